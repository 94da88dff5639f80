// TimelineView: one lane per rank, each step's phases as a stacked bar over the steps (the phases
// of docs/trainer.md that add up to the step's wall time; exposed communication on top in its own
// colour). Zoom with the mouse wheel (about the pointer), pan by dragging, fit() shows every step;
// hovering a bar shows its step, rank and each phase in ms and % of the wall time; a double-click
// emits stepActivated (the hook for a per-unit view of that step).
// Zoomed out, each pixel column holds one bar: the mean of each phase over the steps in it (so the
// stack still adds up to the mean wall time), and a tick at the column's highest wall time, so a
// slow step is not averaged away. Every lane shares one y scale: the highest wall time in view.
#pragma once

#include <QImage>
#include <QVector>

#include <array>
#include <map>
#include <vector>

#include "ui/data/phasesdata.h"
#include "ui/timeline/rangeview.h"

namespace shardscope::ui {

class TimelineView : public RangeView {
  Q_OBJECT

 public:
  /// The stacked phases, bottom to top (they add up to the wall time).
  enum Phase { Data, Forward, Backward, Optimizer, Copy, Other, CommExposed, kPhaseCount };
  static QString phaseName(int phase);
  static QColor phaseColor(int phase);

  /// One drawn bar of a lane: the steps [stepLo, stepHi] it stands for (`steps` of them), each
  /// phase's mean in seconds, and the pixel rectangles drawn for them (empty for a zero phase).
  struct Bar {
    qint64 stepLo = 0;
    qint64 stepHi = 0;
    int steps = 0;
    std::array<double, kPhaseCount> seconds{};
    double wall = 0;     ///< the mean wall time of its steps
    double maxWall = 0;  ///< the highest wall time of its steps
    std::array<QRectF, kPhaseCount> rects{};
    double x0 = 0, x1 = 0;  ///< its pixel extent
  };

  explicit TimelineView(QWidget* parent = nullptr);

  /// Drops every step (a new run).
  void clear();
  /// Adds or replaces steps (a delta's points; reset: clear first). Follows a live run: while the
  /// view is fitted, it stays fitted to the new steps.
  void apply(const PhasesDelta& delta);

  qint64 runId() const { return m_runId; }
  int laneCount() const { return static_cast<int>(m_lanes.size()); }
  /// The rank drawn in lane `lane`.
  int rankOfLane(int lane) const;
  qint64 firstStep() const;
  qint64 lastStep() const;
  /// The steps in view, as a continuous range (step s spans s - 0.5 .. s + 0.5).
  /// Shows steps [lo, hi] (at least one step wide); stops following a live run.
  void setStepRange(double lo, double hi);
  /// Every step in view; follows a live run again.
  void fit();

  /// The bars of lane `lane` as drawn now (computed for the current size and view).
  const QVector<Bar>& bars(int lane) const;
  /// The pixel rectangle of lane `lane`'s bars (y grows down; a bar's base is its bottom).
  QRectF laneRect(int lane) const;
  /// The step under pixel column x (a continuous value).
  double stepAt(double x) const { return valueAt(x); }
  /// What hovering `pos` shows ("" when not over a bar).
  QString detailsAt(const QPoint& pos) const override;

 signals:
  /// A double-click on step `step` of rank `rank`'s lane.
  void stepActivated(qint64 runId, qint64 step, int rank);
  /// The view's step range changed (zoom, pan, fit, new steps while following).
  void viewChanged();

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  // One rank's steps in step order, with each step's stacked phases and wall time.
  struct Lane {
    int rank = 0;
    std::vector<qint64> steps;
    std::vector<std::array<double, kPhaseCount>> phases;
    std::vector<double> wall;
  };
  QRectF plotRect() const override;
  void showRange(double lo, double hi) override { setStepRange(lo, hi); }
  bool hasContent() const override { return !m_lanes.empty(); }
  void layoutBars() const;
  void invalidate();
  /// The lane and bar under `pos` (false when none).
  bool hit(const QPoint& pos, int& lane, int& bar) const;

  qint64 m_runId = -1;
  std::vector<Lane> m_lanes;
  bool m_follow = true;
  // The bars as last laid out (mutable: laid out on demand, for paint and the accessors).
  mutable std::vector<QVector<Bar>> m_bars;
  mutable bool m_barsValid = false;
  mutable double m_scale = 0;  // seconds at the top of a lane
  // Each lane's bars rasterised with the layout (pixel spans written directly: a zoomed-out
  // lane is a thousand one-pixel bars of seven phases, too many for a fillRect each).
  mutable std::vector<QImage> m_laneImages;
};

}  // namespace shardscope::ui
