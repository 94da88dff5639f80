// Tests backend/sweep/sweeploop.cpp: a study's ask -> run -> record loop driven without
// the CLI, on program trials (real processes) and a real SQLite run log: its events, the study's
// status, continuing a finished study, a concurrency override, and the input it refuses. Every wait
// has a generous deadline; nothing asserts a duration.
#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <memory>

#include "backend/sweep/sweeploop.h"
#include "spec/experiment_query.h"
#include "tests/support/experiment.h"
#include "tests/support/teststore.h"
#include "tests/support/verify_ok.h"

using namespace shardscope;
using namespace shardscope::backend;

namespace {

constexpr int kDeadlineMs = 120000;

}  // namespace

class TestSweepLoop : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void runsTheStudyToItsEnd();
  void aFinishedStudyIsContinuedWithNothingToAsk();
  void refusesBadInput();
  void concurrencyOverrideAppliesToAnExistingStudy();
  void aSweepReadsItsExperimentFileOnce();

 private:
  StudyStatus statusOf(qint64 studyId);

  QTemporaryDir m_dir;
  std::unique_ptr<RunStore> m_store;
  QString m_experiment;
};

void TestSweepLoop::initTestCase() {
  QVERIFY(m_dir.isValid());
  m_experiment = testing::writeQuadSweep(m_dir.path(), 3);
  QVERIFY(!m_experiment.isEmpty());
  auto store = RunStore::open(shardscope::testing::storeSpec(m_dir.path(), "runs.db"));
  VERIFY_OK(store);
  m_store = std::move(*store);
}

StudyStatus TestSweepLoop::statusOf(qint64 studyId) {
  auto reader = m_store->reader();
  if (!reader) return StudyStatus::running;
  auto study = reader->study(studyId);
  return study && *study ? (*study)->status : StudyStatus::running;
}

// Three trials one at a time: each is announced, ends complete, and the study ends complete with
// its best trial; nothing is printed by the loop itself.
void TestSweepLoop::runsTheStudyToItsEnd() {
  auto input = SweepLoop::readInput(m_experiment, {});
  VERIFY_OK(input);
  QVERIFY(!input->shape);  // a program trial needs no experiment shape
  auto opened = SweepLoop::openStudy(*m_store, *input, {}, 1);
  VERIFY_OK(opened);
  QVERIFY(!opened->continued);
  QCOMPARE(opened->study.name(), QStringLiteral("quadstudy"));

  SweepLoop::Options options;
  options.runsRoot = m_dir.filePath("runs");
  SweepLoop loop(*m_store, std::move(opened->study), *input, options);
  QCOMPARE(loop.slotCount(), 1);
  QSignalSpy starting(&loop, &SweepLoop::trialStarting);
  QSignalSpy ended(&loop, &SweepLoop::trialEnded);
  QSignalSpy reattached(&loop, &SweepLoop::trialReattached);
  QSignalSpy done(&loop, &SweepLoop::ended);
  VERIFY_OK(loop.start());
  QCOMPARE(statusOf(loop.study().id()), StudyStatus::running);
  QVERIFY(done.wait(kDeadlineMs));

  QCOMPARE(starting.count(), 3);
  QCOMPARE(ended.count(), 3);
  QCOMPARE(reattached.count(), 0);
  for (int i = 0; i < 3; ++i) {
    QCOMPARE(starting.at(i).at(0).value<qint64>(), qint64{i});
    QCOMPARE(starting.at(i).at(1).toInt(), 0);  // no retry
    const auto outcome = ended.at(i).at(0).value<TrialOutcome>();
    QCOMPARE(int(outcome.state), int(search::TrialState::Complete));
    QCOMPARE(outcome.values.size(), std::size_t{1});
  }
  auto outcome = loop.finish();
  VERIFY_OK(outcome);
  QVERIFY(!outcome->stopped);
  QCOMPARE(outcome->summary.counts.complete, 3);
  QVERIFY(outcome->summary.best.has_value());
  QCOMPARE(statusOf(loop.study().id()), StudyStatus::complete);
}

// Swept again, the finished study is continued: running while the loop looks, nothing to ask,
// complete again at the end with the same trials.
void TestSweepLoop::aFinishedStudyIsContinuedWithNothingToAsk() {
  auto input = SweepLoop::readInput(m_experiment, {});
  VERIFY_OK(input);
  auto opened = SweepLoop::openStudy(*m_store, *input, QStringLiteral("quadstudy"), 1);
  VERIFY_OK(opened);
  QVERIFY(opened->continued);
  SweepLoop::Options options;
  options.runsRoot = m_dir.filePath("runs");
  SweepLoop loop(*m_store, std::move(opened->study), *input, options);
  QSignalSpy starting(&loop, &SweepLoop::trialStarting);
  QSignalSpy done(&loop, &SweepLoop::ended);
  VERIFY_OK(loop.start());
  QCOMPARE(statusOf(loop.study().id()), StudyStatus::running);
  QVERIFY(done.wait(kDeadlineMs));
  QCOMPARE(starting.count(), 0);
  auto outcome = loop.finish();
  VERIFY_OK(outcome);
  QCOMPARE(outcome->summary.counts.complete, 3);
  QCOMPARE(statusOf(loop.study().id()), StudyStatus::complete);
}

// The input's errors come before the run log is touched: a file without [search], a bad
// override; an existing study refuses an override of what it fixed at its creation.
void TestSweepLoop::refusesBadInput() {
  const QString plain = m_dir.filePath("plain.toml");
  QVERIFY(testing::writeAll(plain, "[experiment]\nname = \"p\"\n"));
  QVERIFY(!SweepLoop::readInput(plain, {}).ok());
  QVERIFY(!SweepLoop::readInput(m_dir.filePath("missing.toml"), {}).ok());
  QVERIFY(!SweepLoop::readInput(m_experiment, {"search.nope=1"}).ok());

  auto input = SweepLoop::readInput(m_experiment, {"search.seed=2"});
  VERIFY_OK(input);
  auto opened = SweepLoop::openStudy(*m_store, *input, QStringLiteral("quadstudy"), 1);
  QVERIFY2(!opened.ok(), "the study's seed is fixed at its creation");
}

// search.concurrency may change on an existing study: the loop's slots follow the override, while
// the study keeps what it was created with.
void TestSweepLoop::concurrencyOverrideAppliesToAnExistingStudy() {
  if (QThread::idealThreadCount() < 2) QSKIP("needs 2 cores for 2 local slots");
  auto input = SweepLoop::readInput(m_experiment, {"search.concurrency=2"});
  VERIFY_OK(input);
  auto opened = SweepLoop::openStudy(*m_store, *input, QStringLiteral("quadstudy"), 1);
  VERIFY_OK(opened);
  QVERIFY(opened->continued);
  SweepLoop loop(*m_store, std::move(opened->study), *input, {m_dir.filePath("runs"), {}});
  QCOMPARE(loop.slotCount(), 2);
  QCOMPARE(loop.study().space().concurrency, 1);
}

// A sweep reads its experiment file once (spec::experiment_file_reads) and passes the parsed
// experiment on: to the study it creates or continues, the check of its overrides and every trial,
// whose values are applied to the parsed experiment, not to the file read again.
void TestSweepLoop::aSweepReadsItsExperimentFileOnce() {
  for (const bool existing : {false, true}) {
    const std::uint64_t before = spec::experiment_file_reads();
    auto input = SweepLoop::readInput(m_experiment, {"search.seed=1"});
    VERIFY_OK(input);
    VERIFY_OK(SweepLoop::prepareData(*input));
    auto opened = SweepLoop::openStudy(*m_store, *input, QStringLiteral("once"), 1);
    VERIFY_OK(opened);
    QCOMPARE(opened->continued, existing);
    SweepLoop::Options options;
    options.runsRoot = m_dir.filePath("runs");
    SweepLoop loop(*m_store, std::move(opened->study), *input, options);
    QSignalSpy ended(&loop, &SweepLoop::trialEnded);
    QSignalSpy done(&loop, &SweepLoop::ended);
    VERIFY_OK(loop.start());
    QVERIFY(done.wait(kDeadlineMs));
    auto outcome = loop.finish();
    VERIFY_OK(outcome);
    QCOMPARE(outcome->summary.counts.complete, 3);
    QCOMPARE(ended.count(), existing ? 0 : 3);  // the first sweep ran every trial
    QCOMPARE(spec::experiment_file_reads() - before, std::uint64_t{1});
  }
}

QTEST_GUILESS_MAIN(TestSweepLoop)
#include "tst_sweeploop.moc"
