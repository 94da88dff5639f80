// The commands of an experiment's [notify] section (and of the dashboard's settings): what the
// process that follows runs does when a run ends, a run stalls or a sweep ends. A command line
// is the user's own and runs as written through /bin/sh -c; what happened reaches it only in
// SHARDSCOPE_* environment variables (docs/config.md, [notify]), never pasted into the line, so
// a run name is never shell text. A command that cannot start, exits non-zero or runs past its
// time is logged and reported by NotifyCommands::ran; it never stops a run or a sweep.
#pragma once

#include <QObject>
#include <QProcessEnvironment>
#include <QString>

#include <list>
#include <memory>
#include <optional>

#include "spec/experiment.h"

class QProcess;

namespace shardscope::backend {

enum class NotifyEvent { end, stall, sweepEnd };
/// "end", "stall", "sweep_end": SHARDSCOPE_EVENT's value.
QString notifyEventName(NotifyEvent event);
/// "notify.on_end", "notify.on_stall", "notify.on_sweep_end": the field a message names.
QString notifyFieldName(NotifyEvent event);

/// What a command is told; empty fields are passed as empty variables.
struct NotifyFacts {
  qint64 runId = 0;
  QString runName;
  QString status;  ///< a run status name (spec/status.h); "running" for a stall
  QString error;
  QString runDir;
  std::optional<double> objective;
  double stalledMin = 0;  ///< a stall: minutes without an event
  // A sweep's end.
  QString study;
  QString sweepStatus;  ///< "complete" or "stopped"
  std::optional<qint64> bestTrial;
  QString bestRun;
  std::optional<double> bestObjective;
};

/// `base` with the SHARDSCOPE_* variables of `facts` for `event` set.
QProcessEnvironment notifyEnvironment(NotifyEvent event, const NotifyFacts& facts,
                                      QProcessEnvironment base);

class NotifyCommands : public QObject {
  Q_OBJECT
 public:
  struct Options {
    QString workDir;         ///< where commands run ("": this process's folder)
    int timeoutMs = 60'000;  ///< a command running longer is killed (and reported)
  };

  NotifyCommands(spec::NotifySection section, Options options, QObject* parent = nullptr);
  ~NotifyCommands() override;

  const spec::NotifySection& section() const { return m_section; }
  /// The command line for `event` ("" when none is set).
  QString commandFor(NotifyEvent event) const;
  /// Starts `event`'s command, if one is set, and returns at once; false when none is set.
  bool run(NotifyEvent event, const NotifyFacts& facts);
  /// Commands started and not yet ended.
  int running() const { return static_cast<int>(m_running.size()); }
  /// Waits for every started command, killing those past their time (a process about to exit).
  void waitForAll();

 signals:
  /// A command ended: ok, or what went wrong (exit status, last output), also logged.
  void ran(shardscope::backend::NotifyEvent event, bool ok, const QString& message);

 private:
  struct Running;
  void onEnded(Running* command, bool ok, const QString& message);

  spec::NotifySection m_section;
  Options m_options;
  std::list<std::unique_ptr<Running>> m_running;
};

}  // namespace shardscope::backend
