#include "ui/compare/comparepanel.h"

#include <qcustomplot.h>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QLoggingCategory>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

#include "ui/compare/compareplots.h"
#include "ui/compare/studyviews.h"
#include "ui/compare/studyworker.h"
#include "ui/data/runlog.h"
#include "ui/runs/runtablemodel.h"

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
      m_summary(new QLabel(this)),
      m_history(new QCustomPlot(this)),
      m_intermediate(new QCustomPlot(this)),
      m_parallel(new QCustomPlot(this)),
      m_slice(new QCustomPlot(this)),
      m_views(new compare::StudyViews(this)),
      m_studyLoader(new compare::StudyLoader(this)) {
  m_direction->addItem(tr("minimize"), true);
  m_direction->addItem(tr("maximize"), false);
  m_direction->setToolTip(tr("Whether a lower or a higher objective is better"));
  m_experiment->setToolTip(tr("The sweep (runs of one experiment) to compare"));
  m_sliceParam->setToolTip(tr("The parameter on the slice plot's x axis"));
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
  bar->addWidget(m_summary, 1);
  auto* plots = new QWidget(this);
  auto* grid = new QGridLayout(plots);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(m_history, 0, 0);
  grid->addWidget(m_intermediate, 0, 1);
  grid->addWidget(m_parallel, 0, 2);
  grid->addWidget(m_slice, 0, 3);
  grid->addWidget(m_views, 1, 0, 1, 4);
  grid->setRowStretch(0, 1);
  grid->setRowStretch(1, 1);
  for (QCustomPlot* plot : {m_history, m_intermediate, m_parallel, m_slice})
    plot->setMinimumHeight(200);
  m_experiment->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  auto* bottom = new QSplitter(Qt::Horizontal, this);
  bottom->addWidget(buildDiff());
  bottom->addWidget(m_views->overlayChooser());
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 1);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(plots);
  splitter->addWidget(bottom);
  splitter->setStretchFactor(0, 4);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(bar);
  layout->addWidget(splitter);

  connect(&runLog, &RunLog::sweepLoaded, this, &ComparePanel::onSweep);
  connect(m_studyLoader, &compare::StudyLoader::loaded, this, &ComparePanel::onStudy);
  connect(m_views, &compare::StudyViews::overlayRunsChanged, this, &ComparePanel::requestStudy);
  connect(m_experiment, &QComboBox::currentIndexChanged, this, [this] {
    if (!m_filling) showSweep(m_experiment->currentData().toLongLong());
  });
  connect(m_direction, &QComboBox::currentIndexChanged, this, [this] {
    m_minimize = m_direction->currentData().toBool();
    redraw();
    m_views->setData(m_sweep, m_study, m_minimize);
  });
  connect(m_sliceParam, &QComboBox::currentIndexChanged, this, [this] {
    if (!m_filling) redraw();
  });
}

QWidget* ComparePanel::buildDiff() {
  auto* box = new QWidget(this);
  m_diffA = new QComboBox(box);
  m_diffB = new QComboBox(box);
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
  const bool sameSweep = sweep.experimentId == m_sweep.experimentId;
  m_sweep = sweep;
  fillCombos();
  if (!sameSweep || m_diffA->currentIndex() < 0) {
    // Default diff: the first two trials, so the table is never empty.
    m_filling = true;
    m_diffA->setCurrentIndex(0);
    m_diffB->setCurrentIndex(std::min(1, m_diffB->count() - 1));
    m_filling = false;
  }
  redraw();
  updateDiff();
  m_views->setData(m_sweep, m_study, m_minimize);
  requestStudy();  // the run log changed: the study and the curves may have too
}

void ComparePanel::requestStudy() {
  m_studyLoader->request(m_runLog.path(), m_sweep.experimentId, m_views->overlayRuns());
}

// Loaded once the study of the shown sweep and the overlay's curves have arrived.
void ComparePanel::onStudy(const compare::StudyInfo& info) {
  if (info.experimentId != m_sweep.experimentId) return;  // an answer for a previous sweep
  m_study = info;
  if (m_study.studyId >= 0 && !m_study.directions.isEmpty()) {
    const bool minimize = m_study.directions.first() != QStringLiteral("maximize");
    if (minimize != m_minimize) setMinimize(minimize);  // the study says which way is better
  }
  m_views->setData(m_sweep, m_study, m_minimize);
  const QList<qint64> wanted = m_views->overlayRuns();
  const bool complete = std::all_of(wanted.begin(), wanted.end(),
                                    [this](qint64 id) { return m_study.lossCurves.contains(id); });
  if (!complete) return requestStudy();
  if (!m_loaded) {
    m_loaded = true;
    emit loaded();
  }
}

void ComparePanel::fillCombos() {
  m_filling = true;
  m_experiment->clear();
  for (qint64 id : m_sweep.experimentIds) {
    m_experiment->addItem(tr("experiment %1").arg(id), id);
  }
  m_experiment->setCurrentIndex(m_experiment->findData(m_sweep.experimentId));
  const QString param = m_sliceParam->currentText();
  m_sliceParam->clear();
  m_sliceParam->addItems(compare::paramNames(m_sweep));
  if (const int at = m_sliceParam->findText(param); at >= 0) m_sliceParam->setCurrentIndex(at);
  for (QComboBox* combo : {m_diffA, m_diffB}) {
    const qint64 keep = combo->currentData().toLongLong();
    combo->clear();
    for (const SweepTrial& trial : m_sweep.trials) combo->addItem(trial.name, trial.runId);
    if (const int at = combo->findData(keep); at >= 0) combo->setCurrentIndex(at);
  }
  m_filling = false;
}

void ComparePanel::redraw() {
  compare::drawHistory(m_history, m_sweep, m_minimize);
  m_dimmed = compare::drawIntermediate(m_intermediate, m_sweep);
  m_parallelLines = compare::drawParallel(m_parallel, m_sweep, m_minimize);
  m_slicePoints = compare::drawSlice(m_slice, m_sweep, m_sliceParam->currentText());
  const compare::History h = compare::history(m_sweep, m_minimize);
  m_summary->setText(
      m_sweep.experimentId < 0
          ? tr("No sweep in this run log: runs started from an experiment appear here")
          : tr("%1 trials, %2 with an objective; best %3")
                .arg(m_sweep.trials.size())
                .arg(h.objectives.size())
                .arg(h.best.isEmpty() ? QStringLiteral("—")
                                      : QString::number(h.best.last(), 'g', 5)));
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
    const qint64 id = combo->currentData().toLongLong();
    for (const SweepTrial& trial : m_sweep.trials) {
      if (trial.runId == id) return &trial;
    }
    return nullptr;
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
