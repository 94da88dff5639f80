// The shared context of the importers: value coercion, field assignment with conflict checks,
// and the report (text and JSON).
#include "backend/import/importcontext.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

#include <charconv>
#include <cmath>
#include <utility>

#include "spec/field_catalog.h"

namespace shardscope::backend {

namespace {

// Each kind and outcome with its name on the command line and in the report.
constexpr std::pair<ImportKind, const char*> kKindNames[] = {
    {ImportKind::accelerate, "accelerate"},
    {ImportKind::hfTrainer, "hf-trainer"},
    {ImportKind::deepspeed, "deepspeed"},
};
constexpr std::pair<ImportOutcome, const char*> kOutcomeNames[] = {
    {ImportOutcome::mapped, "mapped"},
    {ImportOutcome::ignored, "ignored"},
    {ImportOutcome::unsupported, "unsupported"},
    {ImportOutcome::error, "error"},
};

}  // namespace

QString importKindName(ImportKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return QString::fromLatin1(name);
  return {};
}

QVector<ImportKind> importKinds() {
  QVector<ImportKind> kinds;
  for (const auto& entry : kKindNames) kinds.append(entry.first);
  return kinds;
}

Result<ImportKind> importKindFromName(const QString& name) {
  QStringList names;
  for (const auto& [k, n] : kKindNames) {
    if (name == QLatin1String(n)) return k;
    names << QString::fromLatin1(n);
  }
  const QString choices = names.mid(0, names.size() - 1).join(", ") + " or " + names.last();
  return fail("unknown import kind \"" + name.toStdString() + "\"; use " + choices.toStdString());
}

QString importOutcomeName(ImportOutcome outcome) {
  for (const auto& [o, name] : kOutcomeNames)
    if (o == outcome) return QString::fromLatin1(name);
  return {};
}

int ImportResult::count(ImportOutcome outcome) const {
  int n = 0;
  for (const auto& e : entries) n += e.outcome == outcome ? 1 : 0;
  return n;
}

QString ImportResult::reportText() const {
  QString out =
      QStringLiteral("%1 (%2): %3 keys: %4 mapped, %5 ignored, %6 unsupported, %7 errors\n")
          .arg(file, importKindName(kind))
          .arg(entries.size())
          .arg(count(ImportOutcome::mapped))
          .arg(count(ImportOutcome::ignored))
          .arg(count(ImportOutcome::unsupported))
          .arg(count(ImportOutcome::error));
  // Errors first: they are why nothing was written.
  for (ImportOutcome o : {ImportOutcome::error, ImportOutcome::unsupported, ImportOutcome::mapped,
                          ImportOutcome::ignored}) {
    for (const auto& e : entries) {
      if (e.outcome != o) continue;
      QString line =
          QStringLiteral("  %1 %2 = %3").arg(importOutcomeName(o), -11).arg(e.key, e.value);
      if (o == ImportOutcome::mapped) line += QStringLiteral(" -> ") + e.fields;
      if (o == ImportOutcome::unsupported && !e.fields.isEmpty()) {
        line += QStringLiteral(" -> nearest: ") + e.fields;
      }
      if (o == ImportOutcome::error) {
        line = QStringLiteral("  %1 %2: %3: %4")
                   .arg(importOutcomeName(o), -11)
                   .arg(file, e.key, e.detail);
      } else if (!e.detail.isEmpty()) {
        line += QStringLiteral(" (") + e.detail + QStringLiteral(")");
      }
      out += line + QLatin1Char('\n');
    }
  }
  if (!notes.isEmpty()) {
    out += QStringLiteral("still to set before a run (the builder shows them on the fields):\n");
    for (const auto& n : notes) out += QStringLiteral("  ") + n + QLatin1Char('\n');
  }
  if (!ok()) {
    out += QStringLiteral(
        "nothing written: fix the errors above (or remove the keys) and import "
        "again\n");
  } else if (count(ImportOutcome::unsupported) > 0) {
    out += QStringLiteral(
        "the experiment differs from the file where keys are unsupported: see "
        "what to do above\n");
  }
  return out;
}

QJsonObject ImportResult::reportJson() const {
  QJsonArray list;
  for (const auto& e : entries) {
    QJsonObject o{{"key", e.key},
                  {"value", e.value},
                  {"outcome", importOutcomeName(e.outcome)},
                  {"detail", e.detail}};
    if (!e.fields.isEmpty()) o.insert("fields", e.fields);
    list.append(o);
  }
  return {{"file", file},
          {"kind", importKindName(kind)},
          {"ok", ok()},
          {"mapped", count(ImportOutcome::mapped)},
          {"ignored", count(ImportOutcome::ignored)},
          {"unsupported", count(ImportOutcome::unsupported)},
          {"errors", count(ImportOutcome::error)},
          {"entries", list},
          {"notes", QJsonArray::fromStringList(notes)}};
}

namespace importing {

QString tomlDouble(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  QString s = QString::fromLatin1(buf, static_cast<int>(r.ptr - buf));
  if (!s.contains(QLatin1Char('.')) && !s.contains(QLatin1Char('e')) && std::isfinite(v)) {
    s += QStringLiteral(".0");
  }
  return s;
}

QString tomlString(const QString& s) {
  QString out = QStringLiteral("\"");
  for (QChar c : s) {
    if (c == QLatin1Char('"') || c == QLatin1Char('\\')) out += QLatin1Char('\\');
    out += c;
  }
  return out + QLatin1Char('"');
}

QString valueText(const QJsonValue& v) {
  switch (v.type()) {
    case QJsonValue::Null:
    case QJsonValue::Undefined:
      return QStringLiteral("null");
    case QJsonValue::Bool:
      return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    case QJsonValue::Double: {
      const double d = v.toDouble();
      if (std::trunc(d) == d && std::abs(d) < 1e15) return QString::number(qint64(d));
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, d);
      return QString::fromLatin1(buf, static_cast<int>(r.ptr - buf));
    }
    case QJsonValue::String:
      return v.toString();
    case QJsonValue::Array:
      return QString::fromUtf8(QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact));
    case QJsonValue::Object:
      return QString::fromUtf8(QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact));
  }
  return {};
}

std::optional<bool> asBool(const QJsonValue& v) {
  if (v.isBool()) return v.toBool();
  if (v.isDouble() && (v.toDouble() == 0 || v.toDouble() == 1)) return v.toDouble() == 1;
  if (!v.isString()) return std::nullopt;
  const QString s = v.toString().toLower();
  for (const char* t : {"y", "yes", "t", "true", "on", "1"}) {
    if (s == QLatin1String(t)) return true;
  }
  for (const char* f : {"n", "no", "f", "false", "off", "0"}) {
    if (s == QLatin1String(f)) return false;
  }
  return std::nullopt;
}

std::optional<double> asNumber(const QJsonValue& v) {
  if (v.isDouble()) return v.toDouble();
  if (!v.isString()) return std::nullopt;
  bool ok = false;
  const double d = v.toString().trimmed().toDouble(&ok);
  return ok ? std::optional<double>(d) : std::nullopt;
}

std::optional<qint64> asInt(const QJsonValue& v) {
  const auto d = asNumber(v);
  if (!d || std::trunc(*d) != *d || std::abs(*d) > 9e15) return std::nullopt;
  return static_cast<qint64>(*d);
}

std::optional<qint64> asCount(const QJsonValue& v) {
  const auto n = asInt(v);
  if (!n || *n < 1 || *n > 1'000'000'000) return std::nullopt;
  return n;
}

std::optional<qint64> product(std::initializer_list<qint64> factors) {
  qint64 out = 1;
  for (qint64 f : factors) {
    if (__builtin_mul_overflow(out, f, &out)) return std::nullopt;
  }
  return out;
}

std::optional<QString> asString(const QJsonValue& v) {
  if (v.isString()) return v.toString();
  if (v.isDouble() || v.isBool()) return valueText(v);
  return std::nullopt;
}

bool isOff(const QJsonValue& v) {
  if (v.isNull() || v.isUndefined()) return true;
  if (v.isBool()) return !v.toBool();
  if (v.isString()) {
    const QString s = v.toString().trimmed().toLower();
    return s.isEmpty() || s == QLatin1String("no") || s == QLatin1String("none") ||
           s == QLatin1String("false") || s == QLatin1String("null");
  }
  if (v.isArray()) return v.toArray().isEmpty();
  if (v.isObject()) return v.toObject().isEmpty();
  return false;
}

std::optional<QString> fsdpStrategy(const QJsonValue& v) {
  static const char* const kNames[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard",
                                       "hybrid_shard_zero2"};
  if (const auto i = asInt(v); i && *i >= 1 && *i <= 5) return QString::fromLatin1(kNames[*i - 1]);
  if (!v.isString()) return std::nullopt;
  const QString s = v.toString().trimmed().toLower();
  for (const char* n : kNames) {
    if (s == QLatin1String(n)) return s;
  }
  return std::nullopt;
}

std::vector<Assign> precisionFields(const QString& dtype, bool sharded) {
  if (dtype == QLatin1String("bf16")) {
    return {{"shard.precision", sharded ? "\"bf16\"" : "\"bf16_autocast\""}};
  }
  if (dtype == QLatin1String("fp16")) {
    if (!sharded) return {{"shard.precision", "\"fp16_autocast\""}};
    return {{"shard.precision", "\"custom\""},
            {"shard.param_dtype", "\"fp16\""},
            {"shard.reduce_dtype", "\"fp16\""},
            {"shard.buffer_dtype", "\"fp16\""}};
  }
  return {{"shard.precision", "\"fp32\""}};
}

ImportContext::ImportContext(QString file, ImportKind kind) {
  m_result.file = std::move(file);
  m_result.kind = kind;
  m_exp.source.clear();
  m_exp.experiment.name = QFileInfo(m_result.file).completeBaseName().toStdString();
  if (m_exp.experiment.name.empty()) m_exp.experiment.name = "imported";
  m_exp.experiment.description = "imported from " + importKindName(kind).toStdString() +
                                 " config " + QFileInfo(m_result.file).fileName().toStdString();
}

void ImportContext::add(ImportEntry entry) {
  if (entry.key.isEmpty()) entry.key = QStringLiteral("\"\"");  // a key that is the empty string
  if (entry.outcome == ImportOutcome::error) m_failed = true;
  m_result.entries.append(std::move(entry));
}

std::optional<QString> ImportContext::assigned(const QString& field) const {
  const auto it = m_set.constFind(field);
  if (it == m_set.constEnd()) return std::nullopt;
  return it->first;
}

void ImportContext::map(const QString& key, const QJsonValue& v, const std::vector<Assign>& fields,
                        const QString& note) {
  // Set on a copy first and read each value back in the schema's own spelling (FULL_SHARD for
  // full_shard), so two keys are compared by what they set, not by how they spell it.
  spec::Experiment probe = m_exp;
  std::vector<Assign> canonical;
  for (const auto& [field, text] : fields) {
    auto set = spec::set_field(probe, field.toStdString(), text.toStdString());
    if (!set) {
      error(key, v, QString::fromStdString(set.message()));
      return;
    }
    QString value = QString::fromStdString(*spec::get_field(probe, field.toStdString()));
    const auto* info = spec::find_field(field.toStdString());
    if (info &&
        (info->type == spec::FieldType::string || info->type == spec::FieldType::enumeration)) {
      value = tomlString(value);
    }
    canonical.emplace_back(field, value);
  }
  for (const auto& [field, value] : canonical) {
    const auto it = m_set.constFind(field);
    if (it != m_set.constEnd() && it->first != value) {
      error(key, v,
            QStringLiteral("asks for %1 = %2, but %3 asked for %1 = %4; keep one of them")
                .arg(field, value, it->second, it->first));
      return;
    }
  }
  QStringList shown;
  for (const auto& [field, value] : canonical) {
    if (!m_set.contains(field)) m_set.insert(field, {value, key});
    shown << field + QStringLiteral(" = ") + value;
  }
  m_exp = std::move(probe);
  add({key, valueText(v), ImportOutcome::mapped, shown.join(QStringLiteral(", ")), note});
}

void ImportContext::mapNearest(const QString& key, const QJsonValue& v,
                               const std::vector<Assign>& fields, const QString& whatDiffers) {
  const auto before = m_result.entries.size();
  map(key, v, fields, whatDiffers);
  if (m_result.entries.size() > before &&
      m_result.entries.last().outcome == ImportOutcome::mapped) {
    m_result.entries.last().outcome = ImportOutcome::unsupported;
  }
}

void ImportContext::ignore(const QString& key, const QJsonValue& v, const QString& why) {
  add({key, valueText(v), ImportOutcome::ignored, {}, why});
}

void ImportContext::unsupported(const QString& key, const QJsonValue& v, const QString& whatToDo) {
  add({key, valueText(v), ImportOutcome::unsupported, {}, whatToDo});
}

void ImportContext::mapBool(const QString& key, const QJsonValue& v,
                            const std::vector<QString>& fields) {
  const auto b = asBool(v);
  if (!b) {
    badValue(key, v, QStringLiteral("true or false"));
    return;
  }
  std::vector<Assign> set;
  set.reserve(fields.size());
  for (const auto& f : fields) set.emplace_back(f, *b ? "true" : "false");
  map(key, v, set);
}

void ImportContext::mapSwitch(const QString& key, const QJsonValue& v,
                              const std::vector<Assign>& fieldsOn, const QString& whyOff) {
  const auto b = asBool(v);
  if (!b) {
    badValue(key, v, QStringLiteral("true or false"));
  } else if (*b) {
    map(key, v, fieldsOn);
  } else {
    ignore(key, v, whyOff);
  }
}

void ImportContext::mapWholeNumber(const QString& key, const QJsonValue& v, const QString& field,
                                   qint64 min, const QString& expected) {
  const auto n = asInt(v);
  if (!n || *n < min) {
    badValue(key, v,
             expected.isEmpty() ? QStringLiteral("a whole number >= %1").arg(min) : expected);
  } else {
    map(key, v, {{field, QString::number(*n)}});
  }
}

void ImportContext::error(const QString& key, const QJsonValue& v, const QString& why) {
  add({key, valueText(v), ImportOutcome::error, {}, why});
}

void ImportContext::badValue(const QString& key, const QJsonValue& v, const QString& expected) {
  error(key, v, QStringLiteral("expected %1, got %2").arg(expected, valueText(v)));
}

void ImportContext::unknown(const QString& key, const QJsonValue& v) {
  error(key, v,
        QStringLiteral("unknown key for %1; remove it, or check the spelling and the tool's "
                       "version (docs/import.md lists the keys read)")
            .arg(importKindName(m_result.kind)));
}

ImportResult ImportContext::finish() {
  if (!m_failed) {
    for (const auto& issue : spec::check_experiment(m_exp, false)) {
      m_result.notes << QString::fromStdString(issue.message);
    }
    m_result.experiment = m_exp;
  }
  return std::move(m_result);
}

}  // namespace importing
}  // namespace shardscope::backend
