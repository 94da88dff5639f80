// MainWindow: the dashboard's frame. It owns the run log reader (RunLog, a worker thread) and
// five dockable panels, each with its own controller: builder, runs, plots, compare, hosts. It
// keeps the layout and recent files in QSettings and offers menus, a toolbar and shortcuts.
// Stopping and cloning runs leave as signals: the app wires them to the backend and the builder.
// The builder follows the current run: it shows the experiment that run was started from.
// A Notifier tells of run ends, stalls and sweep ends on the desktop; clicking one selects its run.
#pragma once

#include <QFutureWatcher>
#include <QJsonObject>
#include <QMainWindow>
#include <QStringList>

#include "backend/import/configimport.h"
#include "backend/store/runrecords.h"
#include "spec/result.h"

class QDockWidget;
class QLabel;
class QMenu;
class QTimer;

namespace shardscope::ui {

class BuilderPanel;
class ComparePanel;
class HostsPanel;
class Notifier;
class PlotsPanel;
class SamplesPanel;
class TimelinePanel;
class RunLog;
class RunsPanel;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  /// pollMs: how often the run log file is checked for commits by other processes.
  explicit MainWindow(QWidget* parent = nullptr, int pollMs = 250);
  ~MainWindow() override;

  /// The panel names, in the order of the View menu and the screenshot set.
  static QStringList panelNames();
  /// The widget of panel `name` (one of panelNames()), or nullptr.
  QWidget* panel(const QString& name) const;
  QDockWidget* dock(const QString& name) const;

  /// Opens the run log at `path` (read-only); the panels fill as data arrives.
  void openRunLog(const QString& path);
  /// Opens the experiment file in the builder panel; an error names the file and the field.
  [[nodiscard]] Result<void> openExperiment(const QString& path);
  /// File > Import… without its dialogs: reads `path` as `kind` (backend/import, as
  /// `shardscope-cli import`) on a pool thread, never the GUI thread (a file on a slow disk, or
  /// one made to be slow, must not freeze the window), then opens the experiment in the builder,
  /// unsaved, named next to `path`, and emits importFinished. The report lists every key; when a
  /// key is an error nothing is opened. Returns false (and says so in the status bar) while an
  /// import is still being read.
  bool startImport(backend::ImportKind kind, const QString& path);
  /// True from startImport until its result is in the builder (importFinished).
  bool isImporting() const;
  /// True when every panel has shown the data asked for last, curves included.
  bool isLoaded() const;
  /// The first paint's content is there: the run table is filled and the Compare panel has
  /// drawn the sweep's summaries (history, parallel coordinates); curves may still stream.
  bool isSummaryShown() const;
  /// Runs in the run log as last loaded (-1 before the first load).
  int runCount() const { return m_runCount; }
  /// Selects what a screenshot should show: the best trials of the largest sweep, else the
  /// newest run. Returns a description for index.json.
  QString selectShowcase();

  RunLog& runLog() const { return *m_runLog; }
  RunsPanel* runsPanel() const { return m_runs; }
  PlotsPanel* plotsPanel() const { return m_plots; }
  TimelinePanel* timelinePanel() const { return m_timeline; }
  SamplesPanel* samplesPanel() const { return m_samples; }
  ComparePanel* comparePanel() const { return m_compare; }
  HostsPanel* hostsPanel() const { return m_hosts; }
  BuilderPanel* builderPanel() const { return m_builder; }
  /// Desktop notifications of run ends, stalls and sweep ends (ui/notifier.h).
  Notifier* notifier() const { return m_notifier; }
  /// File > Settings…: the notification settings; saved and applied when accepted.
  void openSettings();
  QStringList recentFiles() const;
  /// The sweep watch (every kSweepWatchMs, and whenever the sweep is read): says in the status
  /// bar, and enables Sweep > Adopt sweep, when the shown sweep's study is running with no
  /// process. A record that looks so is read again first (RunLog::sync): a sweep ends its study,
  /// then exits, and a read made before the end must not call a finished sweep killed.
  void checkSweepProcess();

 signals:
  /// Every panel has loaded its data (emitted after each change of what is shown).
  void loadedChanged();
  void stopRequested(qint64 runId, const QString& runName);
  /// Prune or stop a running trial (RunsPanel::trialRequested).
  void trialRequested(qint64 runId, const QString& runName,
                      shardscope::backend::TrialRequest request);
  /// Resume a stopped or failed run from its newest checkpoint (RunsPanel::resumeRequested).
  void resumeRequested(qint64 runId, const QString& runName);
  /// A new run from run `runId`'s sharded checkpoint of `step` (the Checkpoints dialog's Resume
  /// from here).
  void resumeFromCheckpointRequested(qint64 runId, const QString& runName, qint64 step);
  /// Pause, resume or stop the sweep of study `studyId` (the Sweep menu, on the current run's).
  void sweepControlRequested(qint64 studyId, const QString& name,
                             shardscope::backend::StudyControl control);
  /// The builder's Launch: the saved experiment file to start.
  void launchRequested(const QString& experimentPath);
  /// The builder's Autotune: the saved experiment file to autotune, recorded as study `study`
  /// (its progress is read from the run log; BuilderPanel::autotuneStarted/autotuneFailed take
  /// the start's answer).
  void autotuneRequested(const QString& experimentPath, const QString& study,
                         const QString& objective, double budgetMinutes, int steps, int warmup);
  /// Start again the sweep of study `studyId`, whose process died (Sweep > Adopt sweep).
  void sweepAdoptRequested(qint64 studyId, const QString& name);
  /// A run log was opened (File > Open, a recent file, the first one): what the app's run
  /// control acts on from now.
  void runLogOpened(const QString& path);
  /// An import started by startImport ended: `result` as backend::importConfig gave it, or the
  /// builder's refusal of the experiment; on success the experiment is in the builder.
  void importFinished(const QString& path,
                      const shardscope::Result<shardscope::backend::ImportResult>& result);

 protected:
  void closeEvent(QCloseEvent* event) override;
  /// The first show gives the default layout its proportions (they need the real height).
  void showEvent(QShowEvent* event) override;

 private:
  QDockWidget* addPanel(const QString& name, const QString& title, QWidget* widget,
                        Qt::DockWidgetArea area);
  void buildMenus();
  void rebuildRecentMenu();
  void addRecent(const QString& path);
  void onSelection(const QList<qint64>& ids);
  /// Compare's click on a trial: the Samples view shows the sweep's trials, that one's column
  /// selected.
  void showTrialSamples(qint64 runId);
  /// Opens the experiment of the current run in the builder, unless the builder holds unsaved
  /// edits or a file the user opened after the last selection of theirs.
  void followInBuilder();
  void onExperimentLoaded(qint64 experimentId, const QString& name, const QString& source,
                          const QString& toml);
  /// Selects runs from code (first load, showcase): not the user's choice, so a file the user
  /// opened in the builder stays.
  void selectRunsInCode(const QList<qint64>& ids);
  /// The builder gets run `runId`'s experiment with its trial values applied and no [search]:
  /// one run like that trial, to edit, save and launch.
  void cloneIntoBuilder(qint64 runId, const QJsonObject& params);
  void applyClone();
  void steerCurrentSweep(backend::StudyControl control);
  void updateSweepActions();
  /// The answer to checkSweepProcess's re-read: the sweep is shown as gone when it still is.
  void onSweepSynced(quint64 token);
  void showSweepGone(bool gone);
  void chooseRunLog();
  void chooseServerRunLog();
  void chooseExperiment();
  /// File > Import…: an accelerate, HF Trainer or DeepSpeed config into the builder
  /// (backend/import), with its report.
  void importConfig();
  /// The GUI thread's half of an import: the read result into the builder, and the report box
  /// when the import came from the menu.
  void finishImport();
  void restoreLayout();

  RunLog* m_runLog = nullptr;
  RunsPanel* m_runs = nullptr;
  PlotsPanel* m_plots = nullptr;
  TimelinePanel* m_timeline = nullptr;
  SamplesPanel* m_samples = nullptr;
  ComparePanel* m_compare = nullptr;
  HostsPanel* m_hosts = nullptr;
  BuilderPanel* m_builder = nullptr;
  Notifier* m_notifier = nullptr;
  QMenu* m_recentMenu = nullptr;
  QList<QDockWidget*> m_docks;
  int m_runCount = -1;
  QLabel* m_runCountLabel = nullptr;  // the status bar's permanent "N run(s) in PATH"
  bool m_autoSelected = false;
  bool m_layoutSized = false;     // the default proportions were applied, or a saved layout was
  bool m_selectLaunched = false;  // a Launch waits for its run to show, to select it
  int m_runCountAtLaunch = 0;
  bool m_selectingInCode = false;
  qint64 m_lastCurrent = -1;          // current run as last seen by onSelection
  QList<qint64> m_lastSelection;      // the runs selected as last seen by onSelection
  bool m_samplesFromCompare = false;  // the Samples view shows the trials Compare opened
  bool m_builderChosen = false;       // the user opened a file or template since their last pick
  bool m_loadingRecorded = false;     // the builder's content is being replaced by followInBuilder
  qint64 m_builderWanted = -1;        // experiment asked of the run log for the builder, -1: none
  QJsonObject m_cloneParams;          // trial values to apply once m_builderWanted arrives
  bool m_cloning = false;
  QList<QAction*> m_sweepActions;    // pause, resume, stop: on the current run's sweep
  QAction* m_adoptAction = nullptr;  // start the shown sweep again when its process died
  QLabel* m_sweepState = nullptr;    // "sweep NAME: no process" in the status bar
  QTimer* m_sweepWatch = nullptr;
  quint64 m_sweepSync = 0;          // the token of the last re-read asked for
  bool m_sweepSyncPending = false;  // a re-read is under way
  qint64 m_sweepGone = -1;          // the study seen running with no process on a fresh read
  static constexpr int kSweepWatchMs = 2000;
  struct ImportRead {
    backend::ImportKind kind{};
    QString path;
    Result<backend::ImportResult> result;
  };
  QFutureWatcher<ImportRead>* m_import = nullptr;  // the import being read, off the GUI thread
  bool m_importReport = false;  // show the report box when it ends (File > Import…)
  QString m_importPath;         // the file name of the import being read
  bool m_importing = false;     // from startImport until finishImport has its result
};

}  // namespace shardscope::ui
