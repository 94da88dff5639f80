// backend/sweep/autotunespace: the values autotune tries on an experiment's world shape, the
// overrides that carry a configuration into a run, and the coordinate descent itself, driven by
// objectives written out here (a sum of per-field gains, a memory limit) whose optimum is known.
#include <QJsonObject>
#include <QTest>

#include <map>
#include <string>
#include <vector>

#include "backend/sweep/autotune.h"
#include "backend/sweep/autotunespace.h"
#include "spec/experiment.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using backend::TuneMeasure;
using backend::TuneSettings;

namespace {

const char* kTiny = R"([experiment]
name = "t"
[model]
arch = "tiny"
[data]
train_path = "x.jsonl"
format = "tokens"
seq_len = 16
[train]
batch_size = 16
[launch]
nnodes = %1
nproc_per_node = 2
)";

spec::Experiment tiny(int nnodes) {
  spec::LoadOptions noPaths;
  noPaths.check_paths = false;
  const std::string text = QString::fromLatin1(kTiny).arg(nnodes).toStdString();
  auto exp = spec::parse_experiment(text, "t.toml", {}, noPaths);
  if (!exp) qFatal("%s", exp.message().c_str());
  return *exp;
}

// A separable objective: a base of 100 plus a gain per field value, each above the 3% a move
// needs where the descent meets it; the best setup is NO_SHARD, no checkpointing, micro-batch 8,
// prefetch post, forward prefetch, 4 gathers, size wrapping.
double gain(const TuneSettings& s) {
  double v = 100;
  v += s.strategy == spec::ShardStrategy::no_shard        ? 30
       : s.strategy == spec::ShardStrategy::shard_grad_op ? 15
                                                          : 0;
  v += s.offloadParams ? -20 : 0;
  v += s.offloadOptimizer ? -10 : 0;
  v += s.activationCheckpointing ? 0 : 25;
  v += 8.0 * double(s.microBatchSize);
  v += s.backwardPrefetch == spec::BackwardPrefetch::post ? 12 : 0;
  v += s.forwardPrefetch ? 15 : 0;
  v += s.maxInflightGathers == 4 ? 15 : 0;
  v += s.wrapPolicy == spec::WrapPolicy::size ? 20 : 0;
  return v;
}

}  // namespace

class TestAutotuneSpace : public QObject {
  Q_OBJECT

 private slots:
  void domainFollowsTheWorldShape() {
    // One node of 2 ranks: HYBRID_SHARD is invalid; micro-batches divide 16 / 2 = 8.
    const auto one = backend::tuneDomain(tiny(1));
    QCOMPARE(one.strategies.size(), std::size_t(3));
    QCOMPARE(one.microBatches, (std::vector<std::int64_t>{1, 2, 4, 8}));
    // Two nodes of 2: HYBRID_SHARD joins, second least memory; 16 / 4 = 4.
    const auto two = backend::tuneDomain(tiny(2));
    QCOMPARE(two.strategies.size(), std::size_t(4));
    QVERIFY(two.strategies[1] == spec::ShardStrategy::hybrid_shard);
    QCOMPARE(two.microBatches, (std::vector<std::int64_t>{1, 2, 4}));
  }

  void overridesCarryTheSettingsIntoAnExperiment() {
    TuneSettings s;
    s.strategy = spec::ShardStrategy::shard_grad_op;
    s.offloadOptimizer = true;
    s.activationCheckpointing = false;
    s.microBatchSize = 4;
    s.backwardPrefetch = spec::BackwardPrefetch::none;
    s.forwardPrefetch = true;
    s.maxInflightGathers = 4;
    s.wrapPolicy = spec::WrapPolicy::size;
    spec::LoadOptions noPaths;
    noPaths.check_paths = false;
    const std::string text = QString::fromLatin1(kTiny).arg(1).toStdString();
    auto loaded = spec::parse_experiment(text, "t.toml", backend::tuneOverrides(s), noPaths);
    VERIFY_OK(loaded);
    QVERIFY(backend::tuneSettingsOf(*loaded) == s);
    spec::Experiment applied = tiny(1);
    backend::applyTune(applied, s);
    QVERIFY(applied == *loaded);
  }

  // The settings travel typed: a flag as a bool, a number as an integer, an enumeration as its
  // name (no TOML quotes to strip); the JSON of a candidate keeps those types.
  void valuesAreTyped() {
    TuneSettings s;
    s.strategy = spec::ShardStrategy::shard_grad_op;
    s.microBatchSize = 4;
    s.forwardPrefetch = true;
    const auto values = backend::tuneValues(s);
    QCOMPARE(values.size(), backend::tuneFields().size());
    std::map<std::string, backend::TuneValue> byField(values.begin(), values.end());
    QVERIFY(byField.at("shard.strategy") == backend::TuneValue(std::string("SHARD_GRAD_OP")));
    QVERIFY(byField.at("train.micro_batch_size") == backend::TuneValue(std::int64_t{4}));
    QVERIFY(byField.at("shard.forward_prefetch") == backend::TuneValue(true));
    backend::TuneCandidate c;
    c.settings = s;
    const QJsonObject json = backend::tuneCandidateJson(c)["settings"].toObject();
    QVERIFY(json["shard.strategy"].isString());
    QCOMPARE(json["shard.strategy"].toString(), QStringLiteral("SHARD_GRAD_OP"));
    QVERIFY(json["shard.forward_prefetch"].isBool());
    QCOMPARE(json["train.micro_batch_size"].toInteger(), qint64(4));
    QVERIFY(json["shard.max_inflight_gathers"].isDouble());
  }

  void offloadIsANoOpOnCpu() {
    TuneSettings s;
    s.offloadParams = s.offloadOptimizer = true;
    QVERIFY(backend::onTarget(s, true) == TuneSettings{});
    QVERIFY(backend::onTarget(s, false) == s);
  }

  // From the frugal start the descent reaches the known optimum, measuring no configuration
  // twice and far fewer than the grid's 3 x 2 x 2 x 2 x 4 x 3 x 2 x 3 x 3 = 10,368.
  void descentReachesTheOptimumOfASeparableObjective() {
    const auto domain = backend::tuneDomain(tiny(1));
    const auto starts = backend::tuneStarts(TuneSettings{}, domain);
    std::vector<TuneSettings> measured;
    int twice = 0;
    auto measure = [&](const TuneSettings& s) {
      for (const auto& m : measured) twice += m == s ? 1 : 0;
      measured.push_back(s);
      return TuneMeasure{gain(s), false};
    };
    const auto best = backend::coordinateDescent(starts, domain, measure, {});
    QVERIFY(best.has_value());
    QCOMPARE(twice, 0);
    TuneSettings want;
    want.strategy = spec::ShardStrategy::no_shard;
    want.activationCheckpointing = false;
    want.microBatchSize = 8;
    want.backwardPrefetch = spec::BackwardPrefetch::post;
    want.forwardPrefetch = true;
    want.maxInflightGathers = 4;
    want.wrapPolicy = spec::WrapPolicy::size;
    QVERIFY(*best == want);
    QVERIFY(measured.front() == starts.front());  // the start measured first
    QVERIFY2(measured.size() < 40, qPrintable(QString::number(measured.size())));
  }

  // The first start that gives a value is the start; a micro-batch or a strategy out of memory
  // ends that field's ascent (8 is never measured once 4 was out of memory, nor NO_SHARD once
  // SHARD_GRAD_OP was); a gain under minGain does not move the search.
  void memoryLimitsAndSmallGains() {
    const auto domain = backend::tuneDomain(tiny(1));
    const auto starts = backend::tuneStarts(TuneSettings{}, domain);
    std::map<std::int64_t, int> microBatchesTried;
    int unsharded = 0;
    auto measure = [&](const TuneSettings& s) -> TuneMeasure {
      if (s == starts.front()) return {std::nullopt, true};
      ++microBatchesTried[s.microBatchSize];
      unsharded += s.strategy == spec::ShardStrategy::no_shard ? 1 : 0;
      if (s.strategy == spec::ShardStrategy::shard_grad_op) return {std::nullopt, true};
      if (s.microBatchSize >= 4) return {std::nullopt, true};
      double v = 100 + 10.0 * double(s.microBatchSize);
      if (s.forwardPrefetch) v += 1;  // 1%: noise, not a gain
      return {v, false};
    };
    const auto best = backend::coordinateDescent(starts, domain, measure, {});
    QVERIFY(best.has_value());
    QCOMPARE(best->microBatchSize, std::int64_t(2));
    QVERIFY(!best->forwardPrefetch);
    QCOMPARE(microBatchesTried.count(8), std::size_t(0));
    QCOMPARE(unsharded, 0);  // SHARD_GRAD_OP was out of memory: NO_SHARD needs more
  }

  // The stop callback ends the search before the next measure; the best so far is returned,
  // and nothing when nothing was measured.
  void stopEndsTheSearch() {
    const auto domain = backend::tuneDomain(tiny(1));
    const auto starts = backend::tuneStarts(TuneSettings{}, domain);
    int calls = 0;
    backend::DescentLimits limits;
    limits.stop = [&] { return calls >= 3; };
    auto measure = [&](const TuneSettings& s) {
      ++calls;
      return TuneMeasure{gain(s), false};
    };
    const auto best = backend::coordinateDescent(starts, domain, measure, limits);
    QCOMPARE(calls, 3);
    QVERIFY(best.has_value());
    limits.stop = [] { return true; };
    QVERIFY(!backend::coordinateDescent(starts, domain, measure, limits).has_value());
  }
};

QTEST_GUILESS_MAIN(TestAutotuneSpace)
#include "tst_autotunespace.moc"
