#include "ui/widgets/curveplot.h"

#include <qcustomplot.h>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QVBoxLayout>

#include <algorithm>
#include <array>

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
  QCPGraph* graph = m_plot->addGraph();
  graph->setName(name);
  graph->setPen(
      QPen(seriesColor(m_nextColor++), m_lineWidth, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
  graph->setLineStyle(QCPGraph::lsLine);
  // Thousands of steps per run: draw one representative point per pixel column.
  graph->setAdaptiveSampling(true);
  m_graphs.insert(name, graph);
  return graph;
}

void CurvePlot::setSeries(const QString& name, const QVector<double>& xs,
                          const QVector<double>& ys) {
  const qsizetype n = checkedLength(name, xs, ys);
  QCPGraph* graph = graphFor(name);
  graph->setData(xs.first(n), ys.first(n));
  fitPen(graph);
}

void CurvePlot::appendPoints(const QString& name, const QVector<double>& xs,
                             const QVector<double>& ys) {
  const qsizetype n = checkedLength(name, xs, ys);
  QCPGraph* graph = graphFor(name);
  graph->addData(xs.first(n), ys.first(n));
  fitPen(graph);
}

void CurvePlot::fitPen(QCPGraph* graph) const {
  constexpr int kDensePoints = 20000;
  const bool dense = graph->dataCount() > kDensePoints;
  graph->setAntialiased(!dense);  // a pixel column holds dozens of points: smoothing shows nothing
  const double width = dense ? 0.0 : m_lineWidth;
  if (graph->pen().widthF() == width) return;
  QPen pen = graph->pen();
  pen.setWidthF(width);
  graph->setPen(pen);
}

void CurvePlot::removeSeries(const QString& name) {
  if (QCPGraph* graph = m_graphs.take(name)) m_plot->removeGraph(graph);
}

void CurvePlot::clear() {
  m_plot->clearGraphs();
  m_graphs.clear();
  m_nextColor = 0;
}

int CurvePlot::pointCount(const QString& name) const {
  const QCPGraph* graph = m_graphs.value(name);
  return graph ? graph->dataCount() : 0;
}

void CurvePlot::setLineWidth(double pixels) {
  m_lineWidth = pixels;
  for (QCPGraph* graph : std::as_const(m_graphs)) fitPen(graph);
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
