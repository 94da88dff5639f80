// tst_search_schema: spec owns the [search] schema like every other section: the spec
// library alone (no search library, no Qt in the code under test) reads an experiment's [search]
// into typed settings, applies an override to it, and refuses a bad value naming the file, the
// field and the fix. The parser's every rule is tested through the search library in
// tests/search/tst_space.cpp.
#include <QTest>

#include <string>

#include "spec/experiment.h"
#include "spec/search_space.h"
#include "tests/support/paths.h"

using namespace shardscope;
using namespace shardscope::spec;

namespace {

const std::string kSweep =
    shardscope::testing::sourceDir().toStdString() + "/examples/demo-sweep.toml";

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
                                      "auto, tpe, random, grid, qmc, cmaes, nsga2, gp"));
  }

  // search.on_oom: "replan" by default, "record" keeps an out-of-memory trial's end; anything
  // else is refused naming the field and both values.
  void onOomReplansByDefault() {
    auto s = spaceOf({});
    QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
    QVERIFY(s->on_oom == OnOom::replan);
    auto record = spaceOf({"search.on_oom=\"record\""});
    QVERIFY2(record.ok(), record.ok() ? "" : record.message().c_str());
    QVERIFY(record->on_oom == OnOom::record);
    auto bad = parse_search_space(
        "[search]\non_oom = \"retry\"\n[search.space.\"lora.enabled\"]\ntype = \"bool\"\n",
        "exp.toml");
    QVERIFY(!bad.ok());
    QVERIFY2(bad.message().rfind("exp.toml: search.on_oom: must be \"replan\"", 0) == 0 &&
                 bad.message().find("\"record\"") != std::string::npos,
             bad.message().c_str());
  }

  // Loading the experiment validates [search] like every other section: a bad value is refused
  // at the line that holds it (not at sweep time), with the field and the fix.
  void loadRefusesBadSearchAtItsLine() {
    const std::string text =
        "[search]\n"                     // line 1
        "n_trials = 4\n"                 // 2
        "\n"                             // 3
        "[search.space.\"train.lr\"]\n"  // 4
        "type = \"float\"\n"             // 5
        "low = 1e-2\n"                   // 6
        "high = 1e-5\n";                 // 7
    auto exp = parse_experiment(text, "exp.toml", {}, noPaths());
    QVERIFY(!exp.ok());
    QVERIFY2(
        exp.message().find("exp.toml:6:1: search.space.\"train.lr\".low: must be below high") !=
            std::string::npos,
        exp.message().c_str());
    auto sampler = parse_experiment("[model]\nname = \"tiny\"\n[search]\nsampler = \"bogus\"\n",
                                    "exp.toml", {}, noPaths());
    QVERIFY(!sampler.ok());
    QVERIFY2(sampler.message().find("exp.toml:4:1: search.sampler: unknown sampler") !=
                 std::string::npos,
             sampler.message().c_str());
  }

  // A sweep of shardtrain sets each parameter with --set, so a name that is no field of the
  // experiment is refused on load with the field it was probably meant to be.
  void loadRefusesAParameterThatIsNoField() {
    const std::string text =
        "[search]\n[search.space.\"train.lr_warmup\"]\ntype = \"int\"\nlow = 0\nhigh = 40\n"
        "[search.space.\"train.weight_decy\"]\ntype = \"float\"\nlow = 0.0\nhigh = 0.1\n";
    auto exp = parse_experiment(text, "exp.toml", {}, noPaths());
    QVERIFY(!exp.ok());
    QVERIFY2(exp.message().find("exp.toml:2:15: search.space.\"train.lr_warmup\": "
                                "\"train.lr_warmup\" is not a field of the experiment") !=
                 std::string::npos,
             exp.message().c_str());
    QVERIFY2(exp.message().find("did you mean \"train.lr_warmup_steps\"?") != std::string::npos,
             exp.message().c_str());
    QVERIFY2(exp.message().find("did you mean \"train.weight_decay\"?") != std::string::npos,
             exp.message().c_str());
    // An environment variable of the ranks is a field too, as `--set launch.env.NAME=` is.
    auto env = parse_experiment(
        "[search]\n[search.space.\"launch.env.NCCL_ALGO\"]\ntype = \"categorical\"\n"
        "choices = [\"ring\", \"tree\"]\n",
        "exp.toml", {}, noPaths());
    QVERIFY2(env.ok() || env.message().find("is not a field") == std::string::npos,
             env.message().c_str());
    // Another program's trials take any flag: the same names are fine there.
    auto program =
        parse_experiment("[search]\nprogram = [\"python3\", \"obj.py\"]\n" + text.substr(9),
                         "exp.toml", {}, noPaths());
    QVERIFY2(program.ok(), program.ok() ? "" : program.message().c_str());
  }

  // A [search] with no parameter cannot run a study: refused on load, saying what to add.
  void loadRefusesASearchWithoutParameters() {
    auto exp = parse_experiment("[search]\nn_trials = 3\n", "exp.toml", {}, noPaths());
    QVERIFY(!exp.ok());
    QVERIFY2(exp.message().find("search.space: no parameters; add e.g.") != std::string::npos,
             exp.message().c_str());
  }

  // [search.pbt]: population-based training's settings are read once into the typed space, the
  // defaults filled in; the canonical [search] text of a loaded experiment keeps the table.
  void pbtReadsItsSettings() {
    const std::string text =
        kPbtSpace +
        "[search.pbt]\npopulation = 6\ninterval_steps = 5\nquantile = 0.5\n"
        "factors = [0.5, 2]\nmutable = [\"train.weight_decay\", \"train.lr\"]\n"
        "resample_probability = 0\n";
    auto s = parse_search_space(text, "exp.toml");
    QVERIFY2(s.ok(), s.ok() ? "" : s.message().c_str());
    QVERIFY(s->pbt.has_value());
    QCOMPARE(s->pbt->population, 6);
    QCOMPARE(s->pbt->interval_steps, std::int64_t{5});
    QCOMPARE(s->pbt->quantile, 0.5);
    QCOMPARE(s->pbt->factors, (std::vector<double>{0.5, 2.0}));
    QCOMPARE(s->pbt->mutable_params, (std::vector<std::string>{"train.weight_decay", "train.lr"}));
    QCOMPARE(s->pbt->resample_probability, 0.0);
    auto defaults = parse_search_space(kPbtSpace +
                                           "[search.pbt]\ninterval_steps = 3\nmutable = "
                                           "[\"train.lr\"]\n",
                                       "exp.toml");
    QVERIFY2(defaults.ok(), defaults.ok() ? "" : defaults.message().c_str());
    QCOMPARE(defaults->pbt->population, 4);
    QCOMPARE(defaults->pbt->quantile, 0.25);
    QCOMPARE(defaults->pbt->factors, (std::vector<double>{0.8, 1.2}));
    QCOMPARE(defaults->pbt->resample_probability, 0.25);
    QVERIFY(!parse_search_space(kPbtSpace, "exp.toml")->pbt.has_value());
    // Through the experiment loader: its canonical [search] text keeps [search.pbt].
    auto exp = parse_experiment(
        "[model]\narch = \"tiny\"\n[data]\ntrain_path = \"t.jsonl\"\nformat = \"tokens\"\n" + text,
        "exp.toml", {}, noPaths());
    QVERIFY2(exp.ok(), exp.ok() ? "" : exp.message().c_str());
    auto again = parse_search_space(exp->search.toml, "exp.toml");
    QVERIFY2(again.ok(), again.ok() ? "" : again.message().c_str());
    QVERIFY(again->pbt == s->pbt);
  }

  // Each bad [search.pbt] value is refused naming its key and what to write instead.
  void pbtRefusesBadSettingsByKey() {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"population = 1\ninterval_steps = 3\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.population: must be >= 2 (got 1)"},
        {"population = 4294967298\ninterval_steps = 3\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.population: must be <= 1024"},
        {"mutable = [\"train.lr\"]\n", "exp.toml: search.pbt.interval_steps: missing; set"},
        {"interval_steps = 0\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.interval_steps: must be >= 1 (got 0)"},
        {"interval_steps = 1e300\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.interval_steps: must be an integer"},
        {"interval_steps = 3\nquantile = 0.75\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.quantile: must be in (0, 0.5] (got 0.75)"},
        {"interval_steps = 3\nfactors = [1.2, 0]\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.factors: every factor must be finite and > 0 (got 0)"},
        {"interval_steps = 3\nfactors = []\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.factors: must be a list of 1 to 64 numbers"},
        {"interval_steps = 3\nresample_probability = 1.5\nmutable = [\"train.lr\"]\n",
         "exp.toml: search.pbt.resample_probability: must be in [0, 1] (got 1.5)"},
        {"interval_steps = 3\n", "exp.toml: search.pbt.mutable: must be a non-empty list"},
        {"interval_steps = 3\nmutable = [\"train.batch_size\"]\n",
         "exp.toml: search.pbt.mutable: \"train.batch_size\" cannot change mid-run; use some of "
         "train.lr, train.weight_decay, lora.dropout, train.lr_warmup_steps"},
        {"interval_steps = 3\nmutable = [\"lora.dropout\"]\n",
         "exp.toml: search.pbt.mutable: \"lora.dropout\" is not a float or int parameter of the "
         "search space; add search.space.\"lora.dropout\""},
        {"interval_steps = 3\nmutable = [\"train.lr\", \"train.lr\"]\n",
         "exp.toml: search.pbt.mutable: \"train.lr\" is listed twice"},
        {"interval_steps = 3\nmutable = [\"train.lr\"]\nperiod = 4\n",
         "exp.toml: search.pbt.period: unknown key; the known keys are population"},
    };
    for (const auto& [body, expected] : cases) {
      std::string text = kPbtSpace;
      text += "[search.pbt]\n";
      text += body;
      auto s = parse_search_space(text, "exp.toml");
      QVERIFY2(!s.ok(), body.c_str());
      QVERIFY2(s.message().rfind(expected, 0) == 0, (body + " -> " + s.message()).c_str());
    }
    // PBT replaces a pruner and resumes shardtrain checkpoints: a program trial cannot take it.
    auto pruned =
        parse_search_space("[search]\npruner = \"median\"\n" + kPbtSpace.substr(9) +
                               "[search.pbt]\ninterval_steps = 3\nmutable = [\"train.lr\"]\n",
                           "exp.toml");
    QVERIFY(!pruned.ok());
    QVERIFY2(pruned.message().rfind("exp.toml: search.pbt: replaces the pruner", 0) == 0,
             pruned.message().c_str());
    auto program =
        parse_search_space("[search]\nprogram = [\"obj.py\"]\n" + kPbtSpace.substr(9) +
                               "[search.pbt]\ninterval_steps = 3\nmutable = [\"train.lr\"]\n",
                           "exp.toml");
    QVERIFY(!program.ok());
    QVERIFY2(program.message().rfind("exp.toml: search.pbt: needs shardtrain trials", 0) == 0,
             program.message().c_str());
  }

 private:
  inline static const std::string kPbtSpace =
      "[search]\n[search.space.\"train.lr\"]\ntype = \"float\"\nlow = 1e-4\nhigh = 1e-1\n"
      "log = true\n[search.space.\"train.weight_decay\"]\ntype = \"float\"\nlow = 0.0\n"
      "high = 0.1\n";

  static LoadOptions noPaths() {
    LoadOptions options;
    options.check_paths = false;
    return options;
  }
};

QTEST_GUILESS_MAIN(TestSearchSchema)
#include "tst_search_schema.moc"
