// Per-unit traces read back (backend/monitor/unittrace.h). data/unittrace holds the files of a
// real run (2 FULL_SHARD ranks of the tiny model, 4 steps, trace.every_n_steps = 2, written by
// tests/trainer/shard/unit_trace.py --case sampled); the bad files are made from them here.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "backend/monitor/unittrace.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

QString dataDir() {
  return qEnvironmentVariable("SHARDSCOPE_TEST_SOURCE_DIR") +
         QStringLiteral("/tests/backend/monitor/data/unittrace");
}

QByteArray readAll(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll();
}

// A run directory whose trace/ holds rank 0's and rank 1's files, rank 1's replaced by `rank1`.
QString runDir(const QTemporaryDir& tmp, const QByteArray& rank1) {
  QDir(tmp.path()).mkpath(QStringLiteral("trace"));
  QFile::copy(dataDir() + "/rank-0.jsonl", tmp.filePath("trace/rank-0.jsonl"));
  QFile f(tmp.filePath("trace/rank-1.jsonl"));
  if (f.open(QIODevice::WriteOnly)) f.write(rank1);
  return tmp.path();
}

int count(const UnitTraceRank& r, UnitSpanKind kind, const QString& unit) {
  return static_cast<int>(std::count_if(r.spans.begin(), r.spans.end(), [&](const UnitSpan& s) {
    return s.kind == kind && s.unit == unit;
  }));
}

}  // namespace

class TestUnitTrace : public QObject {
  Q_OBJECT

 private slots:
  void readsARealRunsSteps() {
    QTemporaryDir tmp;
    auto trace = readUnitTrace(runDir(tmp, readAll(dataDir() + "/rank-1.jsonl")));
    VERIFY_OK(trace);
    QCOMPARE(trace->steps.size(), std::size_t{2});
    QVERIFY(trace->steps.count(2) && trace->steps.count(4));
    QVERIFY(trace->truncatedRanks.empty() && trace->stoppedRanks.empty());
    for (const auto& [number, step] : trace->steps) {
      QCOMPARE(step.units, QStringList({"root", "layers.0", "layers.1", "layers.2"}));
      QCOMPARE(step.ranks.size(), std::size_t{2});
      for (const auto& [rank, r] : step.ranks) {
        const auto where = QString("step %1 rank %2").arg(number).arg(rank);
        for (const auto& unit : step.units) {
          // The root stays gathered from forward to backward; the layers gather twice.
          QVERIFY2(count(r, UnitSpanKind::allGather, unit) == (unit == "root" ? 1 : 2),
                   qPrintable(where + " " + unit));
          QVERIFY2(count(r, UnitSpanKind::reduceScatter, unit) == 1, qPrintable(where + unit));
          QVERIFY2(count(r, UnitSpanKind::forward, unit) >= 1, qPrintable(where + unit));
          QVERIFY2(count(r, UnitSpanKind::backward, unit) >= 1, qPrintable(where + unit));
        }
        for (const auto& s : r.spans) {
          QVERIFY2(s.start >= 0 && s.end >= s.start, qPrintable(where + " " + s.unit));
          if (!s.isCollective()) continue;
          QVERIFY2(s.bytes > 0 && s.bandwidth() > 0, qPrintable(where + " " + s.unit));
          QVERIFY(s.waitFrom >= s.start && s.waitFrom <= s.end);
          QCOMPARE(s.exposed(), s.end - s.waitFrom);
        }
        QVERIFY(r.end() > 0 && r.end() <= step.end());
      }
    }
    // The gathered root is the float32 parameters of both ranks' shards.
    const auto& r0 = trace->steps.at(2).ranks.at(0);
    const auto root = std::find_if(r0.spans.begin(), r0.spans.end(), [](const UnitSpan& s) {
      return s.kind == UnitSpanKind::allGather && s.unit == "root";
    });
    QCOMPARE(root->bytes, 65664);
    QCOMPARE(root->phase, QStringLiteral("forward"));
  }

  void dropsACutLastLine() {
    // A rank killed mid-write: its file ends inside a record.
    auto bytes = readAll(dataDir() + "/rank-1.jsonl");
    bytes.chop(40);
    QTemporaryDir tmp;
    auto trace = readUnitTrace(runDir(tmp, bytes));
    VERIFY_OK(trace);
    QCOMPARE(trace->truncatedRanks, std::vector<int>{1});
    QCOMPARE(trace->steps.at(4).ranks.size(), std::size_t{2});
  }

  void garbageNamesFileAndLine() {
    auto bytes = readAll(dataDir() + "/rank-1.jsonl");
    const int third = static_cast<int>(bytes.indexOf('\n', bytes.indexOf('\n') + 1)) + 1;
    bytes.insert(third, "{\"op\": \"all_gather\", oops\n");
    QTemporaryDir tmp;
    auto trace = readUnitTrace(runDir(tmp, bytes));
    QVERIFY(!trace.ok());
    QVERIFY2(trace.message().find("trace/rank-1.jsonl:3: not a JSON object") != std::string::npos,
             trace.message().c_str());
  }

  void aRecordWithoutTimesIsRefused() {
    // A trace from before step-relative times: its records have no "ms".
    QByteArray bytes =
        "{\"op\":\"all_gather\",\"stage\":\"issue\",\"unit\":\"root\",\"phase\":\"forward\","
        "\"step\":1,\"micro\":0,\"bytes\":10}\n";
    QTemporaryDir tmp;
    auto trace = readUnitTrace(runDir(tmp, bytes));
    QVERIFY(!trace.ok());
    QVERIFY2(trace.message().find("rank-1.jsonl:1: the record has no number \"ms\"") !=
                 std::string::npos,
             trace.message().c_str());
  }

  void aStepNoCounterHoldsIsRefused() {
    // 1e300 (or -1, or 2.5) is no step: refused by name, not converted to a qint64 (undefined
    // for a double out of its range; the fuzzer found it).
    for (const auto& [step, shown] :
         {std::pair<const char*, const char*>{"1e300", "1e+300"}, {"-1", "-1"}, {"2.5", "2.5"}}) {
      const QByteArray bytes = QByteArray(
                                   "{\"op\":\"compute\",\"unit\":\"root\",\"phase\":"
                                   "\"forward\",\"step\":") +
                               step + ",\"micro\":0,\"ms\":1,\"end_ms\":2}\n";
      QTemporaryDir tmp;
      auto trace = readUnitTrace(runDir(tmp, bytes));
      QVERIFY(!trace.ok());
      QVERIFY2(trace.message().find(std::string("rank-1.jsonl:1: \"step\" is ") + shown + ",") !=
                       std::string::npos &&
                   trace.message().find("want a whole number from 0") != std::string::npos,
               trace.message().c_str());
    }
  }

  void aWaitWithoutItsIssueIsRefused() {
    QByteArray bytes =
        "{\"op\":\"reduce_scatter\",\"stage\":\"wait\",\"unit\":\"layers.0\",\"phase\":"
        "\"backward\",\"step\":2,\"micro\":0,\"ms\":1.5,\"done_ms\":2}\n";
    QTemporaryDir tmp;
    auto trace = readUnitTrace(runDir(tmp, bytes));
    QVERIFY(!trace.ok());
    QVERIFY2(trace.message().find("rank-1.jsonl:1: a wait of reduce_scatter of layers.0 with no "
                                  "issue") != std::string::npos,
             trace.message().c_str());
  }

  void theSizeBoundIsReported() {
    auto bytes = readAll(dataDir() + "/rank-1.jsonl");
    bytes += "{\"bytes\":1048500,\"op\":\"stopped\",\"reason\":\"max_mib\"}\n";
    QTemporaryDir tmp;
    auto trace = readUnitTrace(runDir(tmp, bytes));
    VERIFY_OK(trace);
    QCOMPARE(trace->stoppedRanks, std::vector<int>{1});
  }

  void readsTheFilesOfTraceFile() {
    // shardtrain --trace FILE: FILE is rank 0's, FILE.rank-1 rank 1's.
    QTemporaryDir tmp;
    QFile::copy(dataDir() + "/rank-0.jsonl", tmp.filePath("t.jsonl"));
    QFile::copy(dataDir() + "/rank-1.jsonl", tmp.filePath("t.jsonl.rank-1"));
    auto trace = readUnitTrace(tmp.filePath("t.jsonl"));
    VERIFY_OK(trace);
    QCOMPARE(trace->steps.at(2).ranks.size(), std::size_t{2});
  }

  void aRunWithoutTracesSaysHowToGetOne() {
    QTemporaryDir tmp;
    auto trace = readUnitTrace(tmp.path());
    QVERIFY(!trace.ok());
    QVERIFY2(trace.message().find("every_n_steps") != std::string::npos, trace.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestUnitTrace)
#include "tst_unittrace.moc"
