#include "ui/compare/triallines.h"

#include <algorithm>
#include <cmath>

namespace shardscope::ui::compare {

TrialLines::TrialLines(QCPAxis* keyAxis, QCPAxis* valueAxis)
    : QCPAbstractPlottable(keyAxis, valueAxis) {}

int TrialLines::addLine(Line line) {
  m_points += line.xs.size();
  m_bounds.grow(line.xs, line.ys, 0);
  m_lines.append(std::move(line));
  return static_cast<int>(m_lines.size() - 1);
}

void TrialLines::setPoints(int index, const QVector<double>& xs, const QVector<double>& ys,
                           bool reset) {
  if (index < 0 || index >= m_lines.size()) return;
  Line& line = m_lines[index];
  const qsizetype from = reset ? 0 : line.xs.size();
  m_points += xs.size() - (reset ? line.xs.size() : 0);
  if (reset) {
    line.xs = xs;
    line.ys = ys;
  } else {
    line.xs += xs;
    line.ys += ys;
  }
  // A reset may shrink a line: the bounds then stay as wide as they were until clearLines(),
  // which only costs some empty margin.
  m_bounds.grow(line.xs, line.ys, from);
}

void TrialLines::clearLines() {
  m_lines.clear();
  m_points = 0;
  m_bounds.clear();
}

double TrialLines::selectTest(const QPointF& /*pos*/, bool /*onlySelectable*/,
                              QVariant* /*details*/) const {
  return -1;  // the lines are not selectable: the plot only drags and zooms
}

QCPRange TrialLines::getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain) const {
  return m_bounds.keys(foundRange, inSignDomain, m_lines);
}

QCPRange TrialLines::getValueRange(bool& foundRange, QCP::SignDomain inSignDomain,
                                   const QCPRange& /*inKeyRange*/) const {
  return m_bounds.values(foundRange, inSignDomain, m_lines);
}

// Thin solid lines that share a pen and have no end marker are stroked together, one drawLines()
// call per run of them: thousands of polyline calls of a few points each cost more than their
// pixels.
void TrialLines::draw(QCPPainter* painter) {
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (keyAxis == nullptr || valueAxis == nullptr) return;
  Mapping map;
  map.vertical = keyAxis->orientation() == Qt::Vertical;
  map.linear =
      keyAxis->scaleType() == QCPAxis::stLinear && valueAxis->scaleType() == QCPAxis::stLinear;
  // Linear axes: pixel = origin + slope * coordinate, two multiplications a point.
  map.keyOrigin = keyAxis->coordToPixel(0.0);
  map.keySlope = keyAxis->coordToPixel(1.0) - map.keyOrigin;
  map.valueOrigin = valueAxis->coordToPixel(0.0);
  map.valueSlope = valueAxis->coordToPixel(1.0) - map.valueOrigin;
  applyDefaultAntialiasingHint(painter);
  painter->setBrush(Qt::NoBrush);
  QVector<QPointF> pixels;
  QVector<QLineF> segments;
  const QPen* batchPen = nullptr;
  const auto flushBatch = [&] {
    if (batchPen != nullptr && !segments.isEmpty()) {
      painter->setPen(*batchPen);
      painter->drawLines(segments.constData(), int(segments.size()));
    }
    segments.clear();
    batchPen = nullptr;
  };
  for (const Line& line : std::as_const(m_lines)) {
    // Wide or dashed pens keep their joins and dash pattern: those are stroked one by one.
    const bool batchable = line.end.shape() == QCPScatterStyle::ssNone &&
                           line.pen.style() == Qt::SolidLine && line.pen.widthF() <= 1.0;
    if (!batchable) {
      flushBatch();
      drawLine(painter, line, map, pixels, nullptr);
      continue;
    }
    if (batchPen == nullptr || *batchPen != line.pen) {
      flushBatch();
      batchPen = &line.pen;
    }
    drawLine(painter, line, map, pixels, &segments);
  }
  flushBatch();
}

QPointF TrialLines::Mapping::pixel(const TrialLines& lines, double key, double value) const {
  if (!linear) return lines.coordsToPixels(key, value);
  const double k = keyOrigin + keySlope * key;
  const double v = valueOrigin + valueSlope * value;
  return vertical ? QPointF(v, k) : QPointF(k, v);
}

// Consecutive points in one pixel column become (first, min, max, last) of that column: what a
// polyline through all of them would cover, in at most four points.
void TrialLines::drawLine(QCPPainter* painter, const Line& line, const Mapping& map,
                          QVector<QPointF>& pixels, QVector<QLineF>* segments) const {
  const qsizetype n = std::min(line.xs.size(), line.ys.size());
  if (n == 0) return;
  const bool vertical = map.vertical;
  if (segments == nullptr) painter->setPen(line.pen);
  pixels.clear();
  double column = qQNaN();
  QPointF first;
  QPointF low;
  QPointF high;
  QPointF last;
  int inColumn = 0;
  int lowAt = 0;
  int highAt = 0;
  bool any = false;
  const auto flush = [&] {
    if (inColumn == 0) return;
    pixels.append(first);
    if (inColumn > 2) {
      // The extremes in the order they came, so the stroke goes where the data went.
      pixels.append(lowAt <= highAt ? low : high);
      pixels.append(lowAt <= highAt ? high : low);
    }
    if (inColumn > 1) pixels.append(last);
    inColumn = 0;
  };
  const auto stroke = [&] {
    flush();
    if (pixels.size() > 1 && segments != nullptr) {
      for (qsizetype i = 1; i < pixels.size(); ++i)
        segments->append(QLineF(pixels[i - 1], pixels[i]));
    } else if (pixels.size() > 1) {
      painter->drawPolyline(pixels.constData(), int(pixels.size()));
    }
    pixels.clear();
  };
  for (qsizetype i = 0; i < n; ++i) {
    if (!std::isfinite(line.xs[i]) || !std::isfinite(line.ys[i])) {
      stroke();  // a gap
      column = qQNaN();
      continue;
    }
    const QPointF p = map.pixel(*this, line.xs[i], line.ys[i]);
    const double c = std::floor(vertical ? p.y() : p.x());
    if (c != column) {
      flush();
      column = c;
      first = low = high = p;
      lowAt = highAt = 0;
    }
    const double v = vertical ? p.x() : p.y();
    if (v < (vertical ? low.x() : low.y())) {
      low = p;
      lowAt = inColumn;
    }
    if (v > (vertical ? high.x() : high.y())) {
      high = p;
      highAt = inColumn;
    }
    last = p;
    any = true;
    ++inColumn;
  }
  const QPointF end = last;
  stroke();
  if (any && line.end.shape() != QCPScatterStyle::ssNone) {
    line.end.applyTo(painter, line.pen);
    line.end.drawShape(painter, end);
  }
}

void TrialLines::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->setPen(m_lines.isEmpty() ? pen() : m_lines.first().pen);
  painter->drawLine(QLineF(rect.left(), rect.center().y(), rect.right(), rect.center().y()));
}

}  // namespace shardscope::ui::compare
