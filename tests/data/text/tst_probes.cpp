// data/text/probes: the probe file's lines (ids, references, the generation prompt's turn) and
// the answer scores (exact match, token F1, character error rate) against hand-computed values.
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

#include "data/text/probes.h"

using namespace shardscope;

class TestProbes : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;

  std::string write(const char* name, const std::string& body) {
    const auto path = m_dir.filePath(name).toStdString();
    std::ofstream(path, std::ios::binary) << body;
    return path;
  }

 private slots:
  void readsIdsReferencesAndPrompts() {
    const auto path = write(
        "probes.jsonl",
        R"({"id": "cat", "messages": [{"role": "user", "content": [{"type": "image", "image": "img/a.png"}, {"type": "text", "text": "What is it?"}]}], "reference": "a cat"})"
        "\n\n"
        R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]})"
        "\n"
        R"({"id": 7, "messages": [{"role": "user", "content": "Seven?"}]})"
        "\n");
    auto probes = data::load_probes(path);
    QVERIFY2(probes.ok(), probes ? "" : probes.message().c_str());
    QCOMPARE(probes->size(), std::size_t{3});
    const auto& cat = (*probes)[0];
    QCOMPARE(cat.id, std::string("cat"));
    QCOMPARE(cat.reference.value_or(""), std::string("a cat"));
    QCOMPARE(cat.prompt, std::string("What is it?"));
    QCOMPARE(cat.sample.images.size(), std::size_t{1});  // resolved against the file's folder
    QVERIFY(cat.sample.images[0].ends_with("/img/a.png"));
    // The conversation ends with an empty assistant turn: the template's generation prompt.
    QCOMPARE(cat.sample.messages.back().role, std::string("assistant"));
    QCOMPARE(cat.sample.messages.back().text, std::string());
    QCOMPARE((*probes)[1].id, std::string("3"));  // no id: its line number (blank line counted)
    QVERIFY(!(*probes)[1].reference.has_value());
    QCOMPARE((*probes)[1].prompt, std::string("Say hi."));
    QCOMPARE((*probes)[2].id, std::string("7"));
  }

  void badLinesNameTheLineAndTheFix_data() {
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<QString>("expected");
    const QByteArray ok = R"({"messages": [{"role": "user", "content": "hi"}]})"
                          "\n";
    QTest::newRow("answer last")
        << ok +
               R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})"
        << "probes.jsonl:2: messages[1]: the last turn is an assistant's";
    QTest::newRow("empty reference")
        << ok + R"({"messages": [{"role": "user", "content": "hi"}], "reference": ""})"
        << "probes.jsonl:2: reference: expected the expected answer";
    QTest::newRow("bad id") << ok +
                                   R"({"id": [1], "messages": [{"role": "user", "content": "hi"}]})"
                            << "probes.jsonl:2: id: expected a non-empty string";
    QTest::newRow("duplicate id")
        << QByteArray(R"({"id": "a", "messages": [{"role": "user", "content": "hi"}]})"
                      "\n") +
               R"({"id": "a", "messages": [{"role": "user", "content": "ho"}]})"
        << "probes.jsonl:2: id: \"a\" is also the id of line 1";
    QTest::newRow("line number as a duplicate id")
        << ok + R"({"id": "1", "messages": [{"role": "user", "content": "ho"}]})"
        << "probes.jsonl:2: id: \"1\" is also the id of line 1";
    QTest::newRow("bad content type")
        << ok + R"({"messages": [{"role": "user", "content": [{"type": "audio"}]}]})"
        << "probes.jsonl:2: messages[0].content[0].type: 'audio' is not one of text, image";
    QTest::newRow("not json") << ok + "{oops"
                              << "probes.jsonl:2:";
    QTest::newRow("no messages") << ok + R"({"reference": "x"})"
                                 << "probes.jsonl:2: messages:";
    QTest::newRow("empty") << QByteArray("\n") << "no probes";
  }

  void badLinesNameTheLineAndTheFix() {
    QFETCH(QByteArray, body);
    QFETCH(QString, expected);
    auto probes = data::load_probes(write("probes.jsonl", body.toStdString()));
    QVERIFY(!probes.ok());
    QVERIFY2(QString::fromStdString(probes.message()).contains(expected), probes.message().c_str());
  }

  // Hand-computed: "a black cat" vs "a cat": 2 common words, precision 2/3, recall 2/2,
  // F1 = 2 * (2/3) / (2/3 + 1) = 0.8; CER: 6 insertions ("black ") over 5 characters = 1.2.
  void scoresAgainstHandComputedValues() {
    const auto s = data::score_answer("a black cat", "a cat");
    QVERIFY(!s.exact_match);
    QCOMPARE(s.f1, 0.8);
    QCOMPARE(s.cer, 1.2);
    // Exact match ignores surrounding white space only.
    QVERIFY(data::text_exact_match("  Paris\n", "Paris"));
    QVERIFY(!data::text_exact_match("paris", "Paris"));
    // F1 counts repeated words once per occurrence in the reference: "the the the" vs "the cat":
    // common 1, precision 1/3, recall 1/2, F1 = 2 * (1/6) / (5/6) = 0.4.
    QCOMPARE(data::token_f1("the the the", "the cat"), 0.4);
    QCOMPARE(data::token_f1("", ""), 1.0);
    QCOMPARE(data::token_f1("", "cat"), 0.0);
    QCOMPARE(data::token_f1("dog", "cat"), 0.0);
    // CER: "kitten" -> "sitting" is 3 edits over 7 reference characters.
    QCOMPARE(data::char_error_rate("kitten", "sitting"), 3.0 / 7.0);
    QCOMPARE(data::char_error_rate("sitting", "sitting"), 0.0);
    // Code points, not bytes: "é" (2 bytes) for "e" is one substitution over 4 characters.
    QCOMPARE(data::char_error_rate("caf\xc3\xa9", "cafe"), 0.25);
    QCOMPARE(data::char_error_rate("", "abcd"), 1.0);
  }
};

QTEST_GUILESS_MAIN(TestProbes)
#include "tst_probes.moc"
