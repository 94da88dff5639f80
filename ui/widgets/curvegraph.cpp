#include "ui/widgets/curvegraph.h"

#include <algorithm>
#include <bit>
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
  m_changedFrom = std::min(m_changedFrom, std::max(from, 0));
  ++m_version;
}

void CurveGraph::setReuseLines(bool on) {
  m_reuseLines = on;
  m_linesValid = false;
  m_lines.clear();
}

void CurveGraph::setIncremental(bool on) {
  m_incremental = on;
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
  if (m_linesValid && key == m_linesKey) return m_lines;  // implicitly shared: no copy
  // The same axes and container, changed only from the last pixel column's first point on (a
  // live run's points appended): the columns before it stand; the reduction goes on from it.
  LinesKey sameView = key;
  sameView.size = m_linesKey.size;
  sameView.version = m_linesKey.version;
  // Growth and shrinking say so by themselves; a new lower end starts afresh (inside).
  const int changed = std::min({m_changedFrom, m_linesKey.size, key.size});
  const bool goOn = m_incremental && m_linesValid && sameView == m_linesKey &&
                    changed >= m_resume.index && m_resume.from >= 0;
  if (goOn) {
    m_lines.resize(m_resume.size);  // detaches from a copy still drawn, if any
    m_lines = computeReducedLines(std::move(m_lines), m_resume);
  } else {
    m_lines = computeReducedLines();
  }
  m_linesKey = key;
  m_linesValid = true;
  m_changedFrom = std::numeric_limits<int>::max();
  return m_lines;
}

namespace {

// The reduced line being written: consecutive points of one pixel column gathered into a run
// (its first point, lowest, highest and last: four points, or the one), a point off the axes
// breaking the line. Lowest and highest are data values: pixels follow them monotonically.
class ColumnRuns {
 public:
  ColumnRuns(QVector<QPointF>& out, const QCPAxis& valueAxis, bool broken)
      : m_out(out), m_valueAxis(valueAxis), m_broken(broken) {}

  /// Adds a run of consecutive points in pixel column c: its first and last point (pixels), its
  /// lowest and highest value, how many points. True when they open a new run, after the last
  /// one was written: where a later reduction may go on from.
  bool add(int c, const QPointF& p0, const QPointF& p1, double low, double high, int points) {
    const bool opens = !m_open || c != m_column;
    if (opens) {
      flush();
      m_open = true;
      m_column = c;
      m_count = 0;
      m_first = p0;
      m_lo = low;
      m_hi = high;
    }
    m_lo = std::min(m_lo, low);
    m_hi = std::max(m_hi, high);
    m_last = p1;
    m_count += points;
    return opens;
  }
  /// A point that cannot be drawn: the line breaks there (once).
  void breakAt(const QPointF& p) {
    flush();
    if (!m_broken) m_out.append(p);
    m_broken = true;
  }
  void flush() {
    if (!m_open) return;
    m_out.append(m_first);
    if (m_count > 1) {
      m_out.append(QPointF(m_first.x(), m_valueAxis.coordToPixel(m_lo)));
      m_out.append(QPointF(m_first.x(), m_valueAxis.coordToPixel(m_hi)));
      m_out.append(m_last);
    }
    m_open = false;
    m_broken = false;
  }
  bool broken() const { return m_broken; }

 private:
  QVector<QPointF>& m_out;
  const QCPAxis& m_valueAxis;
  bool m_open = false;
  int m_column = 0;
  int m_count = 0;
  QPointF m_first, m_last;
  double m_lo = 0, m_hi = 0;
  bool m_broken;  // the last point written breaks the line (nothing to break again)
};

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

CurveGraph::Block merged(const CurveGraph::Block* begin, const CurveGraph::Block* end) {
  CurveGraph::Block block;
  block.lo = std::numeric_limits<double>::infinity();
  block.hi = -block.lo;
  for (const CurveGraph::Block* b = begin; b != end; ++b) {
    if (!b->finite) {
      block.finite = false;
      break;
    }
    block.lo = std::min(block.lo, b->lo);
    block.hi = std::max(block.hi, b->hi);
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
  m_changedFrom = 0;
  m_summaryOf = mDataContainer.data();
  const int n = mDataContainer->size();
  m_levelsFrom = 0;
  if (summary.size() == std::size_t(n / kBlock)) {
    m_levels.resize(1);
    m_levels[0] = std::move(summary);
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
  if (m_levels.empty()) m_levels.emplace_back();
  m_levels[0].resize(std::size_t(blocks));
  if (n > 0) {
    const QCPGraphData* data = &*container->constBegin();
    for (int b = m_summarized / kBlock; b < blocks; ++b) {
      const QCPGraphData* begin = data + std::ptrdiff_t(b) * kBlock;
      m_levels[0][std::size_t(b)] = summaryOf(begin, begin + kBlock);
    }
  }
  // The levels above, from the first block below that changed.
  std::size_t dirty = std::size_t(std::min(m_summarized / kBlock, m_levelsFrom));
  for (std::size_t level = 1;; ++level) {
    const std::size_t count = m_levels[level - 1].size() / kFanout;
    if (count == 0) {
      m_levels.resize(level);
      break;
    }
    if (m_levels.size() <= level) m_levels.emplace_back();
    dirty /= kFanout;
    std::vector<Block>& blocksHere = m_levels[level];
    blocksHere.resize(count);
    const Block* below = m_levels[level - 1].data();
    for (std::size_t b = dirty; b < count; ++b)
      blocksHere[b] = merged(below + b * kFanout, below + (b + 1) * kFanout);
  }
  m_summarized = n;
  m_levelsFrom = std::numeric_limits<int>::max();
}

namespace {
static_assert(std::has_single_bit(unsigned(CurveGraph::kBlock)) &&
              std::has_single_bit(unsigned(CurveGraph::kFanout)));
constexpr int kBlockShift = std::countr_zero(unsigned(CurveGraph::kBlock));
constexpr int kFanoutShift = std::countr_zero(unsigned(CurveGraph::kFanout));
}  // namespace

CurveGraph::Block CurveGraph::rangeSummary(int begin, int end) const {
  const QCPGraphData* data = &*mDataContainer->constBegin();
  Block out;
  out.lo = std::numeric_limits<double>::infinity();
  out.hi = -out.lo;
  const int levels = int(m_levels.size());
  int i = begin;
  while (i < end) {
    // The largest block that starts at i and ends by `end`; none: the point alone. (Sizes are
    // powers of two: masks and shifts, not divisions, on this path of every column.)
    int level = -1;
    int shift = 0;
    for (int l = 0, sh = kBlockShift; l < levels; ++l, sh += kFanoutShift) {
      if ((i & ((1 << sh) - 1)) != 0 || i + (1 << sh) > end) break;
      level = l;
      shift = sh;
    }
    const int size = 1 << shift;
    double lo = 0;
    double hi = 0;
    if (level < 0) {
      lo = hi = data[i].value;
      if (!std::isfinite(lo)) {
        out.finite = false;
        return out;
      }
    } else {
      const Block& block = m_levels[std::size_t(level)][std::size_t(i >> shift)];
      if (!block.finite) {
        out.finite = false;
        return out;
      }
      lo = block.lo;
      hi = block.hi;
    }
    out.lo = std::min(out.lo, lo);
    out.hi = std::max(out.hi, hi);
    i += size;
  }
  return out;
}

QCPRange CurveGraph::getValueRange(bool& foundRange, QCP::SignDomain inSignDomain,
                                   const QCPRange& inKeyRange) const {
  if (m_incremental && inSignDomain == QCP::sdBoth && inKeyRange == QCPRange() &&
      !mDataContainer->isEmpty()) {
    updateSummary();
    const Block all = rangeSummary(0, mDataContainer->size());
    if (all.finite) {  // else QCPGraph's pass, which leaves NaN out
      foundRange = true;
      return {all.lo, all.hi};
    }
  }
  return QCPGraph::getValueRange(foundRange, inSignDomain, inKeyRange);
}

QVector<QPointF> CurveGraph::computeReducedLines() const {
  if (!m_incremental) return computeReducedLinesByBlocks();
  m_resume = Resume();  // from the start; where a later reduction may go on from, kept
  QVector<QPointF> out;
  const QCPAxis* keyAxis = mKeyAxis.data();
  if (keyAxis != nullptr && !mDataContainer->isEmpty()) {
    out.reserve(int(std::min<qsizetype>(mDataContainer->size(),
                                        4 * qsizetype(keyAxis->axisRect()->width()) + 16)));
  }
  return computeReducedLines(std::move(out), m_resume);
}

QVector<QPointF> CurveGraph::computeReducedLines(QVector<QPointF> out, Resume& resume) const {
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (keyAxis == nullptr || valueAxis == nullptr || mDataContainer->isEmpty()) {
    resume = Resume();
    return {};
  }
  updateSummary();
  const QCPGraphData* data = &*mDataContainer->constBegin();
  // As QCPGraph::getLines: the points in the key range and one beyond each end.
  const int from =
      int(mDataContainer->findBegin(keyAxis->range().lower) - mDataContainer->constBegin());
  const int to =
      int(mDataContainer->findEnd(keyAxis->range().upper) - mDataContainer->constBegin());
  if (resume.from != from) {  // a fresh reduction
    resume = Resume();
    resume.from = from;
    resume.index = from;
    out.clear();
  }
  ColumnRuns runs(out, *valueAxis, resume.broken);
  // A new column is where a later reduction may go on from.
  const auto addRun = [&](int at, int c, const QPointF& p0, const QPointF& p1, double low,
                          double high, int points) {
    if (runs.add(c, p0, p1, low, high, points)) {
      resume.index = at;
      resume.size = out.size();
      resume.broken = runs.broken();
    }
  };
  const auto addPoint = [&](int k) {
    const double value = data[k].value;
    const QPointF p(keyAxis->coordToPixel(data[k].key), valueAxis->coordToPixel(value));
    if (!std::isfinite(p.x()) || !std::isfinite(p.y())) {
      runs.breakAt(p);
      return;
    }
    addRun(k, int(std::floor(p.x())), p, p, value, value, 1);
  };
  const auto columnOf = [&](int index) {
    return std::floor(keyAxis->coordToPixel(data[index].key));
  };
  const auto pixelOf = [&](int index) {
    return QPointF(keyAxis->coordToPixel(data[index].key),
                   valueAxis->coordToPixel(data[index].value));
  };
  const bool linearKeys = keyAxis->scaleType() == QCPAxis::stLinear && !keyAxis->rangeReversed();
  int i = std::max(resume.index, from);
  m_lastStart = i;
  int lastWidth = 1;  // points in the last column
  while (i < to) {
    const double c = columnOf(i);
    if (!std::isfinite(c)) {
      addPoint(i++);
      continue;
    }
    int inside = i;  // the last index known to lie in column c
    if (linearKeys) {
      // The first point past column c, found among the keys by comparison (the key where the
      // next column starts, galloping from i, then bisection), then checked against the pixel
      // mapping itself at the boundary (rounding): a column maps about 4 points to pixels.
      const double next = keyAxis->pixelToCoord(c + 1);
      // First guess: as many points as the last column had (regular steps: right or off by
      // one), then galloping away from it; data[low] lies before `next`, data[high] (or the
      // view's end) past it.
      int low = 0;
      int high = std::clamp(i + lastWidth, i + 1, to);
      if (high < to && data[high].key < next) {
        low = high;
        for (int step = 1;; step *= 2) {
          high = std::min(to, low + step);
          if (high == to || data[high].key >= next) break;
          low = high;
        }
      } else {
        low = high - 1;
        for (int step = 1; low > i && data[low].key >= next; step *= 2) {
          high = low;
          low = std::max(i, high - step);
        }
      }
      int j = int(std::partition_point(data + low + 1, data + high,
                                       [next](const QCPGraphData& p) { return p.key < next; }) -
                  data);
      while (j - 1 > i && columnOf(j - 1) != c) --j;
      while (j < to && columnOf(j) == c) ++j;
      inside = j - 1;
      lastWidth = j - i;
    } else {
      // Galloping from i, then bisection on the column itself (monotonic in the sorted keys).
      int outside = to;
      for (int step = 1;; step *= 2) {
        const int probe = inside + step;
        if (probe >= to) break;
        if (columnOf(probe) != c) {
          outside = probe;
          break;
        }
        inside = probe;
      }
      while (outside - inside > 1) {
        const int mid = inside + (outside - inside) / 2;
        (columnOf(mid) == c ? inside : outside) = mid;
      }
    }
    const Block range = rangeSummary(i, inside + 1);
    if (range.finite) {
      addRun(i, int(c), pixelOf(i), pixelOf(inside), range.lo, range.hi, inside - i + 1);
    } else {
      for (int k = i; k <= inside; ++k) addPoint(k);  // the line breaks inside the column
    }
    i = inside + 1;
  }
  runs.flush();
  return out;
}

QVector<QPointF> CurveGraph::computeReducedLinesByBlocks() const {
  QVector<QPointF> out;
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (keyAxis == nullptr || valueAxis == nullptr || mDataContainer->isEmpty()) return out;
  updateSummary();
  constexpr int kOldBlock = kBlock * kFanout;  // 64 points: the pyramid's second level
  const std::vector<Block> none;
  const std::vector<Block>& blocks = m_levels.size() > 1 ? m_levels[1] : none;
  const QCPGraphData* data = &*mDataContainer->constBegin();
  // As QCPGraph::getLines: the points in the key range and one beyond each end.
  const int from =
      int(mDataContainer->findBegin(keyAxis->range().lower) - mDataContainer->constBegin());
  const int to =
      int(mDataContainer->findEnd(keyAxis->range().upper) - mDataContainer->constBegin());
  out.reserve(
      int(std::min<qsizetype>(to - from, 4 * qsizetype(keyAxis->axisRect()->width()) + 16)));
  ColumnRuns runs(out, *valueAxis, true);
  const auto addRun = [&](int c, const QPointF& p0, const QPointF& p1, double low, double high,
                          int points) { runs.add(c, p0, p1, low, high, points); };
  const auto columnOf = [&](int index) {
    return std::floor(keyAxis->coordToPixel(data[index].key));
  };
  int i = from;
  while (i < to) {
    // A whole block of finite values: its summary where it lies in one column; where it spans
    // columns, its pieces found by bisection on the (monotonic) column of the keys and their
    // values scanned, so only a few points per column are mapped to pixels.
    if (i % kOldBlock == 0 && i + kOldBlock <= to && blocks[std::size_t(i / kOldBlock)].finite) {
      const Block& block = blocks[std::size_t(i / kOldBlock)];
      const int end = i + kOldBlock;
      const double x0 = keyAxis->coordToPixel(data[i].key);
      const double x1 = keyAxis->coordToPixel(data[end - 1].key);
      if (std::isfinite(x0) && std::isfinite(x1)) {
        if (std::floor(x0) == std::floor(x1)) {
          addRun(int(std::floor(x0)), QPointF(x0, valueAxis->coordToPixel(data[i].value)),
                 QPointF(x1, valueAxis->coordToPixel(data[end - 1].value)), block.lo, block.hi,
                 kOldBlock);
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
      runs.breakAt(p);
      continue;
    }
    addRun(int(std::floor(p.x())), p, p, value, value, 1);
  }
  runs.flush();
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
