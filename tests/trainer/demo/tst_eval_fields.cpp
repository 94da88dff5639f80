// tst_eval_fields: the [eval] generation fields (spec/experiment.h):
// defaults, parsing, the round trip through write_experiment_toml, and each validation message
// naming the field and the fix (exact_match on non-chat data, max_new_tokens, temperature, top_p).
#include <QTest>

#include <string>

#include "spec/experiment.h"

using namespace shardscope;
using namespace shardscope::spec;

namespace {

const std::string kChat =
    "[model]\narch = \"qwen2_vl\"\npath = \"m\"\n[data]\ntrain_path = \"t.jsonl\"\n"
    "format = \"chat\"\n";

Result<Experiment> parse(const std::string& text, const std::vector<std::string>& set = {}) {
  LoadOptions options;
  options.check_paths = false;  // the texts name files that need not exist
  return parse_experiment(text, "inline.toml", set, options);
}

}  // namespace

class TestEvalFields : public QObject {
  Q_OBJECT

 private slots:
  void defaults() {
    auto e = parse(kChat);
    QVERIFY2(e.ok(), e.ok() ? "" : e.message().c_str());
    QCOMPARE(e->eval.max_new_tokens, 16);
    QCOMPARE(e->eval.do_sample, false);
    QCOMPARE(e->eval.temperature, 1.0);
    QCOMPARE(e->eval.top_p, 1.0);
  }

  void parsedAndWritten() {
    auto e = parse(kChat +
                   "[eval]\nmetrics = [\"loss\", \"exact_match\"]\nmax_new_tokens = 4\n"
                   "do_sample = true\ntemperature = 0.7\ntop_p = 0.9\n");
    QVERIFY2(e.ok(), e.ok() ? "" : e.message().c_str());
    QCOMPARE(e->eval.metrics, (std::vector<std::string>{"loss", "exact_match"}));
    QCOMPARE(e->eval.max_new_tokens, 4);
    QVERIFY(e->eval.do_sample);
    QCOMPARE(e->eval.temperature, 0.7);
    QCOMPARE(e->eval.top_p, 0.9);
    const auto text = write_experiment_toml(*e);
    QVERIFY(text.find("max_new_tokens = 4") != std::string::npos);
    auto again = parse(text);
    QVERIFY2(again.ok(), again.ok() ? "" : again.message().c_str());
    QVERIFY(again->eval == e->eval);
  }

  void overrides() {
    auto e = parse(kChat, {"eval.do_sample=true", "eval.top_p=0.5", "eval.max_new_tokens=3"});
    QVERIFY2(e.ok(), e.ok() ? "" : e.message().c_str());
    QVERIFY(e->eval.do_sample);
    QCOMPARE(e->eval.top_p, 0.5);
    QCOMPARE(e->eval.max_new_tokens, 3);
  }

  void messages_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("parts");
    const auto chat = QString::fromStdString(kChat);
    QTest::newRow("exact_match on tokens")
        << "[data]\ntrain_path = \"t.jsonl\"\n[eval]\nmetrics = [\"exact_match\"]\n"
        << QStringList{"eval.metrics", "data.format is \"tokens\"", "data.format = \"chat\""};
    QTest::newRow("max_new_tokens zero")
        << chat + "[eval]\nmax_new_tokens = 0\n"
        << QStringList{"inline.toml:8:", "eval.max_new_tokens: must be >= 1 (got 0)", "16"};
    QTest::newRow("temperature zero")
        << chat + "[eval]\ntemperature = 0.0\n"
        << QStringList{"eval.temperature: must be > 0", "eval.do_sample = false"};
    QTest::newRow("top_p above one") << chat + "[eval]\ntop_p = 1.5\n"
                                     << QStringList{"eval.top_p: must be in (0, 1]", "0.9"};
    QTest::newRow("top_p zero") << chat + "[eval]\ntop_p = 0.0\n"
                                << QStringList{"eval.top_p: must be in (0, 1]"};
    QTest::newRow("do_sample string")
        << chat + "[eval]\ndo_sample = \"yes\"\n"
        << QStringList{"eval.do_sample: expected a boolean, got a string"};
    QTest::newRow("metric unknown") << chat + "[eval]\nmetrics = [\"bleu\"]\n"
                                    << QStringList{"unknown metric \"bleu\"", "\"exact_match\""};
  }

  void messages() {
    QFETCH(QString, text);
    QFETCH(QStringList, parts);
    auto e = parse(text.toStdString());
    QVERIFY(!e.ok());
    for (const auto& part : parts)
      QVERIFY2(e.message().find(part.toStdString()) != std::string::npos,
               ("missing \"" + part.toStdString() + "\" in: " + e.message()).c_str());
  }
};

QTEST_GUILESS_MAIN(TestEvalFields)
#include "tst_eval_fields.moc"
