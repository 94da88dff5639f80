#include "bench/ui/bigrunlog.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonObject>

#include <cmath>
#include <thread>
#include <vector>

#include "backend/store/db.h"
#include "backend/store/runstore.h"

namespace shardscope::bench {

namespace {

// A sweep of `trials` finished runs with `steps` loss points each, written through RunStore
// (on a worker thread: the store's writer is never driven from a GUI thread).
Result<void> makeSweep(const QString& path, int trials, int steps) {
  Result<void> outcome = ok();
  std::thread writer([&] {
    auto store = backend::RunStore::open(path);
    if (!store) {
      outcome = store.error();
      return;
    }
    auto exp = (*store)->createExperiment({0, "bench-sweep", "bench.toml", "[train]\n", 0}).get();
    if (!exp) {
      outcome = exp.error();
      return;
    }
    std::vector<backend::RunStore::Pending<void>> pending;
    for (int t = 0; t < trials; ++t) {
      const double lr = std::pow(10.0, -4.0 + 3.0 * double(t % 97) / 96.0);
      QJsonObject params{{"train.lr", lr}, {"lora.r", 4 << (t % 4)}};
      auto run = (*store)->createRun({*exp, QString("trial-%1").arg(t), "", params, 2}).get();
      if (!run) {
        outcome = run.error();
        return;
      }
      std::vector<backend::MetricRow> rows;
      rows.reserve(static_cast<std::size_t>(steps));
      const double floor = 0.5 + std::fabs(std::log10(lr) + 2.5);
      for (int s = 0; s < steps; ++s) {
        rows.push_back({*run, s, "loss", floor + 5.0 / (1.0 + 0.05 * s), 0, 1.7e9 + s});
      }
      pending.push_back((*store)->appendMetrics(std::move(rows)));
      pending.push_back((*store)->setRunStatus(*run, spec::RunStatus::complete, {}, floor));
      if (pending.size() > 256) {
        for (auto& p : pending) {
          if (auto r = p.get(); !r) outcome = r.error();
        }
        pending.clear();
        if (!outcome) return;
      }
    }
    for (auto& p : pending) {
      if (auto r = p.get(); !r) outcome = r.error();
    }
  });
  writer.join();
  return outcome;
}

}  // namespace

Result<void> ensureBigSweep(const QString& db, int trials, int steps, bool* made) {
  if (made != nullptr) *made = false;
  const QString marker = db + QString(".%1x%2").arg(trials).arg(steps);
  if (QFileInfo::exists(marker) && QFileInfo::exists(db)) return ok();
  QFile::remove(db);
  if (auto written = makeSweep(db, trials, steps); !written) return written;
  QFile(marker).open(QIODevice::WriteOnly);
  if (made != nullptr) *made = true;
  return ok();
}

Result<void> ensureBigSweepOnServer(const QString& server, int trials, int steps, QString* spec,
                                    bool* made) {
  if (made != nullptr) *made = false;
  const QString name = QString("bench_dashboard_%1x%2").arg(trials).arg(steps);
  const QString filling = name + "_filling";
  *spec = server + "/" + name;
  auto admin = backend::Db::open(server + "/postgres");
  if (!admin) return admin.error();
  auto exists = admin->prepare("SELECT count(*) FROM pg_database WHERE datname = ?1");
  if (!exists) return exists.error();
  if (auto r = exists->bindText(1, name.toStdString()); !r) return r;
  auto row = exists->step();
  if (!row) return row.error();
  if (*row && exists->columnInt64(0) > 0) return ok();
  // CREATE DATABASE runs outside a transaction, so these are single statements.
  if (auto r = admin->exec(("DROP DATABASE IF EXISTS " + filling).toStdString()); !r) return r;
  if (auto r = admin->exec(("CREATE DATABASE " + filling).toStdString()); !r) return r;
  if (auto written = makeSweep(server + "/" + filling, trials, steps); !written) return written;
  if (auto r = admin->exec(("ALTER DATABASE " + filling + " RENAME TO " + name).toStdString()); !r)
    return r;
  if (made != nullptr) *made = true;
  return ok();
}

QString cpuModel() {
  QFile info(QStringLiteral("/proc/cpuinfo"));
  if (!info.open(QIODevice::ReadOnly)) return QStringLiteral("unknown");
  for (const QByteArray& line : info.readAll().split('\n')) {
    if (line.startsWith("model name"))
      return QString::fromUtf8(line.mid(line.indexOf(':') + 1)).trimmed();
  }
  return QStringLiteral("unknown");
}

}  // namespace shardscope::bench
