// TensorBoard event files without TensorFlow: the TFRecord framing (length, masked CRC32C of the
// length, payload, masked CRC32C of the payload) around hand-encoded `Event` protobufs
// (tensorboard/compat/proto/event.proto, summary.proto) and the HParams plugin's session
// messages (tensorboard/plugins/hparams/plugin_data.proto). Only the fields Shardscope writes.
#pragma once

#include <QByteArray>
#include <QFile>
#include <QString>
#include <QStringList>
#include <QVariant>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "spec/result.h"

namespace shardscope::backend::tfevents {

/// CRC-32C (Castagnoli) of `data`, as TFRecord frames use it before masking.
std::uint32_t crc32c(const QByteArray& data);
/// TFRecord's masked CRC: rotate right by 15 and add 0xa282ead8.
std::uint32_t maskedCrc(std::uint32_t crc);
/// One TFRecord: length, masked CRC of the length, payload, masked CRC of the payload.
QByteArray frame(const QByteArray& payload);

/// An Event holding `file_version` "brain.Event:2" (the first record of every event file).
QByteArray versionEvent(double wallTime);
/// An Event with one scalar Summary.Value (`simple_value`, float32 as TensorBoard stores it).
QByteArray scalarEvent(double wallTime, std::int64_t step, const QString& tag, double value);

/// Status of a session in the HParams plugin (api.proto Status).
enum class SessionStatus { unknown = 0, success = 1, failure = 2, running = 3 };

/// An Event with the HParams plugin's session_start_info: `hparams` (numbers, strings, bools;
/// other QVariant types are written as their string form) and the start time.
QByteArray sessionStartEvent(double wallTime, const std::map<QString, QVariant>& hparams,
                             const QString& groupName, double startTimeSecs);
/// An Event with the HParams plugin's session_end_info.
QByteArray sessionEndEvent(double wallTime, SessionStatus status, double endTimeSecs);

/// One hyperparameter of an HParams experiment: its type and domain (api.proto HParamInfo).
struct HParamInfo {
  enum class Type { string = 1, boolean = 2, float64 = 3 };
  QString name;
  Type type = Type::float64;
  std::optional<std::pair<double, double>> interval;  ///< [min, max] of a numeric parameter
  QVariantList discrete;                              ///< the values of a discrete parameter
};

/// An Event with the HParams plugin's experiment: the hyperparameters with their domains and
/// the metrics (scalar tags of each session's own folder) the HParams tab shows as columns.
QByteArray experimentEvent(double wallTime, const QString& name,
                           const std::vector<HParamInfo>& hparams, const QStringList& metricTags);

/// Appends framed events to `DIR/events.out.tfevents.<seconds>.<host>` (the name TensorBoard's
/// loaders look for); the file starts with the version event.
class EventFileWriter {
 public:
  /// Creates `dir` (and parents) and the event file in it.
  [[nodiscard]] static Result<std::unique_ptr<EventFileWriter>> create(const QString& dir,
                                                                       double wallTime);
  /// Writes one Event (already encoded) as a TFRecord.
  [[nodiscard]] Result<void> write(const QByteArray& event);
  /// Flushes and closes; an error names the file.
  [[nodiscard]] Result<void> close();
  const QString& path() const { return m_path; }

 private:
  EventFileWriter() = default;
  QFile m_file;
  QString m_path;
};

}  // namespace shardscope::backend::tfevents
