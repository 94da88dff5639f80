#include "ui/timeline/rangeview.h"

#include <QMouseEvent>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>

namespace shardscope::ui {

RangeView::RangeView(double zoomPerNotch, QWidget* parent)
    : QWidget(parent), m_zoomPerNotch(zoomPerNotch) {}

void RangeView::zoom(double factor, double at) {
  showRange(at - (at - m_lo) * factor, at + (m_hi - at) * factor);
}

double RangeView::valueAt(double x) const {
  const QRectF plot = plotRect();
  return m_lo + (x - plot.left()) / plot.width() * (m_hi - m_lo);
}

double RangeView::xOf(double v) const {
  const QRectF plot = plotRect();
  return plot.left() + (v - m_lo) / (m_hi - m_lo) * plot.width();
}

void RangeView::wheelEvent(QWheelEvent* event) {
  const double notches = event->angleDelta().y() / 120.0;
  if (!hasContent() || notches == 0) return;
  zoom(std::pow(m_zoomPerNotch, notches), valueAt(event->position().x()));
  event->accept();
}

void RangeView::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return QWidget::mousePressEvent(event);
  m_dragging = true;
  m_dragValue = valueAt(event->position().x());
  setCursor(Qt::ClosedHandCursor);
}

void RangeView::mouseMoveEvent(QMouseEvent* event) {
  if (m_dragging) {
    // Keeps the value grabbed under the pointer.
    const double shift = m_dragValue - valueAt(event->position().x());
    if (shift != 0) showRange(m_lo + shift, m_hi + shift);
    return;
  }
  const QString details = detailsAt(event->position().toPoint());
  if (details.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), details, this);
  }
}

void RangeView::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return QWidget::mouseReleaseEvent(event);
  m_dragging = false;
  unsetCursor();
}

}  // namespace shardscope::ui
