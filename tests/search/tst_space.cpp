// Tests search/space.cpp: parsing and validating [search], the internal transforms and
// the program-argument contract.
#include <QtTest>

#include <cmath>
#include <map>

#include "search/space.h"
#include "search/trial.h"

using namespace shardscope::search;

namespace {

const char* kFull = R"([search]
name = "lr-sweep"
seed = 42
n_trials = 60
timeout_s = 3600
concurrency = 4
retry_from_checkpoint = false
objectives = {"eval.loss" = "minimize", "eval.accuracy" = "maximize"}
pruner = {type = "asha", min_resource = 2, reduction_factor = 3}
program = ["python3", "obj.py"]

[search.sampler]
type = "tpe"
n_startup_trials = 5
constant_liar = false
n_local_candidates = 4
local_width = 0.25
rank_weights = false

[search.space."train.lr"]
type = "float"
low = 1e-5
high = 1e-2
log = true

[search.space."lora.r"]
type = "int"
low = 4
high = 64
step = 4
when = {"lora.enabled" = true}

[search.space."lora.enabled"]
type = "bool"

[search.space."train.optimizer"]
type = "categorical"
choices = ["adamw", "sgd"]

[search.space."train.warmup"]
type = "float"
low = 0.0
high = 0.5
step = 0.1
)";

SearchSpace parse_ok(const std::string& text) {
  auto r = parse_search_space(text, "exp/demo.toml");
  if (!r) qFatal("unexpected parse error: %s", r.message().c_str());
  return *r;
}

}  // namespace

class TestSpace : public QObject {
  Q_OBJECT

 private slots:
  void parsesEveryField() {
    const SearchSpace s = parse_ok(kFull);
    QCOMPARE(s.name, std::string("lr-sweep"));
    QVERIFY(!s.retry_from_checkpoint);
    QCOMPARE(s.sampler.type, std::string("tpe"));
    QCOMPARE(s.sampler.n_startup_trials, 5);
    QVERIFY(!s.sampler.constant_liar);
    QVERIFY(s.sampler.multivariate);
    QCOMPARE(s.sampler.n_local_candidates, 4);
    QCOMPARE(s.sampler.local_width, 0.25);
    QVERIFY(!s.sampler.rank_weights);
    QCOMPARE(s.seed, std::uint64_t{42});
    QCOMPARE(s.n_trials, std::int64_t{60});
    QCOMPARE(s.timeout_s, 3600.0);
    QCOMPARE(s.concurrency, 4);
    QCOMPARE(s.objectives.size(), std::size_t{2});
    QCOMPARE(s.objectives[0].metric, std::string("eval.accuracy"));
    QVERIFY(s.objectives[0].direction == Direction::Maximize);
    QCOMPARE(s.pruner.type, std::string("asha"));
    QCOMPARE(*s.pruner.min_resource, std::int64_t{2});
    QCOMPARE(s.pruner.reduction_factor, 3);
    QCOMPARE(s.program, (std::vector<std::string>{"python3", "obj.py"}));
    QCOMPARE(s.params.size(), std::size_t{5});
    // The conditional comes after the parameter its condition names.
    QVERIFY(s.index_of("lora.r") > s.index_of("lora.enabled"));
    const Param& r = s.params[static_cast<std::size_t>(s.index_of("lora.r"))];
    QCOMPARE(r.type, ParamType::Int);
    QCOMPARE(r.cardinality(), std::int64_t{16});
    QCOMPARE(r.when.size(), std::size_t{1});
  }

  void defaultsAndHeaderlessText() {
    const SearchSpace s = parse_ok("[space.x]\ntype = \"float\"\nlow = -1\nhigh = 1\n");
    QCOMPARE(s.name, std::string("demo"));          // the file's stem
    QCOMPARE(s.sampler.type, std::string("auto"));  // the default (#32)
    QCOMPARE(s.concurrency, 1);
    QCOMPARE(s.stop_grace_s, 30.0);
    QVERIFY(s.retry_from_checkpoint);
    QCOMPARE(s.objectives.size(), std::size_t{1});
    QCOMPARE(s.objectives[0].metric, std::string("objective"));
    QCOMPARE(s.pruner.type, std::string("none"));
  }

  void rejectsInvalid_data() {
    QTest::addColumn<QString>("toml");
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("hint");
    const QString lr = "[search.space.\"train.lr\"]\ntype = \"float\"\n";
    QTest::newRow("retry_from_checkpoint not a bool")
        << "[search]\nretry_from_checkpoint = 1\n" + lr + "low = 0.1\nhigh = 1\n"
        << "search.retry_from_checkpoint"
        << "true or false";
    QTest::newRow("low >= high") << lr + "low = 0.1\nhigh = 0.01\n"
                                 << "search.space.\"train.lr\".low"
                                 << "swap";
    QTest::newRow("low == high") << lr + "low = 1\nhigh = 1\n"
                                 << "search.space.\"train.lr\".low"
                                 << "widen";
    QTest::newRow("log with low <= 0") << lr + "low = 0\nhigh = 1\nlog = true\n"
                                       << "search.space.\"train.lr\".low"
                                       << "log = false";
    QTest::newRow("step not dividing") << lr + "low = 0\nhigh = 1\nstep = 0.3\n"
                                       << "search.space.\"train.lr\".step"
                                       << "multiple";
    QTest::newRow("log with step") << lr + "low = 1\nhigh = 2\nstep = 0.5\nlog = true\n"
                                   << "search.space.\"train.lr\".step"
                                   << "drop step or log";
    QTest::newRow("when unknown") << lr + "low = 0\nhigh = 1\nwhen = {\"lora.enabled\" = true}\n"
                                  << "search.space.\"train.lr\".when"
                                  << "lora.enabled";
    QTest::newRow("when impossible value")
        << "[search.space.a]\ntype = \"bool\"\n[search.space.b]\ntype = \"int\"\nlow = 1\n"
           "high = 3\nwhen = {a = \"yes\"}\n"
        << "search.space.\"b\".when"
        << "never be yes";
    QTest::newRow("empty choices") << "[search.space.opt]\ntype = \"categorical\"\nchoices = []\n"
                                   << "search.space.\"opt\".choices"
                                   << "at least one";
    QTest::newRow("unknown param key") << lr + "low = 0\nhigh = 1\nlogg = true\n"
                                       << "search.space.\"train.lr\".logg"
                                       << "known keys";
    QTest::newRow("unknown search key") << "[search]\nn_trial = 5\n" + lr + "low = 0\nhigh = 1\n"
                                        << "search.n_trial"
                                        << "n_trials";
    QTest::newRow("unknown type") << "[search.space.x]\ntype = \"double\"\nlow = 0\nhigh = 1\n"
                                  << "search.space.\"x\".type"
                                  << "float, int";
    QTest::newRow("int bounds") << "[search.space.x]\ntype = \"int\"\nlow = 0.5\nhigh = 3\n"
                                << "search.space.\"x\".low"
                                << "whole";
    QTest::newRow("unknown sampler")
        << "[search]\nsampler = \"cobyla\"\n" + lr + "low = 0\nhigh = 1\n"
        << "search.sampler"
        << "cmaes, nsga2, gp";
    QTest::newRow("local width 0")
        << "[search.sampler]\nlocal_width = 0.0\n" + lr + "low = 0\nhigh = 1\n"
        << "search.sampler.local_width"
        << "(0, 1]";
    QTest::newRow("local width above 1")
        << "[search.sampler]\nlocal_width = 1.5\n" + lr + "low = 0\nhigh = 1\n"
        << "search.sampler.local_width"
        << "(0, 1]";
    QTest::newRow("negative local candidates")
        << "[search.sampler]\nn_local_candidates = -1\n" + lr + "low = 0\nhigh = 1\n"
        << "search.sampler.n_local_candidates"
        << ">= 0";
    // A value beyond an int wrapped when stored (4294967298 became population_size 2).
    QTest::newRow("population beyond int")
        << "[search.sampler]\npopulation_size = 4294967298\n" + lr + "low = 0\nhigh = 1\n"
        << "search.sampler.population_size"
        << "<= 2147483647 (got 4294967298)";
    QTest::newRow("concurrency beyond int")
        << "[search]\nconcurrency = 4294967297\n" + lr + "low = 0\nhigh = 1\n"
        << "search.concurrency"
        << "<= 2147483647";
    QTest::newRow("bad direction")
        << "[search]\nobjectives = {loss = \"min\"}\n" + lr + "low = 0\nhigh = 1\n"
        << "search.objectives.\"loss\""
        << "minimize";
    QTest::newRow("no parameters") << "[search]\nseed = 1\n"
                                   << "search.space"
                                   << "train.lr";
    QTest::newRow("cycle")
        << "[search.space.a]\ntype = \"bool\"\nwhen = {b = true}\n[search.space.b]\ntype = "
           "\"bool\"\nwhen = {a = true}\n"
        << "search.space"
        << "cycle";
  }
  void rejectsInvalid() {
    QFETCH(QString, toml);
    QFETCH(QString, field);
    QFETCH(QString, hint);
    auto r = parse_search_space(toml.toStdString(), "demo.toml");
    QVERIFY2(!r.ok(), "an invalid space was accepted");
    const QString msg = QString::fromStdString(r.message());
    QVERIFY2(msg.startsWith("demo.toml: "), qPrintable(msg));
    QVERIFY2(msg.contains(field + ":"), qPrintable(msg));
    QVERIFY2(msg.contains(hint), qPrintable(msg));
  }

  void logFloatTransform() {
    const SearchSpace s = parse_ok(kFull);
    const Param& lr = s.params[static_cast<std::size_t>(s.index_of("train.lr"))];
    QCOMPARE(std::get<double>(lr.from_unit(0.0)), 1e-5);
    QVERIFY(std::abs(std::get<double>(lr.from_unit(0.5)) - std::sqrt(1e-5 * 1e-2)) < 1e-12);
    QVERIFY(std::get<double>(lr.from_unit(0.999999999)) <= 1e-2);
    QVERIFY(std::abs(lr.to_internal(ParamValue(1e-3)) - std::log(1e-3)) < 1e-12);
    QVERIFY(lr.contains(ParamValue(1e-3)));
    QVERIFY(!lr.contains(ParamValue(0.1)));
    QVERIFY(!lr.contains(ParamValue(std::int64_t{0})));  // an int is not a float value
  }

  // Rounding in the widened internal space gives every grid value the same share.
  void steppedValuesAreEquallyLikely() {
    const SearchSpace s = parse_ok(kFull);
    for (const char* name : {"lora.r", "train.warmup"}) {
      const Param& p = s.params[static_cast<std::size_t>(s.index_of(name))];
      std::map<std::string, int> counts;
      Rng rng(3);
      const int n = 32000;
      for (int i = 0; i < n; ++i) {
        const ParamValue v = p.from_unit(rng.uniform());
        QVERIFY2(p.contains(v), name);
        counts[format_value(v)]++;
      }
      QCOMPARE(static_cast<std::int64_t>(counts.size()), p.cardinality());
      const double expected = static_cast<double>(n) / static_cast<double>(p.cardinality());
      for (const auto& [v, c] : counts) {
        QVERIFY2(std::abs(c - expected) < 0.15 * expected, qPrintable(QString::fromStdString(v)));
      }
    }
  }

  void logIntCoversEveryValue() {
    const SearchSpace s =
        parse_ok("[search.space.bs]\ntype = \"int\"\nlow = 1\nhigh = 64\nlog = true\n");
    const Param& p = s.params[0];
    std::map<std::int64_t, int> counts;
    Rng rng(9);
    for (int i = 0; i < 20000; ++i) counts[std::get<std::int64_t>(p.from_unit(rng.uniform()))]++;
    QCOMPARE(counts.begin()->first, std::int64_t{1});
    QCOMPARE(counts.rbegin()->first, std::int64_t{64});
    // log scale: as many draws in [1, 8] as in [8, 64] (roughly, both halves of log range).
    int low_half = 0;
    for (const auto& [v, c] : counts) low_half += v <= 7 ? c : 0;
    QVERIFY2(low_half > 8000 && low_half < 12000, qPrintable(QString::number(low_half)));
  }

  void programArguments() {
    const SearchSpace s = parse_ok(kFull);
    TrialParams t;
    t["train.lr"] = 0.005;
    t["lora.enabled"] = false;
    t["train.optimizer"] = std::string("sgd");
    t["train.warmup"] = 0.5;
    QVERIFY2(s.check(t).ok(), s.check(t).message().c_str());
    const auto args = program_arguments(s, t);
    const std::vector<std::string> expected = {"--lora.enabled=false",
                                               "--train.lr=0.0050000000000000001",
                                               "--train.optimizer=sgd", "--train.warmup=0.5"};
    QCOMPARE(args, expected);
    t["lora.r"] = std::int64_t{12};
    QVERIFY(!s.check(t).ok());  // inactive conditional present
    t["lora.enabled"] = true;
    QVERIFY(s.check(t).ok());
    QCOMPARE(program_arguments(s, t)[1], std::string("--lora.r=12"));
    t["lora.r"] = std::int64_t{13};  // off the step grid
    QVERIFY(!s.check(t).ok());
  }
};

QTEST_GUILESS_MAIN(TestSpace)
#include "tst_space.moc"
