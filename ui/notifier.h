// Notifier: tells the user, outside the window, what became of their runs while they looked
// elsewhere: a run ended (complete, failed, oom, stopped), a running run stalled (its followed
// ranks wrote no event for N minutes), a sweep ended (with its best trial). It reads what the run
// log worker already sends (RunLog::runsLoaded, studiesLoaded), so a run or sweep started from
// the CLI is told about too. A desktop notification goes through the freedesktop notification
// service (org.freedesktop.Notifications on the session bus); where no such service answers, the
// system tray's message, when there is a tray. Clicking one (the service's "default" action, or
// the tray message) emits runActivated. The dashboard's settings switch each kind off and may
// add a command per kind (backend/notifycommand.h), run from here.
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QString>
#include <QTimer>
#include <QVector>

#include <memory>

#include "backend/notifycommand.h"
#include "backend/store/runrecords.h"
#include "ui/data/runlogtypes.h"

class QSystemTrayIcon;

namespace shardscope::ui {

/// What the dashboard notifies about, kept in QSettings under "notify/".
struct NotifySettings {
  bool onEnd = true;          ///< a run ended: complete, failed, oom or stopped
  bool onStall = true;        ///< a running run stalled
  bool onSweepEnd = true;     ///< a sweep ended
  double stallAfterMin = 30;  ///< minutes without an event, ranks alive, that make a stall (> 0)
  QString endCommand;         ///< run at a run's end (/bin/sh -c, facts in SHARDSCOPE_*); "": none
  QString stallCommand;
  QString sweepEndCommand;

  static NotifySettings load();
  void save() const;
  bool operator==(const NotifySettings&) const = default;
};

class Notifier : public QObject {
  Q_OBJECT

 public:
  enum class Kind { end, stall, sweepEnd };
  Q_ENUM(Kind)

  explicit Notifier(QObject* parent = nullptr);
  ~Notifier() override;

  void setSettings(const NotifySettings& settings);
  const NotifySettings& settings() const { return m_settings; }
  /// Another run log: what it holds when first read is history, not news.
  void reset();

  /// The run table's rows as the worker read them: run ends, and progress for stalls.
  void onRuns(const QVector<shardscope::ui::RunSummary>& runs);
  /// The studies as the worker read them (just before the runs): sweep ends.
  void onStudies(const QVector<shardscope::backend::StudyRecord>& studies);
  /// Tells a stall of each followed running run whose events have not grown for
  /// stallAfterMin (also on a timer of its own).
  void checkStalls();

 signals:
  /// The user clicked a notification about run `runId`.
  void runActivated(qint64 runId);
  /// A notification went out (desktop or tray) about `runId` (-1: none), for the status bar.
  void notified(shardscope::ui::Notifier::Kind kind, qint64 runId, const QString& title,
                const QString& body);

 private slots:
  void onActionInvoked(uint id, const QString& key);
  void onNotificationClosed(uint id, uint reason);

 private:
  struct Progress {
    qint64 bytes = -1;
    QElapsedTimer since;  // since bytes last changed (or its follower came back)
    bool reported = false;
  };

  void notify(Kind kind, qint64 runId, const QString& title, const QString& body,
              const backend::NotifyFacts& facts);
  void sendDesktop(qint64 runId, const QString& title, const QString& body);
  void sendTray(qint64 runId, const QString& title, const QString& body);
  void endOfSweep(const backend::StudyRecord& study);
  const RunSummary* runById(qint64 runId) const;
  static backend::NotifyFacts factsOf(const RunSummary& run);

  NotifySettings m_settings;
  std::unique_ptr<backend::NotifyCommands> m_commands;
  bool m_runsPrimed = false;     // the first list of runs was recorded, not told
  bool m_studiesPrimed = false;  // the same for studies
  QHash<qint64, spec::RunStatus> m_status;
  QHash<qint64, Progress> m_progress;
  QHash<qint64, backend::StudyStatus> m_studies;
  QVector<backend::StudyRecord> m_endedStudies;  // told once the runs of the same read arrive
  QVector<RunSummary> m_runs;
  QHash<uint, qint64> m_shown;  // desktop notification id -> its run
  QSystemTrayIcon* m_tray = nullptr;
  qint64 m_trayRun = -1;  // the run of the tray's last message
  QTimer m_stallTimer;
};

}  // namespace shardscope::ui
