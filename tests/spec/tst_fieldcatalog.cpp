// spec/field_catalog: the form catalogue agrees with the schema, get/set round-trip,
// and validation messages are attached to the field they name.
#include <QtTest>

#include "spec/experiment.h"
#include "spec/field_catalog.h"

using namespace shardscope::spec;

class TestFieldCatalog : public QObject {
  Q_OBJECT

 private slots:
  void typesChoicesDefaultsDocs() {
    const auto* lr = find_field("train.lr");
    QVERIFY(lr);
    QCOMPARE(lr->type, FieldType::floating);
    QCOMPARE(std::stod(lr->default_text), 3e-4);
    QVERIFY(!lr->doc.empty());
    const auto* strategy = find_field("shard.strategy");
    QVERIFY(strategy);
    QCOMPARE(strategy->type, FieldType::enumeration);
    QCOMPARE(strategy->choices,
             (std::vector<std::string>{"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"}));
    // Aliases (float32) are accepted by the reader but not offered.
    QCOMPARE(find_field("shard.param_dtype")->choices.size(), std::size_t(3));
    // A string with a fixed vocabulary stays a string and offers what validation accepts.
    QCOMPARE(find_field("lora.quantize")->type, FieldType::string);
    QCOMPARE(find_field("lora.quantize")->choices, (std::vector<std::string>{"none", "nf4"}));
    QCOMPARE(find_field("lora.quant_storage")->choices,
             (std::vector<std::string>{"uint8", "bfloat16", "float16", "float32"}));
    QVERIFY(find_field("model.path")->choices.empty());
    QCOMPARE(find_field("lora.target_modules")->type, FieldType::list);
    QCOMPARE(find_field("launch.gpus")->list_of_int, true);
    QCOMPARE(find_field("launch.env")->type, FieldType::map);
    QCOMPARE(find_field("train.seed")->is_unsigned, true);
    QCOMPARE(find_field("nope.x"), nullptr);
    QCOMPARE(catalog_sections().front(), std::string("experiment"));
    QCOMPARE(catalog_sections().back(), std::string("notify"));
    QCOMPARE(find_field("notify.on_end")->type, FieldType::string);
    QCOMPARE(find_field("notify.stall_after_min")->default_text, std::string("30.0"));
  }

  void everyDefaultRoundTrips() {
    // set_field(get_field(x)) must leave a non-default experiment unchanged, for every field.
    auto exp = read_experiment_unvalidated(
        "[launch]\nenv = { A = \"1\", \"B C\" = \"x\\\"y\" }\ngpus = [0, 1]\n"
        "[lora]\ntarget_modules = [\"q_proj\", \"a,b\"]\n[experiment]\ndescription = \"a "
        "\\\"q\\\"\"\n",
        "mem.toml");
    QVERIFY2(exp.ok(), exp.ok() ? "" : exp.message().c_str());
    for (const auto& f : field_catalog()) {
      Experiment copy = *exp;
      auto text = get_field(copy, f.path);
      QVERIFY(text.ok());
      auto set = set_field(copy, f.path, *text);
      QVERIFY2(set.ok(), (f.path + ": " + (set.ok() ? "" : set.message())).c_str());
      QVERIFY2(copy == *exp, f.path.c_str());
      QCOMPARE(get_field(Experiment{}, f.path).value(), f.default_text);
    }
  }

  void setUsesTheCliRules() {
    Experiment exp;
    QVERIFY(set_field(exp, "train.lr", "1e-3").ok());
    QCOMPARE(exp.train.lr, 1e-3);
    QVERIFY(set_field(exp, "shard.strategy", "hybrid_shard").ok());  // case-insensitive, as --set
    QCOMPARE(exp.shard.strategy, ShardStrategy::hybrid_shard);
    auto bad = set_field(exp, "train.lr", "fast");
    QVERIFY(!bad.ok());
    QVERIFY2(bad.message().find("train.lr") != std::string::npos, bad.message().c_str());
    QCOMPARE(exp.train.lr, 1e-3);  // unchanged after a refused value
    QVERIFY(!set_field(exp, "train.lrr", "1").ok());
    // Range rules are not applied by set_field: the form keeps the value and shows why.
    QVERIFY(set_field(exp, "train.lr", "-0.1").ok());
    const auto issues = check_experiment(exp, false);
    const auto it = std::find_if(issues.begin(), issues.end(),
                                 [](const FieldIssue& i) { return i.field == "train.lr"; });
    QVERIFY(it != issues.end());
    QVERIFY2(it->message.rfind("train.lr: ", 0) == 0, it->message.c_str());
  }

  void worldRulesNameTheirField() {
    Experiment exp;
    exp.data.train_path = "x.jsonl";
    exp.shard.strategy = ShardStrategy::hybrid_shard;
    exp.launch.nnodes = 1;
    exp.launch.nproc_per_node = 2;
    const auto issues = check_experiment(exp, false);
    QVERIFY(std::any_of(issues.begin(), issues.end(), [](const FieldIssue& i) {
      return i.field == "shard.strategy" && i.message.find("HYBRID_SHARD") != std::string::npos;
    }));
  }
};

QTEST_GUILESS_MAIN(TestFieldCatalog)
#include "tst_fieldcatalog.moc"
