// `rm`, `archive` and `gc` through the real shardscope-cli binary, on runs made by RunStore as a
// launch makes them, with real folders of known sizes: the bytes are gone and the run log is
// consistent (the run's rows gone, the other runs' intact); a running run is refused; another
// machine's local run is left with its rows (unless --force-rows); archive hides and --undo shows;
// gc keeps exactly the best N trials' checkpoints by the study's objective; and (with the sshd
// fixture) an SSH run's remote folder is measured and removed over SSH. tst_cli_clean_pg runs
// the same against a PostgreSQL server (SHARDSCOPE_TEST_DB, teststore.h).
#include <QDir>
#include <QJsonArray>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include "backend/store/runstore.h"
#include "tests/app/clitest.h"
#include "tests/support/teststore.h"

namespace {

using clitest::Run;
using shardscope::backend::Db;
using shardscope::backend::RunReader;
using shardscope::backend::RunStore;
using shardscope::spec::RunStatus;

constexpr qint64 kLogBytes = 1000;   // events-rank-0.jsonl of every run folder
constexpr qint64 kCkptBytes = 5000;  // ckpt/step-000002/rank-0.safetensors

bool writeBytes(const QString& path, qint64 bytes) {
  if (!QDir().mkpath(QFileInfo(path).absolutePath())) return false;
  return clitest::writeAll(path, QByteArray(bytes, 'x'));
}

// A run folder: a log and one checkpoint.
bool makeRunFolder(const QString& dir) {
  return writeBytes(dir + "/events-rank-0.jsonl", kLogBytes) &&
         writeBytes(dir + "/ckpt/step-000002/rank-0.safetensors", kCkptBytes);
}

class TstCliClean : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  QString m_db;
  QProcessEnvironment m_env;
  std::unique_ptr<RunStore> m_store;

  Run cli(const QStringList& args) { return clitest::cli(QStringList{"--db", m_db} + args, m_env); }
  QString runDir(const QString& name) const { return m_dir.filePath("runs/" + name); }

  // A complete local run with its folder and a few metrics; its id.
  qint64 makeRun(const QString& name, RunStatus status = RunStatus::complete) {
    auto id = m_store->createRun({std::nullopt, name, runDir(name), {}, 1}).get();
    if (!id || !makeRunFolder(runDir(name))) return 0;
    const QJsonObject location{{"kind", "local"}, {"run_dir", runDir(name)}, {"world_size", 1}};
    if (!m_store->setRunLocation(*id, location).get()) return 0;
    if (!m_store->appendMetrics({{*id, 1, "loss", 2.0, 0, 1.0}, {*id, 2, "loss", 1.0, 0, 2.0}})
             .get()) {
      return 0;
    }
    if (!m_store->setRunStatus(*id, status).get()) return 0;
    return *id;
  }

  QStringList listed(bool all) {
    const Run r = cli(all ? QStringList{"--json", "ls", "--all"} : QStringList{"--json", "ls"});
    QStringList names;
    for (const auto& run : clitest::json(r.out)["runs"].toArray()) {
      names << run.toObject()["name"].toString();
    }
    names.sort();
    return names;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_db = shardscope::testing::storeSpec(m_dir.path(), "runs.db");
    auto store = RunStore::open(m_db);
    QVERIFY2(store, store ? "" : store.message().c_str());
    m_store = std::move(*store);
    m_env = QProcessEnvironment::systemEnvironment();
    m_env.insert("HOME", m_dir.filePath("home"));
    QVERIFY(QDir().mkpath(m_dir.filePath("home")));
  }

  // rm frees the run's bytes (a dry run first removes nothing), and takes its rows and only its.
  void rmRemovesFolderAndRows() {
    const qint64 a = makeRun("a");
    const qint64 b = makeRun("b");
    QVERIFY(a > 0 && b > 0);
    const Run dry = cli({"rm", "a", "--dry-run"});
    QVERIFY2(dry.exitCode == 0, qPrintable(dry.err));
    QVERIFY2(dry.out.contains("would remove a: 5.9 KiB (6000 bytes)"), qPrintable(dry.out));
    QVERIFY(QFileInfo::exists(runDir("a") + "/events-rank-0.jsonl"));

    const Run r = cli({"--json", "rm", "a"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    const QJsonObject o = clitest::json(r.out);
    QCOMPARE(o["run"].toString(), QString("a"));
    QCOMPARE(o["freed_bytes"].toInteger(), kLogBytes + kCkptBytes);
    QCOMPARE(o["rows_deleted"].toBool(), true);
    QCOMPARE(o["left"].toString(), QString());
    QVERIFY(!QFileInfo::exists(runDir("a")));
    QVERIFY(QFileInfo::exists(runDir("b") + "/ckpt/step-000002/rank-0.safetensors"));

    auto reader = RunReader::open(m_db);
    QVERIFY(reader);
    QVERIFY(!reader->run(a)->has_value());
    QCOMPARE(*reader->metricCount(a), 0);
    QCOMPARE(*reader->metricCount(b), 2);
    QCOMPARE(*reader->integrityCheck(), std::string("ok"));
    QVERIFY(!listed(true).contains("a"));

    const Run unknown = cli({"rm", "a"});
    QCOMPARE(unknown.exitCode, 1);
    QVERIFY2(unknown.err.contains("no run with id or name \"a\""), qPrintable(unknown.err));
  }

  // A running run keeps its folder and rows, and the message says what to do.
  void runningRunIsRefused() {
    const qint64 c = makeRun("c", RunStatus::running);
    QVERIFY(c > 0);
    const Run r = cli({"rm", "c"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("run c is running: stop it first (shardscope-cli stop c)"),
             qPrintable(r.err));
    QVERIFY(QFileInfo::exists(runDir("c") + "/ckpt"));
    auto reader = RunReader::open(m_db);
    QVERIFY(reader->run(c)->has_value());
    QCOMPARE(*reader->metricCount(c), 2);
    // Ended, so that `ls` below never adopts it.
    QVERIFY(m_store->setRunStatus(c, RunStatus::stopped).get());
  }

  void archiveHidesAndUndoShows() {
    QVERIFY(makeRun("d") > 0);
    QVERIFY(listed(false).contains("d"));
    const Run r = cli({"archive", "d"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QCOMPARE(r.out.trimmed(), QString("archived d"));
    QVERIFY(!listed(false).contains("d"));
    QVERIFY(listed(true).contains("d"));
    QVERIFY2(cli({"ls", "--all"}).out.contains("d (archived)"), "plain ls --all marks it");
    const QJsonObject shown = clitest::json(cli({"--json", "show", "d"}).out);
    QVERIFY(shown["archived_at"].isDouble());
    QVERIFY(QFileInfo::exists(runDir("d") + "/ckpt"));  // kept on disk
    QCOMPARE(cli({"archive", "--undo", "d"}).exitCode, 0);
    QVERIFY(listed(false).contains("d"));
    QVERIFY(clitest::json(cli({"--json", "show", "d"}).out)["archived_at"].isNull());
  }

  // A local run another machine launched: its folder is that machine's (here the path happens
  // to exist, and must stay untouched); rm leaves it and keeps the rows, --force-rows drops them.
  void otherMachinesRunIsLeft() {
    const qint64 e = makeRun("e");
    QVERIFY(e > 0);
    {
      auto db = Db::open(m_db);
      QVERIFY(db);
      QVERIFY(db->exec("UPDATE runs SET host = 'other-box' WHERE name = 'e'"));
    }
    const Run r = cli({"rm", "e"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.out.contains("kept e: 0 B (0 bytes) freed; left its run directory " + runDir("e") +
                            " is on other-box, which this machine cannot reach"),
             qPrintable(r.out));
    QVERIFY2(r.out.contains("its rows are kept; --force-rows deletes them"), qPrintable(r.out));
    QVERIFY(QFileInfo::exists(runDir("e") + "/ckpt"));
    auto reader = RunReader::open(m_db);
    QVERIFY(reader->run(e)->has_value());

    const Run forced = cli({"rm", "e", "--force-rows"});
    QVERIFY2(forced.exitCode == 0, qPrintable(forced.out + forced.err));
    QVERIFY(!reader->run(e)->has_value());
    QVERIFY(QFileInfo::exists(runDir("e") + "/ckpt"));  // still not this machine's to remove
  }

  // Five trials, minimize: objectives 0.5, 0.2, 0.9, 0.3 and a failed one; --keep-best 2 keeps
  // the checkpoints of 0.2 and 0.3 and removes the other three's, logs kept.
  void gcKeepsExactlyTheBestN() {
    auto study =
        m_store->createStudy({"sw", std::nullopt, "", {"loss"}, {"minimize"}, "tpe", 1, {}}).get();
    QVERIFY(study);
    const std::vector<double> objectives{0.5, 0.2, 0.9, 0.3, -1};
    QStringList names;
    for (std::size_t i = 0; i < objectives.size(); ++i) {
      const QString name = QStringLiteral("sw-%1").arg(i);
      auto trial = m_store->createTrialRun({*study, std::nullopt, name, runDir(name), {}, 1}).get();
      QVERIFY(trial);
      QVERIFY(makeRunFolder(runDir(name)));
      const bool failed = objectives[i] < 0;
      QVERIFY(m_store
                  ->finishTrial(trial->runId, failed ? RunStatus::failed : RunStatus::complete,
                                failed ? std::vector<double>{} : std::vector<double>{objectives[i]})
                  .get());
      names << name;
    }
    const Run dry = cli({"gc", "--keep-best", "2", "sw", "--dry-run"});
    QVERIFY2(dry.exitCode == 0, qPrintable(dry.out + dry.err));
    QVERIFY2(dry.out.contains("would free 14.6 KiB (15000 bytes)"), qPrintable(dry.out));
    QVERIFY(QFileInfo::exists(runDir("sw-0") + "/ckpt"));

    const Run r = cli({"--json", "gc", "--keep-best", "2", "sw"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    const QJsonObject o = clitest::json(r.out);
    QCOMPARE(o["kept"].toArray(), QJsonArray({"sw-1", "sw-3"}));
    QCOMPARE(o["freed_bytes"].toInteger(), 3 * kCkptBytes);
    for (const QString& name : names) {
      const bool kept = name == "sw-1" || name == "sw-3";
      QCOMPARE(QFileInfo::exists(runDir(name) + "/ckpt/step-000002/rank-0.safetensors"), kept);
      QVERIFY(QFileInfo::exists(runDir(name) + "/events-rank-0.jsonl"));
    }
    // Nothing left to free; the best trials' checkpoints stay.
    const Run again = cli({"gc", "--keep-best", "2", "sw"});
    QVERIFY2(again.out.contains("freed 0 B (0 bytes)"), qPrintable(again.out));
    QCOMPARE(cli({"gc", "--keep-best", "2", "nope"}).exitCode, 1);
  }

  // An SSH run: its local folder and its remote one (reached over the sshd fixture on loopback,
  // so the test sees the same file system) are measured and removed, and its rows deleted.
  void sshRunIsRemovedOverSsh() {
    if (!clitest::writeSshConfig(m_dir.filePath("home"), "node1")) {
      QSKIP("the sshd fixture is not running");
    }
    const QString local = runDir("f");
    const QString remote = m_dir.filePath("remote/f-r9-abc");
    auto id = m_store->createRun({std::nullopt, "f", local, {}, 1}).get();
    QVERIFY(id);
    QVERIFY(writeBytes(local + "/trial.toml", 300));
    QVERIFY(makeRunFolder(remote));
    const QJsonObject location{{"kind", "ssh"},
                               {"host", "node1"},
                               {"hosts", QJsonArray{"node1"}},
                               {"run_dir", remote},
                               {"world_size", 1}};
    QVERIFY(m_store->setRunLocation(*id, location).get());
    QVERIFY(m_store->setRunStatus(*id, RunStatus::complete).get());
    // A trust for the fixture's key, as `hosts trust` records it.
    const Run trust = cli({"hosts", "trust", "node1", clitest::fixtureFingerprint()});
    // It records the key in known_hosts (what SSH checks), then notes that no `hosts add` row
    // names node1 in this run log, which a removal does not need.
    QVERIFY2(trust.out.contains("added to"), qPrintable(trust.out + trust.err));

    const Run dry = cli({"--json", "rm", "f", "--dry-run"});
    QVERIFY2(dry.exitCode == 0, qPrintable(dry.out + dry.err));
    QCOMPARE(clitest::json(dry.out)["freed_bytes"].toInteger(), 300 + kLogBytes + kCkptBytes);
    const Run r = cli({"--json", "rm", "f"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.out + r.err));
    QCOMPARE(clitest::json(r.out)["freed_bytes"].toInteger(), 300 + kLogBytes + kCkptBytes);
    QVERIFY(!QFileInfo::exists(remote));
    QVERIFY(!QFileInfo::exists(local));
    auto reader = RunReader::open(m_db);
    QVERIFY(!reader->run(*id)->has_value());
  }
};

}  // namespace

QTEST_GUILESS_MAIN(TstCliClean)
#include "tst_cli_clean.moc"
