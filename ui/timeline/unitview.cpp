#include "ui/timeline/unitview.h"

#include <QMouseEvent>
#include <QPainter>

#include <algorithm>
#include <cmath>

namespace shardscope::ui {
namespace {

constexpr double kLeft = 96;  // rank and lane labels
constexpr double kTop = 22;   // the millisecond axis
constexpr double kRight = 10;
constexpr double kBottom = 4;
constexpr double kRankGap = 6;  // between two ranks' lanes

using backend::UnitSpan;
using backend::UnitSpanKind;

QColor colorOf(UnitSpanKind kind) {
  switch (kind) {
    case UnitSpanKind::allGather:
      return {76, 120, 168};
    case UnitSpanKind::reduceScatter:
      return {245, 133, 24};
    case UnitSpanKind::forward:
      return {84, 162, 75};
    case UnitSpanKind::backward:
      return {46, 110, 60};
  }
  return Qt::gray;
}

const QColor kExposed(228, 87, 86);

UnitView::Lane laneOf(UnitSpanKind kind) {
  switch (kind) {
    case UnitSpanKind::allGather:
      return UnitView::GatherLane;
    case UnitSpanKind::reduceScatter:
      return UnitView::ReduceLane;
    default:
      return UnitView::ComputeLane;
  }
}

QString bytesText(qint64 bytes) {
  if (bytes >= 1 << 30) return QString::number(bytes / double(1 << 30), 'f', 2) + " GiB";
  if (bytes >= 1 << 20) return QString::number(bytes / double(1 << 20), 'f', 2) + " MiB";
  if (bytes >= 1 << 10) return QString::number(bytes / double(1 << 10), 'f', 1) + " KiB";
  return QString::number(bytes) + " B";
}

QString rateText(double bytesPerSecond) {
  if (bytesPerSecond >= 1e9) return QString::number(bytesPerSecond / 1e9, 'f', 2) + " GB/s";
  if (bytesPerSecond >= 1e6) return QString::number(bytesPerSecond / 1e6, 'f', 1) + " MB/s";
  return QString::number(bytesPerSecond / 1e3, 'f', 1) + " kB/s";
}

// A tick spacing of 1, 2 or 5 times a power of ten giving about `want` ticks over `range`.
double tickStep(double range, int want) {
  const double raw = range / std::max(1, want);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

}  // namespace

UnitView::UnitView(QWidget* parent) : RangeView(0.85, parent) {
  setMouseTracking(true);
  setMinimumSize(320, 160);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

void UnitView::showStep(const backend::UnitTraceStep& step) {
  m_step = step.step;
  m_ranks.clear();
  m_bars.clear();
  for (const auto& [rank, r] : step.ranks) {
    m_ranks.append(rank);
    for (const auto& span : r.spans) m_bars.append(Bar{rank, laneOf(span.kind), span, {}});
  }
  m_end = std::max(step.end(), 1e-3);
  fit();
}

void UnitView::fit() { setTimeRange(0, m_end); }

void UnitView::setTimeRange(double lo, double hi) {
  m_lo = lo;
  m_hi = std::max(hi, lo + 1e-3);
  m_dirty = true;
  update();
}

QRectF UnitView::plotRect() const {
  return QRectF(kLeft, kTop, std::max(1.0, width() - kLeft - kRight),
                std::max(1.0, height() - kTop - kBottom));
}

QRectF UnitView::laneRect(int index, Lane lane) const {
  const QRectF r = plotRect();
  const int n = std::max(1, static_cast<int>(m_ranks.size()));
  const double block = r.height() / n;
  const double laneHeight = std::max(2.0, (block - kRankGap) / static_cast<int>(kLaneCount));
  return QRectF(r.left(), r.top() + index * block + static_cast<int>(lane) * laneHeight, r.width(),
                laneHeight);
}

const QVector<UnitView::Bar>& UnitView::bars() const {
  layout();
  return m_bars;
}

void UnitView::layout() const {
  if (!m_dirty) return;
  m_dirty = false;
  const QRectF area = plotRect();
  for (auto& bar : m_bars) {
    const int index = static_cast<int>(m_ranks.indexOf(bar.rank));
    const QRectF lane = laneRect(index, bar.lane);
    const double x0 = std::max(area.left(), xOf(bar.span.start));
    // At least a pixel wide, so a short collective still shows.
    const double x1 = std::min(area.right(), std::max(xOf(bar.span.end), xOf(bar.span.start) + 1));
    bar.rect = x1 <= x0 ? QRectF() : QRectF(x0, lane.top() + 1, x1 - x0, lane.height() - 2);
  }
}

const UnitView::Bar* UnitView::barAt(const QPoint& pos) const {
  layout();
  // The last drawn wins (drawn on top).
  for (auto it = m_bars.crbegin(); it != m_bars.crend(); ++it)
    if (!it->rect.isEmpty() && it->rect.contains(pos)) return &*it;
  return nullptr;
}

QString UnitView::detailsAt(const QPoint& pos) const {
  const Bar* bar = barAt(pos);
  if (!bar) return {};
  const UnitSpan& s = bar->span;
  QString text = QStringLiteral("%1: %2").arg(s.unit, backend::unitSpanKindName(s.kind));
  if (s.isCollective()) text += QStringLiteral(" (%1)").arg(s.phase);
  text +=
      QStringLiteral("\nrank %1, step %2, micro-step %3").arg(bar->rank).arg(m_step).arg(s.micro);
  text += QStringLiteral("\n%1 ms from %2 to %3 ms")
              .arg(s.duration(), 0, 'f', 3)
              .arg(s.start, 0, 'f', 3)
              .arg(s.end, 0, 'f', 3);
  if (s.isCollective()) {
    text += QStringLiteral("\n%1, %2").arg(bytesText(s.bytes), rateText(s.bandwidth()));
    text += QStringLiteral("\nwaited %1 ms (exposed)").arg(s.exposed(), 0, 'f', 3);
  }
  return text;
}

void UnitView::paintAxis(QPainter& p, const QRectF& area) const {
  p.setPen(palette().color(QPalette::WindowText));
  const double step = tickStep(m_hi - m_lo, std::max(2, static_cast<int>(area.width() / 90)));
  // Ticks counted in whole steps (a floating-point loop counter would drift).
  const auto first = static_cast<long long>(std::ceil(m_lo / step));
  const auto last = static_cast<long long>(std::floor((m_hi + 1e-9) / step));
  for (long long i = first; i <= last; ++i) {
    const double t = static_cast<double>(i) * step;
    const double x = xOf(t);
    p.drawLine(QPointF(x, area.top() - 4), QPointF(x, area.top()));
    p.drawText(QRectF(x - 40, 2, 80, kTop - 6), Qt::AlignCenter,
               QString::number(t, 'g', 6) + (i == first ? " ms" : ""));
  }
}

void UnitView::paintEvent(QPaintEvent* /*event*/) {
  layout();
  QPainter p(this);
  p.fillRect(rect(), palette().color(QPalette::Base));
  const QRectF area = plotRect();
  if (m_ranks.isEmpty()) {
    p.drawText(rect(), Qt::AlignCenter, tr("No step recorded in detail"));
    return;
  }
  paintAxis(p, area);
  static const char* const kLaneNames[kLaneCount] = {"gather", "compute", "reduce"};
  for (int i = 0; i < m_ranks.size(); ++i) {
    for (int lane = 0; lane < kLaneCount; ++lane) {
      const QRectF r = laneRect(i, static_cast<Lane>(lane));
      p.fillRect(r, lane % 2 ? palette().color(QPalette::AlternateBase).darker(104)
                             : palette().color(QPalette::AlternateBase));
      p.setPen(palette().color(QPalette::WindowText));
      p.drawText(QRectF(4, r.top(), kLeft - 8, r.height()), Qt::AlignVCenter | Qt::AlignRight,
                 lane == 0 ? QStringLiteral("rank %1 %2").arg(m_ranks[i]).arg(kLaneNames[lane])
                           : QString::fromLatin1(kLaneNames[lane]));
    }
  }
  p.setClipRect(area);
  for (const auto& bar : m_bars) {
    if (bar.rect.isEmpty()) continue;
    const QColor color = colorOf(bar.span.kind);
    p.fillRect(bar.rect, color);
    if (!bar.span.isCollective()) continue;
    p.setPen(color.darker(160));
    p.drawRect(bar.rect);
    if (bar.span.exposed() <= 0) continue;
    // The waited part: darker in the collective's lane, a red gap in the compute lane.
    const double x0 = std::max(bar.rect.left(), xOf(bar.span.waitFrom));
    const double x1 = std::max(bar.rect.right(), x0 + 1);
    p.fillRect(QRectF(x0, bar.rect.top(), x1 - x0, bar.rect.height()), color.darker(150));
    const QRectF compute = laneRect(static_cast<int>(m_ranks.indexOf(bar.rank)), ComputeLane);
    p.fillRect(QRectF(x0, compute.top() + compute.height() * 0.3, x1 - x0, compute.height() * 0.4),
               kExposed);
  }
}

void UnitView::mouseDoubleClickEvent(QMouseEvent* /*event*/) { fit(); }

void UnitView::resizeEvent(QResizeEvent* event) {
  m_dirty = true;
  QWidget::resizeEvent(event);
}

}  // namespace shardscope::ui
