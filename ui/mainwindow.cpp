#include "ui/mainwindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QMenuBar>
#include <QMessageBox>
#include <QPromise>
#include <QSettings>
#include <QStatusBar>
#include <QThreadPool>
#include <QTimer>
#include <QToolBar>

#include <algorithm>
#include <utility>

#include "backend/import/configimport.h"
#include "backend/store/db.h"
#include "ui/builder/buildercontroller.h"
#include "ui/builder/builderpanel.h"
#include "ui/compare/comparepanel.h"
#include "ui/data/runlog.h"
#include "ui/data/sweepsource.h"
#include "ui/hosts/hostspanel.h"
#include "ui/notifier.h"
#include "ui/plots/plotspanel.h"
#include "ui/runs/runspanel.h"
#include "ui/runs/runtablemodel.h"
#include "ui/samples/samplespanel.h"
#include "ui/settingsdialog.h"
#include "ui/timeline/timelinepanel.h"

Q_LOGGING_CATEGORY(lcMainWindow, "shardscope.ui.mainwindow")

namespace shardscope::ui {

namespace {
constexpr int kMaxRecent = 8;
const char* const kRecentKey = "recentRunLogs";
const char* const kServerUrlKey = "runLog/serverUrl";  // the last PostgreSQL URL opened
}  // namespace

MainWindow::MainWindow(QWidget* parent, int pollMs)
    : QMainWindow(parent), m_runLog(new RunLog(pollMs, this)) {
  setWindowTitle(QStringLiteral("Shardscope"));
  setObjectName(QStringLiteral("MainWindow"));
  setDockNestingEnabled(true);
  m_runs = new RunsPanel(*m_runLog, this);
  m_plots = new PlotsPanel(*m_runLog, this);
  m_compare = new ComparePanel(*m_runLog, this);
  m_timeline = new TimelinePanel(*m_runLog, this);
  m_samples = new SamplesPanel(*m_runLog, this);
  m_hosts = new HostsPanel(*m_runLog, this);
  m_builder = new BuilderPanel(this);

  // The runs table (and the hosts) above, in the smaller part; below, in about two thirds of
  // the height, the big panels: plots, Compare (eight plots and a table), the Timeline and the
  // Builder (a form, the memory chart). The Builder once shared the top with the runs: its minimum
  // height held the top at half the window, so Compare was cramped at 1600x1000 and the Builder
  // short.
  QDockWidget* runs = addPanel("runs", tr("Runs"), m_runs, Qt::TopDockWidgetArea);
  QDockWidget* hosts = addPanel("hosts", tr("Hosts"), m_hosts, Qt::TopDockWidgetArea);
  tabifyDockWidget(runs, hosts);
  // Each tabbed at once: three wide panels side by side, even for a moment, widened the window
  // past the screen.
  QDockWidget* plots = addPanel("plots", tr("Plots"), m_plots, Qt::BottomDockWidgetArea);
  QDockWidget* compare = addPanel("compare", tr("Compare"), m_compare, Qt::BottomDockWidgetArea);
  tabifyDockWidget(plots, compare);
  QDockWidget* timeline =
      addPanel("timeline", tr("Timeline"), m_timeline, Qt::BottomDockWidgetArea);
  tabifyDockWidget(plots, timeline);
  QDockWidget* samples = addPanel("samples", tr("Samples"), m_samples, Qt::BottomDockWidgetArea);
  tabifyDockWidget(plots, samples);
  QDockWidget* builder = addPanel("builder", tr("Builder"), m_builder, Qt::BottomDockWidgetArea);
  tabifyDockWidget(plots, builder);
  runs->raise();
  plots->raise();

  m_import = new QFutureWatcher<ImportRead>(this);
  connect(m_import, &QFutureWatcher<ImportRead>::finished, this, &MainWindow::finishImport);
  buildMenus();
  m_runCountLabel = new QLabel(tr("No run log opened yet"), this);
  m_runCountLabel->setObjectName(QStringLiteral("runCount"));
  statusBar()->addPermanentWidget(m_runs->diskTotal());
  statusBar()->addPermanentWidget(m_runCountLabel);
  resize(1400, 900);
  restoreLayout();

  connect(m_runs, &RunsPanel::selectionChanged, this, &MainWindow::onSelection);
  connect(m_compare, &ComparePanel::trialActivated, this, &MainWindow::showTrialSamples);
  connect(m_runs, &RunsPanel::stopRequested, this, &MainWindow::stopRequested);
  connect(m_runs, &RunsPanel::cloneRequested, this, &MainWindow::cloneIntoBuilder);
  connect(m_runs, &RunsPanel::trialRequested, this, &MainWindow::trialRequested);
  connect(m_runs, &RunsPanel::resumeRequested, this, &MainWindow::resumeRequested);
  // A group of runs opens in Compare as a sweep does (its runs, of any studies).
  connect(m_runs, &RunsPanel::compareGroupRequested, this, [this, compare](qint64 groupId) {
    m_compare->showSweep(groupSweepId(groupId));
    compare->raise();
  });
  connect(m_runs, &RunsPanel::resumeFromCheckpointRequested, this,
          &MainWindow::resumeFromCheckpointRequested);
  connect(m_runs, &RunsPanel::samplesAtStepRequested, this, [this](qint64 runId, qint64 step) {
    selectRunsInCode({runId});
    m_samplesFromCompare = false;
    m_samples->showStep(runId, step);
    if (QDockWidget* d = dock(QStringLiteral("samples"))) d->raise();
  });
  connect(m_runs, &RunsPanel::message, this,
          [this](const QString& text) { statusBar()->showMessage(text, 8000); });
  connect(m_builder->controller(), &BuilderController::launchRequested, this,
          [this, runs, plots](const QString& path) {
            // Say what is starting and bring the runs to the front; the run is selected (so
            // the plots show it) once the run log has it.
            statusBar()->showMessage(tr("Launching %1 ...").arg(path), 15000);
            runs->raise();
            plots->raise();  // in the Builder's place: the new run's curves
            m_selectLaunched = true;
            m_runCountAtLaunch = m_runCount;
            emit launchRequested(path);
          });
  connect(m_builder->controller(), &BuilderController::launchFailed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  // The builder's autotune: started by the app, followed through the run log, stopped as a
  // sweep is (the study's control).
  connect(m_builder, &BuilderPanel::autotuneRequested, this,
          [this](const QString& path, const QString& study, const QString& objective,
                 double minutes, int steps, int warmup) {
            m_runLog->watchAutotune(study);
            emit autotuneRequested(path, study, objective, minutes, steps, warmup);
          });
  connect(m_runLog, &RunLog::autotuneLoaded, m_builder, &BuilderPanel::showAutotune);
  connect(m_runLog, &RunLog::calibrationsLoaded, m_builder, &BuilderPanel::showCalibrations);
  connect(m_builder, &BuilderPanel::autotuneStopRequested, this,
          [this](qint64 studyId, const QString& study) {
            emit sweepControlRequested(studyId, study, backend::StudyControl::stop);
          });
  m_notifier = new Notifier(this);
  m_notifier->setSettings(NotifySettings::load());
  connect(m_runLog, &RunLog::studiesLoaded, m_notifier, &Notifier::onStudies);
  connect(m_runLog, &RunLog::runsLoaded, m_notifier, &Notifier::onRuns);
  connect(m_notifier, &Notifier::notified, this,
          [this](Notifier::Kind, qint64, const QString& title, const QString& body) {
            statusBar()->showMessage(title + QStringLiteral(": ") + body.section('\n', 0, 0),
                                     15000);
          });
  // A click on a notification: the run, selected as the user would, in a window in front.
  connect(m_notifier, &Notifier::runActivated, this, [this, runs](qint64 runId) {
    m_runs->selectRuns({runId});
    runs->raise();
    showNormal();
    raise();
    activateWindow();
  });
  connect(m_runLog, &RunLog::runsLoaded, this, [this](const QVector<RunSummary>& list) {
    m_runCount = static_cast<int>(list.size());
    // A permanent label: a message (a launch, a stop) stays readable while the runs reload.
    m_runCountLabel->setText(
        tr("%n run(s) in %1", nullptr, m_runCount).arg(backend::displaySpec(m_runLog->path())));
    if (statusBar()->currentMessage().startsWith(tr("Reading "))) statusBar()->clearMessage();
    // First load: show the newest run, so the plots are never empty when there is data.
    if (!m_autoSelected && !list.isEmpty() && m_runs->selectedRunIds().isEmpty()) {
      m_autoSelected = true;
      selectRunsInCode({list.first().record.id});
    } else if (m_selectLaunched && m_runCount > m_runCountAtLaunch && !list.isEmpty()) {
      m_selectLaunched = false;  // the newest run: the one the launch recorded
      selectRunsInCode({list.first().record.id});
    }
    emit loadedChanged();
  });
  connect(m_runLog, &RunLog::experimentLoaded, this, &MainWindow::onExperimentLoaded);
  // Any other replacement of the builder's experiment (a file, a template) is the user's choice.
  connect(m_builder->controller(), &BuilderController::fieldChanged, this,
          [this](const QString& path) {
            if (path.isEmpty() && !m_loadingRecorded) m_builderChosen = true;
          });
  connect(m_runLog, &RunLog::failed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  connect(m_runLog, &RunLog::opened, this, [this](bool ok, const QString& message) {
    if (!ok) statusBar()->showMessage(message);
  });
  for (auto* source : {static_cast<QObject*>(m_plots), static_cast<QObject*>(m_compare),
                       static_cast<QObject*>(m_timeline), static_cast<QObject*>(m_samples),
                       static_cast<QObject*>(m_hosts)}) {
    connect(source, SIGNAL(loaded()), this, SIGNAL(loadedChanged()));
  }
  connect(m_compare, &ComparePanel::summaryDrawn, this, &MainWindow::loadedChanged);
}

MainWindow::~MainWindow() = default;

QStringList MainWindow::panelNames() {
  return {QStringLiteral("builder"), QStringLiteral("runs"),     QStringLiteral("plots"),
          QStringLiteral("compare"), QStringLiteral("timeline"), QStringLiteral("samples"),
          QStringLiteral("hosts")};
}

QDockWidget* MainWindow::addPanel(const QString& name, const QString& title, QWidget* widget,
                                  Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(name);  // saveState() keys the layout by it
  widget->setObjectName(name + QStringLiteral("Panel"));
  dock->setWidget(widget);
  addDockWidget(area, dock);
  m_docks.append(dock);
  return dock;
}

QDockWidget* MainWindow::dock(const QString& name) const {
  const auto it = std::find_if(m_docks.begin(), m_docks.end(),
                               [&](const QDockWidget* d) { return d->objectName() == name; });
  return it == m_docks.end() ? nullptr : *it;
}

QWidget* MainWindow::panel(const QString& name) const {
  QDockWidget* d = dock(name);
  return d == nullptr ? nullptr : d->widget();
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open run log…"), this, &MainWindow::chooseRunLog);
  open->setShortcut(QKeySequence::Open);
  // A team's run log on a PostgreSQL server; the last URL is kept in the settings.
  file->addAction(tr("Open run log on a &server…"), this, &MainWindow::chooseServerRunLog);
  QAction* openExp = file->addAction(tr("Open &experiment…"), this, &MainWindow::chooseExperiment);
  openExp->setShortcut(QKeySequence(tr("Ctrl+Shift+O")));
  file->addAction(tr("&Import…"), this, &MainWindow::importConfig);
  m_recentMenu = file->addMenu(tr("Open &recent"));
  rebuildRecentMenu();
  file->addSeparator();
  QAction* settings = file->addAction(tr("&Settings…"), this, &MainWindow::openSettings);
  settings->setShortcut(QKeySequence::Preferences);
  settings->setObjectName(QStringLiteral("settingsAction"));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  int key = 1;
  for (QDockWidget* d : std::as_const(m_docks)) {
    QAction* toggle = d->toggleViewAction();
    toggle->setShortcut(QKeySequence(QStringLiteral("Alt+%1").arg(key++)));
    view->addAction(toggle);
  }
  view->addSeparator();
  QAction* refresh = view->addAction(tr("&Refresh"), m_runLog, &RunLog::refresh);
  refresh->setShortcut(QKeySequence::Refresh);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  m_runs->stopAction()->setShortcut(QKeySequence(tr("Ctrl+.")));
  m_runs->cloneAction()->setShortcut(QKeySequence(tr("Ctrl+D")));
  run->addAction(m_runs->stopAction());
  run->addAction(m_runs->cloneAction());
  run->addAction(m_runs->checkpointsAction());
  QAction* filter = run->addAction(tr("&Filter runs"), this, [this] {
    dock(QStringLiteral("runs"))->raise();
    m_runs->filterEdit()->setFocus();
  });
  filter->setShortcut(QKeySequence::Find);
  m_runs->pruneAction()->setShortcut(QKeySequence(tr("Ctrl+Shift+X")));
  run->insertAction(m_runs->cloneAction(), m_runs->pruneAction());
  m_runs->resumeAction()->setShortcut(QKeySequence(tr("Ctrl+Shift+R")));
  run->insertAction(m_runs->cloneAction(), m_runs->resumeAction());

  // The sweep of the current run, steered through the run log (any sweep: GUI or CLI started).
  QMenu* sweep = menuBar()->addMenu(tr("&Sweep"));
  const struct {
    const char* text;
    const char* keys;
    backend::StudyControl control;
  } steering[] = {{"&Pause sweep", "Ctrl+Alt+P", backend::StudyControl::pause},
                  {"&Resume sweep", "Ctrl+Alt+R", backend::StudyControl::run},
                  {"&Stop sweep", "Ctrl+Alt+.", backend::StudyControl::stop}};
  for (const auto& s : steering) {
    QAction* action =
        sweep->addAction(tr(s.text), this, [this, c = s.control] { steerCurrentSweep(c); });
    action->setShortcut(QKeySequence(tr(s.keys)));
    action->setObjectName(QStringLiteral("sweep-%1").arg(backend::studyControlName(s.control)));
    m_sweepActions.append(action);
  }
  sweep->addSeparator();
  m_adoptAction = sweep->addAction(tr("&Adopt sweep"), this, [this] {
    const SweepStudy& study = m_compare->sweep().study;
    if (!sweepProcessGone(study)) {
      statusBar()->showMessage(tr("The shown sweep has a live process: nothing to adopt"), 8000);
      return;
    }
    emit sweepAdoptRequested(study.studyId, study.name);
  });
  m_adoptAction->setShortcut(QKeySequence(tr("Ctrl+Alt+A")));
  m_adoptAction->setObjectName(QStringLiteral("sweep-adopt"));
  m_adoptAction->setToolTip(
      tr("Start again the sweep whose process died; it reattaches the trials left running"));
  m_sweepState = new QLabel(this);
  m_sweepState->setObjectName(QStringLiteral("sweepState"));
  statusBar()->addPermanentWidget(m_sweepState);
  m_sweepWatch = new QTimer(this);
  m_sweepWatch->setInterval(kSweepWatchMs);
  connect(m_sweepWatch, &QTimer::timeout, this, &MainWindow::checkSweepProcess);
  m_sweepWatch->start();
  connect(m_runLog, &RunLog::sweepLoaded, this, &MainWindow::checkSweepProcess);
  connect(m_runLog, &RunLog::synced, this, &MainWindow::onSweepSynced);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About Shardscope"), this, [this] {
    QMessageBox::about(this, tr("About Shardscope"),
                       tr("Shardscope %1: a dashboard for sharded fine-tuning runs and sweeps.")
                           .arg(QApplication::applicationVersion()));
  });

  QToolBar* bar = addToolBar(tr("Main"));
  bar->setObjectName(QStringLiteral("mainToolBar"));
  bar->addAction(open);
  bar->addAction(refresh);
  bar->addSeparator();
  bar->addAction(m_runs->stopAction());
  bar->addAction(m_runs->pruneAction());
  bar->addAction(m_runs->resumeAction());
  bar->addAction(m_runs->cloneAction());
  bar->addSeparator();
  for (QAction* action : std::as_const(m_sweepActions)) bar->addAction(action);
  bar->addAction(m_adoptAction);
  updateSweepActions();
  checkSweepProcess();
}

void MainWindow::checkSweepProcess() {
  updateSweepActions();
  const SweepStudy& study = m_compare->sweep().study;
  if (!sweepProcessGone(study)) {
    m_sweepGone = -1;
    showSweepGone(false);
    return;
  }
  if (m_sweepGone == study.studyId) return;  // a fresh read said so already
  // The record may predate the process's end: a sweep marks its study ended, then exits, and
  // the poll that delivers the end may not have come yet. Once before, a finished sweep was
  // called killed here for a moment. Read the run log again before saying so.
  if (m_sweepSyncPending) return;
  m_sweepSyncPending = true;
  m_runLog->sync(++m_sweepSync);
}

void MainWindow::onSweepSynced(quint64 token) {
  if (token != m_sweepSync) return;
  m_sweepSyncPending = false;
  // Read after the process was found dead: the study as it ended, or still running with none.
  const SweepStudy& study = m_compare->sweep().study;
  const bool gone = sweepProcessGone(study);
  m_sweepGone = gone ? study.studyId : -1;
  showSweepGone(gone);
}

void MainWindow::showSweepGone(bool gone) {
  const SweepStudy& study = m_compare->sweep().study;
  m_adoptAction->setEnabled(gone);
  const QString text =
      gone ? tr("Sweep %1: no process runs it (killed or crashed); Sweep > Adopt sweep goes on")
                 .arg(study.name)
           : QString();
  if (text != m_sweepState->text()) {
    m_sweepState->setText(text);
    m_sweepState->setVisible(gone);
    if (gone) qCInfo(lcMainWindow, "%s", qPrintable(text));
  }
}

void MainWindow::updateSweepActions() {
  const RunSummary* run = m_runs->model()->runById(m_runs->currentRunId());
  const bool trial = run != nullptr && run->record.studyId.has_value();
  // A study that has ended takes no steering (its sweep is over); one not loaded yet may.
  const SweepStudy& study = m_compare->sweep().study;
  const bool ended = trial && study.studyId == *run->record.studyId && !study.running;
  for (QAction* action : std::as_const(m_sweepActions)) action->setEnabled(trial && !ended);
}

void MainWindow::steerCurrentSweep(backend::StudyControl control) {
  const RunSummary* run = m_runs->model()->runById(m_runs->currentRunId());
  if (run == nullptr || !run->record.studyId) {
    statusBar()->showMessage(tr("Select a trial of the sweep to pause, resume or stop"), 8000);
    return;
  }
  const SweepData& sweep = m_compare->sweep();
  const QString name = sweep.study.studyId == *run->record.studyId && !sweep.study.name.isEmpty()
                           ? sweep.study.name
                           : tr("of %1").arg(run->record.name);
  emit sweepControlRequested(*run->record.studyId, name, control);
}

void MainWindow::cloneIntoBuilder(qint64 runId, const QJsonObject& params) {
  const RunSummary* run = m_runs->model()->runById(runId);
  if (run == nullptr || !run->record.experimentId) {
    statusBar()->showMessage(tr("That run has no recorded experiment to clone"), 8000);
    return;
  }
  BuilderController* builder = m_builder->controller();
  if (builder->isModified()) {
    statusBar()->showMessage(
        tr("The builder has unsaved edits; save or undo them before cloning %1")
            .arg(run->record.name),
        8000);
    return;
  }
  m_cloneParams = params;
  m_cloning = true;
  m_builderChosen = false;
  m_builderWanted = *run->record.experimentId;
  m_runLog->loadExperiment(m_builderWanted);
}

QStringList MainWindow::recentFiles() const { return QSettings().value(kRecentKey).toStringList(); }

void MainWindow::addRecent(const QString& path) {
  // A key=value connection string with a password (the run log refuses it) is not kept at all.
  if (!backend::isPostgresSpec(path) && backend::displaySpec(path) != path) return;
  QStringList recent = recentFiles();
  // A server's URL is kept as typed, without a password in any form (libpq finds it in
  // ~/.pgpass or PGPASSWORD); the settings file is no place for it.
  const QString absolute = backend::isPostgresSpec(path) ? backend::displaySpec(path)
                                                         : QFileInfo(path).absoluteFilePath();
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > kMaxRecent) recent.removeLast();
  QSettings().setValue(kRecentKey, recent);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  m_recentMenu->clear();
  const QStringList recent = recentFiles();
  for (const QString& path : recent) {
    m_recentMenu->addAction(path, this, [this, path] { openRunLog(path); });
  }
  m_recentMenu->setEnabled(!recent.isEmpty());
}

void MainWindow::restoreLayout() {
  QSettings settings;
  restoreGeometry(settings.value("mainWindow/geometry").toByteArray());
  m_layoutSized = restoreState(settings.value("mainWindow/state").toByteArray());
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (m_layoutSized) return;
  m_layoutSized = true;
  // The runs table in the upper 30%, the big panels below. Given before the first show (in
  // the constructor), the proportions were lost and the window opened split in halves.
  const int height = centralWidget() != nullptr ? centralWidget()->height() : this->height();
  resizeDocks({dock(QStringLiteral("runs")), dock(QStringLiteral("plots"))},
              {height * 3 / 10, height * 7 / 10}, Qt::Vertical);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue("mainWindow/geometry", saveGeometry());
  settings.setValue("mainWindow/state", saveState());
  QMainWindow::closeEvent(event);
}

void MainWindow::chooseRunLog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open run log"), QString(),
                                                    tr("Run logs (*.db);;All files (*)"));
  if (!path.isEmpty()) openRunLog(path);
}

void MainWindow::chooseServerRunLog() {
  QSettings settings;
  const QString last =
      settings.value(kServerUrlKey, QStringLiteral("postgresql://user@host:5432/shardscope"))
          .toString();
  bool accepted = false;
  const QString url =
      QInputDialog::getText(
          this, tr("Open run log on a server"),
          tr("PostgreSQL URL of the team's run log (postgresql://user@host:port/database).\n"
             "Keep the password out of it: put it in ~/.pgpass (or PGPASSWORD), where libpq "
             "finds it.\nFor a server across a network, add ?sslmode=verify-full (the server's "
             "certificate and name are checked)."),
          QLineEdit::Normal, last, &accepted)
          .trimmed();
  if (!accepted || url.isEmpty()) return;
  if (!backend::isPostgresSpec(url)) {
    QMessageBox::warning(this, tr("Open run log on a server"),
                         tr("'%1' is not a PostgreSQL URL: it starts with postgresql://, e.g. "
                            "postgresql://alice@db.lab:5432/shardscope")
                             .arg(backend::displaySpec(url)));
    return;
  }
  settings.setValue(kServerUrlKey, backend::displaySpec(url));
  openRunLog(url);
}

void MainWindow::chooseExperiment() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open experiment"), QString(),
                                                    tr("Experiments (*.toml)"));
  if (path.isEmpty()) return;
  if (auto opened = openExperiment(path); !opened) {
    QMessageBox::warning(this, tr("Open experiment"), QString::fromStdString(opened.message()));
  }
}

void MainWindow::importConfig() {
  QStringList kinds;
  for (auto k : backend::importKinds()) kinds << backend::importKindName(k);
  bool picked = false;
  const QString kindName =
      QInputDialog::getItem(this, tr("Import"), tr("Configuration of:"), kinds, 0, false, &picked);
  if (!picked) return;
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Import %1 config").arg(kindName), QString(),
                                   tr("Configs (*.yaml *.yml *.json *.sh *.txt);;All files (*)"));
  if (path.isEmpty()) return;
  if (startImport(*backend::importKindFromName(kindName), path)) m_importReport = true;
}

bool MainWindow::isImporting() const { return m_importing; }

bool MainWindow::startImport(backend::ImportKind kind, const QString& path) {
  const QString name = QFileInfo(path).fileName();
  if (isImporting()) {
    statusBar()->showMessage(
        tr("Still reading %1; import %2 once it is done").arg(m_importPath, name), 8000);
    return false;
  }
  m_importReport = false;
  m_importing = true;
  m_importPath = QFileInfo(path).fileName();
  statusBar()->showMessage(tr("Importing %1…").arg(name));
  // On a pool thread: the file's size and its YAML expansion are bounded (backend/import), but
  // reading it is still disk and parsing work the window must not wait for.
  auto promise = std::make_shared<QPromise<ImportRead>>();
  m_import->setFuture(promise->future());
  QThreadPool::globalInstance()->start([promise, kind, path] {
    promise->start();
    promise->addResult(ImportRead{kind, path, backend::importConfig(kind, path)});
    promise->finish();
  });
  return true;
}
void MainWindow::finishImport() {
  m_importing = false;
  if (m_import->future().resultCount() == 0) return;
  ImportRead read = m_import->result();
  Result<backend::ImportResult> result = std::move(read.result);
  if (result && result->ok()) {
    const QFileInfo info(read.path);
    const QString source = info.dir().filePath(info.completeBaseName() + QStringLiteral(".toml"));
    const QString toml = QString::fromStdString(spec::write_experiment_toml(*result->experiment));
    QString error;
    if (m_builder->controller()->loadText(toml, source, &error)) {
      if (QDockWidget* builder = dock(QStringLiteral("builder"))) builder->raise();
    } else {
      result = fail(error.toStdString());
    }
  }
  const QString name = QFileInfo(read.path).fileName();
  statusBar()->showMessage(result && result->ok() ? tr("Imported %1 into the builder").arg(name)
                                                  : tr("Import of %1 failed").arg(name),
                           8000);
  emit importFinished(read.path, result);
  if (!std::exchange(m_importReport, false)) return;
  if (!result) {
    QMessageBox::warning(this, tr("Import"), QString::fromStdString(result.message()));
    return;
  }
  QMessageBox box(result->ok() ? QMessageBox::Information : QMessageBox::Warning, tr("Import"),
                  QString(), QMessageBox::Ok, this);
  box.setDetailedText(result->reportText());
  if (result->ok()) {
    box.setText(tr("%1: %2 mapped, %3 ignored, %4 unsupported; the experiment is in the builder "
                   "(unsaved).")
                    .arg(name)
                    .arg(result->count(backend::ImportOutcome::mapped))
                    .arg(result->count(backend::ImportOutcome::ignored))
                    .arg(result->count(backend::ImportOutcome::unsupported)));
  } else {
    box.setText(tr("%1: %n key(s) cannot be imported; nothing was opened (see the details).",
                   nullptr, result->count(backend::ImportOutcome::error))
                    .arg(name));
  }
  box.exec();
}

void MainWindow::openSettings() {
  QStringList hosts;
  for (int row = 0; row < m_runs->model()->rowCount(); ++row) {
    if (const RunSummary* run = m_runs->model()->runAt(row)) hosts << run->priceHost;
  }
  hosts.removeDuplicates();
  hosts.sort();
  SettingsDialog dialog(m_notifier->settings(), m_runs->model()->prices(), hosts, this);
  if (dialog.exec() != QDialog::Accepted) return;
  const NotifySettings settings = dialog.settings();
  settings.save();
  m_notifier->setSettings(settings);
  backend::saveHostPrices(dialog.prices());
  m_runs->model()->setPrices(dialog.prices());
}

void MainWindow::openRunLog(const QString& path) {
  m_runCount = -1;
  m_autoSelected = false;
  m_lastCurrent = -1;
  m_lastSelection.clear();
  m_builderWanted = -1;
  m_notifier->reset();
  // A server's URL is shown whole less its password (backend::displaySpec): its last path part
  // may be no database name but user:password@host.
  const QString shown = backend::displaySpec(path);
  setWindowTitle(QStringLiteral("Shardscope — %1")
                     .arg(backend::isPostgresSpec(path) ? shown : QFileInfo(shown).fileName()));
  statusBar()->showMessage(tr("Reading %1…").arg(shown));
  // The sweep is asked for first, so the reader's first pass delivers its summaries too.
  m_compare->showSweep(-1);
  m_runLog->open(path);
  addRecent(path);
  emit runLogOpened(path);
}

Result<void> MainWindow::openExperiment(const QString& path) {
  QString error;
  if (!m_builder->controller()->openFile(path, &error)) return fail(error.toStdString());
  if (QDockWidget* builder = dock(QStringLiteral("builder"))) builder->raise();
  return ok();
}

void MainWindow::onSelection(const QList<qint64>& ids) {
  QVector<RunSummary> runs;
  for (qint64 id : ids) {
    if (const RunSummary* run = m_runs->model()->runById(id)) runs.append(*run);
  }
  m_plots->setRuns(ids, runs, m_runs->currentRunId());
  const qint64 focused = m_runs->currentRunId();
  m_timeline->setRun(ids.isEmpty() ? -1 : (ids.contains(focused) ? focused : ids.first()));
  // Several runs: one column each, at its best evaluation by the shown sweep's objective. The
  // trials Compare opened stay until the user selects other runs.
  if (!m_samplesFromCompare || ids != m_lastSelection) {
    m_samplesFromCompare = false;
    m_samples->setRuns(ids, m_compare->sweep().objectiveKey, m_compare->minimize());
  }
  // Compare follows a new selection only: a refresh of the table re-announces the same one, and
  // must not take back a sweep the user picked in Compare's sweep list meanwhile.
  if (ids != m_lastSelection && !runs.isEmpty() && runs.first().record.experimentId) {
    m_compare->showSweep(*runs.first().record.experimentId);
  }
  if (!runs.isEmpty() || ids.isEmpty()) m_lastSelection = ids;  // rows not listed yet: later
  updateSweepActions();
  // A refresh of the table re-announces the same selection: only a new current run counts.
  if (const qint64 current = m_runs->currentRunId(); current != m_lastCurrent) {
    m_lastCurrent = current;
    if (!m_selectingInCode) m_builderChosen = false;
    followInBuilder();
  }
  emit loadedChanged();
}

void MainWindow::showTrialSamples(qint64 runId) {
  QList<qint64> trials;
  for (const SweepTrial& trial : m_compare->sweep().trials) trials.append(trial.runId);
  if (!trials.contains(runId)) return;
  m_samplesFromCompare = true;
  m_samples->showTrials(trials, runId, m_compare->sweep().objectiveKey, m_compare->minimize());
  if (QDockWidget* d = dock(QStringLiteral("samples"))) d->raise();
}

void MainWindow::selectRunsInCode(const QList<qint64>& ids) {
  const bool before = std::exchange(m_selectingInCode, true);
  m_runs->selectRuns(ids);
  m_selectingInCode = before;
}

void MainWindow::followInBuilder() {
  const RunSummary* run = m_runs->model()->runById(m_lastCurrent);
  if (run == nullptr || !run->record.experimentId || m_builderChosen) return;
  const qint64 id = *run->record.experimentId;
  BuilderController* builder = m_builder->controller();
  if (id == builder->recordedExperimentId() || id == m_builderWanted) return;
  if (builder->isModified()) {
    statusBar()->showMessage(
        tr("The builder keeps its unsaved edits; save or undo them to see the experiment of %1")
            .arg(run->record.name),
        8000);
    return;
  }
  m_builderWanted = id;
  m_runLog->loadExperiment(id);
}

void MainWindow::onExperimentLoaded(qint64 experimentId, const QString& name, const QString& source,
                                    const QString& toml) {
  if (experimentId != m_builderWanted) return;  // the selection moved on meanwhile
  m_builderWanted = -1;
  BuilderController* builder = m_builder->controller();
  const bool cloning = std::exchange(m_cloning, false);
  if (!m_builderChosen && !builder->isModified()) {
    QString error;
    const bool before = std::exchange(m_loadingRecorded, true);
    const bool opened = builder->openRecorded(experimentId, source, toml,
                                              tr("experiment %1 of the run log").arg(name), &error);
    m_loadingRecorded = before;
    if (!opened) statusBar()->showMessage(error, 8000);
    if (opened && cloning) applyClone();
  }
  emit loadedChanged();
}

void MainWindow::applyClone() {
  BuilderController* builder = m_builder->controller();
  // Edits through the undo stack: the clone is an unsaved change of the recorded experiment.
  builder->setSearchToml(QString());
  QStringList refused;
  int set = 0;
  for (auto it = m_cloneParams.constBegin(); it != m_cloneParams.constEnd(); ++it) {
    // A replanned run's history is no field; the plan's own fields (its micro-batch) are.
    if (it.key() == QLatin1String(backend::kReplanParam) ||
        it.key() == QLatin1String(backend::kResumedFromParam))
      continue;
    const QJsonValue v = it.value();
    const QString text = v.isDouble() ? QString::number(v.toDouble(), 'g', 17)
                         : v.isBool() ? QString::fromLatin1(v.toBool() ? "true" : "false")
                                      : v.toString();
    if (builder->setField(it.key(), text)) {
      ++set;
    } else {
      refused.append(it.key());
    }
  }
  QString text =
      tr("Cloned into the builder: %n trial value(s) set, [search] removed; save it "
         "as a new experiment to launch it",
         nullptr, set);
  if (!refused.isEmpty()) {
    text += tr(" (not fields of the experiment, left out: %1)").arg(refused.join(", "));
  }
  statusBar()->showMessage(text, 12000);
  m_cloneParams = {};
}

bool MainWindow::isLoaded() const {
  const bool plotsReady =
      m_runs->selectedRunIds().isEmpty() ||
      (m_plots->isLoaded() && (m_timeline->run() < 0 || m_timeline->isLoaded()));
  // The builder's widgets follow its controller on a short timer: loaded once they show it.
  return m_runs->isLoaded() && plotsReady && m_builderWanted < 0 &&
         !m_builder->isRefreshPending() && m_compare->isLoaded() && m_hosts->isLoaded();
}

bool MainWindow::isSummaryShown() const {
  return m_runs->isLoaded() && m_compare->isSummaryDrawn();
}

QString MainWindow::selectShowcase() {
  const RunTableModel* model = m_runs->model();
  std::optional<qint64> sweep;
  QMap<qint64, int> sizes;
  for (int row = 0; row < model->rowCount(); ++row) {
    if (const auto& id = model->runAt(row)->record.experimentId) ++sizes[*id];
  }
  for (auto it = sizes.cbegin(); it != sizes.cend(); ++it) {
    if (!sweep || it.value() >= sizes.value(*sweep)) sweep = it.key();
  }
  QList<QPair<double, qint64>> ranked;
  for (int row = 0; row < model->rowCount(); ++row) {
    const auto& r = model->runAt(row)->record;
    if (sweep && r.experimentId == sweep && r.objective) ranked.append({*r.objective, r.id});
  }
  std::sort(ranked.begin(), ranked.end());
  QList<qint64> ids;
  for (qsizetype i = 0; i < std::min<qsizetype>(3, ranked.size()); ++i)
    ids.append(ranked[i].second);
  if (ids.isEmpty() && model->rowCount() > 0) ids.append(model->runAt(0)->record.id);
  selectRunsInCode(ids);
  if (sweep) m_compare->showSweep(*sweep);
  QStringList names;
  for (qint64 id : ids) names.append(model->runById(id)->record.name);
  return names.join(QStringLiteral(", "));
}

}  // namespace shardscope::ui
