// RunReader::memoryCalibrations on a real run log (SQLite, and PostgreSQL in the _pg variant):
// the completed runs' `hello.mem_estimate` and `mem` peaks become one correction per kind of run
// (the largest ratio over a run's ranks, the median over runs); a run that is not complete, a
// run of another strategy, a trial's overrides (its params), a rank without a figure and a run
// estimated by other formulas than today's are each taken as they should be; the sweep's
// feasibility check holds the corrected figure.
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "backend/sweep/trialrunner.h"
#include "spec/calibration.h"
#include "spec/estimate.h"
#include "spec/events.h"
#include "spec/experiment.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

constexpr std::int64_t kParams = 49504;
// The demo's tiny model: 49504 parameters, as its hello says.
constexpr char kToml[] = R"([model]
arch = "tiny"
tiny_hidden_size = 32
[data]
train_path = "train.jsonl"
[shard]
strategy = "FULL_SHARD"
)";

QByteArray line(int rank, std::int64_t seq, spec::Payload body) {
  spec::Event e;
  e.env.rank = rank;
  e.env.seq = seq;
  e.env.t = 1.0;
  e.body = std::move(body);
  return QByteArray::fromStdString(spec::encode_event(e));
}

// A run's rank file: its hello (estimate, params, CPU) and two mem events, the second the peak.
FileChunk rankFile(qint64 runId, int rank, std::int64_t estimate, std::int64_t peak) {
  spec::HelloEvent hello;
  hello.world_size = 2;
  hello.local_world_size = 2;
  hello.params_total = kParams;
  hello.params_trainable = kParams;
  hello.mem_estimate = estimate;
  hello.device = spec::DeviceSummary{"cpu", 0, "AMD EPYC", 1 << 30, ""};
  FileChunk chunk;
  chunk.runId = runId;
  chunk.rank = rank;
  chunk.events.push_back({0, runId, rank, 0, "hello", line(rank, 0, hello), 0});
  chunk.events.push_back(
      {0, runId, rank, 1, "mem", line(rank, 1, spec::MemEvent{10, 0, 0, peak / 2, 0}), 100});
  chunk.events.push_back(
      {0, runId, rank, 2, "mem", line(rank, 2, spec::MemEvent{20, 0, 0, peak, 0}), 200});
  chunk.endOffset = 300;
  return chunk;
}

}  // namespace

class TestRunCalibration : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

 private slots:
  void correctionPerKindOfRun() {
    auto store = RunStore::open(testing::storeSpec(m_dir.path(), "calibration.db"));
    VERIFY_OK(store);
    auto expId = (*store)->createExperiment({0, "demo", "", kToml, 0}).get();
    VERIFY_OK(expId);
    auto exp = spec::parse_experiment(kToml, "demo.toml", {}, [] {
      spec::LoadOptions o;
      o.check_paths = false;
      return o;
    }());
    VERIFY_OK(exp);
    // What these formulas say for the two kinds of run (2 ranks): a run's hello carries it, as
    // shardtrain writes it.
    auto fullEstimate = spec::estimate_memory(*exp, 2, 2);
    VERIFY_OK(fullEstimate);
    spec::Experiment unsharded = *exp;
    unsharded.shard.strategy = spec::ShardStrategy::no_shard;
    auto noShardEstimate = spec::estimate_memory(unsharded, 2, 2);
    VERIFY_OK(noShardEstimate);
    const std::int64_t est = fullEstimate->total;
    auto addRun = [&](const QString& name, QJsonObject params, std::int64_t estimate, double ratio0,
                      double ratio1, spec::RunStatus status) -> qint64 {
      auto id = (*store)->createRun({*expId, name, m_dir.filePath(name), params, 2}).get();
      if (!id) return 0;
      const auto peak = [&](double r) { return std::llround(r * double(estimate)); };
      if (!(*store)->ingest(rankFile(*id, 0, estimate, peak(ratio0))).get()) return 0;
      if (!(*store)->ingest(rankFile(*id, 1, estimate, peak(ratio1))).get()) return 0;
      if (!(*store)->setRunStatus(*id, status).get()) return 0;
      return *id;
    };
    // Three complete runs: the worse rank's ratio counts (2.0, 2.2, 3.5): the median is 2.2.
    QVERIFY(addRun("a", {}, est, 2.0, 1.5, spec::RunStatus::complete));
    QVERIFY(addRun("b", {}, est, 1.9, 2.2, spec::RunStatus::complete));
    QVERIFY(addRun("c", {}, est, 3.5, 0.1, spec::RunStatus::complete));
    // Not complete: its figures say nothing.
    QVERIFY(addRun("d", {}, est, 9.0, 9.0, spec::RunStatus::failed));
    // Estimated by other formulas (its hello says 1000 bytes where these say `est`): its ratio
    // is to a figure nobody gives any more, so it is left out.
    QVERIFY(addRun("old", {}, 1000, 9.0, 9.0, spec::RunStatus::complete));
    // Another kind: the trial's override is its strategy.
    QVERIFY(addRun("e", {{"shard.strategy", "NO_SHARD"}, {"replan", "story, not a field"}},
                   noShardEstimate->total, 1.2, 1.1, spec::RunStatus::complete));
    (*store)->flush();
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto table = reader->memoryCalibrations();
    VERIFY_OK(table);
    QCOMPARE(table->size(), std::size_t(2));
    const auto full = table->at(spec::calibration_key(*exp, kParams, false));
    QCOMPARE(full.runs, 3);
    QVERIFY2(std::abs(full.ratio - 2.2) < 1e-6, qPrintable(QString::number(full.ratio, 'g', 17)));
    // The sweep's feasibility check holds the calibrated figure: a budget between the formulas'
    // total and the corrected one lets the raw estimate fit and the calibrated one not.
    auto raw = estimateAgainstBudget(*exp, spec::DeviceBudget{});  // unknown: fits, says need
    VERIFY_OK(raw);
    const spec::DeviceBudget budget{raw->need * 3 / 2, "a test budget", false};
    auto fits = estimateAgainstBudget(*exp, budget);
    VERIFY_OK(fits);
    QVERIFY(fits->over.isEmpty());
    auto over = estimateAgainstBudget(*exp, budget, *table);
    VERIFY_OK(over);
    QCOMPARE(over->calibration.runs, 3);
    QVERIFY2(over->over.contains("(calibrated on 3 runs: x2.20) exceeds the budget"),
             qPrintable(over->over));
    exp->shard.strategy = spec::ShardStrategy::no_shard;
    const auto noShard = table->at(spec::calibration_key(*exp, kParams, false));
    QCOMPARE(noShard.runs, 1);
    QVERIFY2(std::abs(noShard.ratio - 1.2) < 1e-6,
             qPrintable(QString::number(noShard.ratio, 'g', 17)));
  }
};

QTEST_GUILESS_MAIN(TestRunCalibration)
#include "tst_runcalibration.moc"
