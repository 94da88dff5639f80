#include "ui/compare/trialcolours.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace shardscope::ui::compare {

namespace {

QColor mix(QRgb from, QRgb to, double t) {
  const auto channel = [t](int a, int b) { return int(std::lround(a + t * (b - a))); };
  return {channel(qRed(from), qRed(to)), channel(qGreen(from), qGreen(to)),
          channel(qBlue(from), qBlue(to))};
}

// The scale's colour at t in [0, 1]: the three stops, joined linearly (as figureGradient()).
QColor scaleColour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  return t <= 0.5 ? mix(kFigureLow, kFigureMid, 2 * t) : mix(kFigureMid, kFigureHigh, 2 * t - 1);
}

}  // namespace

std::optional<std::pair<double, double>> TrialColouring::range() const {
  std::optional<std::pair<double, double>> out;
  for (const double v : values) {
    if (!std::isfinite(v)) continue;
    if (!out) out = std::pair{v, v};
    out->first = std::min(out->first, v);
    out->second = std::max(out->second, v);
  }
  return out;
}

QColor TrialColouring::colour(qint64 runId, int shades) const {
  const auto it = values.constFind(runId);
  const auto span = range();
  if (it == values.constEnd() || !std::isfinite(*it) || !span) return QColor(kNoFigure);
  const double width = span->second - span->first;
  double t = width > 0 ? (*it - span->first) / width : 0.5;
  // Few shades, so a sweep of thousands of trials is a few plottables; both ends stay exact.
  if (shades > 1) t = std::round(t * (shades - 1)) / (shades - 1);
  return scaleColour(t);
}

QString TrialColouring::describe(qint64 runId) const {
  const auto it = values.constFind(runId);
  if (it == values.constEnd() || !std::isfinite(*it)) {
    return QObject::tr("no %1 recorded for this trial (drawn grey)").arg(name);
  }
  return QStringLiteral("%1 %2").arg(name, QString::number(*it, 'g', 4));
}

QCPColorGradient figureGradient() {
  QCPColorGradient gradient;
  gradient.clearColorStops();
  gradient.setColorStopAt(0.0, QColor(kFigureLow));
  gradient.setColorStopAt(0.5, QColor(kFigureMid));
  gradient.setColorStopAt(1.0, QColor(kFigureHigh));
  return gradient;
}

void setFigureScale(QCustomPlot* plot, const TrialColouring& colouring) {
  QCPLayoutGrid* layout = plot->plotLayout();
  for (QCPLayoutElement* element : layout->elements(false)) {
    if (auto* old = qobject_cast<QCPColorScale*>(element)) {
      layout->remove(old);
      layout->simplify();
    }
  }
  const auto span = colouring.range();
  if (!colouring.byFigure() || !span) return;
  auto* scale = new QCPColorScale(plot);
  scale->setType(QCPAxis::atBottom);
  scale->setGradient(figureGradient());
  const double pad =
      span->second > span->first ? 0.0 : std::max(1e-9, std::abs(span->first) * 0.01);
  scale->setDataRange(QCPRange(span->first - pad, span->second + pad));
  scale->setBarWidth(8);
  scale->axis()->setLabel(colouring.name);
  // Under the axis rect (row 1), over the legend: a row of its own, as tall as it needs.
  layout->insertRow(2);
  layout->addElement(2, 0, scale);
  layout->setRowStretchFactor(2, 0.001);
  QCPMarginGroup* group = plot->axisRect()->marginGroup(QCP::msLeft);
  if (group == nullptr) {
    group = new QCPMarginGroup(plot);
    plot->axisRect()->setMarginGroup(QCP::msLeft | QCP::msRight, group);
  }
  scale->setMarginGroup(QCP::msLeft | QCP::msRight, group);
}

}  // namespace shardscope::ui::compare
