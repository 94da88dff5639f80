// The population-based training loop (see pbtloop.h).
#include "backend/sweep/pbtloop.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QLoggingCategory>
#include <QSysInfo>
#include <QThread>
#include <QTimer>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "backend/lifecycle/runlifecycle.h"
#include "backend/sweep/pbtreplay.h"
#include "search/pbt.h"

Q_LOGGING_CATEGORY(lcPbtLoop, "shardscope.backend.pbtloop")

namespace shardscope::backend {

namespace {

const QString kComplete = QStringLiteral("complete");
const QString kFailed = QStringLiteral("failed");
const QString kRunning = QStringLiteral("running");
const QString kStopped = QStringLiteral("stopped");

}  // namespace

Result<void> PbtLoop::check(const SweepInput& input) {
  const std::string& src = input.experiment.source;
  if (!input.space.pbt)
    return shardscope::fail(src + ": search.pbt: missing; this is no PBT study");
  const std::int64_t interval = input.space.pbt->interval_steps;
  const spec::Experiment& exp = input.experiment;
  if (exp.train.max_steps < interval) {
    return shardscope::fail(src + ": train.max_steps (" + std::to_string(exp.train.max_steps) +
                            ") is below search.pbt.interval_steps (" + std::to_string(interval) +
                            "); raise train.max_steps or lower the interval");
  }
  if (exp.eval.every <= 0 || interval % exp.eval.every != 0) {
    return shardscope::fail(src + ": eval.every (" + std::to_string(exp.eval.every) +
                            ") must be > 0 and divide search.pbt.interval_steps (" +
                            std::to_string(interval) +
                            ") so that every segment ends on an evaluation; set eval.every = " +
                            std::to_string(interval));
  }
  const std::string& metric = input.space.objectives.front().metric;
  if (metric.rfind("eval.", 0) != 0) {
    return shardscope::fail(src +
                            ": search.objectives: PBT ranks members on an evaluation metric "
                            "(\"eval.loss\", ...), not \"" +
                            metric + "\"");
  }
  return ok();
}

PbtLoop::PbtLoop(RunStore& store, search::Study study, const SweepInput& input,
                 const SweepLoop::Options& options, QObject* parent)
    : QObject(parent),
      m_store(store),
      m_study(std::move(study)),
      m_runner(store, input.experimentPath, m_study.space(),
               sweepRunnerOptions(m_study, input, options)),
      m_scheduler(m_runner),
      m_config(m_study.space().pbt.value_or(search::PbtConfig{})),
      m_maxSteps(input.experiment.train.max_steps),
      m_control(store, m_study.id(), m_runner) {
  const std::int64_t interval = std::max<std::int64_t>(1, m_config.interval_steps);
  m_segments = static_cast<int>((m_maxSteps + interval - 1) / interval);
  m_minimize = m_study.space().objectives.empty() ||
               m_study.space().objectives.front().direction == search::Direction::Minimize;
  connect(&m_runner, &TrialRunner::trialStarted, this, [this](qint64 number, qint64 runId) {
    const int n = m_config.population;
    PbtSegment* row = m_lineage.at(int(number / n), int(number % n));
    if (row == nullptr) return;
    if (!row->runId) {
      row->runId = runId;
      if (auto r = save(); !r) fail(r.message());
    }
    emit segmentLaunched(row->segment, row->member, runId);
  });
  connect(&m_scheduler, &Scheduler::trialFinished, this, &PbtLoop::onFinished);
  connect(&m_control, &SweepControl::controlChanged, this, &PbtLoop::onControl);
  connect(&m_scheduler, &Scheduler::trialRejected, this, [this](qint64 number, const QString& e) {
    TrialOutcome outcome;
    outcome.number = number;
    outcome.state = search::TrialState::Failed;
    outcome.error = e;
    onFinished(outcome);
  });
}

// The sweep stamp is cleared by m_control's destructor.
PbtLoop::~PbtLoop() = default;

Result<void> PbtLoop::start() {
  if (!m_study.space().pbt) return shardscope::fail("study has no [search.pbt]");
  if (auto r = checkNoOtherDriver(); !r) return r;
  m_lineage = PbtLineage::fromJson(m_study.space(),
                                   m_study.record().state.value(QLatin1String("pbt")).toObject());
  for (const PbtSegment& row : m_lineage.segments) {
    if (row.state != kStopped) continue;
    return shardscope::fail("study " + m_study.name().toStdString() +
                            " was stopped by the user at segment " + std::to_string(row.segment) +
                            ": a stopped PBT study does not go on (its stopped segments have no "
                            "end checkpoint); start a new study (search.name)");
  }
  if (m_study.record().status != StudyStatus::running) {
    if (auto r = m_store.setStudyStatus(m_study.id(), StudyStatus::running).get(); !r) return r;
  }
  auto started = m_lineage.segments.empty() ? startFirstSegments() : resume();
  if (!started) return started;
  // The user's control from now on, and the study stamped as this process's, as for a sweep
  // (`study adopt` hands its own stamp over to this one).
  return m_control.start();
}

Result<void> PbtLoop::checkNoOtherDriver() {
  const qint64 pid = QCoreApplication::applicationPid();
  const QString host = QSysInfo::machineHostName();
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  // `study adopt` holds the stamp until this process is started and then hands it over: a stamp
  // of another live process that stays through two of its renewals is a driver's.
  QDeadlineTimer handOver(qint64(2) * RunStore::kSweepStampMs);
  for (;;) {
    auto study = reader->study(m_study.id());
    if (!study) return study.error();
    if (!*study || (*study)->sweepPid == pid ||
        !RunStore::sweepAlive(**study, host, RunStore::kSweepStaleS))
      return ok();
    if (handOver.hasExpired()) {
      return shardscope::fail("study " + m_study.name().toStdString() + " is driven by process " +
                              std::to_string((*study)->sweepPid) + " on " +
                              (*study)->sweepHost.toStdString() +
                              ": one process drives a PBT study; it goes on there");
    }
    QThread::msleep(100);
  }
}

Result<void> PbtLoop::startFirstSegments() {
  m_lineage.population = m_config.population;
  std::vector<PbtSegment> first;
  for (int m = 0; m < m_config.population; ++m) {
    PbtSegment row;
    row.member = m;
    row.segment = 0;
    row.trial = m;
    row.endStep = std::min<qint64>(m_config.interval_steps, m_maxSteps);
    row.params = search::pbt_initial(m_study.space(), m_study.space().seed, m);
    first.push_back(row);
  }
  m_lineage.segments = first;
  if (auto r = save(); !r) return r;
  for (PbtSegment& row : first) startSegment(row);
  return ok();
}

Result<void> PbtLoop::resume() {
  const std::string label = "study " + m_study.name().toStdString();
  if (m_lineage.population != m_config.population) {
    return shardscope::fail(label + ": its lineage has " + std::to_string(m_lineage.population) +
                            " members but search.pbt.population is " +
                            std::to_string(m_config.population) +
                            "; continue it with the population it started with, or start a new "
                            "study (search.name)");
  }
  auto trials = m_study.trials();
  if (!trials) return trials.error();
  std::map<qint64, search::StudyTrial> byNumber;
  for (search::StudyTrial& t : *trials) byNumber[t.trial.number] = std::move(t);
  auto orphans = m_study.orphanedTrials();
  if (!orphans) return orphans.error();
  std::set<qint64> orphaned;
  for (const search::StudyTrial& t : *orphans) orphaned.insert(t.trial.number);

  // A segment whose follower lives (its lease's holder): another process drives the study.
  // Checked before anything starts.
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  const QString host = QSysInfo::machineHostName();
  for (const PbtSegment& row : m_lineage.segments) {
    const auto found = byNumber.find(row.trial);
    if (row.state != kRunning || found == byNumber.end() ||
        found->second.status != spec::RunStatus::running || orphaned.count(row.trial) != 0)
      continue;
    auto lease = reader->lease(found->second.runId);
    if (!lease) return lease.error();
    if (*lease && ((*lease)->host != host || RunStore::processAlive((*lease)->pid))) {
      return shardscope::fail(label + ": segment " + std::to_string(row.segment) + " of member " +
                              std::to_string(row.member) + " (run " +
                              std::to_string(found->second.runId) + ") is followed by process " +
                              std::to_string((*lease)->pid) + " on " +
                              (*lease)->host.toStdString() + ": another sweep drives this study");
    }
  }

  std::vector<TrialOutcome> endedMeanwhile;  // segments whose trial ended while no driver ran
  bool running = false;
  for (const PbtSegment& row : m_lineage.segments) {
    if (row.state != kRunning) continue;
    running = true;
    prepareSegment(row);
    const auto found = byNumber.find(row.trial);
    if (found == byNumber.end()) {  // never recorded: it starts as it would have
      emit segmentStarting(row.segment, row.member, row.fromMember, row.params);
      m_scheduler.enqueue(row.trial, row.params);
      continue;
    }
    const search::StudyTrial& t = found->second;
    // Recorded (or claimed for a retry) and never launched: it starts now as that attempt.
    if (t.status == spec::RunStatus::queued ||
        (t.status == spec::RunStatus::running && orphaned.count(row.trial) == 0)) {
      emit segmentStarting(row.segment, row.member, row.fromMember, row.params);
      m_scheduler.enqueue(row.trial, row.params, t.runId);
      continue;
    }
    TrialOutcome outcome;
    outcome.number = row.trial;
    outcome.runId = t.runId;
    outcome.state = t.trial.state;
    outcome.values = t.trial.values;
    outcome.error = t.error;
    if (t.trial.state == search::TrialState::Running) {
      // Its ranks outlive the dead driver: follow them to their end. Gone, it is retried.
      auto attached = m_runner.attach(row.trial, t.runId);
      if (attached) {
        qCInfo(lcPbtLoop) << "segment" << row.segment << "member" << row.member << "run" << t.runId
                          << "reattached";
        emit segmentReattached(row.segment, row.member, t.runId);
        continue;
      }
      outcome.state = search::TrialState::Failed;
      outcome.error =
          QStringLiteral("lost: its PBT driver ended and it could not be reattached: ") +
          QString::fromStdString(attached.message());
      if (auto r = m_store.setRunStatus(t.runId, spec::RunStatus::failed, outcome.error).get(); !r)
        return r;
    }
    endedMeanwhile.push_back(std::move(outcome));
  }
  if (!running) {
    // Every recorded segment ended: the driver died before the next one was decided, or after
    // the last one.
    const int last = m_lineage.segments.back().segment;
    if (last + 1 < m_segments) return advance(last);
    QTimer::singleShot(0, this, [this] {
      if (!m_ended) {
        m_ended = true;
        emit ended();
      }
    });
    return ok();
  }
  // Recorded as if this process had followed them (a failed one is retried there).
  QTimer::singleShot(0, this, [this, outcomes = std::move(endedMeanwhile)] {
    for (const TrialOutcome& outcome : outcomes) onFinished(outcome);
  });
  return ok();
}

void PbtLoop::prepareSegment(const PbtSegment& row) {
  TrialRunner::Segment segment;
  segment.overrides = pbtSegmentOverrides(m_config, row, false);  // the runner applies the values
  segment.resumeFrom = row.fromCheckpoint;
  m_runner.setSegment(row.trial, segment);
}

void PbtLoop::startSegment(const PbtSegment& row) {
  prepareSegment(row);
  emit segmentStarting(row.segment, row.member, row.fromMember, row.params);
  m_scheduler.enqueue(row.trial, row.params);
}

void PbtLoop::onFinished(const TrialOutcome& outcome) {
  const int n = m_config.population;
  PbtSegment* row = m_lineage.at(int(outcome.number / n), int(outcome.number % n));
  if (row == nullptr) return;
  if (outcome.runId) row->runId = outcome.runId;
  const bool complete = outcome.state == search::TrialState::Complete && !outcome.values.empty();
  if (!complete && !outcome.stopped && m_error.empty() && !m_stopping) {
    // A failed segment (a killed rank) runs again as the study retries any trial; paused, once
    // the user resumes.
    if (m_control.control() == StudyControl::pause) {
      qCInfo(lcPbtLoop) << "segment" << row->segment << "member" << row->member
                        << "failed; its retry waits for the resume";
      m_heldRetries.push_back(outcome);
      return;
    }
    auto claimed =
        m_store
            .claimTrial(m_study.id(), m_study.maxRetries(), m_study.space().retry_from_checkpoint)
            .get();
    if (!claimed) return fail(claimed.message());
    if (*claimed) {
      PbtSegment* retried = m_lineage.at(int((*claimed)->number / n), int((*claimed)->number % n));
      if (retried != nullptr) {
        auto reader = m_store.reader();
        auto run = reader ? reader->run((*claimed)->runId)
                          : Result<std::optional<RunRecord>>(reader.error());
        const int attempt = run && *run ? (**run).attempt : 0;
        qCInfo(lcPbtLoop) << "segment" << retried->segment << "member" << retried->member
                          << "runs again, attempt" << attempt;
        emit segmentRetried(retried->segment, retried->member, attempt);
        m_scheduler.enqueue(retried->trial, retried->params, (*claimed)->runId);
        return;
      }
    }
  }
  // Stopped with the study: `stopped`; one segment stopped alone (`study stop-trial`) ends
  // without a result, as a failed one, and the study goes on without it.
  row->state = complete ? kComplete : (outcome.stopped && m_stopping ? kStopped : kFailed);
  if (complete) row->value = outcome.values.front();
  if (auto r = save(); !r) return fail(r.message());
  emit segmentEnded(*row);
  const int segment = row->segment;
  const bool segmentDone = std::none_of(
      m_lineage.segments.begin(), m_lineage.segments.end(),
      [&](const PbtSegment& s) { return s.segment == segment && s.state == kRunning; });
  if (segmentDone && m_error.empty() && !m_stopping && segment + 1 < m_segments) {
    if (m_control.control() == StudyControl::pause) {
      qCInfo(lcPbtLoop).nospace() << "every member finished segment " << segment
                                  << "; the next one waits for the resume";
      m_heldAdvance = segment;
      return;
    }
    if (auto r = advance(segment); !r) return fail(r.message());
    return;
  }
  endIfIdle();
}

void PbtLoop::onControl(StudyControl control) {
  emit controlChanged(control);
  if (m_ended || m_stopping) return;
  switch (control) {
    case StudyControl::pause:
      // The running segments finish their interval (their checkpoints stay); nothing starts.
      m_scheduler.setHeld(true);
      return;
    case StudyControl::run: {
      m_scheduler.setHeld(false);
      std::vector<TrialOutcome> retries;
      retries.swap(m_heldRetries);
      for (const TrialOutcome& outcome : retries) onFinished(outcome);
      if (m_heldAdvance) {
        const int segment = *m_heldAdvance;
        m_heldAdvance.reset();
        if (auto r = advance(segment); !r) return fail(r.message());
      }
      endIfIdle();
      return;
    }
    case StudyControl::stop:
      stopStudy();
      return;
  }
}

void PbtLoop::stopStudy() {
  // SweepControl has told the running segments to stop (TrialRunner::stopAll): each is recorded
  // as it ends (onFinished). What never started ends here.
  m_stopping = true;
  m_heldAdvance.reset();
  std::vector<PbtSegment*> ended;
  for (const Scheduler::Queued& queued : m_scheduler.takeQueued()) {
    const int n = m_config.population;
    PbtSegment* row = m_lineage.at(int(queued.number / n), int(queued.number % n));
    if (row == nullptr) continue;
    row->state = kStopped;
    if (queued.runId) {  // a retry the study had claimed: its run ends as the user asked
      if (auto r = m_store
                       .setRunStatus(*queued.runId, spec::RunStatus::stopped,
                                     QStringLiteral("stopped by the user before it launched"))
                       .get();
          !r)
        qCWarning(lcPbtLoop) << r.message().c_str();
    }
    ended.push_back(row);
  }
  for (const TrialOutcome& outcome : m_heldRetries) {  // failed, their retry never started
    const int n = m_config.population;
    PbtSegment* row = m_lineage.at(int(outcome.number / n), int(outcome.number % n));
    if (row == nullptr) continue;
    row->state = kFailed;
    ended.push_back(row);
  }
  m_heldRetries.clear();
  if (auto r = save(); !r) return fail(r.message());
  for (const PbtSegment* row : ended) emit segmentEnded(*row);
  endIfIdle();
}

void PbtLoop::endIfIdle() {
  if (m_ended || !m_scheduler.idle()) return;
  // Paused with a next segment or a retry to start: it waits for the resume (or a stop).
  if (!m_stopping && m_error.empty() && (m_heldAdvance || !m_heldRetries.empty())) return;
  m_ended = true;
  emit ended();
}

Result<void> PbtLoop::advance(int segment) {
  const int n = m_config.population;
  std::vector<search::TrialParams> params;
  std::vector<std::optional<double>> values;
  for (int m = 0; m < n; ++m) {
    const PbtSegment* row = m_lineage.at(segment, m);
    params.push_back(row->params);
    values.push_back(row->value);
  }
  if (std::none_of(values.begin(), values.end(), [](const auto& v) { return v.has_value(); })) {
    return shardscope::fail("every member failed segment " + std::to_string(segment) +
                            "; see their runs' errors");
  }
  const auto next = search::pbt_decide(m_study.space(), params, values, m_minimize,
                                       m_study.space().seed, segment);
  std::vector<PbtSegment> rows;
  for (int m = 0; m < n; ++m) {
    const PbtSegment& source = *m_lineage.at(segment, next[static_cast<std::size_t>(m)].source);
    auto checkpoint = checkpointOf(source.runId);
    if (!checkpoint) return checkpoint.error();
    if (checkpoint->second != source.endStep) {
      return shardscope::fail(
          "segment " + std::to_string(segment) + " of member " + std::to_string(source.member) +
          " (run " + std::to_string(source.runId) + ") has its newest checkpoint at step " +
          std::to_string(checkpoint->second) + ", not at its end step " +
          std::to_string(source.endStep));
    }
    PbtSegment row;
    row.member = m;
    row.segment = segment + 1;
    row.trial = qint64(segment + 1) * n + m;
    row.startStep = checkpoint->second;
    row.endStep = std::min<qint64>(row.startStep + m_config.interval_steps, m_maxSteps);
    row.fromMember = source.member;
    row.fromRunId = source.runId;
    row.fromCheckpoint = checkpoint->first;
    row.exploited = next[static_cast<std::size_t>(m)].exploited;
    row.params = next[static_cast<std::size_t>(m)].params;
    rows.push_back(row);
  }
  m_lineage.segments.insert(m_lineage.segments.end(), rows.begin(), rows.end());
  if (auto r = save(); !r) return r;
  for (const PbtSegment& row : rows) {
    if (row.exploited) {
      qCInfo(lcPbtLoop) << "segment" << row.segment << "member" << row.member << "exploits member"
                        << row.fromMember << "at step" << row.startStep;
    }
    startSegment(row);
  }
  return ok();
}

Result<std::pair<QString, qint64>> PbtLoop::checkpointOf(qint64 runId) {
  auto reader = m_store.reader();
  if (!reader) return reader.error();
  auto run = reader->run(runId);
  if (!run) return run.error();
  if (!*run) return shardscope::fail("run " + std::to_string(runId) + " is not in the run log");
  auto point = reader->resumePoint(runId, (**run).attempt);
  if (!point) return point.error();
  auto args = RunLifecycle::resumeArguments(*reader, **run, (**run).attempt);
  if (!args) return args.error();
  if (!*point || args->size() != 2) {
    return shardscope::fail("run " + (**run).name.toStdString() +
                            " wrote no sharded checkpoint; PBT needs one at every segment's end "
                            "(train.ckpt_every)");
  }
  return std::pair<QString, qint64>{args->back(), (*point)->step};
}

Result<void> PbtLoop::save() {
  QJsonObject state = m_study.record().state;
  state.insert(QStringLiteral("pbt"), m_lineage.toJson());
  return m_store.setStudyState(m_study.id(), state).get();
}

void PbtLoop::fail(const std::string& error) {
  qCWarning(lcPbtLoop) << "study" << m_study.name() << error.c_str();
  if (m_error.empty()) m_error = error;
  m_runner.stopAll();
  if (m_scheduler.idle() && !m_ended) {
    m_ended = true;
    QTimer::singleShot(0, this, [this] { emit ended(); });
  }
}

Result<search::StudySummary> PbtLoop::finish() {
  if (!m_error.empty()) return shardscope::fail(m_error);
  const StudyStatus status = m_stopping ? StudyStatus::stopped : StudyStatus::complete;
  if (auto r = m_store.setStudyStatus(m_study.id(), status).get(); !r) return r.error();
  return m_study.summary();
}

}  // namespace shardscope::backend
