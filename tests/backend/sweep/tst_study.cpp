// Tests backend/sweep/study.cpp on real run-log files: ask/tell reaching an optimum, enqueue,
// the retry limit, pruning from reported values, several objectives, and a driver process
// SIGKILLed between ask and tell, continued by new processes.
#include <QFile>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <signal.h>

#include <cmath>
#include <set>

#include "backend/store/runstore.h"
#include "backend/sweep/study.h"
#include "tests/support/paths.h"
#include "tests/support/teststore.h"

using namespace shardscope;
using namespace shardscope::search;

namespace {

const QString kCli = shardscope::testing::binaryDir() + "/bin/shardscope-cli";

// A 2-D float space on [-5, 5]^2; `extra` goes into [search] (sampler, objectives, pruner).
QString experiment(const QString& extra) {
  return QStringLiteral(
             "[search]\nseed = 11\nn_trials = 400\n%1\n"
             "[search.space.x]\ntype = \"float\"\nlow = -5.0\nhigh = 5.0\n\n"
             "[search.space.y]\ntype = \"float\"\nlow = -5.0\nhigh = 5.0\n")
      .arg(extra);
}

double sphere(const TrialParams& p) {
  const double x = std::get<double>(p.at("x"));
  const double y = std::get<double>(p.at("y"));
  return (x - 1) * (x - 1) + (y + 2) * (y + 2);
}

class TstStudy : public QObject {
  Q_OBJECT

  QTemporaryDir m_dir;
  int m_files = 0;

  // A fresh run log and experiment file; returns the store.
  std::unique_ptr<backend::RunStore> store(const QString& extra, QString* expPath) {
    const QString base = m_dir.filePath(QString::number(m_files++));
    *expPath = base + "-exp.toml";
    QFile f(*expPath);
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(*expPath));
    f.write(experiment(extra).toUtf8());
    f.close();
    // A file, or a database on the PostgreSQL test server (tst_study_pg).
    auto s = backend::RunStore::open(
        shardscope::testing::storeSpec(m_dir.path(), QString::number(m_files - 1) + ".db"));
    if (!s) qFatal("%s", s.message().c_str());
    return std::move(*s);
  }

  Study create(backend::RunStore& s, const QString& exp, int maxRetries = 1) {
    Study::CreateOptions o;
    o.name = "s";
    o.maxRetries = maxRetries;
    auto study = Study::create(s, exp, o);
    if (!study) qFatal("%s", study.message().c_str());
    return std::move(*study);
  }

 private slots:
  void initTestCase() { QVERIFY(m_dir.isValid()); }

  void askTellReachesOptimumAndPersists() {
    QString exp;
    auto s = store("sampler = \"tpe\"\nobjectives = {objective = \"minimize\"}", &exp);
    {
      Study study = create(*s, exp);
      for (int i = 0; i < 60; ++i) {
        auto asked = study.ask();
        QVERIFY2(asked, asked ? "" : asked.message().c_str());
        QCOMPARE(asked->number, std::int64_t(i));
        QVERIFY(study.tell(asked->number, {sphere(asked->params)}));
      }
    }
    // A second Study over a second store on the same file sees every told result.
    auto other = backend::RunStore::open(s->path());
    QVERIFY(other);
    auto again = Study::open(**other, "s");
    QVERIFY2(again, again ? "" : again.message().c_str());
    auto summary = again->summary();
    QVERIFY(summary);
    QCOMPARE(summary->counts.complete, 60);
    QVERIFY(summary->best);
    // TPE on a 2-D sphere: 60 trials reach the optimum region around (1, -2).
    QVERIFY2(summary->best->trial.values[0] < 0.1,
             qPrintable(QString::number(summary->best->trial.values[0])));
    QCOMPARE(summary->importance.size(), std::size_t(2));
    auto next = again->ask();
    QVERIFY(next);
    QCOMPARE(next->number, std::int64_t(60));
  }

  void enqueuedTrialsComeFirst() {
    QString exp;
    auto s = store("sampler = \"random\"", &exp);
    Study study = create(*s, exp);
    auto first = study.ask();
    QVERIFY(first);
    auto n = study.enqueue({{"x", 1.0}, {"y", -2.0}});
    QVERIFY2(n, n ? "" : n.message().c_str());
    QCOMPARE(*n, std::int64_t(1));
    auto bad = study.enqueue({{"x", 9.0}, {"y", 0.0}});
    QVERIFY(!bad);
    QVERIFY2(bad.message().find("x: 9") != std::string::npos, bad.message().c_str());
    auto partial = study.enqueue({{"x", 1.0}});
    QVERIFY(!partial);
    QVERIFY2(partial.message().find('y') != std::string::npos, partial.message().c_str());
    auto asked = study.ask();
    QVERIFY(asked);
    QCOMPARE(asked->number, std::int64_t(1));
    QVERIFY(asked->enqueued);
    QCOMPARE(std::get<double>(asked->params.at("x")), 1.0);
    QCOMPARE(std::get<double>(asked->params.at("y")), -2.0);
    QCOMPARE(study.ask()->number, std::int64_t(2));  // nothing queued any more: a new number
  }

  void failedTrialsRetriedUpToTheLimit() {
    QString exp;
    auto s = store("sampler = \"random\"", &exp);
    Study study = create(*s, exp, 2);
    auto asked = study.ask();
    QVERIFY(asked);
    QVERIFY(study.report(0, 3, 1.5));
    for (int attempt = 1; attempt <= 2; ++attempt) {
      QVERIFY(study.tell(0, TrialState::Failed, "boom"));
      auto retry = study.ask();
      QVERIFY(retry);
      QCOMPARE(retry->number, std::int64_t(0));
      QCOMPARE(retry->attempt, attempt);
      QVERIFY(retry->params == asked->params);
      // A retry starts a fresh curve.
      auto trials = study.trials(true);
      QVERIFY(trials);
      QVERIFY(trials->front().trial.intermediate.empty());
    }
    QVERIFY(study.tell(0, TrialState::Failed, "boom"));
    auto fresh = study.ask();
    QVERIFY(fresh);
    QCOMPARE(fresh->number, std::int64_t(1));  // the limit (2 retries) is reached
    QCOMPARE(fresh->attempt, 0);
    // A non-finite value is a failure; a second tell is refused naming the trial.
    QVERIFY(study.tell(1, {std::nan("")}));
    auto twice = study.tell(1, {1.0});
    QVERIFY(!twice);
    QVERIFY2(twice.message().find("trial 1 already ended") != std::string::npos,
             twice.message().c_str());
    auto summary = study.summary();
    QVERIFY(summary);
    QCOMPARE(summary->counts.failed, 2);
    QCOMPARE(summary->trials[1].error, QStringLiteral("objective 0 (objective) is not finite"));
  }

  void medianPrunerReadsReportedValues() {
    QString exp;
    auto s =
        store("sampler = \"random\"\npruner = {type = \"median\", n_startup_trials = 2}", &exp);
    Study study = create(*s, exp);
    for (int t = 0; t < 3; ++t) {
      auto asked = study.ask();
      QVERIFY(asked);
      for (int step = 0; step < 4; ++step) QVERIFY(study.report(t, step, 1.0 + t));
      QVERIFY(study.tell(t, {1.0 + t}));
    }
    QVERIFY(study.ask());
    QVERIFY(study.ask());
    QVERIFY(study.report(3, 2, 0.5));  // better than the median (2.0) at step 2
    QCOMPARE(*study.shouldPrune(3), false);
    QVERIFY(study.report(4, 2, 9.0));  // worse
    QCOMPARE(*study.shouldPrune(4), true);
    QVERIFY(study.tell(4, TrialState::Pruned));
    QVERIFY(!study.shouldPrune(4));  // already ended
    QVERIFY(!study.report(4, 3, 1.0));
  }

  void severalObjectivesGiveAParetoFront() {
    QString exp;
    auto s = store(
        "sampler = {type = \"nsga2\", population_size = 10}\n"
        "objectives = {f1 = \"minimize\", f2 = \"minimize\"}",
        &exp);
    Study study = create(*s, exp);
    for (int i = 0; i < 40; ++i) {
      auto asked = study.ask();
      QVERIFY(asked);
      const double x = std::get<double>(asked->params.at("x"));
      const double y = std::get<double>(asked->params.at("y"));
      QVERIFY(study.tell(asked->number, {x * x + y * y, (x - 2) * (x - 2) + y * y}));
    }
    QVERIFY(!study.tell(0, {1.0}));  // one value for two objectives
    auto summary = study.summary();
    QVERIFY(summary);
    QVERIFY(!summary->pareto.empty());
    for (const auto& a : summary->pareto) {
      for (const auto& b : summary->trials) {
        const auto& va = a.trial.values;
        const auto& vb = b.trial.values;
        const bool dominates = vb[0] <= va[0] && vb[1] <= va[1] && (vb[0] < va[0] || vb[1] < va[1]);
        QVERIFY2(!dominates, "a Pareto member is dominated");
      }
    }
    QVERIFY(summary->best);
    double lowest = INFINITY;
    for (const auto& t : summary->pareto) lowest = std::min(lowest, t.trial.values[0]);
    QCOMPARE(summary->best->trial.values[0], lowest);
  }

  // A shell driver asks and tells through the CLI, asks once more and is SIGKILLed before it
  // tells; new processes continue: every told value is there, the lost trial is retried with
  // its number and values, and new trials take the next numbers.
  void killedDriverContinuesWithNextNumbers() {
    QString exp;
    auto s = store("sampler = \"tpe\"\nobjectives = {objective = \"minimize\"}", &exp);
    create(*s, exp);
    const QString log = m_dir.filePath("driver.log");
    const QString asked = m_dir.filePath("driver.asked");
    const QString script = QStringLiteral(
        "for i in 1 2 3 4 5; do\n"
        "  line=$(\"$CLI\" --db \"$DB\" study ask s) || exit 1\n"
        "  n=${line%% *}\n"
        "  v=$(echo \"$line\" | awk '{for(i=2;i<=NF;i++){split($i,a,\"=\");p[a[1]]=a[2]}"
        " printf \"%.17g\", (p[\"x\"]-1)^2+(p[\"y\"]+2)^2}')\n"
        "  \"$CLI\" --db \"$DB\" study tell s \"$n\" \"$v\" || exit 1\n"
        "  echo \"$n $v\" >> \"$LOG\"\n"
        "done\n"
        "line=$(\"$CLI\" --db \"$DB\" study ask s) || exit 1\n"
        "echo \"$line\" > \"$ASKED\"\n"
        "exec sleep 600\n");
    QProcess driver;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("CLI", kCli);
    env.insert("DB", s->path());
    env.insert("LOG", log);
    env.insert("ASKED", asked);
    driver.setProcessEnvironment(env);
    driver.start("sh", {"-c", script});
    QVERIFY(driver.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(asked) && QFile(asked).size() > 0, 60000);
    ::kill(static_cast<pid_t>(driver.processId()), SIGKILL);
    QVERIFY(driver.waitForFinished(10000));

    QFile logFile(log);
    QVERIFY(logFile.open(QIODevice::ReadOnly));
    const QStringList told = QString::fromUtf8(logFile.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(told.size(), 5);
    QFile askedFile(asked);
    QVERIFY(askedFile.open(QIODevice::ReadOnly));
    const QString lostLine = QString::fromUtf8(askedFile.readAll()).trimmed();
    QCOMPARE(lostLine.section(' ', 0, 0), QStringLiteral("5"));

    // A new process (the CLI) continues: first the lost trial 5 again (a retry, same values).
    QProcess next;
    next.start(kCli, {"--db", s->path(), "study", "ask", "s"});
    QVERIFY(next.waitForFinished(60000));
    QCOMPARE(next.exitCode(), 0);
    QCOMPARE(QString::fromUtf8(next.readAllStandardOutput()).trimmed(), lostLine);

    auto study = Study::open(*s, "s");
    QVERIFY(study);
    auto trials = study->trials();
    QVERIFY(trials);
    QCOMPARE(trials->size(), std::size_t(6));
    for (int i = 0; i < 5; ++i) {
      const StudyTrial& t = (*trials)[static_cast<std::size_t>(i)];
      QCOMPARE(t.trial.state, TrialState::Complete);
      QCOMPARE(t.trial.number, told[i].section(' ', 0, 0).toLongLong());
      QCOMPARE(t.trial.values[0], told[i].section(' ', 1, 1).toDouble());
    }
    QCOMPARE((*trials)[5].attempt, 1);
    QVERIFY2((*trials)[5].error.startsWith("lost:"), qPrintable((*trials)[5].error));
    auto fresh = study->ask();
    QVERIFY(fresh);
    QCOMPARE(fresh->number, std::int64_t(6));
  }

  // A study stores the canonical form of its [search] section (the experiment as parsed, its
  // overrides applied), which opens without the experiment file.
  void aStudyStoresItsCanonicalSearchSection() {
    QString unused;
    auto s = store("sampler = \"random\"\nobjectives = {objective = \"minimize\"}", &unused);
    const QString exp = m_dir.filePath("canonical.toml");
    QFile f(exp);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(("[experiment]\nname = \"canon\"\n\n[train]\nmax_steps = 7\n\n" +
             experiment("program = [\"python3\", \"f.py\"]\nsampler = \"random\"\n"
                        "objectives = {objective = \"minimize\"}"))
                .toUtf8());
    f.close();
    for (const bool overridden : {true, false}) {
      Study::CreateOptions o;
      o.name = overridden ? "overridden" : "plain";
      if (overridden) o.overrides = {"search.seed=5"};
      auto created = Study::create(*s, exp, o);
      QVERIFY2(created, created ? "" : created.message().c_str());
      const QString config = created->record().config;
      QVERIFY2(config.startsWith("[search]"), qPrintable(config));
      QVERIFY2(!config.contains("[experiment]") && !config.contains("max_steps"),
               qPrintable(config));
      if (overridden) {
        spec::LoadOptions noPaths;
        noPaths.check_paths = false;
        auto parsed = spec::load_experiment(exp.toStdString(), {"search.seed=5"}, noPaths);
        QVERIFY2(parsed, parsed ? "" : parsed.message().c_str());
        QCOMPARE(config.toStdString(), parsed->search.toml);
      }
    }
    QVERIFY(QFile::remove(exp));
    for (const bool overridden : {true, false}) {
      auto opened = Study::open(*s, overridden ? "overridden" : "plain");
      QVERIFY2(opened, opened ? "" : opened.message().c_str());
      QCOMPARE(opened->space().seed, std::uint64_t(overridden ? 5 : 11));
      QCOMPARE(opened->space().params.size(), std::size_t(2));
      QCOMPARE(opened->space().program.size(), std::size_t(2));
    }
  }

  // Studies created before kept the whole experiment file's text as their config: they still
  // open, ask and tell, their [search] table read from that text.
  void aStudyStoredWithTheWholeExperimentStillOpens() {
    QString exp;
    auto s = store("sampler = \"random\"\nobjectives = {objective = \"minimize\"}", &exp);
    backend::NewStudy old;
    old.name = "old";
    old.config = "[experiment]\nname = \"older\"\n\n[train]\nmax_steps = 7\n\n" +
                 experiment("sampler = \"random\"\nobjectives = {objective = \"minimize\"}");
    old.objectives = {"objective"};
    old.directions = {"minimize"};
    old.sampler = "random";
    old.seed = 11;
    old.state = QJsonObject{{"max_retries", 1}, {"source", exp}};
    auto id = s->createStudy(old).get();
    QVERIFY2(id, id ? "" : id.message().c_str());
    auto opened = Study::open(*s, "old");
    QVERIFY2(opened, opened ? "" : opened.message().c_str());
    QCOMPARE(opened->space().n_trials, std::int64_t(400));
    QCOMPARE(opened->space().params.size(), std::size_t(2));
    for (int i = 0; i < 3; ++i) {
      auto asked = opened->ask();
      QVERIFY2(asked, asked ? "" : asked.message().c_str());
      QVERIFY(opened->tell(asked->number, {sphere(asked->params)}));
    }
    auto summary = opened->summary();
    QVERIFY(summary);
    QCOMPARE(summary->counts.complete, 3);
    // A sweep's override of its fixed space is still compared with the stored value.
    spec::Experiment reseeded;
    reseeded.search.present = true;
    reseeded.search.toml = "[search]\nseed = 12\n";
    auto refused = opened->checkOverrides(reseeded, {"search.seed=12"});
    QVERIFY(!refused);
    QVERIFY2(refused.message().find("search.seed = 11") != std::string::npos,
             refused.message().c_str());
    spec::Experiment same = reseeded;
    same.search.toml = "[search]\nseed = 11\n";
    QVERIFY(opened->checkOverrides(same, {"search.seed=11"}));
  }

  // sampler = "auto" (the default): the study stores the choice in its state; a resumed study
  // reads it back from there (here one written as an older rule might have chosen), and a
  // malformed one is refused naming the field. On SQLite and PostgreSQL (tst_study_pg).
  void autoChoiceIsStoredAndKeptOnResume() {
    QString exp;
    auto s = store("objectives = {objective = \"minimize\"}", &exp);
    {
      Study study = create(*s, exp);
      QCOMPARE(study.space().sampler.type, std::string("auto"));
      QCOMPARE(study.record().sampler, QStringLiteral("auto"));
      QVERIFY(study.autoChoice().has_value());
      QCOMPARE(study.autoChoice()->gp_trials, kAutoGpTrials);
      QVERIFY(study.autoChoice()->then == spec::SamplerKind::tpe);
      for (int i = 0; i < 3; ++i) {
        auto asked = study.ask();
        QVERIFY2(asked, asked ? "" : asked.message().c_str());
        QVERIFY(study.tell(asked->number, {sphere(asked->params)}));
      }
    }
    auto other = backend::RunStore::open(s->path());  // a second store on the same run log
    QVERIFY2(other, other ? "" : other.message().c_str());
    auto opened = Study::open(**other, "s");
    QVERIFY2(opened, opened ? "" : opened.message().c_str());
    const QJsonObject stored = opened->record().state.value("auto").toObject();
    QCOMPARE(stored.value("gp_trials").toInteger(), kAutoGpTrials);
    QCOMPARE(stored.value("then").toString(), QStringLiteral("tpe"));
    QCOMPARE(stored.value("reason").toString(), QStringLiteral("a space of 2 parameters"));
    QVERIFY(opened->autoChoice().has_value());
    QVERIFY(opened->autoChoice()->then == spec::SamplerKind::tpe);

    // The stored choice wins over the rule: a resumed study goes on with what it was given.
    QJsonObject state = opened->record().state;
    state.insert("auto", autoChoiceJson(AutoChoice{2, spec::SamplerKind::cmaes, "an older rule"}));
    QVERIFY((*other)->setStudyState(opened->id(), state).get());
    auto resumed = Study::open(**other, "s");
    QVERIFY2(resumed, resumed ? "" : resumed.message().c_str());
    QVERIFY(resumed->autoChoice().has_value());
    QCOMPARE(resumed->autoChoice()->gp_trials, std::int64_t(2));
    QVERIFY(resumed->autoChoice()->then == spec::SamplerKind::cmaes);
    QCOMPARE(resumed->autoChoice()->reason, std::string("an older rule"));
    auto asked = resumed->ask();
    QVERIFY2(asked, asked ? "" : asked.message().c_str());
    QCOMPARE(asked->number, std::int64_t(3));

    // Malformed: a number no integer holds, a sampler that cannot follow the GP.
    state.insert("auto", QJsonObject{{"gp_trials", 1e300}, {"then", "tpe"}});
    QVERIFY((*other)->setStudyState(opened->id(), state).get());
    auto huge = Study::open(**other, "s");
    QVERIFY(!huge);
    QVERIFY2(huge.message().find("auto.gp_trials") != std::string::npos, huge.message().c_str());
    state.insert("auto", QJsonObject{{"gp_trials", 5}, {"then", "grid"}});
    QVERIFY((*other)->setStudyState(opened->id(), state).get());
    auto grid = Study::open(**other, "s");
    QVERIFY(!grid);
    QVERIFY2(grid.message().find("auto.then is \"grid\"") != std::string::npos,
             grid.message().c_str());
  }

  // A study created before auto was the default: its text names no sampler and its column says
  // tpe; it goes on with tpe (no auto choice), as it was created.
  void aStudyFromBeforeAutoStaysTpe() {
    QString exp;
    auto s = store("objectives = {objective = \"minimize\"}", &exp);
    backend::NewStudy old;
    old.name = "before-auto";
    old.config = experiment("objectives = {objective = \"minimize\"}");
    old.objectives = {"objective"};
    old.directions = {"minimize"};
    old.sampler = "tpe";
    old.seed = 11;
    old.state = QJsonObject{{"max_retries", 1}, {"source", exp}};
    auto id = s->createStudy(old).get();
    QVERIFY2(id, id ? "" : id.message().c_str());
    auto opened = Study::open(*s, "before-auto");
    QVERIFY2(opened, opened ? "" : opened.message().c_str());
    QCOMPARE(opened->space().sampler.type, std::string("tpe"));
    QVERIFY(opened->autoChoice() == std::nullopt);
  }
};

}  // namespace

QTEST_GUILESS_MAIN(TstStudy)
#include "tst_study.moc"
