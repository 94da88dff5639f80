// RunLocation as JSON: the row the run log keeps so any later backend can attach() to a run.
#include "backend/launch/launcher.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonValue>
#include <QProcessEnvironment>
#include <QRandomGenerator>

#include <array>
#include <cmath>

#include "backend/guithread.h"

namespace shardscope::backend {

Result<std::map<std::string, std::string>> resolvedLaunchEnv(const spec::LaunchSection& launch) {
  const QProcessEnvironment system = QProcessEnvironment::systemEnvironment();
  return spec::resolve_launch_env(launch, [&](const std::string& name) {
    const QString key = QString::fromStdString(name);
    return system.contains(key) ? std::optional<std::string>(system.value(key).toStdString())
                                : std::nullopt;
  });
}

QString rendezvousToken() {
  std::array<quint32, 8> words{};
  QRandomGenerator::system()->fillRange(words.data(), words.size());
  QString out;
  for (quint32 w : words) out += QStringLiteral("%1").arg(w, 8, 16, QLatin1Char('0'));
  return out;
}

bool makeRunDir(const QString& path) {
  const QFileInfo info(path);
  const QFileDevice::Permissions owner =
      QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner;
  if (info.isDir()) return QFile::setPermissions(info.absoluteFilePath(), owner);
  if (!QDir().mkpath(info.absolutePath())) return false;
  // QDir::mkdir with permissions creates it with them (mkdir(2)'s mode, under the umask).
  return QDir().mkdir(info.absoluteFilePath(), owner) || QFileInfo(path).isDir();
}

namespace {

const QString kWhere = QStringLiteral("run location");

/// An error about one field of a stored location, with what to do about it.
Error fieldError(const QString& field, const QString& what) {
  return fail(QStringLiteral("%1: %2: %3; the run log row is damaged or was written by another "
                             "Shardscope version (re-launch the run, or use a matching backend)")
                  .arg(kWhere, field, what)
                  .toStdString());
}

QString typeName(const QJsonValue& value) {
  switch (value.type()) {
    case QJsonValue::Null:
      return QStringLiteral("null");
    case QJsonValue::Bool:
      return QStringLiteral("a boolean");
    case QJsonValue::Double:
      return QStringLiteral("a number");
    case QJsonValue::String:
      return QStringLiteral("a string");
    case QJsonValue::Array:
      return QStringLiteral("an array");
    case QJsonValue::Object:
      return QStringLiteral("an object");
    case QJsonValue::Undefined:
      return QStringLiteral("nothing");
  }
  return QStringLiteral("?");
}

/// A whole number stored as a JSON double (exact up to 2^53, enough for pids and ticks).
Result<qint64> toInteger(const QJsonValue& value, const QString& field) {
  const double d = value.toDouble(std::nan(""));
  if (!value.isDouble() || !std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) {
    return fieldError(field, QStringLiteral("expected an integer, got %1").arg(typeName(value)));
  }
  return static_cast<qint64>(d);
}

Result<QString> optionalString(const QJsonObject& json, const QString& key) {
  const QJsonValue value = json.value(key);
  if (value.isUndefined() || value.isNull()) return QString();
  if (!value.isString()) {
    return fieldError(key, QStringLiteral("expected a string, got %1").arg(typeName(value)));
  }
  return value.toString();
}

Result<QList<qint64>> integerList(const QJsonObject& json, const QString& key) {
  const QJsonValue value = json.value(key);
  QList<qint64> out;
  if (value.isUndefined() || value.isNull()) return out;
  if (!value.isArray()) {
    return fieldError(key,
                      QStringLiteral("expected an array of integers, got %1").arg(typeName(value)));
  }
  const QJsonArray array = value.toArray();
  for (qsizetype i = 0; i < array.size(); ++i) {
    auto item = toInteger(array.at(i), QStringLiteral("%1[%2]").arg(key).arg(i));
    if (!item) return item.error();
    out.append(*item);
  }
  return out;
}

Result<QStringList> stringList(const QJsonObject& json, const QString& key) {
  const QJsonValue value = json.value(key);
  QStringList out;
  if (value.isUndefined() || value.isNull()) return out;
  if (!value.isArray()) {
    return fieldError(key,
                      QStringLiteral("expected an array of strings, got %1").arg(typeName(value)));
  }
  const QJsonArray array = value.toArray();
  for (qsizetype i = 0; i < array.size(); ++i) {
    if (!array.at(i).isString()) {
      return fieldError(QStringLiteral("%1[%2]").arg(key).arg(i),
                        QStringLiteral("expected a string, got %1").arg(typeName(array.at(i))));
    }
    out.append(array.at(i).toString());
  }
  return out;
}

QJsonArray toArray(const QList<qint64>& values) {
  QJsonArray array;
  for (qint64 v : values) array.append(v);
  return array;
}

/// Cross-field checks: the lists must describe world_size ranks.
Result<void> checkShape(const RunLocation& loc) {
  if (loc.kind == QLatin1String("local") && loc.pids.size() != loc.worldSize) {
    return fieldError(QStringLiteral("pids"),
                      QStringLiteral("a local run needs one pid per rank (%1), got %2")
                          .arg(loc.worldSize)
                          .arg(loc.pids.size()));
  }
  if (!loc.startTicks.isEmpty() && loc.startTicks.size() != loc.pids.size()) {
    return fieldError(QStringLiteral("start_ticks"),
                      QStringLiteral("expected one start time per pid (%1), got %2")
                          .arg(loc.pids.size())
                          .arg(loc.startTicks.size()));
  }
  return ok();
}

}  // namespace

QJsonObject RunLocation::toJson() const {
  QJsonObject json;
  json.insert(QStringLiteral("kind"), kind);
  json.insert(QStringLiteral("host"), host);
  json.insert(QStringLiteral("hosts"), QJsonArray::fromStringList(hosts));
  json.insert(QStringLiteral("run_dir"), runDir);
  json.insert(QStringLiteral("job_id"), jobId);
  json.insert(QStringLiteral("pids"), toArray(pids));
  if (!startTicks.isEmpty()) json.insert(QStringLiteral("start_ticks"), toArray(startTicks));
  if (!bootIds.isEmpty())
    json.insert(QStringLiteral("boot_ids"), QJsonArray::fromStringList(bootIds));
  json.insert(QStringLiteral("world_size"), worldSize);
  return json;
}

Result<RunLocation> RunLocation::fromJson(const QJsonObject& json) {
  RunLocation loc;
  const QJsonValue kind = json.value(QStringLiteral("kind"));
  loc.kind = kind.toString();
  if (loc.kind != QLatin1String("local") && loc.kind != QLatin1String("ssh") &&
      loc.kind != QLatin1String("slurm") && loc.kind != QLatin1String("program")) {
    return fieldError(
        QStringLiteral("kind"),
        QStringLiteral("expected \"local\", \"ssh\", \"slurm\" or \"program\", got %1")
            .arg(kind.isString() ? "\"" + loc.kind + "\"" : typeName(kind)));
  }
  auto host = optionalString(json, QStringLiteral("host"));
  if (!host) return host.error();
  loc.host = *host;
  auto hosts = stringList(json, QStringLiteral("hosts"));
  if (!hosts) return hosts.error();
  loc.hosts = *hosts;
  auto runDir = optionalString(json, QStringLiteral("run_dir"));
  if (!runDir) return runDir.error();
  if (runDir->isEmpty()) {
    return fieldError(QStringLiteral("run_dir"), QStringLiteral("missing or empty"));
  }
  loc.runDir = *runDir;
  auto jobId = optionalString(json, QStringLiteral("job_id"));
  if (!jobId) return jobId.error();
  loc.jobId = *jobId;
  auto world = toInteger(json.value(QStringLiteral("world_size")), QStringLiteral("world_size"));
  if (!world) return world.error();
  if (*world < 1 || *world > 1 << 20) {
    return fieldError(QStringLiteral("world_size"),
                      QStringLiteral("expected a rank count >= 1, got %1").arg(*world));
  }
  loc.worldSize = static_cast<int>(*world);
  auto pids = integerList(json, QStringLiteral("pids"));
  if (!pids) return pids.error();
  loc.pids = *pids;
  auto ticks = integerList(json, QStringLiteral("start_ticks"));
  if (!ticks) return ticks.error();
  loc.startTicks = *ticks;
  auto boots = stringList(json, QStringLiteral("boot_ids"));
  if (!boots) return boots.error();
  loc.bootIds = *boots;
  if (auto shape = checkShape(loc); !shape) return shape.error();
  return loc;
}

RunHandle::RunHandle(QObject* parent) : QObject(parent) {
  assertOffGuiThread("starting or attaching a run");
}

Launcher::Launcher() { assertOffGuiThread("a launcher"); }

}  // namespace shardscope::backend
