#include "ui/compare/studyviews.h"

#include <qcustomplot.h>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QLoggingCategory>
#include <QPromise>
#include <QThreadPool>
#include <QVBoxLayout>

#include <algorithm>
#include <memory>

#include "ui/compare/compareplots.h"
#include "ui/compare/triallistmodel.h"
#include "ui/widgets/densitylines.h"

Q_LOGGING_CATEGORY(lcStudyViews, "shardscope.ui.studyviews")

namespace shardscope::ui::compare {

namespace {

constexpr int kDefaultOverlay = 3;  // trials overlaid before the user ticks any: the best three

// The inputs of one analysis, copied: the pool thread shares nothing with the widgets.
struct AnalysisInput {
  quint64 generation = 0;
  QVector<TrialPoint> trials;
  QString config;
  QString objectiveName;
  bool minimize = true;
  QStringList params;
  QString keepX;  // the user's contour choice, kept when still a parameter
  QString keepY;
};

Analysis analyse(const AnalysisInput& in) {
  Analysis out;
  out.generation = in.generation;
  out.importance = importance(in.trials, in.config, in.objectiveName, in.minimize);
  // Default contour: the two most important parameters.
  QStringList ranked = in.params;
  if (out.importance) {
    ranked.clear();
    for (const Importance& i : *out.importance) ranked.append(i.name);
  }
  out.x = in.params.contains(in.keepX) ? in.keepX : ranked.value(0);
  out.y = in.params.contains(in.keepY) && in.keepY != out.x ? in.keepY : ranked.value(1);
  out.contour = contourData(in.trials, out.x, out.y);
  return out;
}

}  // namespace

StudyViews::StudyViews(QWidget* parent)
    : QWidget(parent),
      m_contourX(new QComboBox(this)),
      m_contourY(new QComboBox(this)),
      m_paretoX(new QComboBox(this)),
      m_paretoY(new QComboBox(this)),
      m_contourPlot(new QCustomPlot(this)),
      m_importancePlot(new QCustomPlot(this)),
      m_paretoPlot(new QCustomPlot(this)),
      m_overlayPlot(new QCustomPlot(this)) {
  setupPlot(m_contourPlot, tr("Contour: objective over two parameters"));
  setupPlot(m_importancePlot, tr("Parameter importance"));
  setupPlot(m_paretoPlot, tr("Pareto front (red: not dominated)"));
  setupPlot(m_overlayPlot, tr("Train and eval curves of every trial"));
  m_contourX->setToolTip(tr("Parameter on the contour's x axis"));
  m_contourY->setToolTip(tr("Parameter on the contour's y axis"));
  m_paretoX->setToolTip(tr("Objective on the Pareto plot's x axis"));
  m_paretoY->setToolTip(tr("Objective on the Pareto plot's y axis"));

  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Contour"), this));
  bar->addWidget(m_contourX);
  bar->addWidget(new QLabel(tr("×"), this));
  bar->addWidget(m_contourY);
  bar->addSpacing(16);
  bar->addWidget(new QLabel(tr("Pareto"), this));
  bar->addWidget(m_paretoX);
  bar->addWidget(new QLabel(tr("vs"), this));
  bar->addWidget(m_paretoY);
  bar->addStretch(1);
  auto* grid = new QGridLayout;
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(m_contourPlot, 0, 0);
  grid->addWidget(m_importancePlot, 0, 1);
  grid->addWidget(m_paretoPlot, 0, 2);
  grid->addWidget(m_overlayPlot, 0, 3);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(bar);
  layout->addLayout(grid, 1);

  m_chooser = new QWidget(this);
  m_trialList = new QListView(m_chooser);
  m_trialModel = new TrialListModel(true, this);
  m_trialList->setModel(m_trialModel);
  m_trialList->setUniformItemSizes(true);  // 10,000 rows: no per-row size query
  m_trialList->setToolTip(tr("Tick trials to highlight their training loss in the overlay"));
  auto* chooserLayout = new QVBoxLayout(m_chooser);
  chooserLayout->setContentsMargins(0, 0, 0, 0);
  chooserLayout->addWidget(new QLabel(tr("Highlight in the overlay (best first)"), m_chooser));
  chooserLayout->addWidget(m_trialList);

  for (QCustomPlot* plot : {m_contourPlot, m_importancePlot, m_paretoPlot, m_overlayPlot})
    plot->setMinimumHeight(120);
  for (QComboBox* combo : {m_contourX, m_contourY, m_paretoX, m_paretoY}) {
    combo->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    connect(combo, &QComboBox::currentIndexChanged, this, [this] {
      if (!m_filling) redraw();
    });
  }
  connect(m_trialModel, &TrialListModel::checksChanged, this, [this] {
    if (m_filling) return;
    m_overlayChosen = true;
    emit overlayRunsChanged();
    drawOverlayView();
  });
  connect(&m_analysis, &QFutureWatcher<Analysis>::finished, this, &StudyViews::onAnalysis);
}

bool StudyViews::minimizeObjective(int index) const {
  if (index >= 0 && index < m_study.directions.size() && m_study.studyId >= 0)
    return m_study.directions[index] != QStringLiteral("maximize");
  return m_minimize;
}

void StudyViews::setData(const SweepData& sweep, const StudyInfo& study, bool minimize) {
  if (sweep.experimentId != m_sweep.experimentId) m_overlayChosen = false;
  m_sweep = sweep;
  m_study = study.experimentId == sweep.experimentId ? study : StudyInfo{};
  m_minimize = m_study.studyId >= 0 && !m_study.directions.isEmpty()
                   ? m_study.directions.first() != QStringLiteral("maximize")
                   : minimize;
  m_trials = finishedTrials(m_sweep, m_study);
  // Best first, by the first objective: the order of the overlay list.
  std::stable_sort(m_trials.begin(), m_trials.end(), [this](const auto& a, const auto& b) {
    return m_minimize ? a.values[0] < b.values[0] : a.values[0] > b.values[0];
  });
  fillChoosers();
  drawParetoView();
  drawOverlayView();
  startAnalysis();
}

// Importance and the default contour on a pool thread; until they arrive the plots keep what
// they show (the previous analysis of this sweep) or say "computing…".
void StudyViews::startAnalysis() {
  AnalysisInput in;
  in.generation = ++m_generation;
  in.trials = m_trials;
  in.config = m_study.config;
  in.objectiveName = objectiveName();
  in.minimize = m_minimize;
  for (int i = 0; i < m_contourX->count(); ++i) in.params.append(m_contourX->itemText(i));
  in.keepX = m_contourX->currentText();
  in.keepY = m_contourY->currentText();
  if (m_analysedSweep != m_sweep.experimentId) {
    // Nothing of this sweep is drawn yet: say why the two plots are empty.
    for (QCustomPlot* plot : {m_contourPlot, m_importancePlot}) {
      resetPlot(plot);
      placeholder(plot, tr("computing…"));
      plot->replot();
    }
  }
  m_analysed = false;
  m_contourTouched = false;
  auto promise = std::make_shared<QPromise<Analysis>>();
  m_analysis.setFuture(promise->future());
  QThreadPool::globalInstance()->start([promise, in] {
    promise->start();
    promise->addResult(analyse(in));
    promise->finish();
  });
}

void StudyViews::onAnalysis() {
  if (m_analysis.future().resultCount() == 0) return;
  Analysis result = m_analysis.result();
  if (result.generation != m_generation) return;  // a newer setData() is being analysed
  m_importance = std::move(result.importance);
  if (!m_contourTouched) {  // else the user's choice is drawn already
    m_filling = true;
    m_contourX->setCurrentIndex(m_contourX->findText(result.x));
    m_contourY->setCurrentIndex(m_contourY->findText(result.y));
    m_filling = false;
    m_contour = std::move(result.contour);
    drawContour(m_contourPlot, m_contour, m_minimize, objectiveName());
  }
  drawImportance(m_importancePlot, m_importance);
  m_analysed = true;
  m_analysedSweep = m_sweep.experimentId;
  emit analysed();
}

void StudyViews::fillChoosers() {
  m_filling = true;
  QStringList params;
  for (const TrialPoint& t : std::as_const(m_trials)) {
    for (const QString& key : t.params.keys())
      if (compare::isAxisParam(key) && !params.contains(key)) params.append(key);
  }
  params.sort();
  const QString keepX = m_contourX->currentText();
  const QString keepY = m_contourY->currentText();
  m_contourX->clear();
  m_contourY->clear();
  m_contourX->addItems(params);
  m_contourY->addItems(params);
  // Until the analysis ranks them (startAnalysis()): the kept choice, else the first two.
  const QString x = params.contains(keepX) ? keepX : params.value(0);
  const QString y = params.contains(keepY) && keepY != x ? keepY : params.value(1);
  m_contourX->setCurrentIndex(m_contourX->findText(x));
  m_contourY->setCurrentIndex(m_contourY->findText(y));

  const QStringList objectives =
      m_study.studyId >= 0 ? m_study.objectives : QStringList{m_sweep.objectiveKey};
  // The same objectives keep the user's choice; new ones start as the first two.
  QStringList shown;
  for (int i = 0; i < m_paretoX->count(); ++i) shown.append(m_paretoX->itemText(i));
  const bool sameObjectives = shown == objectives;
  for (QComboBox* combo : {m_paretoX, m_paretoY}) {
    const int keep = combo->currentIndex();
    const int fresh = combo == m_paretoX ? 0 : std::min(1, int(objectives.size()) - 1);
    combo->clear();
    combo->addItems(objectives);
    combo->setCurrentIndex(sameObjectives && keep >= 0 ? keep : fresh);
  }
  m_paretoX->setEnabled(objectives.size() > 1);
  m_paretoY->setEnabled(objectives.size() > 1);

  const QList<qint64> ticked = overlayRuns();
  QVector<TrialListModel::Entry> entries;
  entries.reserve(m_trials.size());
  QList<qint64> on;
  for (qsizetype i = 0; i < m_trials.size(); ++i) {
    const TrialPoint& t = m_trials[i];
    QString values;
    for (double v : t.values) {
      if (!values.isEmpty()) values += QStringLiteral(", ");
      values += QString::number(v, 'g', 4);
    }
    entries.append({t.runId, t.label + QStringLiteral("  (") + values + QLatin1Char(')')});
    if (m_overlayChosen ? ticked.contains(t.runId) : i < kDefaultOverlay) on.append(t.runId);
  }
  m_trialModel->setEntries(std::move(entries));
  m_trialModel->setCheckedRuns(on, false);
  m_filling = false;
}

QList<qint64> StudyViews::overlayRuns() const { return m_trialModel->checkedRuns(); }

void StudyViews::setVerdicts(const QHash<qint64, backend::VerdictCounts>& verdicts) {
  m_trialModel->setVerdicts(verdicts);
}

void StudyViews::setOverlayRuns(const QList<qint64>& runIds) {
  m_filling = true;
  m_trialModel->setCheckedRuns(runIds, false);
  m_filling = false;
  m_overlayChosen = true;
  emit overlayRunsChanged();
  drawOverlayView();
}

void StudyViews::setContourParams(const QString& x, const QString& y) {
  m_filling = true;
  m_contourX->setCurrentIndex(m_contourX->findText(x));
  m_contourY->setCurrentIndex(m_contourY->findText(y));
  m_filling = false;
  redraw();
}

void StudyViews::setParetoObjectives(int x, int y) {
  m_filling = true;
  m_paretoX->setCurrentIndex(x);
  m_paretoY->setCurrentIndex(y);
  m_filling = false;
  redraw();
}

// A choice changed (contour parameters, Pareto objectives): what depends on the choosers.
void StudyViews::redraw() {
  m_contourTouched = !m_analysed;  // a running analysis must not undo this choice
  drawContourView();
  drawParetoView();
  drawOverlayView();
}

QString StudyViews::objectiveName() const {
  return m_study.studyId >= 0 && !m_study.objectives.isEmpty() ? m_study.objectives.first()
                                                               : m_sweep.objectiveKey;
}

void StudyViews::drawContourView() {
  m_contour = contourData(m_trials, m_contourX->currentText(), m_contourY->currentText());
  drawContour(m_contourPlot, m_contour, m_minimize, objectiveName());
}

void StudyViews::setOverlayCurves(const QHash<qint64, QVector<QPointF>>& curves) {
  m_study.lossCurves = curves;
  drawOverlayView();
}

void StudyViews::setSweepCurves(const SweepData& sweep) {
  if (sweep.experimentId != m_sweep.experimentId) return;
  m_sweep = sweep;
  drawOverlayView();
}

void StudyViews::drawOverlayView() {
  QHash<qint64, QString> names;
  for (const TrialPoint& t : std::as_const(m_trials)) names.insert(t.runId, t.label);
  const qint64 best = m_trials.isEmpty() ? -1 : m_trials.first().runId;  // best first
  m_overlay =
      drawTrialOverlay(m_overlayPlot, m_sweep, m_study.lossCurves, best, overlayRuns(), names);
}

void StudyViews::drawParetoView() {
  m_paretoPoints.clear();
  m_front.clear();
  const int x = m_paretoX->currentIndex();
  const int y = m_paretoY->currentIndex();
  const int objectives = m_study.studyId >= 0 ? int(m_study.objectives.size()) : 1;
  if (objectives < 2 || x < 0 || y < 0 || x == y) {
    drawPareto(m_paretoPlot, {}, {}, QString(), QString(),
               objectives < 2 ? tr("One objective: a Pareto front needs a study\n"
                                   "with two (search.objectives)")
                              : tr("Choose two different objectives"));
    return;
  }
  for (const TrialPoint& t : std::as_const(m_trials)) {
    if (int(t.values.size()) > std::max(x, y))
      m_paretoPoints.append(QPointF(t.values[size_t(x)], t.values[size_t(y)]));
  }
  m_front = paretoFront(m_paretoPoints, minimizeObjective(x), minimizeObjective(y));
  const auto axisName = [this](int i) {
    return QStringLiteral("%1 (%2)").arg(m_study.objectives[i], m_study.directions.value(i));
  };
  drawPareto(m_paretoPlot, m_paretoPoints, m_front, axisName(x), axisName(y),
             tr("No finished trial yet"));
}

}  // namespace shardscope::ui::compare
