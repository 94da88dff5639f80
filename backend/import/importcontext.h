// The pieces every importer shares: reading a value of the file as a boolean, number or string
// whatever the file's own typing (YAML and JSON are typed, a command line is all strings), and
// the context that sets fields and records one report entry per key. A field set twice to
// different values by two keys is an error naming both keys: one experiment, never a guess.
#pragma once

#include <QJsonValue>
#include <QMap>
#include <QString>

#include <optional>
#include <utility>
#include <vector>

#include "backend/import/configimport.h"

namespace shardscope::backend::importing {

/// The largest config file read (a config is a few KiB; this keeps a device or a wrong file out).
inline constexpr qint64 kMaxConfigBytes = qint64{16} * 1024 * 1024;

/// A value as report text: strings raw, numbers shortest, tables and lists as compact JSON.
QString valueText(const QJsonValue& v);
/// true/false, and the strings accelerate's str_to_bool accepts (yes/no, true/false, on/off, 1/0).
std::optional<bool> asBool(const QJsonValue& v);
/// A number, or a string that is one.
std::optional<double> asNumber(const QJsonValue& v);
/// A whole number (2, 2.0, "2"); 1e8 counts, 2.5 does not.
std::optional<qint64> asInt(const QJsonValue& v);
/// A count of samples, steps or ranks: a whole number from 1 to 10^9, else nullopt.
std::optional<qint64> asCount(const QJsonValue& v);
/// The product, or nullopt when it overflows (batch arithmetic on values from a file).
std::optional<qint64> product(std::initializer_list<qint64> factors);
/// A string, or a number/boolean written as text (a command line's values are all strings).
std::optional<QString> asString(const QJsonValue& v);
/// null, false, "", "no", "none", [] or {}: "nothing asked for".
bool isOff(const QJsonValue& v);
/// A double as TOML writes it (always with a '.' or an exponent).
QString tomlDouble(double v);
/// A string as a TOML basic string.
QString tomlString(const QString& s);

/// One field assignment: dotted field and the value as TOML text (`"bf16"`, `2e-05`, `true`).
using Assign = std::pair<QString, QString>;

class ImportContext {
 public:
  ImportContext(QString file, ImportKind kind);

  /// Sets each field and records the key as mapped. A field another key set to a different
  /// value makes both an error.
  void map(const QString& key, const QJsonValue& v, const std::vector<Assign>& fields,
           const QString& note = {});
  /// Sets the nearest fields for a value the schema cannot express exactly, and records the key
  /// as unsupported (the experiment differs there) with the fields it set and what differs.
  void mapNearest(const QString& key, const QJsonValue& v, const std::vector<Assign>& fields,
                  const QString& whatDiffers);
  /// A true/false key copied to each boolean field of `fields`.
  void mapBool(const QString& key, const QJsonValue& v, const std::vector<QString>& fields);
  /// A true/false key that asks for something: `fieldsOn` when true, ignored (`whyOff`) when
  /// false.
  void mapSwitch(const QString& key, const QJsonValue& v, const std::vector<Assign>& fieldsOn,
                 const QString& whyOff);
  /// A whole number of at least `min` copied to the field `field`; `expected` names the rule in
  /// the error ("" : "a whole number >= MIN").
  void mapWholeNumber(const QString& key, const QJsonValue& v, const QString& field, qint64 min,
                      const QString& expected = {});
  void ignore(const QString& key, const QJsonValue& v, const QString& why);
  void unsupported(const QString& key, const QJsonValue& v, const QString& whatToDo);
  /// Records an error; the import writes nothing.
  void error(const QString& key, const QJsonValue& v, const QString& why);
  /// An error for a value of the wrong type or spelling: "expected <what>".
  void badValue(const QString& key, const QJsonValue& v, const QString& expected);
  /// The unknown-key error.
  void unknown(const QString& key, const QJsonValue& v);

  /// The field's value as set by an earlier key, if any.
  std::optional<QString> assigned(const QString& field) const;
  /// Marks a field as assigned by `key` without a report entry of its own (a derived value).
  bool has(const QString& field) const { return m_set.contains(field); }

  spec::Experiment& experiment() { return m_exp; }
  const QString& file() const { return m_result.file; }
  /// Validates, fills the notes and hands the result over; no experiment when a key failed.
  ImportResult finish();

 private:
  void add(ImportEntry entry);

  spec::Experiment m_exp;
  ImportResult m_result;
  QMap<QString, std::pair<QString, QString>> m_set;  // field -> (TOML value, key that set it)
  bool m_failed = false;
};

/// Per-format mappings; each reads the whole parsed file into the context.
void importAccelerate(ImportContext& ctx, const QJsonObject& root);
void importHfTrainer(ImportContext& ctx, const QJsonObject& root, const QJsonObject& launcher,
                     bool commandLine);
void importDeepSpeed(ImportContext& ctx, const QJsonObject& root);

/// The FSDP options accelerate's fsdp_config and the Trainer's fsdp_config share, keyed by the
/// name without its "fsdp_" prefix. `prefix` is the report path of the table ("fsdp_config.").
/// `defaultVersion`: 1 for accelerate (its default), 2 for the Trainer.
void importFsdpOptions(ImportContext& ctx, const QJsonObject& table, const QString& prefix,
                       int defaultVersion, bool trainerNames);

/// Shard strategy names of FSDP (FULL_SHARD, full_shard, 1..4) as the schema's spelling, or
/// nullopt; HYBRID_SHARD_ZERO2 (5) comes back as "hybrid_shard_zero2" for the caller to refuse.
std::optional<QString> fsdpStrategy(const QJsonValue& v);
/// The precision mode for "bf16"/"fp16" training: sharded runs keep the parameters in that dtype
/// (FSDP's MixedPrecision, DeepSpeed), plain data parallel autocasts fp32 parameters.
std::vector<Assign> precisionFields(const QString& dtype, bool sharded);

}  // namespace shardscope::backend::importing
