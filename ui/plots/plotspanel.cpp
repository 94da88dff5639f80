#include "ui/plots/plotspanel.h"

#include <qcustomplot.h>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QLoggingCategory>
#include <QMenu>
#include <QMessageBox>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTextStream>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "ui/data/runlog.h"
#include "ui/data/runlogtypes.h"
#include "ui/plots/logview.h"
#include "ui/plots/plotcontrols.h"
#include "ui/widgets/curveplot.h"
#include "ui/widgets/plotexport.h"

Q_LOGGING_CATEGORY(lcPlotsPanel, "shardscope.ui.plotspanel")

namespace shardscope::ui {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kReplotMs = 50;       // at most 20 replots a second, however fast points arrive
constexpr int kTickSpacingPx = 60;  // the room an x tick (a label of 3-5 digits) starts with
constexpr int kTickGapPx = 4;       // the least space between two tick labels

struct PlotSpec {
  QString id;
  QString title;
  QString yLabel;
};

QList<PlotSpec> plotSpecs() {
  return {{"loss", QObject::tr("Loss"), QObject::tr("loss (train, eval)")},
          {"lr", QObject::tr("Learning rate"), QObject::tr("lr")},
          {"grad_norm", QObject::tr("Gradient norm"), QObject::tr("grad norm")},
          {"tokens_per_s", QObject::tr("Throughput"), QObject::tr("tokens/s")},
          {"mfu", QObject::tr("Model FLOPs utilisation"), QObject::tr("MFU")},
          {"memory", QObject::tr("Memory per rank"), QObject::tr("MiB")},
          {"gpu_util", QObject::tr("GPU utilisation per rank"), QObject::tr("% busy")},
          {"power", QObject::tr("GPU power draw per rank"), QObject::tr("W")},
          {"comm_exposed", QObject::tr("Exposed communication per rank"),
           QObject::tr("% of step wall time")}};
}

// The plots that a run may lack the data of (no GPU, no phases): each says so in words, in
// place of empty axes, once the selection is read.
bool mayLackData(const QString& id) {
  return id == QLatin1String("gpu_util") || id == QLatin1String("power") ||
         id == QLatin1String("comm_exposed");
}

// Fractions shown as percentages.
double displayScale(const QString& id) {
  if (id == QLatin1String("memory")) return 1.0 / kMiB;
  if (id == QLatin1String("gpu_util") || id == QLatin1String("comm_exposed")) return 100.0;
  return 1.0;
}

// Moves the legend out of the axis rect into a column at its right, on top of a spacer, so it
// never covers a curve (it once hid the right end of the memory curves).
void placeLegendOutside(QCustomPlot* cp, const QFont& font) {
  QCPLegend* legend = cp->legend;
  cp->axisRect()->insetLayout()->take(legend);
  auto* column = new QCPLayoutGrid;
  cp->plotLayout()->addElement(1, 1, column);  // row 0 holds the title, row 1 the axis rect
  cp->plotLayout()->setColumnStretchFactor(1, 0.001);
  column->setMargins(QMargins(2, 0, 2, 0));
  column->addElement(0, 0, legend);
  column->addElement(1, 0, new QCPLayoutElement(cp));  // takes the height the legend leaves
  column->setRowStretchFactor(0, 0.001);
  legend->setFont(font);
  legend->setIconSize(14, 8);
  legend->setRowSpacing(0);
  legend->setMargins(QMargins(4, 2, 4, 2));
  legend->setFillOrder(QCPLayoutGrid::foRowsFirst);
}

// The column placeLegendOutside made: the legend above a spacer.
QCPLayoutGrid* legendColumn(QCustomPlot* cp) {
  return qobject_cast<QCPLayoutGrid*>(cp->plotLayout()->element(1, 1));
}

// The legend wraps into more columns when its entries are more than the axis rect's height holds.
void wrapLegend(QCustomPlot* cp) {
  QCPLegend* legend = cp->legend;
  const int rowHeight = std::max(1, QFontMetrics(legend->font()).height() + 2);
  const int height =
      cp->axisRect()->rect().height() > 0 ? cp->axisRect()->rect().height() : cp->height() - 60;
  const int rows = std::max(1, height / rowHeight);
  if (legend->wrap() != rows) {
    legend->setWrap(rows);
    legend->setFillOrder(QCPLayoutGrid::foRowsFirst, true);
  }
}

// Y range of data [low, high]: a little headroom; never below 0 for non-negative data; all zeros
// (MFU of a run that does not report it) draws on 0..1, not -10..10; any flat series includes 0.
QCPRange valueRange(double low, double high) {
  if (high <= low) {  // a flat series: from 0, so a constant does not read as a big swing
    if (low == 0) return {0, 1};
    return low > 0 ? QCPRange(0, low * 1.5) : QCPRange(low * 1.5, 0);
  }
  const double pad = (high - low) * 0.04;
  return {low >= 0 ? std::max(0.0, low - pad) : low - pad, high + pad};
}

bool hasEnded(const RunSummary& run) {
  return run.record.status != spec::RunStatus::queued &&
         run.record.status != spec::RunStatus::running;
}

// True when two neighbouring tick labels of `axis` (horizontal) come closer than a few pixels.
bool tickLabelsTouch(const QCPAxis* axis) {
  const QVector<double> ticks = axis->tickVector();
  const QVector<QString> labels = axis->tickVectorLabels();
  const QFontMetrics metrics(axis->tickLabelFont());
  double right = -1e9;
  for (qsizetype i = 0; i < ticks.size() && i < labels.size(); ++i) {
    const double at = axis->coordToPixel(ticks[i]);
    if (at < axis->axisRect()->left() - 1 || at > axis->axisRect()->right() + 1) continue;
    const double half = metrics.horizontalAdvance(labels[i]) / 2.0;
    if (at - half < right + kTickGapPx) return true;
    right = at + half;
  }
  return false;
}

}  // namespace

PlotsPanel::PlotsPanel(RunLog& runLog, QWidget* parent)
    : QWidget(parent), m_runLog(runLog), m_log(new LogView(runLog, this)) {
  m_stack = new QStackedWidget(this);
  auto* page = new QWidget(m_stack);
  m_grid = page;
  m_controls = new PlotControls(page);
  auto* grid = new QWidget(page);
  auto* pageLayout = new QVBoxLayout(page);
  pageLayout->setContentsMargins(0, 0, 0, 0);
  pageLayout->addWidget(m_controls);
  pageLayout->addWidget(grid, 1);
  auto* gridLayout = new QGridLayout(grid);
  gridLayout->setContentsMargins(0, 0, 0, 0);
  int index = 0;
  for (const PlotSpec& spec : plotSpecs()) {
    auto* plot = new CurvePlot(grid);
    plot->setObjectName(spec.id);
    plot->setAxisLabels(tr("step"), spec.yLabel);
    plot->setLineWidth(1.5);
    auto* title = new QCPTextElement(plot->customPlot(), spec.title,
                                     QFont(font().family(), font().pointSize() + 1, QFont::Bold));
    plot->customPlot()->plotLayout()->insertRow(0);
    plot->customPlot()->plotLayout()->addElement(0, 0, title);
    placeLegendOutside(plot->customPlot(), QFont(font().family(), font().pointSize() - 2));
    plot->customPlot()->installEventFilter(this);
    // As many x ticks as the width holds: a plot narrowed by its column's legend (the memory
    // plot's, two columns wide) drew 300 steps as "50 100150200250300" with the default 5.
    // A new width starts from one tick per kTickSpacingPx; while the labels still touch, one
    // fewer. This replot's ticks were made before its layout, so a change queues another.
    QCustomPlot* cp = plot->customPlot();
    connect(cp, &QCustomPlot::afterLayout, cp, [cp, width = -1]() mutable {
      QCPAxisTicker& ticker = *cp->xAxis->ticker();
      int fit = ticker.tickCount();
      if (cp->axisRect()->width() != width) {
        width = cp->axisRect()->width();
        fit = std::clamp(width / kTickSpacingPx, 2, 6);
      } else if (tickLabelsTouch(cp->xAxis) && fit > 1) {
        fit -= 1;
      }
      if (fit == ticker.tickCount()) return;
      ticker.setTickCount(fit);
      cp->replot(QCustomPlot::rpQueuedReplot);
    });
    plot->setContextMenuPolicy(Qt::CustomContextMenu);
    plot->customPlot()->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(plot->customPlot(), &QWidget::customContextMenuRequested, this,
            [this, id = spec.id](const QPoint& at) { showPlotMenu(id, at); });
    m_plots.insert(spec.id, plot);
    m_titles.insert(spec.id, title);
    QWidget* cell = plot;
    if (mayLackData(spec.id)) {
      auto* stack = new QStackedWidget(grid);
      auto* note = new QLabel(stack);
      note->setObjectName(spec.id + QStringLiteral("Note"));
      note->setWordWrap(true);
      note->setAlignment(Qt::AlignCenter);
      note->setTextFormat(Qt::RichText);
      note->setFrameShape(QFrame::StyledPanel);
      stack->addWidget(plot);
      stack->addWidget(note);
      m_notes.insert(spec.id, note);
      cell = stack;
    }
    gridLayout->addWidget(cell, index / kGridColumns, index % kGridColumns);
    ++index;
  }
  // Empty axes say nothing: with no run selected, a word on what to do instead.
  m_empty = new QLabel(m_stack);
  m_empty->setObjectName(QStringLiteral("plotsEmptyState"));
  m_empty->setWordWrap(true);
  m_empty->setAlignment(Qt::AlignCenter);
  m_empty->setTextFormat(Qt::RichText);
  m_stack->addWidget(page);
  m_stack->addWidget(m_empty);
  connect(m_controls, &PlotControls::smoothingChanged, this, &PlotsPanel::setSmoothing);
  connect(m_controls, &PlotControls::xAxisChanged, this, &PlotsPanel::setXAxis);
  connect(m_controls, &PlotControls::logScaleChanged, this, &PlotsPanel::setLogScale);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(m_stack);
  splitter->addWidget(m_log);
  splitter->setStretchFactor(0, 4);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(splitter);

  m_replotTimer.setObjectName(QStringLiteral("plotsReplot"));
  m_replotTimer.setSingleShot(true);
  m_replotTimer.setInterval(kReplotMs);
  connect(&m_replotTimer, &QTimer::timeout, this, &PlotsPanel::replotNow);
  connect(&runLog, &RunLog::seriesLoaded, this, &PlotsPanel::onSeries);
  connect(&runLog, &RunLog::seriesPassDone, this, &PlotsPanel::onPassDone);
  connect(&runLog, &RunLog::runsLoaded, this, [this](const QVector<RunSummary>& runs) {
    m_runCount = static_cast<int>(runs.size());
    for (const RunSummary& run : runs) {
      if (m_runIds.contains(run.record.id))
        m_runInfo.insert(run.record.id, {run.record.name, hasEnded(run)});
    }
    updateEmptyState();
    updateNotes();
    // The selection is not announced again when the table reloads: the log's run may have ended.
    for (const RunSummary& run : runs) {
      if (run.record.id == m_log->runId()) m_log->setEnded(hasEnded(run));
    }
  });
  updateEmptyState();
}

void PlotsPanel::updateEmptyState() {
  if (!m_runIds.isEmpty()) {
    m_stack->setCurrentWidget(m_grid);
    return;
  }
  m_empty->setText(
      m_runCount == 0
          ? tr("<p><b>No runs yet.</b></p><p>Start one from the <b>Builder</b> tab: choose "
               "<i>demo</i>, press <i>New from template</i>, then <b>Launch</b>. Its loss, "
               "learning rate, throughput and memory curves draw here as it trains.</p>")
          : tr("<p>Select a run in the <b>Runs</b> table to see its curves here (several, "
               "with Ctrl or Shift, to compare them).</p>"));
  m_stack->setCurrentWidget(m_empty);
}

QStringList PlotsPanel::plotIds() {
  QStringList ids;
  for (const PlotSpec& spec : plotSpecs()) ids.append(spec.id);
  return ids;
}

QString PlotsPanel::plotFor(const QString& key) {
  if (key == QLatin1String("loss") || key == QLatin1String("eval.loss"))
    return QStringLiteral("loss");
  if (key.startsWith(QLatin1String("mem."))) return QStringLiteral("memory");
  if (key == QLatin1String("sys.gpu_util")) return QStringLiteral("gpu_util");
  if (key == QLatin1String("sys.power_w")) return QStringLiteral("power");
  if (key == QLatin1String(kExposedShareKey)) return QStringLiteral("comm_exposed");
  return plotIds().contains(key) && !mayLackData(key) ? key : QString();
}

QString PlotsPanel::seriesName(const QString& runName, const QString& key, int rank) {
  if (key == QLatin1String("loss")) return runName + QStringLiteral(" train");
  if (key == QLatin1String("eval.loss")) return runName + QStringLiteral(" eval");
  if (key.startsWith(QLatin1String("mem."))) {
    return QStringLiteral("%1 r%2 %3").arg(runName).arg(rank).arg(key.mid(4));
  }
  if (key.startsWith(QLatin1String("sys.")) || key == QLatin1String(kExposedShareKey))
    return QStringLiteral("%1 r%2").arg(runName).arg(rank);
  return runName;
}

void PlotsPanel::setRuns(const QList<qint64>& runIds, const QVector<RunSummary>& runs,
                         qint64 logRun) {
  // A refresh of the runs table announces the same selection again: the curves stay, and the
  // reader goes on following them.
  const bool changed = runIds != m_runIds;
  m_runIds = runIds;
  if (changed) {
    m_loaded = false;
    m_series.clear();
    m_clocks.clear();
    for (CurvePlot* plot : std::as_const(m_plots)) {
      plot->clear();
      plot->replot();
    }
  }
  if (changed) m_runInfo.clear();
  for (const RunSummary& run : runs) {
    if (!runIds.contains(run.record.id)) continue;
    m_runInfo.insert(run.record.id, {run.record.name, hasEnded(run)});
    if (run.record.startedAt) m_clocks[run.record.id].startedAt = *run.record.startedAt;
  }
  if (!runIds.contains(logRun)) logRun = runIds.isEmpty() ? -1 : runIds.first();
  const RunSummary* shown = nullptr;
  for (const RunSummary& run : runs) {
    if (run.record.id == logRun) shown = &run;
  }
  const bool ended = shown != nullptr && hasEnded(*shown);
  m_log->setRun(shown != nullptr ? logRun : -1, shown != nullptr ? shown->record.worldSize : 1,
                shown != nullptr ? shown->record.name : QString(), int(runIds.size()), ended);
  if (changed) m_runLog.watchRuns(runIds, ++m_watchGeneration);
  updateEmptyState();
  updateNotes();
}

QString PlotsPanel::missingText(const QString& id, const QStringList& runs, bool live) {
  const QString names = runs.join(QStringLiteral(", "));
  if (id == QLatin1String("comm_exposed")) {
    return live ? tr("<p><b>No phase timings yet</b> for %1.</p>").arg(names.toHtmlEscaped())
                : tr("<p><b>No phase timings</b> for %1: its trainer wrote no <i>phases</i> "
                     "events (a program launcher, or a shardtrain before them), so the exposed "
                     "communication is unknown.</p>")
                      .arg(names.toHtmlEscaped());
  }
  return live ? tr("<p><b>No GPU metrics yet</b> for %1.</p>").arg(names.toHtmlEscaped())
              : tr("<p><b>No GPU metrics</b> for %1: it ran on the CPU, or NVML was not found "
                   "where it ran (its log says which). GPU utilisation and power come from the "
                   "trainer's <i>sys</i> events, read through NVML on CUDA devices.</p>")
                    .arg(names.toHtmlEscaped());
}

void PlotsPanel::updateNotes() {
  for (auto note = m_notes.cbegin(); note != m_notes.cend(); ++note) {
    const QString& id = note.key();
    auto* stack = qobject_cast<QStackedWidget*>(note.value()->parentWidget());
    QSet<qint64> drawn;
    for (const StoredSeries& series : m_series.value(id)) drawn.insert(series.runId);
    QStringList lacking;
    bool live = false;
    for (const qint64 runId : std::as_const(m_runIds)) {
      if (drawn.contains(runId)) continue;
      const RunInfo info = m_runInfo.value(runId, {QString::number(runId), true});
      lacking.append(info.name);
      live = live || !info.ended;
    }
    const QString title = plotSpecs().at(plotIds().indexOf(id)).title;
    // Until the selection is read, or when every run has the data: the plot as it is.
    if (!m_loaded || lacking.isEmpty()) {
      m_titles.value(id)->setText(title);
      stack->setCurrentWidget(m_plots.value(id));
      continue;
    }
    if (drawn.isEmpty()) {
      note.value()->setText(QStringLiteral("<p><b>%1</b></p>").arg(title.toHtmlEscaped()) +
                            missingText(id, lacking, live));
      stack->setCurrentWidget(note.value());
      continue;
    }
    // Some runs have it: their curves, and the title names the others.
    const QString what =
        id == QLatin1String("comm_exposed") ? tr("no phase timings") : tr("no GPU metrics");
    m_titles.value(id)->setText(
        QStringLiteral("%1 (%2: %3)").arg(title, what, lacking.join(QStringLiteral(", "))));
    stack->setCurrentWidget(m_plots.value(id));
  }
}

QLabel* PlotsPanel::missingNote(const QString& id) const {
  QLabel* note = m_notes.value(id);
  if (note == nullptr) return nullptr;
  auto* stack = qobject_cast<QStackedWidget*>(note->parentWidget());
  return stack != nullptr && stack->currentWidget() == note ? note : nullptr;
}

void PlotsPanel::onSeries(const QVector<SeriesChunk>& chunks) {
  QSet<qint64> reclocked;  // runs whose clock moved: their points' xs move too
  for (const SeriesChunk& chunk : chunks) {
    if (!m_runIds.contains(chunk.runId)) continue;  // sent before the selection changed
    const QString id = plotFor(chunk.key);
    CurvePlot* plot = m_plots.value(id);
    if (plot == nullptr) continue;
    StoredSeries points{chunk.runId, chunk.steps, chunk.values, chunk.times};
    if (const double scale = displayScale(id); scale != 1.0) {
      for (double& v : points.values) v *= scale;
    }
    if (chunk.key == QLatin1String("tokens_per_s") && chunk.rank == 0) {
      RunClock& clock = m_clocks[chunk.runId];
      if (chunk.reset) {
        clock.steps.clear();
        clock.times.clear();
        clock.tps.clear();
      }
      clock.steps += chunk.steps;
      clock.times += chunk.times;
      clock.tps += chunk.values;
      if (m_axis != XAxis::step) reclocked.insert(chunk.runId);
    }
    if (!chunk.times.isEmpty()) {
      RunClock& clock = m_clocks[chunk.runId];
      const double first = *std::min_element(chunk.times.cbegin(), chunk.times.cend());
      if (!(clock.firstTime <= first)) {
        clock.firstTime = first;
        if (m_axis == XAxis::relativeTime) reclocked.insert(chunk.runId);
      }
    }
    const QString name = seriesName(chunk.runName, chunk.key, chunk.rank);
    StoredSeries& stored = m_series[id][name];
    if (chunk.reset) {
      stored = points;
    } else {
      stored.runId = points.runId;
      stored.steps += points.steps;
      stored.values += points.values;
      stored.times += points.times;
    }
    drawPoints(id, name, points, chunk.reset);
    if (chunk.key == QLatin1String("mem.estimate")) {
      // The trainer's estimate: a flat dashed line the measured peaks read against.
      plot->setSeriesStyle(name, Qt::DashLine);
    } else if (chunk.key == QLatin1String("eval.loss")) {
      // Evaluations are sparse: dots joined by a dashed line read as "measured here".
      plot->setSeriesStyle(name, Qt::DashLine, true);
    }
    m_dirty.insert(id);
  }
  for (const qint64 runId : std::as_const(reclocked)) redrawSeries(runId);
  if (m_loaded) updateNotes();
  scheduleReplot();
}

void PlotsPanel::drawPoints(const QString& id, const QString& name, const StoredSeries& points,
                            bool reset) {
  CurvePlot* plot = m_plots.value(id);
  if (m_axis == XAxis::step) {
    if (reset) {
      plot->setSeries(name, points.steps, points.values);
    } else {
      plot->appendPoints(name, points.steps, points.values);
    }
    return;
  }
  // A point the clock cannot place yet (tokens before any throughput) waits for the next redraw.
  const QVector<double> mapped =
      mapX(m_axis, m_clocks.value(points.runId), points.steps, points.times);
  QVector<double> xs;
  QVector<double> ys;
  xs.reserve(mapped.size());
  ys.reserve(mapped.size());
  for (qsizetype i = 0; i < mapped.size() && i < points.values.size(); ++i) {
    if (!std::isfinite(mapped[i])) continue;
    xs.append(mapped[i]);
    ys.append(points.values[i]);
  }
  if (reset) {
    plot->setSeries(name, xs, ys);
  } else {
    plot->appendPoints(name, xs, ys);
  }
}

void PlotsPanel::redrawSeries(qint64 runId) {
  for (auto plot = m_series.cbegin(); plot != m_series.cend(); ++plot) {
    for (auto series = plot->cbegin(); series != plot->cend(); ++series) {
      if (runId >= 0 && series->runId != runId) continue;
      drawPoints(plot.key(), series.key(), *series, true);
      m_dirty.insert(plot.key());
    }
  }
}

void PlotsPanel::setXAxis(XAxis axis) {
  if (axis == m_axis) return;
  m_axis = axis;
  styleXAxes();
  redrawSeries(-1);
  for (const QString& id : plotIds()) {
    fitAxes(id);
    m_plots.value(id)->replot();
  }
  m_dirty.clear();
}

void PlotsPanel::styleXAxes() {
  for (CurvePlot* plot : std::as_const(m_plots)) {
    QCustomPlot* cp = plot->customPlot();
    QSharedPointer<QCPAxisTicker> ticker;
    if (cp->xAxis->scaleType() == QCPAxis::stLogarithmic) {
      ticker.reset(new QCPAxisTickerLog);
    } else if (m_axis == XAxis::wallTime) {
      auto* dates = new QCPAxisTickerDateTime;
      dates->setDateTimeFormat(QStringLiteral("MMM d\nhh:mm"));
      ticker.reset(dates);
    } else if (m_axis == XAxis::relativeTime) {
      auto* times = new QCPAxisTickerTime;
      times->setTimeFormat(QStringLiteral("%h:%m:%s"));
      ticker.reset(times);
    } else {
      ticker.reset(new QCPAxisTicker);
    }
    ticker->setTickCount(cp->xAxis->ticker()->tickCount());
    cp->xAxis->setTicker(ticker);
    cp->xAxis->setLabel(xAxisLabel(m_axis));
    plot->setXText([axis = m_axis](double x) { return xText(axis, x); });
  }
}

void PlotsPanel::setLogScale(bool x, bool y) {
  for (CurvePlot* plot : std::as_const(m_plots)) {
    QCustomPlot* cp = plot->customPlot();
    cp->xAxis->setScaleType(x ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    cp->yAxis->setScaleType(y ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    cp->yAxis->setTicker(y ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                           : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  }
  styleXAxes();
  for (const QString& id : plotIds()) {
    fitAxes(id);
    m_plots.value(id)->replot();
  }
}

void PlotsPanel::setSmoothing(double weight) {
  for (const QString& id : plotIds()) {
    m_plots.value(id)->setSmoothing(weight);
    m_plots.value(id)->replot();
  }
}

void PlotsPanel::onPassDone(const QList<qint64>& runIds, int generation) {
  if (runIds != m_runIds || generation != m_watchGeneration) return;
  if (!m_loaded) {
    m_loaded = true;
    updateNotes();
    replotNow();
    emit loaded();
  }
}

void PlotsPanel::scheduleReplot() {
  if (!m_replotTimer.isActive()) m_replotTimer.start();
}

void PlotsPanel::replotNow() {
  m_replotTimer.stop();
  if (!m_loaded) {  // the first paint of a selection: everything at once
    QSet<QString> dirty = std::exchange(m_dirty, {});
    for (const QString& id : dirty) fitAxes(id);
    dirty.unite(std::exchange(m_dirty, {}));  // plots whose legend column alignLegends widened
    for (const QString& id : dirty) m_plots.value(id)->replot();
    emit replotted();
    return;
  }
  // While following live runs, one plot per turn of the event loop: six replots in one go held
  // the GUI thread for tens of ms (the dashboard's latency target); the rest follow as soon as it
  // is free.
  QString id;
  for (const QString& candidate : plotIds()) {
    if (m_dirty.remove(candidate)) {
      id = candidate;
      break;
    }
  }
  if (id.isEmpty()) return;
  fitAxes(id);
  m_plots.value(id)->replot();
  if (m_dirty.isEmpty()) {
    emit replotted();
  } else {
    QTimer::singleShot(0, this, [this] {
      if (!m_replotTimer.isActive()) replotNow();
    });
  }
}

void PlotsPanel::fitAxes(const QString& id) {
  CurvePlot* plot = m_plots.value(id);
  if (plot == nullptr) return;
  QCustomPlot* cp = plot->customPlot();
  bool anyKey = false;
  bool anyValue = false;
  QCPRange keys;
  QCPRange values;
  // A log axis fits the positive points only (the others are not drawn).
  const QCP::SignDomain keySigns =
      cp->xAxis->scaleType() == QCPAxis::stLogarithmic ? QCP::sdPositive : QCP::sdBoth;
  const bool logValues = cp->yAxis->scaleType() == QCPAxis::stLogarithmic;
  for (int g = 0; g < cp->graphCount(); ++g) {
    bool found = false;
    const QCPRange k = cp->graph(g)->getKeyRange(found, keySigns);
    if (found)
      keys = anyKey ? QCPRange(std::min(keys.lower, k.lower), std::max(keys.upper, k.upper)) : k;
    anyKey = anyKey || found;
    const QCPRange v =
        cp->graph(g)->getValueRange(found, logValues ? QCP::sdPositive : QCP::sdBoth);
    if (found)
      values =
          anyValue ? QCPRange(std::min(values.lower, v.lower), std::max(values.upper, v.upper)) : v;
    anyValue = anyValue || found;
  }
  if (anyKey) {
    // The x axis ends at the last step (it once stopped at 38 of 40 steps).
    cp->xAxis->setRange(keys.lower, keys.upper > keys.lower ? keys.upper : keys.lower + 1);
  }
  if (anyValue && logValues) {
    cp->yAxis->setRange(values.lower / 1.2,
                        values.upper > values.lower ? values.upper * 1.2 : values.lower * 10);
  } else if (anyValue) {
    cp->yAxis->setRange(valueRange(values.lower, values.upper));
  }
  wrapLegend(cp);
  alignLegends(id);
}

void PlotsPanel::alignLegends(const QString& id) {
  const QStringList ids = plotIds();
  const auto column = ids.indexOf(id) % kGridColumns;
  int width = 0;
  for (auto i = column; i < ids.size(); i += kGridColumns)
    width = std::max(width,
                     m_plots.value(ids[i])->customPlot()->legend->minimumOuterSizeHint().width());
  for (auto i = column; i < ids.size(); i += kGridColumns) {
    QCPLayoutGrid* grid = legendColumn(m_plots.value(ids[i])->customPlot());
    if (grid == nullptr || grid->minimumSize().width() == width) continue;
    grid->setMinimumSize(width, 0);
    if (ids[i] != id) m_dirty.insert(ids[i]);  // its axis rect moved: it replots too
  }
}

bool PlotsPanel::eventFilter(QObject* watched, QEvent* event) {
  // A paint before the coalesced replot (a grab, a resize) would show new points with old axes:
  // catch that plot up first; its replot queues the paint that shows it.
  if (event->type() == QEvent::Paint && !m_dirty.isEmpty()) {
    for (auto it = m_plots.cbegin(); it != m_plots.cend(); ++it) {
      if (it.value()->customPlot() != watched || !m_dirty.contains(it.key())) continue;
      m_dirty.remove(it.key());
      fitAxes(it.key());
      it.value()->customPlot()->replot(QCustomPlot::rpQueuedRefresh);
      if (m_dirty.isEmpty()) m_replotTimer.stop();
      break;
    }
  }
  return QWidget::eventFilter(watched, event);
}

Result<void> PlotsPanel::exportPlot(const QString& id, const QString& path, int width,
                                    int height) const {
  CurvePlot* plot = m_plots.value(id);
  if (plot == nullptr) {
    return fail("plot \"" + id.toStdString() + "\" does not exist; use one of " +
                plotIds().join(", ").toStdString());
  }
  return savePlot(plot->customPlot(), path, width, height);
}

Result<void> PlotsPanel::exportCsv(const QString& id, const QString& path) const {
  CurvePlot* plot = m_plots.value(id);
  if (plot == nullptr) return fail("plot \"" + id.toStdString() + "\" does not exist");
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) {
    return fail(path.toStdString() + ": cannot write the CSV: " + file.errorString().toStdString());
  }
  QTextStream out(&file);
  out << "series,step,value\n";
  const QHash<QString, StoredSeries> series = m_series.value(id);
  for (const QString& seriesName : plot->seriesNames()) {
    const StoredSeries stored = series.value(seriesName);
    QString name = seriesName;
    name.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    for (qsizetype i = 0; i < stored.steps.size() && i < stored.values.size(); ++i) {
      out << '"' << name << "\"," << stored.steps[i] << ','
          << QString::number(stored.values[i], 'g', 10) << '\n';
    }
  }
  out.flush();
  if (file.error() != QFileDevice::NoError) {
    return fail(path.toStdString() +
                ": writing the CSV failed: " + file.errorString().toStdString());
  }
  return ok();
}

QMenu* PlotsPanel::plotMenu(const QString& id) {
  auto* menu = new QMenu(this);
  QAction* image = menu->addAction(tr("Save plot as PNG, SVG or PDF…"));
  image->setObjectName(QStringLiteral("savePlot"));
  connect(image, &QAction::triggered, this, [this, id] { savePlotDialog(id); });
  QAction* csv = menu->addAction(tr("Export data as CSV…"));
  csv->setObjectName(QStringLiteral("saveCsv"));
  connect(csv, &QAction::triggered, this, [this, id] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export data as CSV"), id + QStringLiteral(".csv"), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    if (const Result<void> done = exportCsv(id, path); !done) {
      qCWarning(lcPlotsPanel, "%s", done.message().c_str());
      QMessageBox::warning(this, tr("Export data as CSV"), QString::fromStdString(done.message()));
    }
  });
  return menu;
}

void PlotsPanel::savePlotDialog(const QString& id) {
  const QString folder = QStandardPaths::writableLocation(QStandardPaths::PicturesLocation);
  ExportDialog dialog(tr("Save plot"), QDir(folder).filePath(id + QStringLiteral(".png")),
                      QSize(1200, 800), this);
  if (dialog.exec() != QDialog::Accepted) return;
  const Result<void> done =
      exportPlot(id, dialog.path(), dialog.imageSize().width(), dialog.imageSize().height());
  if (!done) {
    qCWarning(lcPlotsPanel, "%s", done.message().c_str());
    QMessageBox::warning(this, tr("Save plot"), QString::fromStdString(done.message()));
  }
}

void PlotsPanel::showPlotMenu(const QString& id, const QPoint& where) {
  std::unique_ptr<QMenu> menu(plotMenu(id));
  menu->exec(m_plots.value(id)->customPlot()->mapToGlobal(where));
}

}  // namespace shardscope::ui
