#include "ui/widgets/densitylines.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardscope::ui {

namespace {

// A channel in [0, 1] as 0..255, rounded.
int toByte(float v) { return int(std::lround(v * 255.0f)); }

// Coordinates to pixels inside the axis rect (0,0 its top left) for one rasterisation.
struct Mapping {
  bool linear = true;
  double keyOrigin = 0, keySlope = 1, valueOrigin = 0, valueSlope = 1;
  const QCPAxis* keyAxis = nullptr;
  const QCPAxis* valueAxis = nullptr;
  QPointF offset;
  QPointF pixel(double key, double value) const {
    if (linear) return {keyOrigin + keySlope * key, valueOrigin + valueSlope * value};
    return QPointF(keyAxis->coordToPixel(key), valueAxis->coordToPixel(value)) - offset;
  }
};

// Counts a line's pixels: each pixel once per line (`stamp` holds the last line that counted it).
struct Stamper {
  int w;
  int h;
  int id;
  std::vector<quint16>& counts;
  std::vector<int>& stamp;
  // Rows y0..y1 (either order) of pixel column `column`, clipped to the image.
  void mark(double column, double y0, double y1) const {
    if (column < 0 || column >= w) return;
    const int lo = std::max(0, int(std::floor(std::min(y0, y1))));
    const int hi = std::min(h - 1, int(std::floor(std::max(y0, y1))));
    const std::size_t base = std::size_t(column);
    for (int row = lo; row <= hi; ++row) {
      const std::size_t at = std::size_t(row) * std::size_t(w) + base;
      if (stamp[at] == id) continue;
      stamp[at] = id;
      if (counts[at] < std::numeric_limits<quint16>::max()) ++counts[at];
    }
  }
};

// Linear axes: pixel = origin + slope * coordinate, two multiplications a point.
Mapping mappingFor(const QCPAxis* keyAxis, const QCPAxis* valueAxis, const QRect& rect) {
  Mapping map;
  map.keyAxis = keyAxis;
  map.valueAxis = valueAxis;
  map.offset = rect.topLeft();
  map.linear = keyAxis->scaleType() == QCPAxis::stLinear &&
               valueAxis->scaleType() == QCPAxis::stLinear &&
               keyAxis->orientation() == Qt::Horizontal;
  map.keyOrigin = keyAxis->coordToPixel(0.0) - rect.left();
  map.keySlope = keyAxis->coordToPixel(1.0) - rect.left() - map.keyOrigin;
  map.valueOrigin = valueAxis->coordToPixel(0.0) - rect.top();
  map.valueSlope = valueAxis->coordToPixel(1.0) - rect.top() - map.valueOrigin;
  return map;
}

}  // namespace

DensityLines::DensityLines(QCPAxis* keyAxis, QCPAxis* valueAxis)
    : QCPAbstractPlottable(keyAxis, valueAxis) {
  m_refine.setSingleShot(true);
  m_refine.setInterval(kRefineMs);
  connect(&m_refine, &QTimer::timeout, this, &DensityLines::onRefine);
}

int DensityLines::addGroup(const Group& group) {
  m_groups.append(group);
  ++m_generation;
  return static_cast<int>(m_groups.size() - 1);
}

int DensityLines::addLine(int group, const QVector<double>& xs, const QVector<double>& ys) {
  Line line{std::clamp(group, 0, std::max(0, groupCount() - 1)), xs, ys};
  m_points += std::min(xs.size(), ys.size());
  m_bounds.grow(line.xs, line.ys, 0);
  m_lines.append(std::move(line));
  ++m_generation;
  return static_cast<int>(m_lines.size() - 1);
}

void DensityLines::setPoints(int index, const QVector<double>& xs, const QVector<double>& ys,
                             bool reset) {
  if (index < 0 || index >= m_lines.size()) return;
  Line& line = m_lines[index];
  const qsizetype from = reset ? 0 : line.xs.size();
  m_points -= reset ? std::min(line.xs.size(), line.ys.size()) : 0;
  if (reset) {
    line.xs = xs;
    line.ys = ys;
  } else {
    line.xs += xs;
    line.ys += ys;
  }
  m_points += std::min(xs.size(), ys.size());
  m_bounds.grow(line.xs, line.ys, from);
  ++m_generation;
}

void DensityLines::setBackdrop(const QColor& color) {
  m_backdrop = color;
  ++m_generation;
}

void DensityLines::clearLines() {
  m_lines.clear();
  m_points = 0;
  m_bounds.clear();
  ++m_generation;
}

int DensityLines::linesIn(int group) const {
  return static_cast<int>(std::count_if(m_lines.cbegin(), m_lines.cend(),
                                        [group](const Line& l) { return l.group == group; }));
}

double DensityLines::selectTest(const QPointF& /*pos*/, bool /*onlySelectable*/,
                                QVariant* /*details*/) const {
  return -1;  // a density is not selectable: the plot only drags and zooms
}

QCPRange DensityLines::getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain) const {
  return m_bounds.keys(foundRange, inSignDomain, m_lines);
}

QCPRange DensityLines::getValueRange(bool& foundRange, QCP::SignDomain inSignDomain,
                                     const QCPRange& /*inKeyRange*/) const {
  return m_bounds.values(foundRange, inSignDomain, m_lines);
}

DensityLines::View DensityLines::currentView() const {
  View view;
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (keyAxis == nullptr || valueAxis == nullptr || keyAxis->axisRect() == nullptr) return view;
  view.rect = keyAxis->axisRect()->rect();
  view.keys = keyAxis->range();
  view.values = valueAxis->range();
  view.generation = m_generation;
  return view;
}

void DensityLines::onRefine() {
  m_refineDue = true;
  if (mParentPlot != nullptr) mParentPlot->replot(QCustomPlot::rpQueuedReplot);
}

// New data or a new pixel size: rasterised now (the replot after new points shows them all). A
// pan or zoom of the same data: the last image moved and scaled at once, the exact one when the
// view has been still for kRefineMs.
void DensityLines::draw(QCPPainter* painter) {
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (keyAxis == nullptr || valueAxis == nullptr) return;
  const View view = currentView();
  if (view.rect.isEmpty()) return;
  const bool stale = m_image.isNull() || view.generation != m_imageView.generation ||
                     view.rect.size() != m_imageView.rect.size();
  if (stale || (m_refineDue && !(view == m_imageView))) rasterise(view);
  m_refineDue = false;
  if (view == m_imageView) {
    painter->drawImage(view.rect.topLeft(), m_image);
    m_drawnExact = true;
    return;
  }
  // Where the image's ranges lie in the current view.
  const QPointF topLeft(keyAxis->coordToPixel(m_imageView.keys.lower),
                        valueAxis->coordToPixel(m_imageView.values.upper));
  const QPointF bottomRight(keyAxis->coordToPixel(m_imageView.keys.upper),
                            valueAxis->coordToPixel(m_imageView.values.lower));
  painter->setRenderHint(QPainter::SmoothPixmapTransform, false);
  painter->drawImage(QRectF(topLeft, bottomRight), m_image);
  m_drawnExact = false;
  m_refine.start();
}

void DensityLines::rasterise(const View& view) {
  const int w = view.rect.width();
  const int h = view.rect.height();
  std::vector<std::vector<quint16>> counts(std::size_t(std::max(1, groupCount())));
  for (auto& c : counts) c.assign(std::size_t(w) * std::size_t(h), 0);
  std::vector<int> stamp(std::size_t(w) * std::size_t(h), -1);
  if (mKeyAxis.data() != nullptr && mValueAxis.data() != nullptr) {
    for (int i = 0; i < m_lines.size(); ++i) {
      const Line& line = m_lines[i];
      rasteriseLine(line, i, view, counts[std::size_t(line.group)], stamp);
    }
  }
  m_image = composite(counts, view.rect.size());
  m_imageView = view;
  ++m_rasters;
}

// A line is reduced per pixel column as it is walked: the rows it covers in a column are the
// span between the lowest and highest of its values there (its points and where its segments
// cross the column's edges), so a column of many points costs a min and a max each, and a
// segment that crosses several columns is walked one column at a time. A pixel counts a line
// once (`stamp` holds the last line that counted it): a trial with 1,000 points in 300 columns
// weighs what a trial with 300 does.
void DensityLines::rasteriseLine(const Line& line, int id, const View& view,
                                 std::vector<quint16>& counts, std::vector<int>& stamp) const {
  const int w = view.rect.width();
  const int h = view.rect.height();
  const QCPAxis* keyAxis = mKeyAxis.data();
  const QCPAxis* valueAxis = mValueAxis.data();
  if (keyAxis == nullptr || valueAxis == nullptr) return;
  const Mapping map = mappingFor(keyAxis, valueAxis, view.rect);
  const Stamper stamper{w, h, id, counts, stamp};
  const auto mark = [&stamper](double column, double y0, double y1) {
    stamper.mark(column, y0, y1);
  };
  // Columns strictly between `from` and `to` that segment a -> b crosses (clipped to the rect).
  const auto crossColumns = [&](QPointF a, QPointF b, double from, double to) {
    const double slope = (b.y() - a.y()) / (b.x() - a.x());
    // `from` and `to` are whole column numbers (floors), possibly far off screen.
    const auto first = static_cast<long long>(std::max(from + 1, 0.0));
    const auto end = static_cast<long long>(std::max(std::min(to, double(w)), 0.0));
    for (long long k = first; k < end; ++k) {
      const auto c = static_cast<double>(k);
      mark(c, a.y() + slope * (c - a.x()), a.y() + slope * (c + 1.0 - a.x()));
    }
  };
  const qsizetype n = std::min(line.xs.size(), line.ys.size());
  bool open = false;  // a column is being accumulated
  double column = 0, lo = 0, hi = 0;
  QPointF prev;
  for (qsizetype i = 0; i < n; ++i) {
    if (!std::isfinite(line.xs[i]) || !std::isfinite(line.ys[i])) {
      if (open) mark(column, lo, hi);  // a gap
      open = false;
      continue;
    }
    const QPointF p = map.pixel(line.xs[i], line.ys[i]);
    const double c = std::floor(p.x());
    if (open && c == column) {
      lo = std::min(lo, p.y());
      hi = std::max(hi, p.y());
    } else if (open && c > column) {
      // Leaves `column` at its right edge, crosses the ones between, enters `c` at its left.
      const double slope = (p.y() - prev.y()) / (p.x() - prev.x());
      const double out = prev.y() + slope * (column + 1.0 - prev.x());
      mark(column, std::min(lo, out), std::max(hi, out));
      crossColumns(prev, p, column, c);
      const double in = prev.y() + slope * (c - prev.x());
      lo = std::min(in, p.y());
      hi = std::max(in, p.y());
    } else if (open) {
      // Backwards in x (keys out of order): the same, mirrored.
      const double slope = (p.y() - prev.y()) / (p.x() - prev.x());
      const double out = prev.y() + slope * (column - prev.x());
      mark(column, std::min(lo, out), std::max(hi, out));
      crossColumns(p, prev, c, column);
      const double in = prev.y() + slope * (c + 1.0 - prev.x());
      lo = std::min(in, p.y());
      hi = std::max(in, p.y());
    } else {
      lo = hi = p.y();
    }
    column = c;
    open = true;
    prev = p;
  }
  if (open) mark(column, lo, hi);
}

// Per pixel, each group's colour at an opacity from minAlpha (one line) to 1 (the group's busiest
// pixel) on a log scale, groups composited in order (source over). The opacity per count comes
// from a table per group: a log per pixel would cost more than the lines.
QImage DensityLines::composite(const std::vector<std::vector<quint16>>& counts, QSize size) const {
  const bool opaque = m_backdrop.isValid() && m_backdrop.alpha() == 255;
  QImage image(size, opaque ? QImage::Format_RGB32 : QImage::Format_ARGB32_Premultiplied);
  image.fill(opaque ? m_backdrop : QColor(Qt::transparent));
  const float back[3] = {float(m_backdrop.redF()), float(m_backdrop.greenF()),
                         float(m_backdrop.blueF())};
  const int groups = std::min(groupCount(), int(counts.size()));
  std::vector<std::vector<float>> alphas(std::size_t(std::max(groups, 0)));
  for (int g = 0; g < groups; ++g) {
    const auto& c = counts[std::size_t(g)];
    const quint16 most = c.empty() ? 0 : *std::max_element(c.begin(), c.end());
    const double scale = most > 1 ? 1.0 / std::log(double(most)) : 0.0;
    const double floor = m_groups[g].minAlpha;
    auto& table = alphas[std::size_t(g)];
    table.resize(std::size_t(most) + 1, 0.0f);
    for (int n = 1; n <= most; ++n)
      table[std::size_t(n)] = float(floor + (1.0 - floor) * std::min(1.0, std::log(n) * scale));
  }
  const std::size_t width = std::size_t(size.width());
  for (int row = 0; row < size.height(); ++row) {
    auto* out = reinterpret_cast<QRgb*>(image.scanLine(row));
    for (std::size_t col = 0; col < width; ++col) {
      const std::size_t at = std::size_t(row) * width + col;
      float r = 0, gr = 0, b = 0, a = 0;
      for (int g = 0; g < groups; ++g) {
        const quint16 n = counts[std::size_t(g)][at];
        if (n == 0) continue;
        const float alpha = alphas[std::size_t(g)][n];
        const QColor& color = m_groups[g].color;
        r = float(color.redF()) * alpha + r * (1.0f - alpha);
        gr = float(color.greenF()) * alpha + gr * (1.0f - alpha);
        b = float(color.blueF()) * alpha + b * (1.0f - alpha);
        a = alpha + a * (1.0f - alpha);
      }
      if (a > 0 && opaque) {
        out[col] = qRgb(toByte(r + back[0] * (1.0f - a)), toByte(gr + back[1] * (1.0f - a)),
                        toByte(b + back[2] * (1.0f - a)));
      } else if (a > 0) {
        out[col] = qRgba(toByte(r), toByte(gr), toByte(b), toByte(a));
      }
    }
  }
  return image;
}

void DensityLines::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->setPen(QPen(m_groups.isEmpty() ? QColor(Qt::gray) : m_groups.first().color, 2));
  painter->drawLine(QLineF(rect.left(), rect.center().y(), rect.right(), rect.center().y()));
}

}  // namespace shardscope::ui
