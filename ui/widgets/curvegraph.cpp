#include "ui/widgets/curvegraph.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace shardscope::ui {

QVector<QRectF> CurveGraph::columnSpans(const QVector<QPointF>& lines, double width) {
  QVector<QRectF> spans;
  spans.reserve(lines.size() / 2);
  bool open = false;  // a column is being gathered
  int column = 0;
  double lo = 0, hi = 0, lastY = 0;
  const auto flush = [&] {
    if (open) spans.append(QRectF(column, lo - width / 2, 1.0, hi - lo + width));
  };
  for (const QPointF& p : lines) {
    if (!std::isfinite(p.x()) || !std::isfinite(p.y())) {  // a gap in the data
      flush();
      open = false;
      continue;
    }
    const int c = int(std::floor(p.x()));
    if (open && c == column) {
      lo = std::min(lo, p.y());
      hi = std::max(hi, p.y());
    } else {
      const bool joined = open && c == column + 1;
      flush();
      column = c;
      lo = hi = p.y();
      if (joined) {  // the step from the last column's last point shows in this one
        lo = std::min(lo, lastY);
        hi = std::max(hi, lastY);
      }
      open = true;
    }
    lastY = p.y();
  }
  flush();
  return spans;
}

void CurveGraph::pointsChanged(int from) {
  m_summarized = std::clamp(from, 0, m_summarized);
  ++m_version;
}

void CurveGraph::setReuseLines(bool on) {
  m_reuseLines = on;
  m_linesValid = false;
  m_lines.clear();
}

CurveGraph::LinesKey CurveGraph::linesKey(const QCPAxis& keyAxis, const QCPAxis& valueAxis) const {
  LinesKey key;
  key.data = mDataContainer.data();
  key.size = key.data != nullptr ? key.data->size() : 0;
  key.version = m_version;
  key.keyRange = keyAxis.range();
  key.valueRange = valueAxis.range();
  if (const QCPAxisRect* rect = keyAxis.axisRect(); rect != nullptr) key.rect = rect->rect();
  key.keyScale = keyAxis.scaleType();
  key.valueScale = valueAxis.scaleType();
  key.keyReversed = keyAxis.rangeReversed();
  key.valueReversed = valueAxis.rangeReversed();
  return key;
}

QVector<QPointF> CurveGraph::reducedLines() const {
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (!m_reuseLines || keyAxis == nullptr || valueAxis == nullptr) return computeReducedLines();
  const LinesKey key = linesKey(*keyAxis, *valueAxis);
  if (!m_linesValid || !(key == m_linesKey)) {
    m_lines = computeReducedLines();
    m_linesKey = key;
    m_linesValid = true;
  }
  return m_lines;  // implicitly shared: no copy
}

namespace {

CurveGraph::Block summaryOf(const QCPGraphData* begin, const QCPGraphData* end) {
  CurveGraph::Block block;
  block.lo = std::numeric_limits<double>::infinity();
  block.hi = -block.lo;
  for (const QCPGraphData* p = begin; p != end; ++p) {
    if (!std::isfinite(p->value)) {
      block.finite = false;
      break;
    }
    block.lo = std::min(block.lo, p->value);
    block.hi = std::max(block.hi, p->value);
  }
  return block;
}

}  // namespace

std::vector<CurveGraph::Block> CurveGraph::summarize(const QCPGraphDataContainer& data) {
  const int blocks = data.size() / kBlock;
  std::vector<Block> summary(std::size_t(std::max(blocks, 0)));
  if (blocks <= 0) return summary;
  const QCPGraphData* points = &*data.constBegin();
  for (int b = 0; b < blocks; ++b) {
    const QCPGraphData* begin = points + std::ptrdiff_t(b) * kBlock;
    summary[std::size_t(b)] = summaryOf(begin, begin + kBlock);
  }
  return summary;
}

void CurveGraph::adoptData(QSharedPointer<QCPGraphDataContainer> data, std::vector<Block> summary) {
  setData(std::move(data));
  ++m_version;
  m_summaryOf = mDataContainer.data();
  const int n = mDataContainer->size();
  if (summary.size() == std::size_t(n / kBlock)) {
    m_blocks = std::move(summary);
    m_summarized = n;
  } else {
    m_summarized = 0;  // not its summary: made again at the next draw
  }
}

void CurveGraph::updateSummary() const {
  const QCPGraphDataContainer* container = mDataContainer.data();
  const int n = container->size();
  if (container != m_summaryOf || n < m_summarized) m_summarized = 0;
  m_summaryOf = container;
  const int blocks = n / kBlock;
  m_blocks.resize(std::size_t(blocks));
  if (n == 0) return;
  const QCPGraphData* data = &*container->constBegin();
  for (int b = m_summarized / kBlock; b < blocks; ++b) {
    const QCPGraphData* begin = data + std::ptrdiff_t(b) * kBlock;
    m_blocks[std::size_t(b)] = summaryOf(begin, begin + kBlock);
  }
  m_summarized = n;
}

QVector<QPointF> CurveGraph::computeReducedLines() const {
  QVector<QPointF> out;
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (keyAxis == nullptr || valueAxis == nullptr || mDataContainer->isEmpty()) return out;
  updateSummary();
  const QCPGraphData* data = &*mDataContainer->constBegin();
  // As QCPGraph::getLines: the points in the key range and one beyond each end.
  const int from =
      int(mDataContainer->findBegin(keyAxis->range().lower) - mDataContainer->constBegin());
  const int to =
      int(mDataContainer->findEnd(keyAxis->range().upper) - mDataContainer->constBegin());
  out.reserve(
      int(std::min<qsizetype>(to - from, 4 * qsizetype(keyAxis->axisRect()->width()) + 16)));
  // The run of points being gathered: its pixel column, first and last point (pixels), count,
  // and lowest and highest value (data coordinates: pixels follow monotonically).
  bool open = false;
  int column = 0;
  int count = 0;
  QPointF first, last;
  double lo = 0, hi = 0;
  bool broken = true;  // the last point written breaks the line (nothing to break again)
  const auto flush = [&] {
    if (!open) return;
    out.append(first);
    if (count > 1) {
      out.append(QPointF(first.x(), valueAxis->coordToPixel(lo)));
      out.append(QPointF(first.x(), valueAxis->coordToPixel(hi)));
      out.append(last);
    }
    open = false;
    broken = false;
  };
  // Adds a run of consecutive points in pixel column c: its first and last point (pixels), its
  // lowest and highest value, how many points.
  const auto addRun = [&](int c, const QPointF& p0, const QPointF& p1, double low, double high,
                          int points) {
    if (!open || c != column) {
      flush();
      open = true;
      column = c;
      count = 0;
      first = p0;
      lo = low;
      hi = high;
    }
    lo = std::min(lo, low);
    hi = std::max(hi, high);
    last = p1;
    count += points;
  };
  const auto columnOf = [&](int index) {
    return std::floor(keyAxis->coordToPixel(data[index].key));
  };
  int i = from;
  while (i < to) {
    // A whole block of finite values: its summary where it lies in one column; where it spans
    // columns, its pieces found by bisection on the (monotonic) column of the keys and their
    // values scanned, so only a few points per column are mapped to pixels.
    if (i % kBlock == 0 && i + kBlock <= to && m_blocks[std::size_t(i / kBlock)].finite) {
      const Block& block = m_blocks[std::size_t(i / kBlock)];
      const int end = i + kBlock;
      const double x0 = keyAxis->coordToPixel(data[i].key);
      const double x1 = keyAxis->coordToPixel(data[end - 1].key);
      if (std::isfinite(x0) && std::isfinite(x1)) {
        if (std::floor(x0) == std::floor(x1)) {
          addRun(int(std::floor(x0)), QPointF(x0, valueAxis->coordToPixel(data[i].value)),
                 QPointF(x1, valueAxis->coordToPixel(data[end - 1].value)), block.lo, block.hi,
                 kBlock);
        } else {
          for (int j = i; j < end;) {
            const double c = columnOf(j);
            int inside = j;  // the last index known to lie in column c
            int outside = end;
            while (outside - inside > 1) {
              const int mid = inside + (outside - inside) / 2;
              (columnOf(mid) == c ? inside : outside) = mid;
            }
            double low = data[j].value;
            double high = low;
            for (int k = j + 1; k <= inside; ++k) {
              low = std::min(low, data[k].value);
              high = std::max(high, data[k].value);
            }
            addRun(
                int(c),
                QPointF(keyAxis->coordToPixel(data[j].key), valueAxis->coordToPixel(data[j].value)),
                QPointF(keyAxis->coordToPixel(data[inside].key),
                        valueAxis->coordToPixel(data[inside].value)),
                low, high, inside - j + 1);
            j = inside + 1;
          }
        }
        i = end;
        continue;
      }
    }
    const double value = data[i].value;
    const QPointF p(keyAxis->coordToPixel(data[i].key), valueAxis->coordToPixel(value));
    ++i;
    if (!std::isfinite(p.x()) || !std::isfinite(p.y())) {
      flush();
      if (!broken) out.append(p);
      broken = true;
      continue;
    }
    addRun(int(std::floor(p.x())), p, p, value, value, 1);
  }
  flush();
  return out;
}

void CurveGraph::draw(QCPPainter* painter) {
  const QCPAxis* key = mKeyAxis.data();
  const QCPAxis* value = mValueAxis.data();
  // The summary path draws a plain solid line: anything else (dots, a fill, a selection, a
  // dashed estimate, a vertical key axis) goes QCPGraph's way.
  const bool plain = key != nullptr && value != nullptr && key->orientation() == Qt::Horizontal &&
                     mLineStyle == lsLine && mScatterStyle.isNone() &&
                     mBrush.style() == Qt::NoBrush && selection().isEmpty() &&
                     mPen.style() == Qt::SolidLine && key->range().size() > 0 &&
                     !mDataContainer->isEmpty();
  if (!plain) {
    QCPGraph::draw(painter);
    return;
  }
  const auto begin = mDataContainer->findBegin(key->range().lower);
  const auto end = mDataContainer->findEnd(key->range().upper);
  if (double(end - begin) <= key->axisRect()->width()) {  // sparse: stroked as a polyline
    QCPGraph::draw(painter);
    return;
  }
  painter->setPen(mPen);
  painter->setBrush(Qt::NoBrush);
  drawDense(painter, reducedLines());
}

void CurveGraph::drawLinePlot(QCPPainter* painter, const QVector<QPointF>& lines) const {
  const QPen pen = painter->pen();
  const QCPAxis* key = mKeyAxis.data();
  const QCPAxisRect* rect = key != nullptr ? key->axisRect() : nullptr;
  const bool dense = rect != nullptr && key->orientation() == Qt::Horizontal &&
                     pen.style() == Qt::SolidLine && double(lines.size()) > rect->width();
  if (!dense) {
    QCPGraph::drawLinePlot(painter, lines);
    return;
  }
  drawDense(painter, lines);
}

void CurveGraph::drawDense(QCPPainter* painter, const QVector<QPointF>& lines) const {
  const QPen pen = painter->pen();
  if (pen.color().alpha() == 0) return;
  const double width = std::max(1.0, pen.widthF());
  painter->save();
  painter->setAntialiasing(false);
  painter->setPen(Qt::NoPen);
  painter->setBrush(pen.color());
  const QVector<QRectF> spans = columnSpans(lines, width);
  painter->drawRects(spans.constData(), int(spans.size()));
  painter->restore();
  // Stretches sparser than a column (irregular steps): their segments, stroked.
  applyDefaultAntialiasingHint(painter);
  for (qsizetype i = 1; i < lines.size(); ++i) {
    const QPointF& a = lines[i - 1];
    const QPointF& b = lines[i];
    if (std::floor(b.x()) - std::floor(a.x()) > 1.0 && std::isfinite(a.y()) && std::isfinite(b.y()))
      painter->drawLine(a, b);
  }
}

}  // namespace shardscope::ui
