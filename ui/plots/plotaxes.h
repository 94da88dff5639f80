// The Plots panel's x axis: step, wall time, time since the run started, or tokens seen; and
// what each needs of a run (RunClock). Pure functions over plain values, no widgets.
//
// Tokens seen: the `step` event carries tokens per second, not tokens per step, so the count is
// an estimate: each run's tokens per step is the median, over consecutive step events, of
// tokens_per_s x (time between the events) / (steps between them) (a median, so the pauses of
// evaluations and checkpoints, which only lengthen a few intervals, do not inflate it), and a
// point at step s sits at s x that.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>

#include <limits>

namespace shardscope::ui {

enum class XAxis { step, wallTime, relativeTime, tokens };

/// The choices in the panel's order, and their names ("step", "wall time", ...).
QList<XAxis> xAxes();
QString xAxisName(XAxis axis);
/// The axis label ("step", "wall time", "time since start", "tokens seen (est.)").
QString xAxisLabel(XAxis axis);

/// What the time and token axes need of one run: when it started and its step events.
struct RunClock {
  double startedAt = std::numeric_limits<double>::quiet_NaN();  ///< the run row's, unix s
  double firstTime = std::numeric_limits<double>::quiet_NaN();  ///< its earliest point's time
  QVector<double> steps;  ///< the steps of its step events (tokens_per_s), in order
  QVector<double> times;  ///< their unix times
  QVector<double> tps;    ///< their tokens per second

  /// The run's start: the earlier of startedAt and firstTime (a run imported later has a start
  /// after its points), else its first step event's time (NaN: none of them yet).
  double start() const;
  /// The time of step `step`, interpolated between step events (clamped at the ends; NaN when
  /// there are none).
  double timeAt(double step) const;
  /// The estimated tokens per step (above; NaN with fewer than two step events).
  double tokensPerStep() const;
};

/// The x of each point of a series at `steps` (its `times` may be empty: then they come from
/// the clock) on axis `axis`; NaN where the clock cannot tell yet.
QVector<double> mapX(XAxis axis, const RunClock& clock, const QVector<double>& steps,
                     const QVector<double>& times);

/// How an x of `axis` reads in the hover read-out ("step 120", "14:02:31", "1:05:10",
/// "1.2M tokens").
QString xText(XAxis axis, double x);

}  // namespace shardscope::ui
