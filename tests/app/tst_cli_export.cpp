// `export-study` and `export-run` through the real binary: what they refuse (an existing
// journal, a folder that already holds files, an unknown study or run, a missing run log, an
// unknown format) with the exit code of docs/cli.md and a message naming the path and the fix,
// and --json output with exactly the documented fields. That Optuna and TensorBoard read what
// they write is check_export.py's job (the `reference` tests).
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QTemporaryDir>
#include <QTest>

#include "tests/app/clitest.h"

using clitest::cli;
using clitest::documentedFields;
using clitest::json;
using clitest::Run;
using clitest::sortedKeys;

namespace {

const char* kStudy = R"([experiment]
name = "pair"

[search]
sampler = "random"
seed = 1
n_trials = 4

[search.space.x]
type = "float"
low = 0.0
high = 1.0
)";

}  // namespace

class TestCliExport : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QString db() const { return m_dir.filePath("runs.db"); }
  QString path(const QString& name) const { return m_dir.filePath(name); }

 private slots:
  // A study with one complete and one running trial, made by the study verbs.
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(clitest::writeAll(path("pair.toml"), kStudy));
    QCOMPARE(cli({"--db", db(), "study", "create", "pair", path("pair.toml")}).exitCode, 0);
    QCOMPARE(cli({"--db", db(), "study", "ask", "pair", "--owner-pid", "0"}).exitCode, 0);
    QCOMPARE(cli({"--db", db(), "study", "report", "pair", "0", "1", "0.5"}).exitCode, 0);
    QCOMPARE(cli({"--db", db(), "study", "tell", "pair", "0", "0.25"}).exitCode, 0);
    QCOMPARE(cli({"--db", db(), "study", "ask", "pair", "--owner-pid", "0"}).exitCode, 0);
  }

  void studyToOptunaPrintsTheDocumentedFields() {
    const Run r =
        cli({"--db", db(), "--json", "export-study", "pair", "--to", "optuna", path("a.log")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QJsonObject o = json(r.out);
    QCOMPARE(sortedKeys(o), documentedFields("export-study-optuna"));
    QCOMPARE(o["trials"].toInt(), 2);
    QCOMPARE(o["complete"].toInt(), 1);
    QCOMPARE(o["running"].toInt(), 1);
    // One JSON object a line: the study, its attributes, then the trials by number.
    QFile journal(path("a.log"));
    QVERIFY(journal.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = journal.readAll().trimmed().split('\n');
    QCOMPARE(QJsonDocument::fromJson(lines.first()).object()["op_code"].toInt(), 0);
    QCOMPARE(QJsonDocument::fromJson(lines.last()).object()["op_code"].toInt(), 4);
    QCOMPARE(QJsonDocument::fromJson(lines.last()).object()["state"].toInt(), 0);  // RUNNING
  }

  void anExistingJournalIsRefusedAndKept() {
    QVERIFY(clitest::writeAll(path("old.log"), "keep me\n"));
    const Run r = cli({"--db", db(), "export-study", "pair", "--to", "optuna", path("old.log")});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(path("old.log") + ": already exists; give a new file name"),
             qPrintable(r.err));
    QCOMPARE(clitest::readAll(path("old.log")), QByteArray("keep me\n"));
  }

  void aFolderWithFilesIsRefused() {
    QVERIFY(QDir().mkpath(path("busy")));
    QVERIFY(clitest::writeAll(path("busy/events.out.tfevents.1.host"), "x"));
    const Run r = cli({"--db", db(), "export-run", "pair-0", "--to", "tensorboard", path("busy")});
    QCOMPARE(r.exitCode, 2);
    QVERIFY2(r.err.contains(path("busy") + ": is not empty; give a new or empty folder"),
             qPrintable(r.err));
    const Run file = cli({"--db", db(), "export-study", "pair", "--to", "tensorboard",
                          path("busy/events.out.tfevents.1.host")});
    QCOMPARE(file.exitCode, 2);
    QVERIFY2(file.err.contains("is a file; give a folder"), qPrintable(file.err));
  }

  void unknownStudyRunOrFormatAndMissingRunLog() {
    const Run study = cli({"--db", db(), "export-study", "nope", "--to", "optuna", path("n.log")});
    QCOMPARE(study.exitCode, 1);
    QVERIFY2(study.err.contains("nope"), qPrintable(study.err));
    QVERIFY(!QFile::exists(path("n.log")));
    const Run run = cli({"--db", db(), "export-run", "nope-3", "--to", "tensorboard", path("n")});
    QCOMPARE(run.exitCode, 1);
    QVERIFY2(run.err.contains("nope-3"), qPrintable(run.err));
    const Run format = cli({"--db", db(), "export-run", "pair-0", "--to", "wandb", path("n")});
    QCOMPARE(format.exitCode, 2);
    QVERIFY2(format.err.contains("--to"), qPrintable(format.err));
    const QString missing = path("missing.db");
    const Run noLog = cli({"--db", missing, "export-study", "pair", "--to", "optuna", path("m")});
    QCOMPARE(noLog.exitCode, 1);
    QVERIFY2(noLog.err.contains(missing + " does not exist yet"), qPrintable(noLog.err));
    QVERIFY(!QFile::exists(missing));  // never created by an export
    const QString nowhere = path("no/such/folder/x.log");
    const Run folder = cli({"--db", db(), "export-study", "pair", "--to", "optuna", nowhere});
    QCOMPARE(folder.exitCode, 1);
    QVERIFY2(folder.err.contains(nowhere + ": cannot create it") &&
                 folder.err.contains("check that its folder exists"),
             qPrintable(folder.err));
  }

  void runAndStudyToTensorBoardPrintTheDocumentedFields() {
    const Run run = cli(
        {"--db", db(), "--json", "export-run", "pair-0", "--to", "tensorboard", path("tb-run")});
    QVERIFY2(run.exitCode == 0, qPrintable(run.err));
    const QJsonObject o = json(run.out);
    QCOMPARE(sortedKeys(o), documentedFields("export-run"));
    QVERIFY(o["hparams"].toBool());     // a trial: its parameters and objective
    QCOMPARE(o["scalars"].toInt(), 2);  // the reported value and the objective
    for (const auto& f : o["files"].toArray()) QVERIFY(QFile::exists(f.toString()));

    const Run study = cli(
        {"--db", db(), "--json", "export-study", "pair", "--to", "tensorboard", path("tb-all")});
    QVERIFY2(study.exitCode == 0, qPrintable(study.err));
    const QJsonObject s = json(study.out);
    QCOMPARE(sortedKeys(s), documentedFields("export-study-tensorboard"));
    QCOMPARE(s["runs"].toArray().size(), 2);
    QVERIFY(QDir(path("tb-all/pair-0")).exists());
    QVERIFY(QDir(path("tb-all/pair-1")).exists());
  }
};

QTEST_GUILESS_MAIN(TestCliExport)
#include "tst_cli_export.moc"
