// RunQuery: the runs filter's small query language, parsed once and matched against each run's
// facts (no SQL: the runs table filters the rows it already holds). Pure: no store, no widgets.
//
//   query   := term*                       terms are ANDed
//   term    := ['-'] (field | compare | word)   '-' negates the term
//   field   := ('tag' | 'group' | 'status' | 'name') ':' value
//   compare := key op number               op: < <= > >= = !=
//            | key ('=' | '!=') value      a text comparison
//   key     := a parameter ("train.lr"), else a metric's last value ("loss"); "best.KEY" is the
//              metric's best (lowest) value, "last.KEY" and "param.KEY" say which one explicitly
//   word    := a name, parameter or host fragment (any case), as the filter box always took
//   value   := a bare word, or "double quoted" (\" and \\ inside)
//
// Examples: `tag:best status:complete`, `group:baseline`, `-tag:draft lr`, `train.lr>1e-4
// loss<1.6`, `best.eval.loss<=2 name:"sweep 3"`. A bad query fails with the character position, the
// token and what was expected there. Bounded for any input: at most kMaxQueryChars characters and
// kMaxQueryTerms terms are read, one pass, no recursion.
#pragma once

#include <QHash>
#include <QString>
#include <QStringList>
#include <QVariant>

#include <vector>

#include "spec/result.h"

namespace shardscope::backend {

/// What a query is matched against: one run as the runs table knows it.
struct RunFacts {
  QString name;
  QString status;  ///< spec::to_string of its status
  QStringList tags;
  QStringList groups;  ///< the groups it is in (schema v12)
  /// Parameters by dotted key ("train.lr"), numbers as numbers, other values as text.
  QHash<QString, QVariant> params;
  QHash<QString, double> last;  ///< metric -> its last value (rank 0)
  QHash<QString, double> best;  ///< metric -> its lowest value (rank 0)
  /// Text a bare word may also be found in (the parameters in one line, the host).
  QStringList words;
};

/// Where and why a query could not be parsed.
struct RunQueryError {
  int position = 0;  ///< 0-based character offset of the offending token
  int length = 0;    ///< its length (>= 1 unless the query ended)
  QString message;   ///< "at 9, '>>': expected a number or a word after '>'"
};

inline constexpr int kMaxQueryChars = 2000;
inline constexpr int kMaxQueryTerms = 64;

class RunQuery {
 public:
  enum class Op { lt, le, gt, ge, eq, ne };
  enum class Kind { word, tag, group, status, name, value };
  enum class Source { any, param, last, best };
  struct Term {
    Kind kind = Kind::word;
    bool negated = false;
    QString key;  ///< value: the parameter or metric name
    Source source = Source::any;
    Op op = Op::eq;
    QString text;       ///< the value as written (unquoted)
    double number = 0;  ///< the value as a number, when numeric
    bool numeric = false;
  };

  /// Parses `text`; on failure `error` (when given) holds the position, token and expectation,
  /// and the Result's message says the same.
  [[nodiscard]] static Result<RunQuery> parse(const QString& text, RunQueryError* error = nullptr);

  /// True when the run satisfies every term (an empty query matches every run).
  bool matches(const RunFacts& run) const;
  bool isEmpty() const { return m_terms.empty(); }
  const std::vector<Term>& terms() const { return m_terms; }
  /// The metric names whose last or best values the terms may read (so a caller fetches only
  /// those).
  QStringList metricKeys() const;

 private:
  std::vector<Term> m_terms;
};

}  // namespace shardscope::backend
