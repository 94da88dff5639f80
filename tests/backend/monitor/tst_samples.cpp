// A run's probe answers read back (backend/monitor/samples.h): `sample` events encoded as a rank
// writes them, parsed by the monitor, stored in a real run log (SQLite, or PostgreSQL in the _pg
// variant) and read by step; the same from a run directory's events file, whose bad line is named.
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "backend/monitor/eventstream.h"
#include "backend/monitor/samples.h"
#include "backend/store/runstore.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

spec::SampleEvent sample(qint64 step, const std::string& probe, const std::string& text) {
  spec::SampleEvent e;
  e.step = step;
  e.probe = probe;
  e.prompt = "What is it?";
  e.text = text;
  e.tokens = 2;
  if (probe == "cat") {
    e.images = {"probes/ab.png"};
    e.reference = "a cat";
    e.exact_match = text == "a cat";
    e.f1 = 0.8;
    e.cer = 1.2;
  }
  return e;
}

// Rank 0's events file: a step, the samples of steps 2 and 4 around an eval, a log line.
QByteArray rankZeroLines() {
  std::vector<spec::Payload> bodies{spec::StepEvent{2, 1.5, 1e-3, 1, 10, 0, 0, 0},
                                    sample(2, "cat", "a black cat"),
                                    sample(2, "2", "hello"),
                                    spec::EvalEvent{2, {{"loss", 1.25}}},
                                    sample(4, "cat", "a cat"),
                                    sample(4, "2", "hi\nthere"),
                                    spec::LogEvent{"info", "probes at step 4: 8 tokens in 0.1 s"}};
  QByteArray bytes;
  qint64 seq = 0;
  for (const auto& body : bodies)
    bytes += QByteArray::fromStdString(spec::encode_event({{1, 0, seq++, 1.7e9}, body})) + '\n';
  return bytes;
}

}  // namespace

class TestSamples : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;

 private slots:
  void theRunLogKeepsSamplesByStep() {
    auto store = RunStore::open(testing::storeSpec(m_dir.path(), "samples.db"));
    VERIFY_OK(store);
    auto run = (*store)->createRun({std::nullopt, "probed", "", {}, 1}).get();
    VERIFY_OK(run);
    EventStream stream;
    FileChunk chunk = parseEventsChunk(*run, rankZeroLines(), stream);
    VERIFY_OK((*store)->ingest(chunk).get());
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto all = samplesOfRun(*reader, *run);
    VERIFY_OK(all);
    QCOMPARE(all->size(), std::size_t{4});
    QCOMPARE((*all)[0].step, 2);
    QCOMPARE((*all)[0].probe, std::string("cat"));
    QCOMPARE((*all)[0].text, std::string("a black cat"));
    QCOMPARE(*(*all)[0].f1, 0.8);
    QCOMPARE((*all)[0].images, std::vector<std::string>{"probes/ab.png"});
    QVERIFY(!(*all)[1].reference.has_value());
    QCOMPARE((*all)[3].text, std::string("hi\nthere"));
    auto four = samplesOfRun(*reader, *run, 4);
    VERIFY_OK(four);
    QCOMPARE(four->size(), std::size_t{2});
    QCOMPARE(*(*four)[0].exact_match, true);
    auto none = samplesOfRun(*reader, *run, 3);
    VERIFY_OK(none);
    QVERIFY(none->empty());
    const auto json = sampleToJson((*all)[0]);
    QCOMPARE(json["probe"].toString(), QStringLiteral("cat"));
    QCOMPARE(json["cer"].toDouble(), 1.2);
    QVERIFY(!sampleToJson((*all)[1]).contains("f1"));  // no reference: no scores
  }

  void aRunDirectoryGivesTheSame() {
    QTemporaryDir dir;
    QFile file(dir.filePath("events-rank-0.jsonl"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(rankZeroLines());
    file.close();
    auto two = samplesOfRunDir(dir.path(), 2);
    VERIFY_OK(two);
    QCOMPARE(two->size(), std::size_t{2});
    QCOMPARE((*two)[1].text, std::string("hello"));
    QFile bad(dir.filePath("events-rank-0.jsonl"));
    QVERIFY(bad.open(QIODevice::Append));
    bad.write(R"({"v":1,"ev":"sample","rank":0,"seq":9,"t":1,"step":"x"})"
              "\n");
    bad.close();
    auto broken = samplesOfRunDir(dir.path());
    QVERIFY(!broken.ok());
    QVERIFY2(broken.message().find("events-rank-0.jsonl:8: sample.step") != std::string::npos,
             broken.message().c_str());
    QVERIFY(!samplesOfRunDir(dir.filePath("nowhere")).ok());
  }
};

QTEST_GUILESS_MAIN(TestSamples)
#include "tst_samples.moc"
