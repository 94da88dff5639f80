#include "ui/notifier.h"

#include <QApplication>
#include <QDBusConnection>
#include <QDBusPendingCallWatcher>
#include <QDBusPendingReply>
#include <QDir>
#include <QLoggingCategory>
#include <QSettings>
#include <QSystemTrayIcon>

#include <algorithm>
#include <cmath>
#include <utility>

Q_LOGGING_CATEGORY(lcNotifier, "shardscope.ui.notifier")

namespace shardscope::ui {

namespace {

const QString kService = QStringLiteral("org.freedesktop.Notifications");
const QString kPath = QStringLiteral("/org/freedesktop/Notifications");
const QString kInterface = QStringLiteral("org.freedesktop.Notifications");
const QString kDefaultAction = QStringLiteral("default");

QString statusName(spec::RunStatus status) { return QString::fromUtf8(spec::to_string(status)); }

bool tellsAnEnd(spec::RunStatus status) {
  using S = spec::RunStatus;
  return status == S::complete || status == S::failed || status == S::oom || status == S::stopped;
}

QString number(double v) { return QString::number(v, 'g', 6); }

}  // namespace

NotifySettings NotifySettings::load() {
  QSettings s;
  NotifySettings out;
  out.onEnd = s.value("notify/on_end", out.onEnd).toBool();
  out.onStall = s.value("notify/on_stall", out.onStall).toBool();
  out.onSweepEnd = s.value("notify/on_sweep_end", out.onSweepEnd).toBool();
  const double minutes = s.value("notify/stall_after_min", out.stallAfterMin).toDouble();
  if (minutes > 0) out.stallAfterMin = minutes;
  out.endCommand = s.value("notify/end_command").toString();
  out.stallCommand = s.value("notify/stall_command").toString();
  out.sweepEndCommand = s.value("notify/sweep_end_command").toString();
  return out;
}

void NotifySettings::save() const {
  QSettings s;
  s.setValue("notify/on_end", onEnd);
  s.setValue("notify/on_stall", onStall);
  s.setValue("notify/on_sweep_end", onSweepEnd);
  s.setValue("notify/stall_after_min", stallAfterMin);
  s.setValue("notify/end_command", endCommand);
  s.setValue("notify/stall_command", stallCommand);
  s.setValue("notify/sweep_end_command", sweepEndCommand);
}

Notifier::Notifier(QObject* parent) : QObject(parent) {
  // Any sender: the service may start (or restart) after the dashboard; ids tell ours apart.
  QDBusConnection bus = QDBusConnection::sessionBus();
  bus.connect(QString(), kPath, kInterface, QStringLiteral("ActionInvoked"), this,
              SLOT(onActionInvoked(uint, QString)));
  bus.connect(QString(), kPath, kInterface, QStringLiteral("NotificationClosed"), this,
              SLOT(onNotificationClosed(uint, uint)));
  connect(&m_stallTimer, &QTimer::timeout, this, &Notifier::checkStalls);
  setSettings(NotifySettings{});
}

Notifier::~Notifier() = default;

void Notifier::setSettings(const NotifySettings& settings) {
  m_settings = settings;
  spec::NotifySection commands;
  commands.on_end = settings.endCommand.toStdString();
  commands.on_stall = settings.stallCommand.toStdString();
  commands.on_sweep_end = settings.sweepEndCommand.toStdString();
  m_commands = std::make_unique<backend::NotifyCommands>(
      commands, backend::NotifyCommands::Options{QDir::homePath(), 60'000});
  // Checked a few times per stall period, at most every 10 s.
  const double periodMs = settings.stallAfterMin * 60'000.0 / 4;
  m_stallTimer.start(int(std::clamp(periodMs, 100.0, 10'000.0)));
}

void Notifier::reset() {
  m_runsPrimed = false;
  m_studiesPrimed = false;
  m_status.clear();
  m_progress.clear();
  m_studies.clear();
  m_endedStudies.clear();
  m_runs.clear();
}

void Notifier::onStudies(const QVector<backend::StudyRecord>& studies) {
  for (const backend::StudyRecord& study : studies) {
    if (study.kind != backend::StudyKind::search) continue;
    const auto before = m_studies.constFind(study.id);
    const bool wasRunning = before == m_studies.constEnd()
                                ? m_studiesPrimed  // new since the last read: it ran meanwhile
                                : *before == backend::StudyStatus::running;
    m_studies.insert(study.id, study.status);
    if (wasRunning && study.status != backend::StudyStatus::running) m_endedStudies.append(study);
  }
  m_studiesPrimed = true;
}

void Notifier::onRuns(const QVector<RunSummary>& runs) {
  m_runs = runs;
  for (const RunSummary& run : runs) {
    const backend::RunRecord& r = run.record;
    const auto before = m_status.constFind(r.id);
    const bool told = before != m_status.constEnd() && spec::is_final(*before);
    m_status.insert(r.id, r.status);
    if (m_runsPrimed && !told && tellsAnEnd(r.status) && m_settings.onEnd) {
      QString body = tr("Run %1: %2").arg(r.name, statusName(r.status));
      if (r.objective) body += tr(", objective %1").arg(number(*r.objective));
      if (!r.error.isEmpty()) body += QStringLiteral("\n") + r.error.section('\n', 0, 0);
      notify(Kind::end, r.id, tr("Run %1 %2").arg(r.name, statusName(r.status)), body,
             factsOf(run));
    }
    if (r.status != spec::RunStatus::running) {
      m_progress.remove(r.id);
      continue;
    }
    Progress& p = m_progress[r.id];
    if (p.bytes != run.eventBytes || !run.followed || !p.since.isValid()) {
      p.bytes = run.eventBytes;
      p.since.start();
      p.reported = false;
    }
  }
  m_runsPrimed = true;
  const auto ended = std::exchange(m_endedStudies, {});
  if (m_settings.onSweepEnd) {
    for (const backend::StudyRecord& study : ended) endOfSweep(study);
  }
  checkStalls();
}

void Notifier::checkStalls() {
  if (!m_settings.onStall) return;
  const qint64 afterMs = qint64(std::llround(m_settings.stallAfterMin * 60'000.0));
  for (auto it = m_progress.begin(); it != m_progress.end(); ++it) {
    Progress& p = it.value();
    if (p.reported || !p.since.isValid() || p.since.elapsed() < afterMs) continue;
    const RunSummary* run = runById(it.key());
    if (run == nullptr || !run->followed) continue;
    p.reported = true;
    const double minutes = double(p.since.elapsed()) / 60'000.0;
    backend::NotifyFacts facts = factsOf(*run);
    facts.stalledMin = minutes;
    notify(Kind::stall, it.key(), tr("Run %1 stalled").arg(run->record.name),
           tr("Run %1 wrote no event for %2 min while its ranks run")
               .arg(run->record.name, QString::number(minutes, 'f', 1)),
           facts);
  }
}

// The best complete trial by the study's first objective and direction.
void Notifier::endOfSweep(const backend::StudyRecord& study) {
  const bool maximize = !study.directions.isEmpty() && study.directions.front() == "maximize";
  const RunSummary* best = nullptr;
  double bestValue = 0;
  const RunSummary* newest = nullptr;
  for (const RunSummary& run : std::as_const(m_runs)) {
    if (run.record.studyId != study.id) continue;
    if (newest == nullptr || run.record.createdAt > newest->record.createdAt) newest = &run;
    if (run.record.status != spec::RunStatus::complete) continue;
    std::optional<double> value = run.record.objective;
    if (run.record.objectiveValues && !run.record.objectiveValues->empty())
      value = run.record.objectiveValues->front();
    if (!value || !std::isfinite(*value)) continue;
    if (best == nullptr || (maximize ? *value > bestValue : *value < bestValue)) {
      best = &run;
      bestValue = *value;
    }
  }
  backend::NotifyFacts facts;
  facts.study = study.name;
  facts.sweepStatus = backend::studyStatusName(study.status);
  QString body = tr("Sweep %1 %2").arg(study.name, facts.sweepStatus);
  if (best != nullptr) {
    facts.bestTrial = best->record.trialNumber;
    facts.bestRun = best->record.name;
    facts.bestObjective = bestValue;
    body += tr("; best trial #%1 (%2): %3 = %4")
                .arg(best->record.trialNumber.value_or(-1))
                .arg(best->record.name,
                     study.objectives.isEmpty() ? QStringLiteral("objective")
                                                : study.objectives.front(),
                     number(bestValue));
  } else {
    body += tr("; no trial completed");
  }
  const RunSummary* shown = best != nullptr ? best : newest;
  notify(Kind::sweepEnd, shown != nullptr ? shown->record.id : -1,
         tr("Sweep %1 ended").arg(study.name), body, facts);
}

void Notifier::notify(Kind kind, qint64 runId, const QString& title, const QString& body,
                      const backend::NotifyFacts& facts) {
  qCInfo(lcNotifier, "%s: %s", qPrintable(title), qPrintable(body));
  const backend::NotifyEvent event = kind == Kind::end     ? backend::NotifyEvent::end
                                     : kind == Kind::stall ? backend::NotifyEvent::stall
                                                           : backend::NotifyEvent::sweepEnd;
  m_commands->run(event, facts);
  sendDesktop(runId, title, body);
  emit notified(kind, runId, title, body);
}

// Asynchronous: a slow or missing service never blocks the GUI thread. A call the bus cannot
// deliver (no service, no session bus) goes to the tray instead.
void Notifier::sendDesktop(qint64 runId, const QString& title, const QString& body) {
  QDBusConnection bus = QDBusConnection::sessionBus();
  if (!bus.isConnected()) return sendTray(runId, title, body);
  QDBusMessage call =
      QDBusMessage::createMethodCall(kService, kPath, kInterface, QStringLiteral("Notify"));
  QStringList actions;  // "default": a click on the notification itself
  if (runId > 0) actions << kDefaultAction << tr("Show run");
  call << QStringLiteral("Shardscope") << uint(0) << QStringLiteral("shardscope") << title << body
       << actions << QVariantMap{} << int(-1);
  auto* watcher = new QDBusPendingCallWatcher(bus.asyncCall(call), this);
  connect(watcher, &QDBusPendingCallWatcher::finished, this, [this, watcher, runId, title, body] {
    watcher->deleteLater();
    QDBusPendingReply<uint> reply = *watcher;
    if (reply.isError()) {
      qCInfo(lcNotifier, "no desktop notification service (%s): the tray tells instead",
             qPrintable(reply.error().message()));
      return sendTray(runId, title, body);
    }
    if (runId > 0) m_shown.insert(reply.value(), runId);
  });
}

void Notifier::sendTray(qint64 runId, const QString& title, const QString& body) {
  if (!QSystemTrayIcon::isSystemTrayAvailable()) return;
  if (m_tray == nullptr) {
    m_tray = new QSystemTrayIcon(qApp->windowIcon(), this);
    m_tray->setToolTip(QStringLiteral("Shardscope"));
    connect(m_tray, &QSystemTrayIcon::messageClicked, this, [this] {
      if (m_trayRun > 0) emit runActivated(m_trayRun);
    });
    m_tray->show();
  }
  m_trayRun = runId;
  m_tray->showMessage(title, body);
}

void Notifier::onActionInvoked(uint id, const QString& key) {
  const auto it = m_shown.constFind(id);
  if (it == m_shown.constEnd() || key != kDefaultAction) return;
  emit runActivated(*it);
}

void Notifier::onNotificationClosed(uint id, uint /*reason*/) { m_shown.remove(id); }

const RunSummary* Notifier::runById(qint64 runId) const {
  for (const RunSummary& run : m_runs) {
    if (run.record.id == runId) return &run;
  }
  return nullptr;
}

backend::NotifyFacts Notifier::factsOf(const RunSummary& run) {
  backend::NotifyFacts facts;
  facts.runId = run.record.id;
  facts.runName = run.record.name;
  facts.status = statusName(run.record.status);
  facts.error = run.record.error;
  facts.runDir = run.record.runDir;
  facts.objective = run.record.objective;
  return facts;
}

}  // namespace shardscope::ui
