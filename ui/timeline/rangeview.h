// RangeView: what the Timeline (over steps) and the per-unit view (over a step's milliseconds)
// share: a horizontal range [viewLo, viewHi] drawn across plotRect(), the wheel zooming about the
// pointer, a left-button drag panning, and hovering showing detailsAt() as a tooltip. Each view
// says how a range is shown (its minimum width, what else changes) in showRange().
#pragma once

#include <QRectF>
#include <QString>
#include <QWidget>

namespace shardscope::ui {

class RangeView : public QWidget {
 public:
  double viewLo() const { return m_lo; }
  double viewHi() const { return m_hi; }
  /// Zooms by `factor` (< 1: in) about the value `at`.
  void zoom(double factor, double at);
  /// What hovering `pos` shows ("" when over nothing).
  virtual QString detailsAt(const QPoint& pos) const = 0;

 protected:
  /// `zoomPerNotch`: the factor one wheel notch zooms in by.
  RangeView(double zoomPerNotch, QWidget* parent);

  /// The pixel rectangle the range spans.
  virtual QRectF plotRect() const = 0;
  /// Shows [lo, hi], as the view's own setter does.
  virtual void showRange(double lo, double hi) = 0;
  /// Whether there is anything to zoom or pan.
  virtual bool hasContent() const { return true; }

  /// The value under pixel column x, and the pixel column of value v.
  double valueAt(double x) const;
  double xOf(double v) const;

  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;

  double m_lo = 0, m_hi = 1;

 private:
  double m_zoomPerNotch;
  bool m_dragging = false;
  double m_dragValue = 0;  // the value under the pointer when the drag began
};

}  // namespace shardscope::ui
