#include "backend/notifycommand.h"

#include <QDeadlineTimer>
#include <QLocale>
#include <QLoggingCategory>
#include <QProcess>
#include <QTimer>

#include <algorithm>

Q_LOGGING_CATEGORY(lcNotify, "shardscope.notify")

namespace shardscope::backend {

namespace {

constexpr qsizetype kOutputKept = 2000;  // bytes of a command's output quoted when it fails

QString number(std::optional<double> v) {
  return v ? QString::number(*v, 'g', QLocale::FloatingPointShortest) : QString();
}

}  // namespace

QString notifyEventName(NotifyEvent event) {
  switch (event) {
    case NotifyEvent::end:
      return QStringLiteral("end");
    case NotifyEvent::stall:
      return QStringLiteral("stall");
    case NotifyEvent::sweepEnd:
      return QStringLiteral("sweep_end");
  }
  return {};
}

QString notifyFieldName(NotifyEvent event) {
  switch (event) {
    case NotifyEvent::end:
      return QStringLiteral("notify.on_end");
    case NotifyEvent::stall:
      return QStringLiteral("notify.on_stall");
    case NotifyEvent::sweepEnd:
      return QStringLiteral("notify.on_sweep_end");
  }
  return {};
}

QProcessEnvironment notifyEnvironment(NotifyEvent event, const NotifyFacts& facts,
                                      QProcessEnvironment base) {
  base.insert(QStringLiteral("SHARDSCOPE_EVENT"), notifyEventName(event));
  base.insert(QStringLiteral("SHARDSCOPE_RUN_ID"),
              facts.runId > 0 ? QString::number(facts.runId) : QString());
  base.insert(QStringLiteral("SHARDSCOPE_RUN_NAME"), facts.runName);
  base.insert(QStringLiteral("SHARDSCOPE_RUN_STATUS"), facts.status);
  base.insert(QStringLiteral("SHARDSCOPE_RUN_ERROR"), facts.error);
  base.insert(QStringLiteral("SHARDSCOPE_RUN_DIR"), facts.runDir);
  base.insert(QStringLiteral("SHARDSCOPE_OBJECTIVE"), number(facts.objective));
  base.insert(QStringLiteral("SHARDSCOPE_STALLED_MIN"),
              event == NotifyEvent::stall ? QString::number(facts.stalledMin, 'g', 4) : QString());
  base.insert(QStringLiteral("SHARDSCOPE_STUDY"), facts.study);
  base.insert(QStringLiteral("SHARDSCOPE_SWEEP_STATUS"), facts.sweepStatus);
  base.insert(QStringLiteral("SHARDSCOPE_BEST_TRIAL"),
              facts.bestTrial ? QString::number(*facts.bestTrial) : QString());
  base.insert(QStringLiteral("SHARDSCOPE_BEST_RUN"), facts.bestRun);
  base.insert(QStringLiteral("SHARDSCOPE_BEST_OBJECTIVE"), number(facts.bestObjective));
  return base;
}

struct NotifyCommands::Running {
  NotifyEvent event = NotifyEvent::end;
  QString command;
  std::unique_ptr<QProcess> process;
  QTimer deadline;
  QByteArray output;  // the last kOutputKept bytes of stdout and stderr together
  bool timedOut = false;
  bool ended = false;
};

NotifyCommands::NotifyCommands(spec::NotifySection section, Options options, QObject* parent)
    : QObject(parent), m_section(std::move(section)), m_options(std::move(options)) {}

NotifyCommands::~NotifyCommands() {
  // Commands still running are left to finish on their own: a notification is not worth
  // killing, and QProcess would kill it on destruction.
  for (auto& command : m_running) {
    command->process->disconnect(this);
    command->process->setParent(nullptr);
    if (command->process->state() != QProcess::NotRunning)
      (void)command->process.release();  // not waited for: it ends as an orphan
  }
}

QString NotifyCommands::commandFor(NotifyEvent event) const {
  switch (event) {
    case NotifyEvent::end:
      return QString::fromStdString(m_section.on_end);
    case NotifyEvent::stall:
      return QString::fromStdString(m_section.on_stall);
    case NotifyEvent::sweepEnd:
      return QString::fromStdString(m_section.on_sweep_end);
  }
  return {};
}

bool NotifyCommands::run(NotifyEvent event, const NotifyFacts& facts) {
  const QString line = commandFor(event).trimmed();
  if (line.isEmpty()) return false;
  auto command = std::make_unique<Running>();
  Running* raw = command.get();
  raw->event = event;
  raw->command = line;
  raw->process = std::make_unique<QProcess>();
  QProcess& process = *raw->process;
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.setStandardInputFile(QProcess::nullDevice());
  process.setProcessEnvironment(
      notifyEnvironment(event, facts, QProcessEnvironment::systemEnvironment()));
  if (!m_options.workDir.isEmpty()) process.setWorkingDirectory(m_options.workDir);
  connect(&process, &QProcess::readyRead, this, [raw] {
    raw->output += raw->process->readAll();
    if (raw->output.size() > kOutputKept) raw->output = raw->output.right(kOutputKept);
  });
  connect(&process, &QProcess::finished, this, [this, raw](int code, QProcess::ExitStatus status) {
    raw->output += raw->process->readAll();
    if (raw->timedOut) {
      onEnded(raw, false,
              QStringLiteral("ran over %1 s and was killed")
                  .arg(QString::number(m_options.timeoutMs / 1000.0)));
    } else if (status == QProcess::CrashExit) {
      onEnded(raw, false, QStringLiteral("was killed by a signal"));
    } else if (code != 0) {
      onEnded(raw, false, QStringLiteral("exited with status %1").arg(code));
    } else {
      onEnded(raw, true, {});
    }
  });
  connect(&process, &QProcess::errorOccurred, this, [this, raw](QProcess::ProcessError error) {
    if (error == QProcess::FailedToStart)
      onEnded(raw, false, QStringLiteral("could not start: ") + raw->process->errorString());
  });
  raw->deadline.setSingleShot(true);
  connect(&raw->deadline, &QTimer::timeout, this, [raw] {
    raw->timedOut = true;
    raw->process->kill();
  });
  m_running.push_back(std::move(command));
  // `sh -c LINE NAME`: the line is the user's own; $0 names the hook in sh's own messages.
  process.start(
      QStringLiteral("/bin/sh"),
      {QStringLiteral("-c"), line, QStringLiteral("shardscope-") + notifyEventName(event)});
  if (!raw->ended) raw->deadline.start(m_options.timeoutMs);
  return true;
}

void NotifyCommands::onEnded(Running* command, bool ok, const QString& message) {
  if (command->ended) return;
  command->ended = true;
  command->deadline.stop();
  QString text;
  if (!ok) {
    text = QStringLiteral("%1 `%2` %3")
               .arg(notifyFieldName(command->event), command->command, message);
    const QString output = QString::fromUtf8(command->output).trimmed();
    if (!output.isEmpty()) text += QStringLiteral("; its last output:\n") + output;
    qCWarning(lcNotify, "%s", qPrintable(text));
  }
  emit ran(command->event, ok, text);
  // Deleted from the event loop: this runs inside the process's own signal.
  QTimer::singleShot(0, this, [this, command] {
    auto it = std::find_if(m_running.begin(), m_running.end(),
                           [command](const auto& c) { return c.get() == command; });
    if (it != m_running.end()) m_running.erase(it);
  });
}

void NotifyCommands::waitForAll() {
  for (auto& command : m_running) {
    if (command->ended) continue;
    QProcess& process = *command->process;
    const int left = command->deadline.isActive() ? command->deadline.remainingTime() : 0;
    if (!process.waitForFinished(std::max(1, left))) {
      command->timedOut = true;
      process.kill();
      process.waitForFinished(5000);
    }
  }
}

}  // namespace shardscope::backend
