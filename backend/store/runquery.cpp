#include "backend/store/runquery.h"

#include <QVariant>

#include <cmath>
#include <optional>

#include "spec/status.h"

namespace shardscope::backend {

namespace {

using Op = RunQuery::Op;
using Kind = RunQuery::Kind;
using Source = RunQuery::Source;

bool keyChar(QChar c) {
  return c.isLetterOrNumber() || c == '_' || c == '.' || c == '/' || c == '-';
}

bool opChar(QChar c) { return c == '<' || c == '>' || c == '=' || c == '!'; }

QString opText(Op op) {
  switch (op) {
    case Op::lt:
      return "<";
    case Op::le:
      return "<=";
    case Op::gt:
      return ">";
    case Op::ge:
      return ">=";
    case Op::eq:
      return "=";
    case Op::ne:
      return "!=";
  }
  return {};
}

// A cursor over the query with the error it met first.
class Parser {
 public:
  explicit Parser(const QString& text) : m_text(text) {}

  std::optional<std::vector<RunQuery::Term>> run(RunQueryError& error) {
    std::vector<RunQuery::Term> terms;
    if (m_text.size() > kMaxQueryChars) {
      return fail(
          error, kMaxQueryChars, 1,
          QString("the query is longer than %1 characters: shorten it").arg(kMaxQueryChars));
    }
    for (;;) {
      skipSpace();
      if (m_at >= m_text.size()) return terms;
      if (static_cast<int>(terms.size()) == kMaxQueryTerms) {
        return fail(
            error, m_at, 1,
            QString("more than %1 terms: a query holds at most that many").arg(kMaxQueryTerms));
      }
      RunQuery::Term term;
      if (!parseTerm(term, error)) return std::nullopt;
      terms.push_back(std::move(term));
    }
  }

 private:
  std::nullopt_t fail(RunQueryError& error, qsizetype at, qsizetype length, const QString& why) {
    error.position = static_cast<int>(at);
    error.length = static_cast<int>(length);
    const QString token = at < m_text.size() ? m_text.mid(at, std::max<qsizetype>(length, 1))
                                             : QString("end of query");
    error.message = at < m_text.size() ? QString("at %1, '%2': %3").arg(at + 1).arg(token, why)
                                       : QString("at the end of the query: %1").arg(why);
    return std::nullopt;
  }

  void skipSpace() {
    while (m_at < m_text.size() && m_text.at(m_at).isSpace()) ++m_at;
  }

  // A bare run of key characters, or "quoted" text; false with the error set on a bad quote.
  bool readValue(QString& out, RunQueryError& error, const QString& after) {
    if (m_at >= m_text.size() || m_text.at(m_at).isSpace()) {
      fail(error, m_at, 1, "expected a value right after " + after + " (no spaces)");
      return false;
    }
    if (m_text.at(m_at) == '"') {
      const qsizetype open = m_at++;
      while (m_at < m_text.size() && m_text.at(m_at) != '"') {
        if (m_text.at(m_at) == '\\' && m_at + 1 < m_text.size()) ++m_at;
        out.append(m_text.at(m_at++));
      }
      if (m_at >= m_text.size()) {
        fail(error, open, 1, "this quote is never closed: add a '\"'");
        return false;
      }
      ++m_at;  // the closing quote
      return true;
    }
    const qsizetype start = m_at;
    while (m_at < m_text.size() && !m_text.at(m_at).isSpace() && !opChar(m_text.at(m_at)) &&
           m_text.at(m_at) != '"') {
      ++m_at;
    }
    if (m_at == start) {
      fail(error, m_at, 1, "expected a value after " + after);
      return false;
    }
    out = m_text.mid(start, m_at - start);
    return true;
  }

  std::optional<Op> readOp() {
    const auto next = [&](qsizetype i) {
      return m_at + i < m_text.size() ? m_text.at(m_at + i) : QChar();
    };
    const QChar c = next(0);
    const bool eq = next(1) == '=';
    Op op;
    if (c == '<') {
      op = eq ? Op::le : Op::lt;
    } else if (c == '>') {
      op = eq ? Op::ge : Op::gt;
    } else if (c == '=') {
      op = Op::eq;
    } else if (c == '!' && eq) {
      op = Op::ne;
    } else {
      return std::nullopt;
    }
    m_at += (c == '!' || ((c == '<' || c == '>') && eq)) ? 2 : 1;
    if (c == '=' && next(0) == '=') ++m_at;  // "==" reads as "="
    return op;
  }

  bool parseTerm(RunQuery::Term& term, RunQueryError& error) {
    if (m_text.at(m_at) == '-') {
      term.negated = true;
      ++m_at;
      if (m_at >= m_text.size() || m_text.at(m_at).isSpace()) {
        fail(error, m_at - 1, 1, "a '-' negates the term right after it: write -tag:draft");
        return false;
      }
    }
    if (m_text.at(m_at) == '"') {  // a quoted word
      term.kind = Kind::word;
      return readValue(term.text, error, "'\"'");
    }
    const qsizetype start = m_at;
    // A token with no ':' and no comparison is a word, whatever its characters ("exp#1").
    qsizetype end = m_at;
    bool structured = false;
    while (end < m_text.size() && !m_text.at(end).isSpace()) {
      structured = structured || m_text.at(end) == ':' || opChar(m_text.at(end));
      ++end;
    }
    if (!structured) {
      term.kind = Kind::word;
      term.text = m_text.mid(start, end - start);
      m_at = end;
      return true;
    }
    while (m_at < m_text.size() && keyChar(m_text.at(m_at))) ++m_at;
    const QString key = m_text.mid(start, m_at - start);
    const QChar c = m_text.at(m_at);
    if (c == ':') return parseField(term, key, start, error);
    if (opChar(c)) return parseCompare(term, key, error);
    fail(error, m_at, 1,
         key.isEmpty()
             ? QString("expected a word, field:value or key<value")
             : QString("expected ':', a comparison (< <= > >= = !=) or a space after '%1'")
                   .arg(key));
    return false;
  }

  bool parseField(RunQuery::Term& term, const QString& key, qsizetype start, RunQueryError& error) {
    const QString field = key.toLower();
    if (field == "tag") {
      term.kind = Kind::tag;
    } else if (field == "group") {
      term.kind = Kind::group;
    } else if (field == "status") {
      term.kind = Kind::status;
    } else if (field == "name") {
      term.kind = Kind::name;
    } else {
      fail(error, start, key.size(),
           "unknown field: use tag:, group:, status: or name:, or compare a parameter or metric "
           "with "
           "< <= > >= = !=");
      return false;
    }
    ++m_at;  // ':'
    const qsizetype valueAt = m_at;
    if (!readValue(term.text, error, "'" + key + ":'")) return false;
    if (term.kind == Kind::status &&
        !spec::parse_run_status(term.text.toLower().toStdString()).has_value()) {
      fail(error, valueAt, term.text.size(),
           "not a status: queued, running, complete, stopped, pruned, failed, oom or infeasible");
      return false;
    }
    if (term.kind == Kind::status) term.text = term.text.toLower();
    return true;
  }

  bool parseCompare(RunQuery::Term& term, const QString& key, RunQueryError& error) {
    if (key.isEmpty()) {
      fail(error, m_at, 1,
           "expected a parameter or metric name right before the comparison (no spaces: "
           "loss<1.6)");
      return false;
    }
    const qsizetype opAt = m_at;
    const auto op = readOp();
    if (!op) {
      fail(error, opAt, 1, "expected a comparison: < <= > >= = !=");
      return false;
    }
    term.kind = Kind::value;
    term.op = *op;
    term.key = key;
    for (const auto& [prefix, source] :
         {std::pair{QString("best."), Source::best}, std::pair{QString("last."), Source::last},
          std::pair{QString("param."), Source::param}}) {
      if (key.startsWith(prefix) && key.size() > prefix.size()) {
        term.key = key.mid(prefix.size());
        term.source = source;
      }
    }
    const qsizetype valueAt = m_at;
    if (m_at < m_text.size() && opChar(m_text.at(m_at))) {
      fail(error, opAt, m_at - opAt + 1, "not a comparison: use < <= > >= = !=");
      return false;
    }
    if (!readValue(term.text, error, "'" + opText(*op) + "'")) return false;
    bool numeric = false;
    term.number = term.text.toDouble(&numeric);
    term.numeric = numeric && std::isfinite(term.number);
    if (!term.numeric && *op != Op::eq && *op != Op::ne) {
      fail(error, valueAt, term.text.size(),
           "expected a number after '" + opText(*op) + "' (" + key + opText(*op) + "1e-4)");
      return false;
    }
    return true;
  }

  const QString& m_text;
  qsizetype m_at = 0;
};

bool compareNumbers(double a, Op op, double b) {
  switch (op) {
    case Op::lt:
      return a < b;
    case Op::le:
      return a <= b;
    case Op::gt:
      return a > b;
    case Op::ge:
      return a >= b;
    case Op::eq:
      return a == b;
    case Op::ne:
      return a != b;
  }
  return false;
}

// The run's value of a comparison's key: a parameter (any source or param), else a metric.
std::optional<QVariant> valueOf(const RunQuery::Term& term, const RunFacts& run) {
  if (term.source == Source::any || term.source == Source::param) {
    if (auto it = run.params.constFind(term.key); it != run.params.cend()) return *it;
    if (term.source == Source::param) return std::nullopt;
  }
  const auto& metrics = term.source == Source::best ? run.best : run.last;
  if (auto it = metrics.constFind(term.key); it != metrics.cend()) return QVariant(*it);
  return std::nullopt;
}

bool matchValue(const RunQuery::Term& term, const RunFacts& run) {
  const auto value = valueOf(term, run);
  if (!value) return false;  // a run without the field satisfies no comparison on it
  bool isNumber = false;
  const double number = value->toDouble(&isNumber);
  if (term.numeric && isNumber) return compareNumbers(number, term.op, term.number);
  if (term.op != Op::eq && term.op != Op::ne) return false;
  const bool equal = value->toString().compare(term.text, Qt::CaseInsensitive) == 0;
  return term.op == Op::eq ? equal : !equal;
}

bool matchTerm(const RunQuery::Term& term, const RunFacts& run) {
  switch (term.kind) {
    case Kind::word:
      if (run.name.contains(term.text, Qt::CaseInsensitive)) return true;
      for (const QString& text : run.words) {
        if (text.contains(term.text, Qt::CaseInsensitive)) return true;
      }
      return false;
    case Kind::name:
      return run.name.contains(term.text, Qt::CaseInsensitive);
    case Kind::tag:
      return run.tags.contains(term.text, Qt::CaseInsensitive);
    case Kind::group:
      return run.groups.contains(term.text, Qt::CaseInsensitive);
    case Kind::status:
      return run.status == term.text;
    case Kind::value:
      return matchValue(term, run);
  }
  return false;
}

}  // namespace

Result<RunQuery> RunQuery::parse(const QString& text, RunQueryError* error) {
  RunQueryError local;
  RunQueryError& out = error != nullptr ? *error : local;
  Parser parser(text);
  auto terms = parser.run(out);
  if (!terms) return fail("runs filter: " + out.message.toStdString());
  RunQuery query;
  query.m_terms = std::move(*terms);
  return query;
}

bool RunQuery::matches(const RunFacts& run) const {
  for (const Term& term : m_terms) {
    if (matchTerm(term, run) == term.negated) return false;
  }
  return true;
}

QStringList RunQuery::metricKeys() const {
  QStringList keys;
  for (const Term& term : m_terms) {
    if (term.kind == Kind::value && term.source != Source::param && !keys.contains(term.key))
      keys.append(term.key);
  }
  return keys;
}

}  // namespace shardscope::backend
