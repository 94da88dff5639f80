// `tag` and `note` through the real shardscope-cli binary on a real run log (runs and a study made
// by RunStore, as a launch makes them): +NAME and -NAME edits (a `-draft` is never taken for an
// option), the listing of known tags, notes set, printed and cleared, --study, --json, and the
// messages of a bad tag, an unknown run and an option written after RUN. tst_cli_tags_pg runs the
// same against a PostgreSQL server (SHARDSCOPE_TEST_DB, teststore.h).
#include <QJsonArray>
#include <QTest>

#include "backend/store/runstore.h"
#include "tests/app/clirunlog.h"

namespace {

using clitest::Run;
using shardscope::backend::RunStore;

class TstCliTags : public QObject, clitest::OnRunLog {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(openRunLog());
    auto store = RunStore::open(m_db);
    QVERIFY2(store, store ? "" : store.message().c_str());
    for (const char* name : {"exp-1", "exp-2"}) {
      auto run = (*store)->createRun({std::nullopt, name, "", {}, 1}).get();
      QVERIFY2(run, run ? "" : run.message().c_str());
    }
    auto study =
        (*store)->createStudy({"lr-sweep", std::nullopt, "", {"loss"}, {"minimize"}, "tpe", 1, {}});
    QVERIFY(study.get());
  }

  void addRemoveAndList() {
    Run added = cli({"tag", "exp-1", "+best", "draft", "+lr/1e-4"});
    QCOMPARE(added.exitCode, 0);
    QCOMPARE(added.out.trimmed(), QStringLiteral("best draft lr/1e-4"));
    // `-draft` after RUN is a removal, however CLI11 would read a dash word elsewhere.
    Run removed = cli({"tag", "exp-1", "-draft"});
    QVERIFY2(removed.exitCode == 0, qPrintable(removed.err));
    QCOMPARE(removed.out.trimmed(), QStringLiteral("best lr/1e-4"));
    QCOMPARE(cli({"tag", "exp-2", "+draft"}).exitCode, 0);
    QCOMPARE(cli({"tag", "exp-1"}).out.trimmed(), QStringLiteral("best lr/1e-4"));
    // --db after the verb, and by id.
    Run byId = clitest::cli({"tag", "--db", m_db, "--json", "2"});
    QCOMPARE(byId.exitCode, 0);
    const QJsonObject o = clitest::json(byId.out);
    QCOMPARE(o["run"].toString(), QStringLiteral("exp-2"));
    QCOMPARE(o["tags"].toArray(), QJsonArray({"draft"}));

    Run known = cli({"--json", "tag"});
    QCOMPARE(known.exitCode, 0);
    const QJsonArray tags = clitest::json(known.out)["tags"].toArray();
    QCOMPARE(tags.size(), 3);
    QCOMPARE(tags[0]["name"].toString(), QStringLiteral("best"));
    QCOMPARE(tags[0]["runs"].toInt(), 1);
    QCOMPARE(tags[1]["name"].toString(), QStringLiteral("draft"));
    QCOMPARE(tags[1]["runs"].toInt(), 1);
    QVERIFY(tags[0]["color"].toString().startsWith('#'));
    Run plain = cli({"tag"});
    QVERIFY2(plain.out.contains(QRegularExpression("^draft\t#[0-9a-f]{6}\t1 run\t0 studies$",
                                                   QRegularExpression::MultilineOption)),
             qPrintable(plain.out));
  }

  void studyTags() {
    Run s = cli({"tag", "--study", "lr-sweep", "+best"});
    QVERIFY2(s.exitCode == 0, qPrintable(s.err));
    QCOMPARE(s.out.trimmed(), QStringLiteral("best"));
    Run unknown = cli({"tag", "--study", "nope", "+best"});
    QCOMPARE(unknown.exitCode, 1);
    QVERIFY2(unknown.err.contains("no study with id or name \"nope\""), qPrintable(unknown.err));
  }

  void notes() {
    QCOMPARE(cli({"note", "exp-1"}).out, QString());
    Run set = cli({"note", "exp-1", "# Best so far\n\n- lr 1e-4 is -stable-"});
    QVERIFY2(set.exitCode == 0, qPrintable(set.err));
    QCOMPARE(cli({"note", "exp-1"}).out,
             QStringLiteral("# Best so far\n\n- lr 1e-4 is -stable-\n"));
    // Several words are one text; a text that starts with a dash is text.
    QCOMPARE(cli({"note", "exp-2", "-", "diverged", "at", "step", "300"}).exitCode, 0);
    Run json = cli({"--json", "note", "exp-2"});
    QCOMPARE(clitest::json(json.out)["note"].toString(), QStringLiteral("- diverged at step 300"));
    QCOMPARE(cli({"note", "exp-2", "--clear"}).exitCode, 0);
    QCOMPARE(cli({"--json", "note", "exp-2"}).out.trimmed(),
             QStringLiteral(R"({"note":"","run":"exp-2"})"));
    QCOMPARE(cli({"note", "--study", "lr-sweep", "lr", "only"}).exitCode, 0);
    QCOMPARE(cli({"note", "--study", "lr-sweep"}).out, QStringLiteral("lr only\n"));
  }

  void errorsNameTheCause() {
    Run bad = cli({"tag", "exp-1", "+has:colon"});
    QCOMPARE(bad.exitCode, 2);
    QVERIFY2(bad.err.contains("tag 'has:colon' holds ':'"), qPrintable(bad.err));
    QVERIFY2(bad.err.contains("+NAME to add"), qPrintable(bad.err));
    Run unknown = cli({"tag", "exp-9", "+best"});
    QCOMPARE(unknown.exitCode, 1);
    QVERIFY2(unknown.err.contains("no run with id or name \"exp-9\""), qPrintable(unknown.err));
    // The verb's own options may follow RUN; any other double-dash word is refused, not stored.
    QCOMPARE(clitest::json(cli({"tag", "exp-1", "--json"}).out)["run"].toString(),
             QStringLiteral("exp-1"));
    Run late = cli({"tag", "exp-1", "--all"});
    QCOMPARE(late.exitCode, 2);
    QVERIFY2(late.err.contains("options go before RUN"), qPrintable(late.err));
    Run both = cli({"note", "--clear", "exp-1", "text"});
    QCOMPARE(both.exitCode, 2);
    QVERIFY2(both.err.contains("not both"), qPrintable(both.err));
    // Nothing of the refused edits was stored.
    QCOMPARE(cli({"tag", "exp-1"}).out.trimmed(), QStringLiteral("best lr/1e-4"));
  }
};

}  // namespace

QTEST_GUILESS_MAIN(TstCliTags)
#include "tst_cli_tags.moc"
