#include "ui/compare/comparepanel.h"

#include <qcustomplot.h>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QLoggingCategory>
#include <QMenu>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>

#include "ui/compare/compareplots.h"
#include "ui/compare/pbtviews.h"
#include "ui/compare/studyviews.h"
#include "ui/compare/triallines.h"
#include "ui/compare/triallistmodel.h"
#include "ui/data/runlog.h"
#include "ui/widgets/candidatetable.h"
#include "ui/widgets/plotexport.h"

Q_LOGGING_CATEGORY(lcComparePanel, "shardscope.ui.comparepanel")

namespace shardscope::ui {

namespace {

QString valueText(const QJsonValue& value) {
  if (value.isUndefined()) return QStringLiteral("—");
  if (value.isDouble()) return QString::number(value.toDouble(), 'g', 6);
  if (value.isString()) return value.toString();
  if (value.isBool()) return value.toBool() ? QStringLiteral("true") : QStringLiteral("false");
  return QString::fromUtf8(QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact));
}

}  // namespace

ComparePanel::ComparePanel(RunLog& runLog, QWidget* parent)
    : QWidget(parent),
      m_runLog(runLog),
      m_experiment(new QComboBox(this)),
      m_direction(new QComboBox(this)),
      m_sliceParam(new QComboBox(this)),
      m_colourBy(new QComboBox(this)),
      m_summary(new QLabel(this)),
      m_history(new QCustomPlot(this)),
      m_intermediate(new QCustomPlot(this)),
      m_parallel(new QCustomPlot(this)),
      m_slice(new QCustomPlot(this)),
      m_views(new compare::StudyViews(this)),
      m_pbt(new compare::PbtViews(this)),
      m_progress(new QProgressBar(this)) {
  m_direction->addItem(tr("minimize"), true);
  m_direction->addItem(tr("maximize"), false);
  m_direction->setToolTip(tr("Whether a lower or a higher objective is better"));
  m_experiment->setToolTip(tr("The sweep (runs of one experiment) to compare"));
  m_sliceParam->setObjectName(QStringLiteral("sliceParam"));
  m_sliceParam->setToolTip(tr("The parameter on the slice plot's x axis"));
  // The figures the plots can colour trials by; the data is the figure's key in TrialFigures.
  m_colourBy->setObjectName(QStringLiteral("colourBy"));
  m_colourBy->addItem(tr("objective"), QString());
  m_colourBy->addItem(tr("exposed communication share"), QStringLiteral("exposed"));
  m_colourBy->addItem(tr("MFU"), QStringLiteral("mfu"));
  m_colourBy->setToolTip(
      tr("What the history, parallel coordinates and slice colour trials by: the objective, or "
         "the mean over each trial's steps of its exposed-communication share (ranks averaged) "
         "or MFU; trials without it are grey"));
  m_summary->setObjectName(QStringLiteral("sweepSummary"));
  // A long summary (auto's choice) is cut at the bar's width, not widening the window; the
  // tooltip has it whole.
  m_summary->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  m_progress->setObjectName(QStringLiteral("curveProgress"));
  m_progress->setFormat(tr("curves %v / %m"));
  m_progress->setToolTip(tr("Trials whose intermediate values have been read from the run log"));
  m_progress->setMaximumWidth(220);
  m_progress->hide();
  m_curveTimer.setSingleShot(true);
  m_curveTimer.setInterval(kCurveReplotMs);
  connect(&m_curveTimer, &QTimer::timeout, this, &ComparePanel::replotCurves);
  compare::setupPlot(m_history, tr("Optimisation history"));
  compare::setupPlot(m_intermediate, tr("Intermediate values (pruned dimmed)"));
  compare::setupPlot(m_parallel, tr("Parallel coordinates (blue = best)"));
  compare::setupPlot(m_slice, tr("Slice"));

  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Sweep"), this));
  bar->addWidget(m_experiment);
  bar->addWidget(m_direction);
  bar->addWidget(new QLabel(tr("Slice by"), this));
  bar->addWidget(m_sliceParam);
  bar->addWidget(new QLabel(tr("Colour by"), this));
  bar->addWidget(m_colourBy);
  bar->addWidget(m_summary, 1);
  bar->addWidget(m_progress);
  auto* savePage = new QPushButton(tr("Save page…"), this);
  savePage->setObjectName(QStringLiteral("savePage"));
  savePage->setToolTip(tr("Save the whole Compare page as PNG, SVG or PDF at a chosen size"));
  connect(savePage, &QPushButton::clicked, this, [this] { savePageDialog(); });
  bar->addWidget(savePage);
  auto* plots = new QWidget(this);
  auto* grid = new QGridLayout(plots);
  m_grid = grid;
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(m_history, 0, 0);
  grid->addWidget(m_intermediate, 0, 1);
  grid->addWidget(m_parallel, 0, 2);
  grid->addWidget(m_slice, 0, 3);
  grid->addWidget(m_views, 1, 0, 1, 4);
  // A PBT study's lineage and best schedule: a row of its own, shown for such a study only (an
  // empty row with a stretch would still take a third of the height: onSweep sets it).
  grid->addWidget(m_pbt, 2, 0, 1, 4);
  grid->setRowStretch(0, 1);
  grid->setRowStretch(1, 1);
  grid->setRowStretch(2, 0);
  for (QCustomPlot* plot : {m_history, m_intermediate, m_parallel, m_slice})
    plot->setMinimumHeight(120);
  m_experiment->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_candidates = new CandidateTable(this);
  m_candidates->setToolTip(
      tr("Every candidate of the autotune: the winner highlighted, the ones "
         "that did not measure marked (hover for why)"));
  m_candidates->hide();
  auto* bottom = new QSplitter(Qt::Horizontal, this);
  bottom->addWidget(m_candidates);
  bottom->addWidget(buildDiff());
  bottom->addWidget(m_views->overlayChooser());
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 3);
  bottom->setStretchFactor(2, 1);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(plots);
  splitter->addWidget(bottom);
  splitter->setStretchFactor(0, 4);
  splitter->setStretchFactor(1, 1);
  // Eight empty axes say nothing to someone who has not swept yet: a word on how to start.
  m_empty = new QLabel(
      tr("<p><b>No sweep in this run log yet.</b></p>"
         "<p>A sweep runs one experiment many times with the settings it searches, and this "
         "tab compares the trials: the best so far, the parameters that matter, each trial's "
         "curves.</p>"
         "<p>In the <b>Builder</b>: start from the <i>demo</i> template (<i>New from "
         "template</i>), add the parameters to search on its <i>search</i> tab, then "
         "<b>Launch</b>. Or open <code>examples/demo-sweep.toml</code> (File &gt; Open "
         "experiment), or from a terminal: <code>shardscope-cli sweep "
         "examples/demo-sweep.toml</code>.</p>"),
      this);
  m_empty->setObjectName(QStringLiteral("compareEmptyState"));
  m_empty->setWordWrap(true);
  m_empty->setAlignment(Qt::AlignCenter);
  m_empty->setTextFormat(Qt::RichText);
  m_stack = new QStackedWidget(this);
  m_content = splitter;
  m_stack->addWidget(splitter);
  m_stack->addWidget(m_empty);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(bar);
  layout->addWidget(m_stack);

  addSaveMenus();
  // A click (no drag) on a trial's point in the history opens that trial elsewhere (Samples).
  connect(m_history, &QCustomPlot::mousePress, this,
          [this](QMouseEvent* event) { m_historyPress = event->pos(); });
  connect(m_history, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* event) {
    if ((event->pos() - m_historyPress).manhattanLength() > 3) return;
    if (const qint64 run = trialAtHistory(event->pos()); run >= 0) emit trialActivated(run);
  });
  // A click on a segment of the lineage: it and the checkpoint's source side by side in the diff.
  connect(m_pbt, &compare::PbtViews::segmentClicked, this,
          [this](qint64 run, qint64 from) { setDiffRuns(run, from > 0 ? from : run); });
  connect(&runLog, &RunLog::sweepLoaded, this, &ComparePanel::onSweep);
  connect(&runLog, &RunLog::sweepCurvesLoaded, this, &ComparePanel::onCurves);
  connect(&runLog, &RunLog::trialFiguresLoaded, this, &ComparePanel::onFigures);
  // Each trial's verdict counts, as the runs table's Verdicts column has them (the same read of
  // the run log, runsLoaded), beside its name in the overlay's list and the diff's choosers.
  connect(&runLog, &RunLog::runsLoaded, this, [this](const QVector<RunSummary>& runs) {
    QHash<qint64, backend::VerdictCounts> verdicts;
    for (const RunSummary& run : runs)
      if (run.verdicts.marked() > 0) verdicts.insert(run.record.id, run.verdicts);
    m_diffModel->setVerdicts(verdicts);
    m_views->setVerdicts(verdicts);
  });
  connect(m_colourBy, &QComboBox::currentIndexChanged, this, [this] {
    updateColouring();
    if (m_colouring.byFigure()) {
      requestFigures();  // drawn when they arrive
    } else {
      redraw();
      emit colouringDrawn();
    }
  });
  m_history->setMouseTracking(true);
  connect(m_history, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) {
    const qint64 run = trialAtHistory(event->pos());
    if (run < 0) {
      QToolTip::hideText();
    } else {
      QToolTip::showText(event->globalPosition().toPoint(), trialTip(run), m_history);
    }
  });
  connect(m_views, &compare::StudyViews::overlayRunsChanged, this, &ComparePanel::requestOverlay);
  connect(m_views, &compare::StudyViews::analysed, this, &ComparePanel::updateLoaded);
  connect(m_experiment, &QComboBox::currentIndexChanged, this, [this] {
    if (!m_filling) showSweep(m_experiment->currentData().toLongLong());
  });
  connect(m_direction, &QComboBox::currentIndexChanged, this, [this] {
    m_minimize = m_direction->currentData().toBool();
    if (m_filling) return;
    redraw();
    m_views->setData(m_sweep, m_study, m_minimize);
  });
  connect(m_sliceParam, &QComboBox::currentIndexChanged, this, [this] {
    if (!m_filling) redraw();
  });
}

void ComparePanel::addSaveMenus() {
  for (QCustomPlot* plot : m_content->findChildren<QCustomPlot*>()) {
    plot->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(plot, &QWidget::customContextMenuRequested, this, [this, plot](const QPoint& at) {
      QMenu menu(this);
      QAction* one = menu.addAction(tr("Save plot as PNG, SVG or PDF…"));
      QAction* page = menu.addAction(tr("Save the whole page…"));
      QAction* chosen = menu.exec(plot->mapToGlobal(at));
      if (chosen == one) savePageDialog(plot);
      if (chosen == page) savePageDialog();
    });
  }
}

Result<void> ComparePanel::exportPage(const QString& path, int width, int height) {
  return savePage(m_content, path, width, height);
}

void ComparePanel::savePageDialog(QCustomPlot* plot) {
  const QString folder = QStandardPaths::writableLocation(QStandardPaths::PicturesLocation);
  const QString title = plot != nullptr ? tr("Save plot") : tr("Save the Compare page");
  const QSize size = plot != nullptr ? QSize(1200, 800) : QSize(1920, 1200);
  ExportDialog dialog(title, QDir(folder).filePath(plot != nullptr ? "plot.png" : "compare.png"),
                      size, this);
  if (dialog.exec() != QDialog::Accepted) return;
  const QSize chosen = dialog.imageSize();
  const Result<void> done = plot != nullptr
                                ? savePlot(plot, dialog.path(), chosen.width(), chosen.height())
                                : exportPage(dialog.path(), chosen.width(), chosen.height());
  if (!done) {
    qCWarning(lcComparePanel, "%s", done.message().c_str());
    QMessageBox::warning(this, title, QString::fromStdString(done.message()));
  }
}

QWidget* ComparePanel::buildDiff() {
  auto* box = new QWidget(this);
  m_diffA = new QComboBox(box);
  m_diffB = new QComboBox(box);
  // One model for both: 10,000 trials are one reset, not 20,000 addItem() calls.
  m_diffModel = new compare::TrialListModel(false, this);
  for (QComboBox* combo : {m_diffA, m_diffB}) {
    combo->setModel(m_diffModel);
    // Sized by a typical name, not by measuring every trial's.
    combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    combo->setMinimumContentsLength(18);
  }
  m_diff = new QTableWidget(0, 3, box);
  m_diff->setHorizontalHeaderLabels({tr("Field"), tr("Trial A"), tr("Trial B")});
  m_diff->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_diff->verticalHeader()->hide();
  m_diff->setEditTriggers(QAbstractItemView::NoEditTriggers);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Config diff"), box));
  bar->addWidget(m_diffA, 1);
  bar->addWidget(new QLabel(tr("vs"), box));
  bar->addWidget(m_diffB, 1);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(bar);
  layout->addWidget(m_diff);
  for (QComboBox* combo : {m_diffA, m_diffB}) {
    connect(combo, &QComboBox::currentIndexChanged, this, [this] {
      if (!m_filling) updateDiff();
    });
  }
  return box;
}

void ComparePanel::showSweep(qint64 experimentId) {
  if (experimentId == m_sweep.experimentId && m_loaded) return;
  m_runLog.watchSweep(experimentId);
}

void ComparePanel::setMinimize(bool minimize) { m_direction->setCurrentIndex(minimize ? 0 : 1); }

void ComparePanel::onSweep(const SweepData& sweep) {
  const bool sameSweep = sweep.experimentId == m_sweep.experimentId && m_summaryDrawn;
  // Curves already streamed stay (the summaries carry none); new points keep arriving.
  QHash<qint64, std::pair<QVector<double>, QVector<double>>> kept;
  if (sameSweep) {
    for (const SweepTrial& trial : std::as_const(m_sweep.trials))
      kept.insert(trial.runId, {trial.steps, trial.values});
  } else {
    m_curvesComplete = sweep.experimentId < 0;
    m_curvesDone = m_curvesTotal = 0;
    m_study.lossCurves.clear();
    m_figures = {};
  }
  m_sweep = sweep;
  m_stack->setCurrentWidget(m_sweep.experimentId < 0 ? static_cast<QWidget*>(m_empty) : m_content);
  m_trialIndex.clear();
  for (qsizetype i = 0; i < m_sweep.trials.size(); ++i) {
    SweepTrial& trial = m_sweep.trials[i];
    m_trialIndex.insert(trial.runId, int(i));
    if (const auto it = kept.constFind(trial.runId); it != kept.cend()) {
      trial.steps = it->first;
      trial.values = it->second;
    }
  }
  m_study.experimentId = m_sweep.experimentId;
  m_study.studyId = m_sweep.study.studyId;
  m_study.name = m_sweep.study.name;
  m_study.config = m_sweep.study.config;
  m_study.objectives = m_sweep.study.objectives;
  m_study.directions = m_sweep.study.directions;
  m_study.trialNumbers.clear();
  m_study.objectiveValues.clear();
  for (const SweepTrial& trial : std::as_const(m_sweep.trials)) {
    if (trial.trialNumber) m_study.trialNumbers.insert(trial.runId, *trial.trialNumber);
    if (trial.objectiveValues) m_study.objectiveValues.insert(trial.runId, *trial.objectiveValues);
  }
  QElapsedTimer step;
  step.start();
  m_timings.clear();
  const auto lap = [&](const QString& name) {
    m_timings.append({name, double(step.nsecsElapsed()) / 1e6});
    step.restart();
  };
  fillCombos();
  adoptStudyDirection();
  updateColouring();
  if (!sameSweep || m_diffA->currentIndex() < 0) {
    // Default diff: the first two trials, so the table is never empty.
    m_filling = true;
    m_diffA->setCurrentIndex(0);
    m_diffB->setCurrentIndex(std::min(1, m_diffB->count() - 1));
    m_filling = false;
  }
  lap(QStringLiteral("combos"));
  m_candidates->setVisible(m_sweep.autotune.has_value());
  if (m_sweep.autotune) m_candidates->setAutotune(*m_sweep.autotune);
  redraw(lap);
  updateDiff();
  lap(QStringLiteral("diff"));
  m_views->setData(m_sweep, m_study, m_minimize);
  lap(QStringLiteral("study views"));
  m_pbt->setData(m_sweep);
  m_grid->setRowStretch(2, m_sweep.pbt ? 1 : 0);
  lap(QStringLiteral("pbt"));
  updateProgress();
  if (!m_summaryDrawn || !sameSweep) {
    m_summaryDrawn = true;
    emit summaryDrawn();
  }
  requestOverlay();  // the ticked trials may have changed with the summaries
  requestFigures();  // trials came or moved on: their figures too
  updateLoaded();
}

void ComparePanel::requestFigures() {
  if (!m_colouring.byFigure() || m_sweep.experimentId < 0) return;
  QList<qint64> runs;
  runs.reserve(m_sweep.trials.size());
  for (const SweepTrial& trial : std::as_const(m_sweep.trials)) runs.append(trial.runId);
  m_runLog.loadTrialFigures(m_sweep.experimentId, runs);
}

void ComparePanel::onFigures(const TrialFigures& figures) {
  if (figures.experimentId != m_sweep.experimentId || !m_summaryDrawn) return;  // an old sweep's
  m_figures = figures;
  updateColouring();
  if (!m_colouring.byFigure()) return;  // back to the objective meanwhile
  redraw();
  emit colouringDrawn();
}

void ComparePanel::updateColouring() {
  const QString figure = m_colourBy->currentData().toString();
  m_colouring = {};
  if (figure.isEmpty()) return;
  const bool mfu = figure == QLatin1String("mfu");
  m_colouring.name = mfu ? tr("MFU") : tr("exposed communication share");
  if (m_figures.experimentId == m_sweep.experimentId)
    m_colouring.values = mfu ? m_figures.mfu : m_figures.exposedShare;
}

QString ComparePanel::trialTip(qint64 runId) const {
  const int index = m_trialIndex.value(runId, -1);
  if (index < 0) return {};
  const SweepTrial& trial = m_sweep.trials[index];
  QString text = tr("%1: objective %2")
                     .arg(trial.name, trial.objective ? QString::number(*trial.objective, 'g', 5)
                                                      : QStringLiteral("—"));
  if (m_colouring.byFigure()) text += QLatin1Char('\n') + m_colouring.describe(runId);
  return text;
}

// A study says which way is better (its first objective's direction).
void ComparePanel::adoptStudyDirection() {
  if (m_study.studyId < 0 || m_study.directions.isEmpty()) return;
  const bool minimize = m_study.directions.first() != QStringLiteral("maximize");
  if (minimize == m_minimize) return;
  m_filling = true;
  m_direction->setCurrentIndex(minimize ? 0 : 1);
  m_filling = false;
}

// The overlay shows every trial's train loss: all of the sweep's runs are watched.
void ComparePanel::requestOverlay() {
  QList<qint64> runs;
  runs.reserve(m_sweep.trials.size());
  for (const SweepTrial& trial : std::as_const(m_sweep.trials)) runs.append(trial.runId);
  if (runs == m_overlayWatched) return;
  m_overlayWatched = runs;
  m_runLog.watchOverlay(runs);
}

void ComparePanel::onCurves(const SweepCurves& curves) {
  if (curves.experimentId != m_sweep.experimentId || !m_summaryDrawn) return;  // an old sweep's
  if (curves.set == CurveSet::overlay) {
    mergeOverlay(curves);
  } else {
    mergeIntermediate(curves);
  }
  updateLoaded();
}

void ComparePanel::mergeIntermediate(const SweepCurves& curves) {
  for (const SeriesChunk& chunk : curves.chunks) {
    const int index = m_trialIndex.value(chunk.runId, -1);
    if (index < 0) continue;  // a trial newer than the summaries: the next pass brings it
    SweepTrial& trial = m_sweep.trials[index];
    if (chunk.reset) {
      trial.steps = chunk.steps;
      trial.values = chunk.values;
    } else {
      trial.steps += chunk.steps;
      trial.values += chunk.values;
    }
    if (m_intermediateLines != nullptr && m_sweep.pbt) {
      // A PBT member's line runs across its segments' trials: drawn again from all of them.
      const int line = compare::intermediateLine(m_sweep, index);
      if (line >= 0 && line < m_intermediateLines->lineCount()) {
        QVector<double> xs;
        QVector<double> ys;
        compare::intermediatePoints(m_sweep, line, xs, ys);
        m_intermediateLines->setPoints(line, xs, ys, true);
        if (line == m_bestLine)  // its bold copy on top
          m_intermediateLines->setPoints(m_intermediateLines->lineCount() - 1, xs, ys, true);
      }
    } else if (m_intermediateLines != nullptr) {
      if (index < m_intermediateLines->lineCount())
        compare::appendIntermediate(m_intermediateLines, index, chunk);
      if (index == m_bestLine)  // its bold copy on top
        compare::appendIntermediate(m_intermediateLines, m_intermediateLines->lineCount() - 1,
                                    chunk);
    }
    m_curvesChanged = true;
  }
  m_curvesDone = curves.done;
  m_curvesTotal = curves.total;
  const bool wasComplete = m_curvesComplete;
  if (curves.last) m_curvesComplete = true;
  updateProgress();
  if (curves.last) {
    // The final state at once; a pass that brought nothing new changes no pixel.
    if (m_curvesChanged || !wasComplete) replotCurves();
  } else if (!curves.chunks.isEmpty() && !m_curveTimer.isActive()) {
    m_curveTimer.start();
  }
}

void ComparePanel::mergeOverlay(const SweepCurves& curves) {
  for (const SeriesChunk& chunk : curves.chunks) {
    QVector<QPointF>& curve = m_study.lossCurves[chunk.runId];
    if (chunk.reset) curve.clear();
    for (qsizetype i = 0; i < chunk.steps.size(); ++i)
      curve.append(QPointF(chunk.steps[i], chunk.values[i]));
  }
  if (!curves.chunks.isEmpty()) m_views->setOverlayCurves(m_study.lossCurves);
}

// While curves stream, a replot of millions of points can take longer than the batches take to
// arrive: waiting 4x the last replot between two keeps the GUI thread free 80% of the time.
void ComparePanel::replotCurves() {
  m_curveTimer.stop();
  m_curvesChanged = false;
  QElapsedTimer timer;
  timer.start();
  m_intermediate->rescaleAxes();
  m_intermediate->yAxis->scaleRange(1.1, m_intermediate->yAxis->range().center());
  m_intermediate->replot();
  m_views->setSweepCurves(m_sweep);  // the overlay's eval curves
  m_curveTimer.setInterval(std::max(kCurveReplotMs, 4 * int(timer.elapsed())));
}

void ComparePanel::updateProgress() {
  const bool streaming = !m_curvesComplete && m_curvesTotal > 0;
  m_progress->setVisible(streaming);
  if (streaming) {
    m_progress->setMaximum(m_curvesTotal);
    m_progress->setValue(m_curvesDone);
  }
}

// Loaded once the summaries are drawn, every trial's curve has arrived, so have the overlay's
// curves, and the study views have their importance and contour.
void ComparePanel::updateLoaded() {
  const QList<qint64>& wanted = m_overlayWatched;
  const bool overlay = std::all_of(wanted.begin(), wanted.end(),
                                   [this](qint64 id) { return m_study.lossCurves.contains(id); });
  const bool complete = m_summaryDrawn && m_curvesComplete && overlay && m_views->isAnalysed();
  const bool became = complete && !m_loaded;
  m_loaded = complete;
  if (became) emit loaded();
}

bool ComparePanel::showsCostPareto() const {
  return m_sliceParam->currentData().toString() == QLatin1String("usage");
}

void ComparePanel::showCostPareto() {
  const int at = m_sliceParam->findData(QStringLiteral("usage"));
  if (at >= 0) m_sliceParam->setCurrentIndex(at);
}

void ComparePanel::fillCombos() {
  m_filling = true;
  m_experiment->clear();
  for (qint64 id : m_sweep.experimentIds) {
    const QString name = m_sweep.names.value(id);
    m_experiment->addItem(name.isEmpty() ? tr("experiment %1").arg(id) : name, id);
  }
  m_experiment->setCurrentIndex(m_experiment->findData(m_sweep.experimentId));
  const QString param = m_sliceParam->currentText();
  const bool cost = showsCostPareto();
  m_sliceParam->clear();
  m_sliceParam->addItems(compare::paramNames(m_sweep));
  // The cost view: the objective against each trial's device-hours, the Pareto front joined.
  m_sliceParam->addItem(tr("%1 (Pareto front)").arg(compare::hoursLabel(m_sweep)),
                        QStringLiteral("usage"));
  if (cost) {
    m_sliceParam->setCurrentIndex(m_sliceParam->count() - 1);
  } else if (const int at = m_sliceParam->findText(param); at >= 0) {
    m_sliceParam->setCurrentIndex(at);
  }
  const qint64 keepA = m_diffA->currentData().toLongLong();
  const qint64 keepB = m_diffB->currentData().toLongLong();
  QVector<compare::TrialListModel::Entry> entries;
  entries.reserve(m_sweep.trials.size());
  for (const SweepTrial& trial : std::as_const(m_sweep.trials))
    entries.append({trial.runId, trial.name});
  m_diffModel->setEntries(std::move(entries));
  m_diffA->setCurrentIndex(m_diffModel->rowOf(keepA));
  m_diffB->setCurrentIndex(m_diffModel->rowOf(keepB));
  m_filling = false;
}

void ComparePanel::redraw(const std::function<void(const QString&)>& lap) {
  const auto mark = [&lap](const char* name) {
    if (lap) lap(QString::fromLatin1(name));
  };
  compare::drawHistory(m_history, m_sweep, m_minimize, m_colouring);
  mark("history");
  // A PBT study's has a line per member (across its segments), none pruned.
  compare::setPlotTitle(m_intermediate, m_sweep.pbt ? tr("Intermediate values (a line per member)")
                                                    : tr("Intermediate values (pruned dimmed)"));
  m_intermediateLines = compare::drawIntermediate(m_intermediate, m_sweep, m_minimize, &m_dimmed,
                                                  &m_bestTrial, &m_bestLine);
  mark("intermediate");
  m_parallelLines = compare::drawParallel(m_parallel, m_sweep, m_minimize, m_colouring);
  mark("parallel");
  if (showsCostPareto()) {
    const QString hours = compare::hoursLabel(m_sweep);
    compare::setPlotTitle(m_slice, tr("Objective vs %1 (red: the Pareto front)").arg(hours));
    m_costPareto = compare::drawCostPareto(m_slice, m_sweep, m_minimize, hours);
    m_slicePoints = m_costPareto.points;
  } else {
    compare::setPlotTitle(m_slice, tr("Slice"));
    m_costPareto = {};
    m_slicePoints = compare::drawSlice(m_slice, m_sweep, m_sliceParam->currentText(), m_colouring);
  }
  mark("slice");
  const compare::History h = compare::history(m_sweep, m_minimize);
  QString summary = m_sweep.experimentId < 0
                        ? tr("No sweep in this run log yet")
                        : tr("%1 trials, %2 with an objective; best %3")
                              .arg(m_sweep.trials.size())
                              .arg(h.objectives.size())
                              .arg(h.best.isEmpty() ? QStringLiteral("—")
                                                    : QString::number(h.best.last(), 'g', 5));
  // The study's sampler; for auto, which one proposes which trials (the switch point). A PBT
  // study uses none: its population and segments instead.
  if (m_sweep.pbt) {
    summary += tr("; population-based training: %1 members, segments of %2 steps")
                   .arg(m_sweep.pbt->lineage.population)
                   .arg(m_sweep.pbt->intervalSteps);
  } else if (m_sweep.experimentId >= 0 && !m_sweep.study.sampler.isEmpty()) {
    summary += m_sweep.study.samplerChoice.isEmpty()
                   ? tr("; sampler %1").arg(m_sweep.study.sampler)
                   : tr("; sampler %1: %2").arg(m_sweep.study.sampler, m_sweep.study.samplerChoice);
  }
  m_summary->setText(summary);
  m_summary->setToolTip(summary);
}

qint64 ComparePanel::trialAtHistory(const QPoint& at) const {
  constexpr double kNearPx = 8;
  qint64 found = -1;
  double nearest = kNearPx * kNearPx;
  for (qsizetype i = 0; i < m_sweep.trials.size(); ++i) {
    const SweepTrial& trial = m_sweep.trials[i];
    if (!trial.objective) continue;  // not drawn in the history (compare::history)
    const double dx =
        m_history->xAxis->coordToPixel(double(trial.trialNumber.value_or(i))) - at.x();
    const double dy = m_history->yAxis->coordToPixel(*trial.objective) - at.y();
    if (dx * dx + dy * dy <= nearest) {
      nearest = dx * dx + dy * dy;
      found = trial.runId;
    }
  }
  return found;
}

QVector<double> ComparePanel::bestSoFar() const {
  return compare::history(m_sweep, m_minimize).best;
}

void ComparePanel::setDiffRuns(qint64 a, qint64 b) {
  m_filling = true;
  m_diffA->setCurrentIndex(m_diffA->findData(a));
  m_diffB->setCurrentIndex(m_diffB->findData(b));
  m_filling = false;
  updateDiff();
}

void ComparePanel::updateDiff() {
  const auto find = [this](QComboBox* combo) -> const SweepTrial* {
    const int index =
        combo->currentIndex() < 0 ? -1 : m_trialIndex.value(combo->currentData().toLongLong(), -1);
    return index < 0 ? nullptr : &m_sweep.trials[index];
  };
  const SweepTrial* a = find(m_diffA);
  const SweepTrial* b = find(m_diffB);
  m_diff->setRowCount(0);
  if (a == nullptr || b == nullptr) return;
  QStringList fields = a->params.keys();
  for (const QString& key : b->params.keys()) {
    if (!fields.contains(key)) fields.append(key);
  }
  fields.sort();
  const auto addRow = [this](const QString& field, const QString& x, const QString& y) {
    const int row = m_diff->rowCount();
    m_diff->insertRow(row);
    const bool differs = x != y;
    for (int column = 0; column < 3; ++column) {
      auto* item = new QTableWidgetItem(column == 0 ? field : column == 1 ? x : y);
      if (differs) item->setBackground(QColor(0xff, 0xf1, 0xc2));
      if (differs) item->setForeground(Qt::black);
      m_diff->setItem(row, column, item);
    }
  };
  // Differing fields first: that is what the user came for.
  for (bool differing : {true, false}) {
    for (const QString& field : fields) {
      const QString x = valueText(a->params.value(field));
      const QString y = valueText(b->params.value(field));
      if ((x != y) == differing) addRow(field, x, y);
    }
  }
  const auto objective = [](const SweepTrial* t) {
    return t->objective ? QString::number(*t->objective, 'g', 6) : QStringLiteral("—");
  };
  addRow(tr("status"), QString::fromLatin1(spec::to_string(a->status).data()),
         QString::fromLatin1(spec::to_string(b->status).data()));
  addRow(tr("objective"), objective(a), objective(b));
}

}  // namespace shardscope::ui
