// `group` through the real shardscope-cli binary on a real run log (runs made by RunStore, as a
// launch makes them): create, add (by name and by id, --create), rm, rename, show, list and
// delete (which keeps the runs), --json, and the messages of a bad name, a taken name, an unknown
// group and an unknown run, none of which stores anything. tst_cli_groups_pg runs the same
// against a PostgreSQL server (SHARDSCOPE_TEST_DB, teststore.h).
#include <QJsonArray>
#include <QTest>

#include "backend/store/runstore.h"
#include "tests/app/clirunlog.h"

namespace {

using clitest::Run;
using shardscope::backend::RunStore;

class TstCliGroups : public QObject, clitest::OnRunLog {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(openRunLog());
    auto store = RunStore::open(m_db);
    QVERIFY2(store, store ? "" : store.message().c_str());
    for (const char* name : {"exp-1", "exp-2", "exp-3"}) {
      auto run = (*store)->createRun({std::nullopt, name, "", {}, 1}).get();
      QVERIFY2(run, run ? "" : run.message().c_str());
    }
  }

  void createAddRemoveAndList() {
    Run created = cli({"group", "create", "baseline"});
    QVERIFY2(created.exitCode == 0, qPrintable(created.err));
    QCOMPARE(created.out.trimmed(), QStringLiteral("baseline\t0 runs"));
    Run added = cli({"group", "add", "baseline", "exp-1", "2"});
    QVERIFY2(added.exitCode == 0, qPrintable(added.err));
    QCOMPARE(added.out.trimmed(), QStringLiteral("baseline\t2 runs"));
    // A run in two groups; --create makes the second.
    Run other = cli({"group", "add", "--create", "lr/1e-4", "exp-1", "exp-3"});
    QVERIFY2(other.exitCode == 0, qPrintable(other.err));
    Run removed = cli({"--json", "group", "rm", "lr/1e-4", "exp-3"});
    QCOMPARE(removed.exitCode, 0);
    QCOMPARE(clitest::json(removed.out)["runs"].toInt(), 1);

    QCOMPARE(cli({"group", "list"}).out, QStringLiteral("baseline\t2 runs\nlr/1e-4\t1 run\n"));
    Run shown = cli({"group", "show", "baseline"});
    QCOMPARE(shown.out, QStringLiteral("1\texp-1\tqueued\n2\texp-2\tqueued\n"));
    const QJsonObject json = clitest::json(cli({"--json", "group", "show", "lr/1e-4"}).out);
    QCOMPARE(json["group"].toString(), QStringLiteral("lr/1e-4"));
    QCOMPARE(json["runs"].toArray().size(), 1);
    QCOMPARE(json["runs"].toArray().at(0).toObject()["name"].toString(), QStringLiteral("exp-1"));
    const QJsonArray groups =
        clitest::json(cli({"--json", "group", "list"}).out)["groups"].toArray();
    QCOMPARE(groups.size(), 2);
    QCOMPARE(groups[0]["name"].toString(), QStringLiteral("baseline"));
    QCOMPARE(groups[0]["runs"].toInt(), 2);
  }

  void renameAndDeleteKeepRuns() {
    Run renamed = cli({"group", "rename", "lr/1e-4", "lr-small"});
    QVERIFY2(renamed.exitCode == 0, qPrintable(renamed.err));
    QCOMPARE(renamed.out.trimmed(), QStringLiteral("lr-small\t1 run"));
    Run deleted = cli({"group", "delete", "lr-small"});
    QVERIFY2(deleted.exitCode == 0, qPrintable(deleted.err));
    QCOMPARE(deleted.out.trimmed(), QStringLiteral("deleted group lr-small (its 1 run stays)"));
    QCOMPARE(cli({"group", "list"}).out, QStringLiteral("baseline\t2 runs\n"));
    QCOMPARE(cli({"show", "exp-1"}).exitCode, 0);  // the run stays
  }

  void errorsNameTheCause() {
    Run bad = cli({"group", "create", "has:colon"});
    QCOMPARE(bad.exitCode, 2);
    QVERIFY2(bad.err.contains("group 'has:colon' holds ':'"), qPrintable(bad.err));
    Run taken = cli({"group", "create", "baseline"});
    QCOMPARE(taken.exitCode, 1);
    QVERIFY2(taken.err.contains("group 'baseline' already exists"), qPrintable(taken.err));
    Run missing = cli({"group", "add", "nope", "exp-1"});
    QCOMPARE(missing.exitCode, 1);
    QVERIFY2(missing.err.contains("no group 'nope'") && missing.err.contains("group create nope"),
             qPrintable(missing.err));
    Run unknownRun = cli({"group", "add", "baseline", "exp-3", "exp-9"});
    QCOMPARE(unknownRun.exitCode, 1);
    QVERIFY2(unknownRun.err.contains("no run with id or name \"exp-9\""),
             qPrintable(unknownRun.err));
    Run noGroup = cli({"group", "show", "nope"});
    QCOMPARE(noGroup.exitCode, 1);
    QVERIFY2(noGroup.err.contains("no group \"nope\""), qPrintable(noGroup.err));
    // Nothing of the refused edits was stored.
    QCOMPARE(cli({"group", "list"}).out, QStringLiteral("baseline\t2 runs\n"));
  }
};

}  // namespace

QTEST_GUILESS_MAIN(TstCliGroups)
#include "tst_cli_groups.moc"
