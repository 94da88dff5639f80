// UnitView: one step recorded in detail (docs/trainer.md, "Per-unit traces"), per rank three
// stream lanes over the step's milliseconds: all-gathers, compute (each unit's forward and
// backward stretches) and reduce-scatters, one bar per unit collective or stretch. The part of a
// collective the rank waited on is drawn darker in its lane and as a red gap in the compute lane,
// so overlap and exposed communication read at a glance. Hovering a bar shows its unit, kind,
// bytes, bandwidth and duration. The wheel zooms about the pointer, dragging pans, a double-click
// shows the whole step again. Each rank's times are on its own clock from its step's origin.
#pragma once

#include <QRectF>
#include <QVector>

#include "backend/monitor/unittrace.h"
#include "ui/timeline/rangeview.h"

namespace shardscope::ui {

class UnitView : public RangeView {
  Q_OBJECT

 public:
  /// The lanes of a rank, top to bottom.
  enum Lane { GatherLane, ComputeLane, ReduceLane, kLaneCount };

  /// One drawn bar: a span of a rank, and where it is drawn (for the current size and view).
  struct Bar {
    int rank = 0;
    Lane lane = ComputeLane;
    backend::UnitSpan span;
    QRectF rect;  ///< pixels; empty when out of view
  };

  explicit UnitView(QWidget* parent = nullptr);

  /// Shows `step` whole (every rank that recorded it).
  void showStep(const backend::UnitTraceStep& step);

  qint64 step() const { return m_step; }
  /// Ranks drawn, top to bottom.
  QVector<int> ranks() const { return m_ranks; }
  /// Every bar, in rank order then span order, laid out for the current size and view.
  const QVector<Bar>& bars() const;
  /// The pixel rectangle of lane `lane` of the `index`-th rank drawn.
  QRectF laneRect(int index, Lane lane) const;
  /// Shows the step's milliseconds [lo, hi].
  void setTimeRange(double lo, double hi);
  /// The whole step.
  void fit();
  /// What hovering `pos` shows ("" when not over a bar).
  QString detailsAt(const QPoint& pos) const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  QRectF plotRect() const override;
  void showRange(double lo, double hi) override { setTimeRange(lo, hi); }
  void layout() const;
  const Bar* barAt(const QPoint& pos) const;
  void paintAxis(class QPainter& p, const QRectF& area) const;

  qint64 m_step = 0;
  double m_end = 1;  // the step's last end (ms)
  QVector<int> m_ranks;
  mutable QVector<Bar> m_bars;
  mutable bool m_dirty = true;  // the bars' rectangles are for another size or view
};

}  // namespace shardscope::ui
