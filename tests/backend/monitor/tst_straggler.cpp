// Naming the straggler from phases (backend/monitor/straggler.h): the verdict on known phases,
// and the same verdict read back from a real SQLite run log after the monitor's parser stored the
// events. A straggler made by slowing a real rank from outside: tests/trainer/shard/straggler.py.
#include <QTemporaryDir>
#include <QTest>

#include "backend/monitor/eventstream.h"
#include "backend/monitor/straggler.h"
#include "backend/store/runstore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

// A step of `wall` seconds whose busy part is `forward` + 0.1 forward + 0.02 optimizer; the
// rest waiting on collectives.
spec::PhasesEvent phases(qint64 step, double wall, double forward) {
  spec::PhasesEvent e;
  e.step = step;
  e.wall = wall;
  e.forward = forward;
  e.backward = 2 * forward;
  e.optimizer = 0.02;
  e.comm_exposed = wall - 3 * forward - 0.02;
  e.comm_total = e.comm_exposed + 0.05;
  return e;
}

// Two ranks, 10 steps; rank 1's forward and backward take `slow` times rank 0's on 9 of them.
RankPhases twoRanks(double slow) {
  RankPhases out;
  for (qint64 step = 1; step <= 10; ++step) {
    const double f0 = 0.1;
    const double f1 = step == 5 ? 0.08 : 0.1 * slow;  // one step where rank 0 is the busier
    const double wall = 3 * std::max(f0, f1) + 0.05;
    out[0][step] = phases(step, wall, f0);
    out[1][step] = phases(step, wall, f1);
  }
  return out;
}

}  // namespace

class TestStraggler : public QObject {
  Q_OBJECT

 private slots:
  void namesTheRankThatIsSlowMostOften() {
    const auto v = nameStraggler(twoRanks(1.8));
    QCOMPARE(v.steps, 10);
    QCOMPARE(v.ranks, 2);
    QCOMPARE(v.slowest, 1);
    QCOMPARE(v.slowestShare, 0.9);
    QCOMPARE(v.phase, QStringLiteral("forward"));  // forward and backward: the first named
    QVERIFY2(v.phaseRatio > 1.6 && v.phaseRatio < 1.8, qPrintable(QString::number(v.phaseRatio)));
    QVERIFY(v.othersWaitShare > 0.3);  // rank 0 waits for rank 1 most of each step
    QVERIFY2(v.text.startsWith("rank 1 was the slowest on 90% of 10 steps: its forward is 1.7x "
                               "rank 0's"),
             qPrintable(v.text));
    QVERIFY2(v.text.contains("rank 0 spent"), qPrintable(v.text));
    QCOMPARE(v.perRank.at(1).slowestSteps, 9);
  }

  void balancedRanksNameNobody() {
    const auto v = nameStraggler(twoRanks(1.0));
    QVERIFY2(v.text.startsWith("no rank stands out"), qPrintable(v.text));
  }

  void stepsMissingOnOneRankAreLeftOut() {
    auto three = twoRanks(1.8);
    three[2] = three[0];
    three[2].erase(10);  // rank 2 has not reported step 10 yet
    const auto v = nameStraggler(three);
    QCOMPARE(v.steps, 9);
    QCOMPARE(v.slowest, 1);
    QVERIFY2(v.text.contains("the others spent"), qPrintable(v.text));
  }

  void oneRankOrNoneSaySo() {
    RankPhases one;
    one[0][1] = phases(1, 0.5, 0.1);
    QVERIFY(nameStraggler(one).text.startsWith("one rank: no straggler"));
    QCOMPARE(nameStraggler(one).slowest, -1);
    QVERIFY(nameStraggler({}).text.startsWith("no phases recorded"));
  }

  // Through the real path: encoded lines, the monitor's parser, a SQLite run log, the reader.
  void theRunLogGivesTheSameVerdict() {
    QTemporaryDir dir;
    auto store = RunStore::open(dir.filePath("runs.db"));
    VERIFY_OK(store);
    auto run = (*store)->createRun({std::nullopt, "slow", "", {}, 2}).get();
    VERIFY_OK(run);
    const auto phases = twoRanks(1.8);
    for (const auto& [rank, steps] : phases) {
      QByteArray bytes;
      qint64 seq = 0;
      for (const auto& [step, e] : steps) {
        bytes += QByteArray::fromStdString(spec::encode_event({{1, rank, seq++, 1.7e9}, e})) + '\n';
      }
      EventStream stream;
      stream.rank = rank;
      FileChunk chunk = parseEventsChunk(*run, bytes, stream);
      chunk.rank = rank;
      VERIFY_OK((*store)->ingest(chunk).get());
    }
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto stored = phasesOfRun(*reader, *run);
    VERIFY_OK(stored);
    QCOMPARE(stored->size(), std::size_t(2));
    QCOMPARE(stored->at(1).at(3).forward, phases.at(1).at(3).forward);
    QCOMPARE(nameStraggler(*stored).text, nameStraggler(phases).text);
  }
};

QTEST_GUILESS_MAIN(TestStraggler)
#include "tst_straggler.moc"
