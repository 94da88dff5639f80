// Protobuf wire format by hand: a field is a key (number << 3 | wire type) then a varint
// (type 0), 8 little-endian bytes (type 1), a varint length and bytes (type 2), or 4
// little-endian bytes (type 5). Field numbers are those of TensorBoard's .proto files, named
// at each call.
#include "backend/export/tfevents.h"

#include <QDateTime>
#include <QDir>
#include <QSysInfo>

#include <array>
#include <cstring>

namespace shardscope::backend::tfevents {
namespace {

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void putVarint(QByteArray& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.append(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.append(static_cast<char>(v));
}

void putKey(QByteArray& out, std::uint32_t field, WireType type) {
  putVarint(out, (static_cast<std::uint64_t>(field) << 3) | type);
}

template <class T>
void putLittleEndian(QByteArray& out, T v) {
  for (std::size_t i = 0; i < sizeof v; ++i) out.append(static_cast<char>((v >> (8 * i)) & 0xff));
}

void putDouble(QByteArray& out, std::uint32_t field, double v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  putKey(out, field, kFixed64);
  putLittleEndian(out, bits);
}

void putFloat(QByteArray& out, std::uint32_t field, float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  putKey(out, field, kFixed32);
  putLittleEndian(out, bits);
}

void putBytes(QByteArray& out, std::uint32_t field, const QByteArray& bytes) {
  putKey(out, field, kBytes);
  putVarint(out, static_cast<std::uint64_t>(bytes.size()));
  out.append(bytes);
}

void putInt(QByteArray& out, std::uint32_t field, std::int64_t v) {
  putKey(out, field, kVarint);
  putVarint(out, static_cast<std::uint64_t>(v));  // int64: two's complement, 10 bytes if < 0
}

// Event { double wall_time = 1; int64 step = 2; Summary summary = 5; }
QByteArray event(double wallTime, std::int64_t step, const QByteArray& summary) {
  QByteArray out;
  putDouble(out, 1, wallTime);
  if (step != 0) putInt(out, 2, step);
  putBytes(out, 5, summary);
  return out;
}

// google.protobuf.Value { double number_value = 2; string string_value = 3; bool bool_value = 4; }
QByteArray protobufValue(const QVariant& v) {
  QByteArray out;
  switch (v.typeId()) {
    case QMetaType::Bool:
      putInt(out, 4, v.toBool() ? 1 : 0);
      break;
    case QMetaType::Double:
    case QMetaType::Float:
    case QMetaType::Int:
    case QMetaType::LongLong:
    case QMetaType::UInt:
    case QMetaType::ULongLong:
      putDouble(out, 2, v.toDouble());
      break;
    default:
      putBytes(out, 3, v.toString().toUtf8());
  }
  return out;
}

// A Summary with one Value { string tag = 1; SummaryMetadata metadata = 9; TensorProto tensor =
// 8; } whose metadata is PluginData { plugin_name = 1: "hparams"; content = 2 } (field 1 of
// SummaryMetadata) and whose tensor is the plugin's empty float tensor, as
// tensorboard.plugins.hparams.summary writes it.
QByteArray hparamsEvent(double wallTime, const char* tag, const QByteArray& pluginData) {
  QByteArray plugin;
  putBytes(plugin, 1, "hparams");
  putBytes(plugin, 2, pluginData);
  QByteArray metadata;
  putBytes(metadata, 1, plugin);
  // TensorProto { dtype = 1: DT_FLOAT; tensor_shape = 2: { dim = 2: { size = 0 } } }
  static const QByteArray kNullTensor = QByteArray::fromHex("080112021200");
  QByteArray value;
  putBytes(value, 1, tag);
  putBytes(value, 8, kNullTensor);
  putBytes(value, 9, metadata);
  QByteArray summary;
  putBytes(summary, 1, value);
  return event(wallTime, 0, summary);
}

}  // namespace

std::uint32_t crc32c(const QByteArray& data) {
  static const std::array<std::uint32_t, 256> kTable = [] {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;  // reflected
      table[i] = c;
    }
    return table;
  }();
  std::uint32_t crc = 0xffffffffu;
  for (const char ch : data)
    crc = kTable[(crc ^ static_cast<std::uint8_t>(ch)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

std::uint32_t maskedCrc(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

QByteArray frame(const QByteArray& payload) {
  QByteArray length;
  putLittleEndian(length, static_cast<std::uint64_t>(payload.size()));
  QByteArray out = length;
  putLittleEndian(out, maskedCrc(crc32c(length)));
  out.append(payload);
  putLittleEndian(out, maskedCrc(crc32c(payload)));
  return out;
}

QByteArray versionEvent(double wallTime) {
  QByteArray out;
  putDouble(out, 1, wallTime);
  putBytes(out, 3, "brain.Event:2");  // Event.file_version
  return out;
}

QByteArray scalarEvent(double wallTime, std::int64_t step, const QString& tag, double value) {
  QByteArray summaryValue;
  putBytes(summaryValue, 1, tag.toUtf8());
  putFloat(summaryValue, 2, static_cast<float>(value));  // Summary.Value.simple_value
  QByteArray summary;
  putBytes(summary, 1, summaryValue);  // Summary.value
  return event(wallTime, step, summary);
}

QByteArray sessionStartEvent(double wallTime, const std::map<QString, QVariant>& hparams,
                             const QString& groupName, double startTimeSecs) {
  // SessionStartInfo { map<string, Value> hparams = 1; string group_name = 4;
  //                    double start_time_secs = 5; }; a map entry is { key = 1; value = 2 }.
  QByteArray start;
  for (const auto& [name, value] : hparams) {
    QByteArray entry;
    putBytes(entry, 1, name.toUtf8());
    putBytes(entry, 2, protobufValue(value));
    putBytes(start, 1, entry);
  }
  if (!groupName.isEmpty()) putBytes(start, 4, groupName.toUtf8());
  putDouble(start, 5, startTimeSecs);
  QByteArray data;  // HParamsPluginData { int32 version = 1 (0); session_start_info = 3; }
  putBytes(data, 3, start);
  return hparamsEvent(wallTime, "_hparams_/session_start_info", data);
}

QByteArray experimentEvent(double wallTime, const QString& name,
                           const std::vector<HParamInfo>& hparams, const QStringList& metricTags) {
  // Experiment { string name = 6; double time_created_secs = 3; repeated HParamInfo
  //              hparam_infos = 4; repeated MetricInfo metric_infos = 5; }
  QByteArray experiment;
  putBytes(experiment, 6, name.toUtf8());
  putDouble(experiment, 3, wallTime);
  for (const HParamInfo& h : hparams) {
    // HParamInfo { name = 1; DataType type = 4; ListValue domain_discrete = 5;
    //              Interval domain_interval = 6 { min_value = 1; max_value = 2; } }
    QByteArray info;
    putBytes(info, 1, h.name.toUtf8());
    putInt(info, 4, static_cast<std::int64_t>(h.type));
    if (h.interval) {
      QByteArray interval;
      putDouble(interval, 1, h.interval->first);
      putDouble(interval, 2, h.interval->second);
      putBytes(info, 6, interval);
    } else if (!h.discrete.isEmpty()) {
      QByteArray list;  // google.protobuf.ListValue { repeated Value values = 1; }
      for (const QVariant& v : h.discrete) putBytes(list, 1, protobufValue(v));
      putBytes(info, 5, list);
    }
    putBytes(experiment, 4, info);
  }
  for (const QString& tag : metricTags) {
    QByteArray metricName;  // MetricName { string group = 1 (the session's folder); tag = 2; }
    putBytes(metricName, 2, tag.toUtf8());
    QByteArray info;  // MetricInfo { MetricName name = 1; }
    putBytes(info, 1, metricName);
    putBytes(experiment, 5, info);
  }
  QByteArray data;  // HParamsPluginData { experiment = 2; }
  putBytes(data, 2, experiment);
  return hparamsEvent(wallTime, "_hparams_/experiment", data);
}

QByteArray sessionEndEvent(double wallTime, SessionStatus status, double endTimeSecs) {
  QByteArray end;  // SessionEndInfo { Status status = 1; double end_time_secs = 2; }
  putInt(end, 1, static_cast<std::int64_t>(status));
  putDouble(end, 2, endTimeSecs);
  QByteArray data;  // HParamsPluginData { session_end_info = 4; }
  putBytes(data, 4, end);
  return hparamsEvent(wallTime, "_hparams_/session_end_info", data);
}

Result<std::unique_ptr<EventFileWriter>> EventFileWriter::create(const QString& dir,
                                                                 double wallTime) {
  if (!QDir().mkpath(dir)) {
    return fail(dir.toStdString() + ": cannot create the folder; check its parent's permissions");
  }
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter());
  writer->m_path = QDir(dir).filePath(QStringLiteral("events.out.tfevents.%1.%2")
                                          .arg(static_cast<qint64>(wallTime))
                                          .arg(QSysInfo::machineHostName()));
  writer->m_file.setFileName(writer->m_path);
  if (!writer->m_file.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    return fail(writer->m_path.toStdString() + ": cannot create it: " +
                writer->m_file.errorString().toStdString() + "; check that the folder is writable");
  }
  if (auto r = writer->write(versionEvent(wallTime)); !r) return r.error();
  return writer;
}

Result<void> EventFileWriter::write(const QByteArray& event) {
  const QByteArray record = frame(event);
  if (m_file.write(record) != record.size()) {
    return fail(m_path.toStdString() + ": write failed: " + m_file.errorString().toStdString() +
                " (is the disk full?)");
  }
  return ok();
}

Result<void> EventFileWriter::close() {
  if (!m_file.flush()) {
    return fail(m_path.toStdString() + ": write failed: " + m_file.errorString().toStdString());
  }
  m_file.close();
  return ok();
}

}  // namespace shardscope::backend::tfevents
