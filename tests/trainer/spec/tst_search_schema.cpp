// tst_search_schema: trainer/spec owns the [search] schema like every other section: the spec
// library alone (no search library, no Qt in the code under test) reads an experiment's [search]
// into typed settings, applies an override to it, and refuses a bad value naming the file, the
// field and the fix. The parser's every rule is tested through the search library in
// tests/search/tst_space.cpp.
#include <QTest>

#include <string>

#include "trainer/spec/experiment.h"
#include "trainer/spec/search_space.h"

using namespace shardscope;
using namespace shardscope::spec;

namespace {

const std::string kSweep = SHARDSCOPE_SOURCE_DIR "/examples/demo-sweep.toml";

Result<SearchSpace> spaceOf(const std::vector<std::string>& overrides) {
  LoadOptions options;
  options.check_paths = false;  // the example's data is generated on demand
  auto exp = load_experiment(kSweep, overrides, options);
  if (!exp) return exp.error();
  if (!exp->search.present) return fail("no [search] in " + kSweep);
  return parse_search_space(exp->search.toml, exp->source);
}

}  // namespace

class TestSearchSchema : public QObject {
  Q_OBJECT

 private slots:
  void readsTheExamplesSearch() {
    auto s = spaceOf({});
    QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
    QCOMPARE(s->name, std::string("demo-sweep"));
    QCOMPARE(s->sampler.type, std::string("tpe"));
    QCOMPARE(s->seed, std::uint64_t{7});
    QCOMPARE(s->n_trials, std::int64_t{8});
    QCOMPARE(s->objectives.size(), std::size_t{1});
    QCOMPARE(s->objectives[0].metric, std::string("objective"));
    QVERIFY(s->objectives[0].direction == Direction::Minimize);
    const int lr = s->index_of("train.lr");
    QVERIFY(lr >= 0);
    const Param& p = s->params[static_cast<std::size_t>(lr)];
    QVERIFY(p.type == ParamType::Float && p.log);
    QCOMPARE(p.low, 1e-3);
    QCOMPARE(p.high, 1e-1);
  }

  // A --set on a [search] key reaches the typed settings, as one on any section does.
  void overrideReachesSearch() {
    auto s = spaceOf({"search.n_trials=3", "search.sampler=\"random\""});
    QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
    QCOMPARE(s->n_trials, std::int64_t{3});
    QCOMPARE(s->sampler.type, std::string("random"));
  }

  void badValueNamesFileFieldAndFix() {
    auto s = parse_search_space(
        "[search]\nsampler = \"bogus\"\n[search.space.\"lora.enabled\"]\ntype = \"bool\"\n",
        "exp.toml");
    QVERIFY(!s.ok());
    QCOMPARE(s.message(), std::string("exp.toml: search.sampler: unknown sampler \"bogus\"; use "
                                      "random, grid, qmc, tpe, cmaes, nsga2"));
  }
};

QTEST_GUILESS_MAIN(TestSearchSchema)
#include "tst_search_schema.moc"
