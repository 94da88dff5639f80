#include "ui/widgets/curveplot.h"

#include <qcustomplot.h>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QLoggingCategory>
#include <QPromise>
#include <QThreadPool>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "ui/widgets/curvegraph.h"
#include "ui/widgets/smoothing.h"

Q_LOGGING_CATEGORY(lcCurvePlot, "shardscope.ui.curveplot")

namespace shardscope::ui {

namespace {

// Tableau 10: distinct hues that stay apart for most colour-blind readers and on white.
constexpr std::array<QRgb, 10> kPalette = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
                                           0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac};

void styleAxis(QCPAxis* axis) {
  axis->setBasePen(QPen(QColor(0x60, 0x60, 0x60), 1));
  axis->setTickPen(QPen(QColor(0x60, 0x60, 0x60), 1));
  axis->setSubTickPen(QPen(QColor(0x90, 0x90, 0x90), 1));
  axis->setTickLabelColor(QColor(0x30, 0x30, 0x30));
  axis->setLabelColor(QColor(0x20, 0x20, 0x20));
  axis->grid()->setPen(QPen(QColor(0xdd, 0xdd, 0xdd), 1, Qt::SolidLine));
  axis->grid()->setZeroLinePen(QPen(QColor(0xbb, 0xbb, 0xbb), 1, Qt::SolidLine));
  axis->grid()->setSubGridVisible(false);
}

constexpr int kDensePoints = 20000;   // above this, a series is drawn with a thin raster pen
constexpr int kFaintAlpha = 60;       // the raw curve behind a smoothed one
const char* const kRawLayer = "raw";  // below "main": the faint raw curves under every smoothed one

// The index of the point of `graph` whose key is nearest `x` (-1: no points).
int nearestIndex(const QCPGraph* graph, double x) {
  const auto& data = *graph->data();
  if (data.isEmpty()) return -1;
  auto it = data.findBegin(x, false);  // the first point at or after x
  if (it == data.constEnd()) return data.size() - 1;
  int index = int(it - data.constBegin());
  if (index > 0 && x - (it - 1)->key < it->key - x) --index;
  return index;
}

// The lengths of xs and ys must agree; a caller bug is logged and the extra points dropped
// (a plot should degrade, not take the dashboard down).
qsizetype checkedLength(const QString& name, const QVector<double>& xs, const QVector<double>& ys) {
  if (xs.size() != ys.size()) {
    qCWarning(lcCurvePlot, "%s:%d: series '%s' got %lld x values and %lld y values; plotting %lld",
              __FILE__, __LINE__, qPrintable(name), static_cast<long long>(xs.size()),
              static_cast<long long>(ys.size()),
              static_cast<long long>(std::min(xs.size(), ys.size())));
  }
  return std::min(xs.size(), ys.size());
}

}  // namespace

// A background pass: the deferred series' points as they were when it started (implicitly
// shared copies of the raw containers: O(1) here, and the GUI thread's next change to a raw
// graph detaches from them), smoothed with one weight into new containers the GUI thread then
// takes whole (a pointer swap).
struct CurvePlot::SmoothPass {
  struct Series {
    QString name;
    quint64 generation = 0;
    QSharedPointer<QCPGraphDataContainer> points;    // the raw points (dropped once read)
    QSharedPointer<QCPGraphDataContainer> smoothed;  // the same keys, the EMA of the values
    EmaState ema;                                    // where the EMA stands at the last point
    std::vector<CurveGraph::Block> summary;          // the smoothed points' block summary
  };
  double weight = 0.0;
  std::vector<Series> series;

  // On the worker: exactly what refreshSmoothed computes from a fresh EmaState.
  void run() {
    std::vector<double> values;
    for (Series& s : series) {
      const QCPGraphDataContainer& points = *s.points;
      const int n = points.size();
      values.resize(std::size_t(n));
      const QCPGraphData* in = n > 0 ? &*points.constBegin() : nullptr;
      for (int i = 0; i < n; ++i) values[std::size_t(i)] = in[i].value;
      s.ema = EmaState(weight);
      (void)smoothEmaAppend(s.ema, values.data(), values.data(), std::size_t(n));  // fresh: all
      s.smoothed = QSharedPointer<QCPGraphDataContainer>::create(points);
      QCPGraphData* to = n > 0 ? &*s.smoothed->begin() : nullptr;  // detaches: a copy of its own
      for (int i = 0; i < n; ++i) to[i].value = values[std::size_t(i)];
      s.summary = CurveGraph::summarize(*s.smoothed);  // not on the GUI thread either
      s.points.reset();
    }
  }
};

CurvePlot::CurvePlot(QWidget* parent) : QWidget(parent), m_plot(new QCustomPlot(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_plot);

  m_plot->setBackground(Qt::white);
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  for (QCPAxis* axis : {m_plot->xAxis, m_plot->yAxis}) styleAxis(axis);
  // A frame on all four sides reads as a chart, not as two loose axes.
  m_plot->axisRect()->setupFullAxesBox(true);
  m_plot->xAxis2->setTickLabels(false);
  m_plot->yAxis2->setTickLabels(false);
  setAxisLabels(tr("step"), tr("value"));

  m_plot->legend->setVisible(true);
  m_plot->legend->setBrush(QColor(255, 255, 255, 220));
  m_plot->legend->setBorderPen(QPen(QColor(0xbb, 0xbb, 0xbb)));
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);

  m_plot->addLayer(kRawLayer, m_plot->layer("main"), QCustomPlot::limBelow);
  // The hover dots redraw alone: a pointer move repaints one layer, not a million points.
  m_plot->layer("overlay")->setMode(QCPLayer::lmBuffered);
  m_plot->setMouseTracking(true);
  m_plot->installEventFilter(this);
  connect(m_plot, &QCustomPlot::mouseMove, this, &CurvePlot::onMouseMove);
  connect(m_plot, &QCustomPlot::beforeReplot, this, &CurvePlot::refreshSmoothed);
  m_passWatcher = new QFutureWatcher<void>(this);
  connect(m_passWatcher, &QFutureWatcher<void>::finished, this, &CurvePlot::onPassDone);
}

QColor CurvePlot::seriesColor(int index) {
  const int size = paletteSize();
  return QColor::fromRgb(kPalette[static_cast<std::size_t>(((index % size) + size) % size)]);
}

int CurvePlot::paletteSize() { return static_cast<int>(kPalette.size()); }

void CurvePlot::setAxisLabels(const QString& xLabel, const QString& yLabel) {
  m_plot->xAxis->setLabel(xLabel);
  m_plot->yAxis->setLabel(yLabel);
}

QCPGraph* CurvePlot::graphFor(const QString& name) {
  if (QCPGraph* graph = m_graphs.value(name)) return graph;
  auto* graph = new CurveGraph(m_plot->xAxis, m_plot->yAxis);
  graph->setReuseLines(m_reuseLines);
  graph->setIncremental(m_incrementalLines);
  graph->setName(name);
  m_colors.insert(name, seriesColor(m_nextColor++));
  graph->setPen(
      QPen(m_colors.value(name), m_lineWidth, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
  graph->setLineStyle(QCPGraph::lsLine);
  // Thousands of steps per run: draw one representative point per pixel column.
  graph->setAdaptiveSampling(true);
  m_graphs.insert(name, graph);
  m_order.append(name);
  if (m_smoothing > 0) applySmoothingTo(name);
  return graph;
}

QVector<QRectF> CurvePlot::columnSpans(const QVector<QPointF>& pixels, double penWidth) {
  return CurveGraph::columnSpans(pixels, penWidth);
}

QCPGraph* CurvePlot::drawnGraph(const QString& name) const {
  if (QCPGraph* smoothed = m_smoothed.value(name)) return smoothed;
  return m_graphs.value(name);
}

void CurvePlot::setSeriesStyle(const QString& name, Qt::PenStyle style, bool dots) {
  if (!m_graphs.contains(name)) return;
  m_styles.insert(name, Style{style, dots});
  fitPens(name);
}

void CurvePlot::setSmoothing(double weight) {
  const double w = std::clamp(std::isnan(weight) ? 0.0 : weight, 0.0, kMaxSmoothing);
  if (w == m_smoothing) return;
  m_smoothing = w;
  for (const QString& name : std::as_const(m_order)) applySmoothingTo(name);
  // The legend lists each series once, by the graph it is drawn with, in creation order.
  m_plot->legend->clearItems();
  for (const QString& name : std::as_const(m_order)) drawnGraph(name)->addToLegend();
}

void CurvePlot::applySmoothingTo(const QString& name) {
  QCPGraph* raw = m_graphs.value(name);
  QCPGraph* smoothed = m_smoothed.value(name);
  const bool created = m_smoothing > 0 && smoothed == nullptr;
  if (created) {
    auto* graph = new CurveGraph(m_plot->xAxis, m_plot->yAxis);
    graph->setReuseLines(m_reuseLines);
    graph->setIncremental(m_incrementalLines);
    smoothed = graph;
    smoothed->setName(name);
    smoothed->setLineStyle(QCPGraph::lsLine);
    smoothed->setAdaptiveSampling(true);
    m_smoothed.insert(name, smoothed);
    raw->removeFromLegend();
    raw->setLayer(kRawLayer);
  } else if (m_smoothing == 0 && smoothed != nullptr) {
    m_plot->removeGraph(m_smoothed.take(name));
    raw->setLayer("main");
    if (!m_plot->legend->hasItemWithPlottable(raw)) raw->addToLegend();
  }
  if (m_smoothing > 0) markStale(name, {0, created});
  if (!m_smoothed.contains(name)) {
    m_ema.remove(name);
    m_deferred.remove(name);
  }
  fitPens(name);
}

void CurvePlot::markStale(const QString& name, Stale stale) {
  if (const auto it = m_stale.constFind(name); it != m_stale.constEnd()) {
    stale.from = std::min(stale.from, it->from);
    stale.keys = stale.keys || it->keys;
  }
  m_stale.insert(name, stale);
}

void CurvePlot::refreshSmoothed() {
  std::vector<double> values;
  const QHash<QString, Stale> stale = std::exchange(m_stale, {});
  // Whether a series' EMA starts again from its first point (a new weight, points replaced or
  // added before the end) rather than going on from where it stood.
  const auto whole = [this](const QString& name, const Stale& entry, int n) {
    const QCPGraph* smoothed = m_smoothed.value(name);
    const auto ema = m_ema.constFind(name);
    return entry.keys || entry.from <= 0 || smoothed->dataCount() < entry.from ||
           smoothed->dataCount() > n || ema == m_ema.constEnd() ||
           ema->count != std::size_t(entry.from);
  };
  // Those series together: over kBackgroundPoints, a background pass smooths them.
  qint64 wholePoints = 0;
  for (auto entry = stale.cbegin(); entry != stale.cend() && m_background; ++entry) {
    const QCPGraph* raw = m_graphs.value(entry.key());
    if (raw == nullptr || !m_smoothed.contains(entry.key())) continue;
    if (whole(entry.key(), *entry, raw->dataCount())) wholePoints += raw->dataCount();
  }
  const bool background = m_background && wholePoints >= kBackgroundPoints;
  for (auto entry = stale.cbegin(); entry != stale.cend(); ++entry) {
    auto* smoothed = static_cast<CurveGraph*>(m_smoothed.value(entry.key()));
    QCPGraph* raw = m_graphs.value(entry.key());
    if (smoothed == nullptr || raw == nullptr) continue;
    const QCPGraphDataContainer& points = *raw->data();
    const int n = points.size();
    if (whole(entry.key(), *entry, n)) {
      if (background) {
        // The curve keeps its smoothed points (an earlier weight's) until the pass's arrive;
        // points replaced are drawn as they are meanwhile (the smoothed keys must be theirs).
        const bool replaced = entry->keys || smoothed->dataCount() > n;
        if (replaced) {
          smoothed->setData(QSharedPointer<QCPGraphDataContainer>::create(points));
          smoothed->pointsChanged(0);
        }
        if (replaced || !m_deferred.contains(entry.key()))
          m_deferred.insert(entry.key(), m_nextGeneration++);
        m_ema.remove(entry.key());
        fitPens(entry.key());
        continue;
      }
      m_deferred.remove(entry.key());
    } else if (m_deferred.contains(entry.key())) {
      continue;  // points appended: smoothed on from where the pass ends, when it arrives
    }
    // Same keys as the raw points, in the same (sorted) order; only the values are smoothed.
    // While the slider moves, the keys stay: the values alone are written (a 1M-point copy
    // is the larger part of the work); appended points add their own keys only.
    QCPGraphDataContainer* data = smoothed->data().data();
    int from = std::clamp(entry->from, 0, n);
    if (entry->keys || data->size() < from || data->size() > n) {
      data->set(points);
      from = 0;
    } else if (data->size() < n) {
      data->add(QVector<QCPGraphData>(points.constBegin() + data->size(), points.constEnd()), true);
    }
    EmaState& ema = m_ema[entry.key()];
    if (from == 0 || ema.count != std::size_t(from)) {
      ema = EmaState(m_smoothing);
      from = 0;
    }
    // values[k] holds point from + k: an append reads and writes its new points only (sizing
    // the buffer to every point cost a 2 MB clear per 250k-point curve at each append).
    const QCPGraphData* in = n > 0 ? &*points.constBegin() : nullptr;
    values.resize(std::size_t(n - from));
    for (int i = from; i < n; ++i) values[std::size_t(i - from)] = in[i].value;
    if (!smoothEmaAppend(ema, values.data(), values.data(), values.size())) {
      // A flat series that stopped being flat: every point's value changes.
      values.resize(std::size_t(n));
      for (int i = 0; i < n; ++i) values[std::size_t(i)] = in[i].value;
      ema = EmaState(m_smoothing);
      from = 0;
      (void)smoothEmaAppend(ema, values.data(), values.data(), std::size_t(n));
    }
    QCPGraphData* to = n > 0 ? &*data->begin() : nullptr;
    for (int i = from; i < n; ++i) to[i].value = values[std::size_t(i - from)];
    smoothed->pointsChanged(from);
    fitPens(entry.key());
  }
  startPass();
}

void CurvePlot::setReuseLines(bool on) {
  m_reuseLines = on;
  for (QCPGraph* graph : std::as_const(m_graphs))
    static_cast<CurveGraph*>(graph)->setReuseLines(on);
  for (QCPGraph* graph : std::as_const(m_smoothed))
    static_cast<CurveGraph*>(graph)->setReuseLines(on);
}

void CurvePlot::setIncrementalLines(bool on) {
  m_incrementalLines = on;
  for (QCPGraph* graph : std::as_const(m_graphs))
    static_cast<CurveGraph*>(graph)->setIncremental(on);
  for (QCPGraph* graph : std::as_const(m_smoothed))
    static_cast<CurveGraph*>(graph)->setIncremental(on);
}

bool CurvePlot::isSmoothingPending() const { return m_pass != nullptr || !m_deferred.isEmpty(); }

void CurvePlot::finishSmoothing() {
  const bool background = std::exchange(m_background, false);  // no new pass meanwhile
  while (m_pass != nullptr) {
    m_passWatcher->waitForFinished();
    onPassDone();
  }
  // What no pass brought to this weight: smoothed here.
  for (auto it = m_deferred.cbegin(); it != m_deferred.cend(); ++it)
    markStale(it.key(), {0, false});
  refreshSmoothed();
  m_background = background;
}

void CurvePlot::startPass() {
  if (!m_background || m_pass != nullptr || m_deferred.isEmpty()) return;
  auto pass = std::make_shared<SmoothPass>();
  pass->weight = m_smoothing;
  for (auto it = m_deferred.cbegin(); it != m_deferred.cend(); ++it) {
    const QCPGraph* raw = m_graphs.value(it.key());
    if (raw == nullptr) continue;
    SmoothPass::Series series;
    series.name = it.key();
    series.generation = it.value();
    series.points = QSharedPointer<QCPGraphDataContainer>::create(*raw->data());
    pass->series.push_back(std::move(series));
  }
  m_pass = pass;
  auto promise = std::make_shared<QPromise<void>>();
  m_passWatcher->setFuture(promise->future());
  QThreadPool::globalInstance()->start([promise, pass] {
    promise->start();
    pass->run();
    promise->finish();
  });
}

void CurvePlot::onPassDone() {
  // A finished signal of a pass finishSmoothing() took already: the pass now running is not done.
  if (m_pass == nullptr || !m_passWatcher->future().isFinished()) return;
  const std::shared_ptr<SmoothPass> pass = std::exchange(m_pass, nullptr);
  for (SmoothPass::Series& s : pass->series) {
    // Taken only for the weight now chosen and the points it read (a newer generation: they
    // were replaced since; the next pass smooths them).
    const auto deferred = m_deferred.constFind(s.name);
    if (deferred == m_deferred.constEnd() || *deferred != s.generation ||
        pass->weight != m_smoothing)
      continue;
    auto* smoothed = static_cast<CurveGraph*>(m_smoothed.value(s.name));
    const QCPGraph* raw = m_graphs.value(s.name);
    if (smoothed == nullptr || raw == nullptr) continue;
    const int n = s.smoothed->size();
    smoothed->adoptData(s.smoothed, std::move(s.summary));
    m_ema.insert(s.name, s.ema);
    m_deferred.erase(deferred);
    // Points appended while it ran: smoothed on from its last point at the next replot.
    if (raw->dataCount() != n) markStale(s.name, {n, false});
    fitPens(s.name);
  }
  startPass();  // the weight chosen meanwhile, if any: the latest only
  if (!isSmoothingPending()) emit smoothingSettled();
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void CurvePlot::setSeries(const QString& name, const QVector<double>& xs,
                          const QVector<double>& ys) {
  const qsizetype n = checkedLength(name, xs, ys);
  auto* graph = static_cast<CurveGraph*>(graphFor(name));
  graph->setData(xs.first(n), ys.first(n));
  graph->pointsChanged(0);
  if (m_smoothing > 0) markStale(name, {0, true});
  fitPens(name);
}

void CurvePlot::appendPoints(const QString& name, const QVector<double>& xs,
                             const QVector<double>& ys) {
  const qsizetype n = checkedLength(name, xs, ys);
  auto* graph = static_cast<CurveGraph*>(graphFor(name));
  // Points after the last one (a live run's new steps) leave the earlier ones where they were:
  // only they are summarised and smoothed; anywhere else, every point may have moved.
  const int before = graph->dataCount();
  const bool atEnd =
      n == 0 || before == 0 ||
      *std::min_element(xs.cbegin(), xs.cbegin() + n) > (graph->data()->constEnd() - 1)->key;
  graph->addData(xs.first(n), ys.first(n));
  graph->pointsChanged(atEnd ? before : 0);
  if (m_smoothing > 0) markStale(name, atEnd ? Stale{before, false} : Stale{0, true});
  fitPens(name);
}

void CurvePlot::fitPens(const QString& name) {
  QCPGraph* raw = m_graphs.value(name);
  if (raw == nullptr) return;
  QCPGraph* smoothed = m_smoothed.value(name);
  const bool dense = raw->dataCount() > kDensePoints;
  const double width = dense ? 0.0 : m_lineWidth;
  const Style style = m_styles.value(name);
  QColor color = m_colors.value(name);
  const QCPScatterStyle dots(style.dots ? QCPScatterStyle::ssCircle : QCPScatterStyle::ssNone, 5);
  if (smoothed != nullptr) {
    smoothed->setAntialiased(!dense);
    smoothed->setPen(QPen(color, width, style.pen, Qt::RoundCap, Qt::RoundJoin));
    smoothed->setScatterStyle(dots);
    color.setAlpha(kFaintAlpha);
  }
  // A pixel column holds dozens of points: antialiasing shows nothing and costs much.
  raw->setAntialiased(!dense);
  raw->setPen(QPen(color, width, style.pen, Qt::RoundCap, Qt::RoundJoin));
  raw->setScatterStyle(smoothed != nullptr ? QCPScatterStyle() : dots);
}

void CurvePlot::removeSeries(const QString& name) {
  if (QCPItemTracer* tracer = m_tracers.take(name)) m_plot->removeItem(tracer);
  if (QCPGraph* graph = m_smoothed.take(name)) m_plot->removeGraph(graph);
  if (QCPGraph* graph = m_graphs.take(name)) m_plot->removeGraph(graph);
  m_order.removeAll(name);
  m_stale.remove(name);
  m_ema.remove(name);
  m_deferred.remove(name);
  m_styles.remove(name);
  m_colors.remove(name);
}

void CurvePlot::clear() {
  for (QCPItemTracer* tracer : std::as_const(m_tracers)) m_plot->removeItem(tracer);
  m_tracers.clear();
  m_plot->clearGraphs();
  m_graphs.clear();
  m_smoothed.clear();
  m_colors.clear();
  m_styles.clear();
  m_order.clear();
  m_stale.clear();
  m_ema.clear();
  m_deferred.clear();
  m_hoverText.clear();
  m_nextColor = 0;
}

QString CurvePlot::readoutAt(double x) {
  const auto xText = [this](double at) {
    return m_xText ? m_xText(at) : QString::number(at, 'g', 7);
  };
  QStringList lines;
  for (const QString& name : std::as_const(m_order)) {
    QCPGraph* graph = drawnGraph(name);
    if (graph == nullptr) continue;
    const int index = nearestIndex(graph, x);
    QCPItemTracer*& tracer = m_tracers[name];
    if (tracer == nullptr) {
      tracer = new QCPItemTracer(m_plot);
      tracer->setLayer("overlay");
      tracer->setStyle(QCPItemTracer::tsCircle);
      tracer->setSize(7);
      tracer->setInterpolating(false);
      tracer->setBrush(Qt::white);
    }
    tracer->setVisible(index >= 0);
    if (index < 0) continue;
    const QCPGraphData point = *graph->data()->at(index);
    tracer->setGraph(graph);
    tracer->setGraphKey(point.key);
    tracer->setPen(QPen(m_colors.value(name), 2));
    QString line = QStringLiteral("%1: %2").arg(name, QString::number(point.value, 'g', 5));
    if (const QCPGraph* raw = m_graphs.value(name); raw != nullptr && raw != graph) {
      line += tr(" (raw %1)").arg(QString::number(raw->data()->at(index)->value, 'g', 5));
    }
    lines.append(line + tr(" at %1").arg(xText(point.key)));
  }
  m_hoverText = lines.join(QLatin1Char('\n'));
  return m_hoverText;
}

void CurvePlot::onMouseMove(QMouseEvent* event) {
  const QPointF at = event->position();
  if (m_order.isEmpty() || !m_plot->axisRect()->rect().contains(at.toPoint())) {
    hideReadout();
    return;
  }
  const QString text = readoutAt(m_plot->xAxis->pixelToCoord(at.x()));
  QToolTip::showText(event->globalPosition().toPoint(), text, m_plot);
  m_plot->layer("overlay")->replot();
}

void CurvePlot::hideReadout() {
  if (m_hoverText.isEmpty()) return;
  m_hoverText.clear();
  for (QCPItemTracer* tracer : std::as_const(m_tracers)) tracer->setVisible(false);
  QToolTip::hideText();
  m_plot->layer("overlay")->replot();
}

bool CurvePlot::eventFilter(QObject* watched, QEvent* event) {
  if (watched == m_plot && event->type() == QEvent::Leave) hideReadout();
  return QWidget::eventFilter(watched, event);
}

int CurvePlot::pointCount(const QString& name) const {
  const QCPGraph* graph = m_graphs.value(name);
  return graph ? graph->dataCount() : 0;
}

void CurvePlot::setLineWidth(double pixels) {
  m_lineWidth = pixels;
  for (const QString& name : std::as_const(m_order)) fitPens(name);
}

void CurvePlot::setRanges(double xLower, double xUpper, double yLower, double yUpper) {
  m_plot->xAxis->setRange(xLower, xUpper);  // xAxis2 and yAxis2 follow (setupFullAxesBox)
  m_plot->yAxis->setRange(yLower, yUpper);
}

void CurvePlot::rescale() {
  m_plot->rescaleAxes();
  // A little headroom, so the highest and lowest points do not sit on the frame.
  m_plot->yAxis->scaleRange(1.06, m_plot->yAxis->range().center());
  replot();
}

void CurvePlot::replot() { m_plot->replot(); }

Result<void> CurvePlot::savePng(const QString& path, int width, int height) {
  finishSmoothing();
  if (width <= 0 || height <= 0) {
    return fail(path.toStdString() + ": PNG size " + std::to_string(width) + "x" +
                std::to_string(height) + " must be positive");
  }
  if (!m_plot->savePng(path, width, height)) {
    const QString folder = QFileInfo(path).absolutePath();
    return fail(path.toStdString() + ": could not write the PNG (does " + folder.toStdString() +
                " exist, and may this user write to it?)");
  }
  return ok();
}

}  // namespace shardscope::ui
