#include "ui/timeline/timelineview.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace shardscope::ui {
namespace {

constexpr double kLeft = 64;  // lane labels
constexpr double kRight = 8;
constexpr double kTop = 4;
constexpr double kBottom = 22;  // the step axis
constexpr double kLaneGap = 8;
constexpr double kPerStepPx = 3;  // a step at least this wide gets a bar of its own

std::array<double, TimelineView::kPhaseCount> stacked(const spec::PhasesEvent& e) {
  std::array<double, TimelineView::kPhaseCount> out{};
  out[TimelineView::Data] = e.data;
  out[TimelineView::Forward] = e.forward;
  out[TimelineView::Backward] = e.backward;
  out[TimelineView::Optimizer] = e.optimizer;
  out[TimelineView::Copy] = e.copy;
  out[TimelineView::Other] = e.other;
  out[TimelineView::CommExposed] = e.comm_exposed;
  return out;
}

QString ms(double seconds) {
  return QString::number(seconds * 1e3, 'f', 1) + QStringLiteral(" ms");
}

// A tick spacing of 1, 2 or 5 x 10^k steps, about `target` steps apart, at least 1.
qint64 niceSpacing(double target) {
  if (target <= 1) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(target)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= target) return static_cast<qint64>(m * magnitude);
  return static_cast<qint64>(10 * magnitude);
}

}  // namespace

QString TimelineView::phaseName(int phase) {
  switch (phase) {
    case Data:
      return QStringLiteral("data");
    case Forward:
      return QStringLiteral("forward");
    case Backward:
      return QStringLiteral("backward");
    case Optimizer:
      return QStringLiteral("optimizer");
    case Copy:
      return QStringLiteral("copy");
    case Other:
      return QStringLiteral("other");
    case CommExposed:
      return QStringLiteral("exposed comm");
    default:
      return {};
  }
}

QColor TimelineView::phaseColor(int phase) {
  switch (phase) {
    case Data:
      return QColor(0x8c, 0x8c, 0x8c);
    case Forward:
      return QColor(0x3b, 0x75, 0xc4);
    case Backward:
      return QColor(0x5a, 0xa8, 0x4f);
    case Optimizer:
      return QColor(0x9a, 0x63, 0xc2);
    case Copy:
      return QColor(0x2a, 0xa8, 0xa8);
    case Other:
      return QColor(0xc8, 0xc0, 0xa8);
    case CommExposed:
      return QColor(0xe0, 0x40, 0x30);
    default:
      return Qt::black;
  }
}

TimelineView::TimelineView(QWidget* parent) : RangeView(0.8, parent) {
  setMouseTracking(true);
  setMinimumHeight(120);
  setAutoFillBackground(true);
  setBackgroundRole(QPalette::Base);
}

void TimelineView::clear() {
  m_runId = -1;
  m_lanes.clear();
  m_follow = true;
  m_lo = 0;
  m_hi = 1;
  invalidate();
}

void TimelineView::apply(const PhasesDelta& delta) {
  if (delta.reset || delta.runId != m_runId) {
    const bool follow = m_follow || delta.runId != m_runId;
    clear();
    m_follow = follow;
  }
  m_runId = delta.runId;
  for (const auto& point : delta.points) {
    auto lane = std::find_if(m_lanes.begin(), m_lanes.end(),
                             [&](const Lane& l) { return l.rank == point.rank; });
    if (lane == m_lanes.end()) {
      lane = m_lanes.insert(std::upper_bound(m_lanes.begin(), m_lanes.end(), point.rank,
                                             [](int r, const Lane& l) { return r < l.rank; }),
                            Lane{point.rank, {}, {}, {}});
    }
    const qint64 step = point.phases.step;
    const auto at = std::lower_bound(lane->steps.begin(), lane->steps.end(), step);
    const auto index = at - lane->steps.begin();
    if (at != lane->steps.end() && *at == step) {
      lane->phases[index] = stacked(point.phases);
      lane->wall[index] = point.phases.wall;
      continue;
    }
    lane->steps.insert(at, step);
    lane->phases.insert(lane->phases.begin() + index, stacked(point.phases));
    lane->wall.insert(lane->wall.begin() + index, point.phases.wall);
  }
  if (m_follow) {
    fit();
  } else {
    invalidate();
  }
}

int TimelineView::rankOfLane(int lane) const {
  return lane >= 0 && lane < laneCount() ? m_lanes[lane].rank : -1;
}

qint64 TimelineView::firstStep() const {
  qint64 first = -1;
  for (const auto& lane : m_lanes)
    if (!lane.steps.empty() && (first < 0 || lane.steps.front() < first))
      first = lane.steps.front();
  return first;
}

qint64 TimelineView::lastStep() const {
  qint64 last = -1;
  for (const auto& lane : m_lanes)
    if (!lane.steps.empty()) last = std::max(last, lane.steps.back());
  return last;
}

void TimelineView::setStepRange(double lo, double hi) {
  if (hi - lo < 1) {
    const double mid = (lo + hi) / 2;
    lo = mid - 0.5;
    hi = mid + 0.5;
  }
  m_lo = lo;
  m_hi = hi;
  m_follow = false;
  invalidate();
  emit viewChanged();
}

void TimelineView::fit() {
  const qint64 first = firstStep();
  const qint64 last = lastStep();
  if (first < 0) {
    m_lo = 0;
    m_hi = 1;
  } else {
    m_lo = static_cast<double>(first) - 0.5;
    m_hi = static_cast<double>(last) + 0.5;
  }
  m_follow = true;
  invalidate();
  emit viewChanged();
}

QRectF TimelineView::plotRect() const {
  return QRectF(kLeft, kTop, std::max(1.0, width() - kLeft - kRight),
                std::max(1.0, height() - kTop - kBottom));
}

QRectF TimelineView::laneRect(int lane) const {
  const QRectF plot = plotRect();
  const int n = std::max(1, laneCount());
  const double h = std::max(1.0, (plot.height() - kLaneGap * (n - 1)) / n);
  return QRectF(plot.left(), plot.top() + lane * (h + kLaneGap), plot.width(), h);
}

void TimelineView::invalidate() {
  m_barsValid = false;
  update();
}

const QVector<TimelineView::Bar>& TimelineView::bars(int lane) const {
  layoutBars();
  static const QVector<Bar> none;
  return lane >= 0 && lane < laneCount() ? m_bars[lane] : none;
}

void TimelineView::layoutBars() const {
  if (m_barsValid) return;
  m_barsValid = true;
  m_bars.assign(m_lanes.size(), {});
  const QRectF plot = plotRect();
  const double pps = plot.width() / (m_hi - m_lo);
  const bool perStep = pps >= kPerStepPx;
  const int columns = static_cast<int>(plot.width());
  m_scale = 0;
  for (std::size_t l = 0; l < m_lanes.size(); ++l) {
    const Lane& lane = m_lanes[l];
    QVector<Bar>& out = m_bars[l];
    // The visible steps: s + 0.5 > viewLo and s - 0.5 < viewHi.
    auto it = std::upper_bound(lane.steps.begin(), lane.steps.end(), m_lo - 0.5,
                               [](double v, qint64 s) { return v < static_cast<double>(s); });
    int key = -1;
    for (; it != lane.steps.end() && static_cast<double>(*it) - 0.5 < m_hi; ++it) {
      const auto i = static_cast<std::size_t>(it - lane.steps.begin());
      const double s = static_cast<double>(*it);
      int k = 0;
      if (perStep) {
        k = key + 1;
      } else {
        k = std::clamp(static_cast<int>(std::floor((s - m_lo) * pps)), 0, columns - 1);
      }
      if (k != key || out.isEmpty()) {
        Bar bar;
        bar.stepLo = *it;
        if (perStep) {
          bar.x0 = plot.left() + (s - 0.4 - m_lo) * pps;
          bar.x1 = plot.left() + (s + 0.4 - m_lo) * pps;
        } else {
          bar.x0 = plot.left() + k;
          bar.x1 = bar.x0 + 1;
        }
        out.append(bar);
        key = k;
      }
      Bar& bar = out.last();
      bar.stepHi = *it;
      ++bar.steps;
      for (int p = 0; p < kPhaseCount; ++p) bar.seconds[p] += lane.phases[i][p];
      bar.wall += lane.wall[i];
      bar.maxWall = std::max(bar.maxWall, lane.wall[i]);
    }
    for (Bar& bar : out) {
      for (double& s : bar.seconds) s /= bar.steps;
      bar.wall /= bar.steps;
      m_scale = std::max(m_scale, bar.maxWall);
    }
  }
  if (m_scale <= 0) m_scale = 1;
  m_laneImages.assign(m_lanes.size(), {});
  std::array<QRgb, kPhaseCount> colours{};
  for (int p = 0; p < kPhaseCount; ++p) colours[p] = phaseColor(p).rgba();
  const QRgb tick = palette().color(QPalette::Text).rgba();
  for (std::size_t l = 0; l < m_lanes.size(); ++l) {
    const QRectF r = laneRect(static_cast<int>(l));
    QImage& image = m_laneImages[l];
    image = QImage(static_cast<int>(std::ceil(r.width())), static_cast<int>(std::ceil(r.height())),
                   QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::transparent);
    const int w = image.width();
    const int h = image.height();
    // A pixel span of the lane's image: columns [x0, x1), rows [y0, y1) (lane coordinates).
    const auto span = [&](double x0, double x1, double y0, double y1, QRgb colour) {
      const int c0 = std::clamp(static_cast<int>(std::lround(x0 - r.left())), 0, w);
      const int c1 =
          std::clamp(std::max(c0 + 1, static_cast<int>(std::lround(x1 - r.left()))), 0, w);
      const int r0 = std::clamp(static_cast<int>(std::lround(y0 - r.top())), 0, h);
      const int r1 = std::clamp(static_cast<int>(std::lround(y1 - r.top())), 0, h);
      for (int y = r0; y < r1; ++y) {
        auto* row = reinterpret_cast<QRgb*>(image.scanLine(y));
        std::fill(row + c0, row + c1, colour);
      }
    };
    for (Bar& bar : m_bars[l]) {
      double y = r.bottom();
      for (int p = 0; p < kPhaseCount; ++p) {
        const double height = bar.seconds[p] / m_scale * r.height();
        bar.rects[p] = height > 0 ? QRectF(bar.x0, y - height, bar.x1 - bar.x0, height) : QRectF();
        if (height > 0) span(bar.x0, bar.x1, y - height, y, colours[p]);
        y -= height;
      }
      // A column of several steps: a tick at their highest wall time.
      if (bar.steps > 1 && bar.maxWall > bar.wall) {
        const double top = r.bottom() - bar.maxWall / m_scale * r.height();
        span(bar.x0, bar.x1, top, top + 1, tick);
      }
    }
  }
}

void TimelineView::paintEvent(QPaintEvent*) {
  layoutBars();
  QPainter painter(this);
  const QRectF plot = plotRect();
  const QColor text = palette().color(QPalette::Text);
  const QColor grid = palette().color(QPalette::Mid);
  if (m_lanes.empty()) {
    painter.setPen(text);
    painter.drawText(rect(), Qt::AlignCenter, tr("no phases recorded for this run"));
    return;
  }
  for (int l = 0; l < laneCount(); ++l) {
    const QRectF r = laneRect(l);
    painter.setPen(text);
    painter.drawText(QRectF(0, r.top(), kLeft - 6, r.height()), Qt::AlignRight | Qt::AlignVCenter,
                     tr("rank %1").arg(m_lanes[l].rank));
    painter.setPen(grid);
    painter.drawLine(QPointF(r.left(), r.bottom() + 0.5), QPointF(r.right(), r.bottom() + 0.5));
    painter.drawImage(r.topLeft(), m_laneImages[l]);
    if (l == 0) {
      painter.setPen(text);
      painter.drawText(QRectF(r.left() + 4, r.top(), r.width() - 8, 14),
                       Qt::AlignRight | Qt::AlignTop, ms(m_scale));
    }
  }
  // The step axis.
  painter.setPen(text);
  const double span = m_hi - m_lo;
  const qint64 spacing = niceSpacing(span / std::max(1.0, plot.width() / 90));
  const auto firstTick = static_cast<qint64>(std::ceil(m_lo / spacing)) * spacing;
  for (qint64 t = firstTick; static_cast<double>(t) <= m_hi; t += spacing) {
    const double x = plot.left() + (static_cast<double>(t) - m_lo) / span * plot.width();
    painter.drawLine(QPointF(x, plot.bottom() + 1), QPointF(x, plot.bottom() + 5));
    painter.drawText(QRectF(x - 40, plot.bottom() + 5, 80, kBottom - 5), Qt::AlignHCenter,
                     QString::number(t));
  }
}

void TimelineView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  invalidate();
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* event) {
  int lane = 0;
  int bar = 0;
  if (!hit(event->position().toPoint(), lane, bar)) return;
  const Bar& b = m_bars[lane][bar];
  // A bar of many steps: the one nearest the pointer.
  const auto step = std::clamp(static_cast<qint64>(std::llround(stepAt(event->position().x()))),
                               b.stepLo, b.stepHi);
  emit stepActivated(m_runId, step, m_lanes[lane].rank);
}

void TimelineView::leaveEvent(QEvent* event) {
  QToolTip::hideText();
  QWidget::leaveEvent(event);
}

bool TimelineView::hit(const QPoint& pos, int& lane, int& bar) const {
  layoutBars();
  for (int l = 0; l < laneCount(); ++l) {
    const QRectF r = laneRect(l);
    if (pos.y() < r.top() || pos.y() > r.bottom()) continue;
    const QVector<Bar>& list = m_bars[l];
    const auto it = std::upper_bound(list.begin(), list.end(), double(pos.x()) + 0.5,
                                     [](double x, const Bar& b) { return x < b.x0; });
    if (it == list.begin()) return false;
    const auto& b = *(it - 1);
    if (pos.x() + 0.5 > b.x1 + 1) return false;
    lane = l;
    bar = static_cast<int>(it - 1 - list.begin());
    return true;
  }
  return false;
}

QString TimelineView::detailsAt(const QPoint& pos) const {
  int lane = 0;
  int index = 0;
  if (!hit(pos, lane, index)) return {};
  const Bar& bar = m_bars[lane][index];
  QStringList lines;
  if (bar.steps == 1) {
    lines << tr("step %1, rank %2").arg(bar.stepLo).arg(m_lanes[lane].rank);
    lines << tr("wall %1").arg(ms(bar.wall));
  } else {
    lines << tr("steps %1-%2 (%3 steps, means), rank %4")
                 .arg(bar.stepLo)
                 .arg(bar.stepHi)
                 .arg(bar.steps)
                 .arg(m_lanes[lane].rank);
    lines << tr("wall %1 (highest %2)").arg(ms(bar.wall), ms(bar.maxWall));
  }
  for (int p = kPhaseCount - 1; p >= 0; --p) {
    const double share = bar.wall > 0 ? 100.0 * bar.seconds[p] / bar.wall : 0;
    lines << QStringLiteral("%1: %2 (%3%)")
                 .arg(phaseName(p), ms(bar.seconds[p]), QString::number(share, 'f', 1));
  }
  return lines.join(QLatin1Char('\n'));
}

}  // namespace shardscope::ui
