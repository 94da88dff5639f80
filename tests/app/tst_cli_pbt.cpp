// Population-based training through shardscope-cli: `sweep` of a [search.pbt] experiment (2
// members of 2-rank tiny-model trials, 2 segments of 3 steps), `study show --json`'s lineage and
// best schedule, and `pbt-replay`, which runs that schedule as one run: attempt 0 trains steps 1-3
// with the first segment's values, attempt 1 resumes its step-3 checkpoint with the second's and
// trains steps 4-6. Its loss curve is, exactly, the best member's chain of segments' (the same
// seeds, data order, values and world size; fp32 on CPU). Then a driver SIGKILLed mid-study, with
// the ranks of the segment it ran, is swept again: the study goes on from its lineage and ends
// with every segment of both members complete. And `study stop` of a running PBT study, whose
// running segment's ranks are held (SIGSTOP) until the driver has printed that it was told: the
// driver exits 4, the study is `stopped`, and its lineage holds both members' first segments,
// none running (the queued one dropped, the running one stopped). Cost: 6 + about 5 trainer
// starts of 3 steps, and 1 held one.
#include <signal.h>
#include <QJsonArray>
#include <QRegularExpression>
#include <QTest>

#include <map>
#include <set>
#include <utility>

#include "backend/launch/launcher.h"
#include "backend/store/runstore.h"
#include "backend/sweep/study.h"
#include "tests/app/clirunlog.h"
#include "tests/app/clitest.h"
#include "tests/support/experiment.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;

namespace {

// Named "demo": `sweep` writes its data (demo-data/) on first use.
const QByteArray kTinyPbt = testing::tinyDemoExperiment("demo", "demo-data") + R"([train]
max_steps = 6
batch_size = 8
ckpt_at_end = false
[eval]
every = 3
batches = 1
[launch]
nproc_per_node = 2
threads_per_rank = 1
[search]
name = "pbt"
seed = 3
objectives = {"eval.loss" = "minimize"}
[search.space."train.lr"]
type = "float"
low = 1e-3
high = 3e-1
log = true
[search.pbt]
population = 2
interval_steps = 3
quantile = 0.5
mutable = ["train.lr"]
)";

std::map<qint64, double> lossOf(backend::RunReader& reader, qint64 runId) {
  std::map<qint64, double> out;
  if (auto points = reader.metric(runId, QStringLiteral("loss"))) {
    for (const auto& p : *points) out[p.step] = p.value;
  }
  return out;
}

}  // namespace

class TestCliPbt : public QObject, clitest::OnRunLog {
  Q_OBJECT

 private slots:
  void initTestCase() { QVERIFY(openRunLog()); }

  void sweepShowsTheLineageAndReplaysTheBestSchedule() {
    const QString exp = m_dir.filePath("tiny-pbt.toml");
    QVERIFY(testing::writeAll(exp, kTinyPbt));
    const auto sweep = cli({"sweep", exp});
    QVERIFY2(sweep.exitCode == 0, qPrintable(sweep.out + sweep.err));
    QVERIFY2(sweep.out.contains("population-based training, 2 members, 2 segments of 3 steps"),
             qPrintable(sweep.out));
    QVERIFY2(sweep.out.contains(QRegularExpression("segment 1 member \\d start from member \\d")),
             qPrintable(sweep.out));

    const auto show = cli({"--json", "study", "show", "pbt"});
    QVERIFY2(show.exitCode == 0, qPrintable(show.err));
    const QJsonObject pbt = clitest::json(show.out).value("pbt").toObject();
    QCOMPARE(pbt.value("segments").toArray().size(), 4);
    const QJsonArray schedule = pbt.value("best_schedule").toArray();
    QCOMPARE(schedule.size(), 2);
    const auto text = cli({"study", "show", "pbt"});
    QVERIFY2(text.out.contains(QRegularExpression("exploits member \\d \\(run \\d+\\) at step 3")),
             qPrintable(text.out));
    // What applies to PBT instead of the unused sampler and trial budget.
    QVERIFY2(text.out.contains("search:     population-based training: 2 members, segments of 3 "
                               "steps\ntrials:     4 segment runs ("),
             qPrintable(text.out));
    QVERIFY2(!text.out.contains("sampler:"), qPrintable(text.out));

    const auto replay = cli({"pbt-replay", "pbt"});
    QVERIFY2(replay.exitCode == 0, qPrintable(replay.out + replay.err));
    const auto id =
        QRegularExpression("pbt-replay: run \\S+ \\(id (\\d+)\\) complete").match(replay.out);
    QVERIFY2(id.hasMatch(), qPrintable(replay.out));
    const qint64 runId = id.captured(1).toLongLong();

    auto store = backend::RunStore::open(m_db);
    VERIFY_OK(store);
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto run = reader->run(runId);
    VERIFY_OK(run);
    QVERIFY(run->has_value());
    QCOMPARE((**run).status, spec::RunStatus::complete);
    QCOMPARE((**run).attempt, 1);
    QVERIFY(!(**run).studyId);
    // The last attempt's values are the last segment's.
    const QJsonObject last = schedule.last().toObject();
    QCOMPARE((**run).params.value("train.lr").toDouble(),
             last.value("params").toObject().value("train.lr").toDouble());
    // One curve, steps 1-6, the chain's losses exactly.
    const auto replayed = lossOf(*reader, runId);
    QCOMPARE(int(replayed.size()), 6);
    for (const auto& v : schedule) {
      const QJsonObject s = v.toObject();
      const auto original = lossOf(*reader, s.value("run").toInteger());
      for (qint64 step = s.value("start_step").toInteger() + 1;
           step <= s.value("end_step").toInteger(); ++step) {
        QVERIFY2(original.count(step) == 1 && replayed.count(step) == 1,
                 qPrintable(QString::number(step)));
        QCOMPARE(replayed.at(step), original.at(step));
      }
    }
  }

  // `sweep` is SIGKILLed (from outside, as a crash would) once a member's first segment completed
  // and another segment's ranks run; those ranks are SIGKILLed too (really gone). `sweep` again
  // continues the study: the segments that completed are kept as they were, the killed one is
  // retried inside PBT (attempt 1), and the lineage ends complete: 2 members, 2 segments each.
  void killedDriverContinuesTheStudy() {
    const QString exp = m_dir.filePath("tiny-pbt-killed.toml");
    QVERIFY(testing::writeAll(
        exp, QByteArray(kTinyPbt).replace("name = \"pbt\"", "name = \"pbt-killed\"")));
    QProcess driver;
    driver.start(clitest::kCli, {"--db", m_db, "sweep", exp});
    QVERIFY(driver.waitForStarted());
    QString seen;
    qint64 killedRun = 0;
    QList<qint64> ranks;
    // A complete segment, and a launched one whose ranks all run.
    const auto midStudy = [&] {
      seen += QString::fromUtf8(driver.readAllStandardOutput());
      if (!seen.contains(QRegularExpression("segment 0 member \\d complete"))) return false;
      auto store = backend::RunStore::open(m_db);
      if (!store) return false;
      auto study = search::Study::open(**store, QStringLiteral("pbt-killed"));
      auto trials =
          study ? study->trials() : Result<std::vector<search::StudyTrial>>(study.error());
      if (!trials) return false;
      auto reader = (*store)->reader();
      if (!reader) return false;
      for (const search::StudyTrial& t : *trials) {
        if (t.status != spec::RunStatus::running) continue;
        auto run = reader->run(t.runId);
        if (!run || !*run) continue;
        auto location = backend::RunLocation::fromJson((**run).location);
        if (!location || location->pids.size() != 2) continue;
        if (!testing::alive(location->pids[0]) || !testing::alive(location->pids[1])) continue;
        killedRun = t.runId;
        ranks = {location->pids[0], location->pids[1]};
        return true;
      }
      return false;
    };
    QTRY_VERIFY2_WITH_TIMEOUT(midStudy(), qPrintable(seen), 180000);
    ::kill(static_cast<pid_t>(driver.processId()), SIGKILL);
    QVERIFY(driver.waitForFinished(30000));
    for (const qint64 pid : ranks) ::kill(static_cast<pid_t>(pid), SIGKILL);
    QTRY_VERIFY_WITH_TIMEOUT(!testing::alive(ranks[0]) && !testing::alive(ranks[1]), 30000);

    const auto lineageNow = [&] {
      const auto show = cli({"--json", "study", "show", "pbt-killed"});
      return clitest::json(show.out).value("pbt").toObject();
    };
    std::map<std::pair<int, int>, QJsonObject> completeBefore;  // (segment, member) -> row
    for (const auto& v : lineageNow().value("segments").toArray()) {
      const QJsonObject row = v.toObject();
      if (row.value("state").toString() == "complete")
        completeBefore[{row.value("segment").toInt(), row.value("member").toInt()}] = row;
    }
    QVERIFY(!completeBefore.empty());

    const auto again = cli({"sweep", exp});
    QVERIFY2(again.exitCode == 0, qPrintable(again.out + again.err));
    QVERIFY2(again.out.contains("continuing study pbt-killed"), qPrintable(again.out));
    QVERIFY2(again.out.contains(QRegularExpression("segment \\d member \\d failed: attempt 1 runs "
                                                   "it again")),
             qPrintable(again.out));

    const QJsonObject pbt = lineageNow();
    QCOMPARE(pbt.value("population").toInt(), 2);
    const QJsonArray segments = pbt.value("segments").toArray();
    QCOMPARE(segments.size(), 4);
    std::set<std::pair<int, int>> rows;
    for (const auto& v : segments) {
      const QJsonObject row = v.toObject();
      const std::pair<int, int> key{row.value("segment").toInt(), row.value("member").toInt()};
      rows.insert(key);
      QCOMPARE(row.value("state").toString(), QStringLiteral("complete"));
      QVERIFY(row.value("value").isDouble());
      QVERIFY(row.value("run").toInteger() > 0);
      if (key.first == 1) {  // the next segment starts from a segment-0 run's checkpoint
        QVERIFY(row.value("from_run").toInteger() > 0);
        QVERIFY(!row.value("from_checkpoint").toString().isEmpty());
      }
      if (completeBefore.count(key) != 0) QCOMPARE(row, completeBefore.at(key));
    }
    QCOMPARE(int(rows.size()), 4);

    // One trial per segment, none doubled; the killed one ran again and completed.
    const auto show = cli({"--json", "study", "show", "pbt-killed"});
    QCOMPARE(clitest::json(show.out).value("trials").toArray().size(), 4);
    auto store = backend::RunStore::open(m_db);
    VERIFY_OK(store);
    auto reader = (*store)->reader();
    VERIFY_OK(reader);
    auto killed = reader->run(killedRun);
    VERIFY_OK(killed);
    QVERIFY(killed->has_value());
    QCOMPARE((**killed).status, spec::RunStatus::complete);
    QCOMPARE((**killed).attempt, 1);
  }

  void studyStopEndsThePbtDriver() {
    const QString exp = m_dir.filePath("tiny-pbt-stop.toml");
    QVERIFY(testing::writeAll(
        exp, QByteArray(kTinyPbt).replace("name = \"pbt\"", "name = \"pbt-stop\"")));
    QProcess driver;
    driver.start(clitest::kCli, {"--db", m_db, "sweep", exp});
    QVERIFY(driver.waitForStarted());
    QString seen;
    QList<qint64> ranks;
    // A segment whose ranks all run: held where they are.
    const auto running = [&] {
      seen += QString::fromUtf8(driver.readAllStandardOutput());
      auto store = backend::RunStore::open(m_db);
      if (!store) return false;
      auto study = search::Study::open(**store, QStringLiteral("pbt-stop"));
      auto trials =
          study ? study->trials() : Result<std::vector<search::StudyTrial>>(study.error());
      auto reader = (*store)->reader();
      if (!trials || !reader) return false;
      for (const search::StudyTrial& t : *trials) {
        if (t.status != spec::RunStatus::running) continue;
        auto run = reader->run(t.runId);
        if (!run || !*run) continue;
        auto location = backend::RunLocation::fromJson((**run).location);
        if (!location || location->pids.size() != 2) continue;
        if (!testing::alive(location->pids[0]) || !testing::alive(location->pids[1])) continue;
        ranks = {location->pids[0], location->pids[1]};
        for (const qint64 pid : ranks) ::kill(static_cast<pid_t>(pid), SIGSTOP);
        return true;
      }
      return false;
    };
    QTRY_VERIFY2_WITH_TIMEOUT(running(), qPrintable(seen), 180000);
    const auto stop = cli({"study", "stop", "pbt-stop"});
    QVERIFY2(stop.exitCode == 0, qPrintable(stop.out + stop.err));
    const auto told = [&] {
      seen += QString::fromUtf8(driver.readAllStandardOutput());
      return seen.contains("study pbt-stop stopped: the running segments are told to stop");
    };
    QTRY_VERIFY2_WITH_TIMEOUT(told(), qPrintable(seen), 60000);
    for (const qint64 pid : ranks) ::kill(static_cast<pid_t>(pid), SIGCONT);
    QVERIFY(driver.waitForFinished(120000));
    seen += QString::fromUtf8(driver.readAllStandardOutput());
    QCOMPARE(driver.exitCode(), 4);
    QVERIFY2(seen.contains("study pbt-stop stopped by the user"), qPrintable(seen));
    for (const qint64 pid : ranks) QVERIFY(!testing::alive(pid));

    const auto show = cli({"--json", "study", "show", "pbt-stop"});
    QVERIFY2(show.exitCode == 0, qPrintable(show.err));
    const QJsonObject study = clitest::json(show.out);
    QCOMPARE(study.value("status").toString(), QStringLiteral("stopped"));
    const QJsonArray segments = study.value("pbt").toObject().value("segments").toArray();
    QCOMPARE(segments.size(), 2);
    int stopped = 0;
    for (const auto& v : segments) {
      const QJsonObject row = v.toObject();
      QCOMPARE(row.value("segment").toInt(), 0);
      const QString state = row.value("state").toString();
      QVERIFY2(state == "stopped" || state == "complete", qPrintable(state));
      if (state == "stopped") ++stopped;
    }
    QVERIFY(stopped >= 1);
  }
};

QTEST_GUILESS_MAIN(TestCliPbt)
#include "tst_cli_pbt.moc"
