// Drawing of the Compare panel's plots from a SweepData, as free functions over a QCustomPlot so
// the panel's controller stays small. Trials without an objective (pruned, failed, running) are
// left out of the history, slice and parallel coordinates; the intermediate values show every
// trial, pruned ones dimmed (a population-based training study's: one line per member).
#pragma once

#include <QJsonValue>
#include <QStringList>
#include <QVector>

#include "ui/compare/trialcolours.h"
#include "ui/data/runlogtypes.h"

class QCustomPlot;

namespace shardscope::ui::compare {

class TrialLines;

/// The running best of `objectives` (each entry the best of the entries up to it).
QVector<double> bestSoFar(const QVector<double>& objectives, bool minimize);
/// Parameter names that occur in any trial, sorted; for a group of runs (groupOfSweep), those
/// that every run has.
QStringList paramNames(const SweepData& sweep);
/// Whether a params key is a plot axis: every one but a replanned run's history
/// (backend::kReplanParam), which the config diff shows instead.
bool isAxisParam(const QString& key);
/// A parameter value as a number: numbers as they are, booleans 0/1, other values the index of
/// their text in `categories` (appended when new).
double paramNumber(const QJsonValue& value, QStringList& categories);

/// Objective per finished trial in trial order, and each one's trial number: its number in the
/// study when it has one, else its index in the sweep (both count from 0).
struct History {
  QVector<double> trialNumbers;
  QVector<double> objectives;
  QVector<double> best;
};
History history(const SweepData& sweep, bool minimize);

/// `colouring` by a figure: each trial's dot in its colour on the figure scale (under the plot),
/// grey without the figure; by objective: one colour.
void drawHistory(QCustomPlot* plot, const SweepData& sweep, bool minimize,
                 const TrialColouring& colouring = {});
/// The index in `sweep.trials` of the complete trial with the best objective (-1: none).
int bestTrial(const SweepData& sweep, bool minimize);
/// Draws every trial's intermediate values as one TrialLines plottable (line i = trial i; pruned
/// ones grey with a cross at their end; the best trial once more as the last line, bold) and
/// returns it, so streamed points can be added with appendIntermediate(). A population-based
/// training study (sweep.pbt) has one line per member instead (line m = member m), running
/// across its segments' trials at their global steps (intermediateLine, intermediatePoints), the
/// best member (PbtData::best's end) bold on top. `dimmed` (optional) receives how many trials
/// were drawn dimmed, `best` the best trial's index (-1: none), `bestLine` the line drawn again
/// bold (-1: none).
TrialLines* drawIntermediate(QCustomPlot* plot, const SweepData& sweep, bool minimize,
                             int* dimmed = nullptr, int* best = nullptr, int* bestLine = nullptr);
/// The line of the intermediate values that holds trial `index`'s points: its own (index), or
/// for a PBT study its member's (-1: none).
int intermediateLine(const SweepData& sweep, int index);
/// Every point of line `line` of the intermediate values: the points of the trials on it
/// (intermediateLine) in step order.
void intermediatePoints(const SweepData& sweep, int line, QVector<double>& xs, QVector<double>& ys);
/// Adds points to trial `index`'s line (reset: replaces them); its pruned cross follows its end.
void appendIntermediate(TrialLines* lines, int index, const SeriesChunk& chunk);
/// Above this many trials the intermediate values and parallel coordinates are drawn without
/// antialiasing: thousands of antialiased polylines take seconds per replot.
constexpr int kAntialiasedTrials = 300;
/// Returns how many trials were drawn (one polyline each, all in one TrialLines plottable),
/// coloured by objective (blue = best) or by `colouring`'s figure.
int drawParallel(QCustomPlot* plot, const SweepData& sweep, bool minimize,
                 const TrialColouring& colouring = {});
/// Returns how many points were drawn: later trials darker, or coloured by `colouring`'s figure.
int drawSlice(QCustomPlot* plot, const SweepData& sweep, const QString& param,
              const TrialColouring& colouring = {});
/// What drawCostPareto drew: trials with an objective and device-hours, and those on the front.
struct CostPareto {
  int points = 0;
  int front = 0;
};
/// Compare's "Slice by" GPU-hours: each started trial's objective (y) against its device-hours
/// (x: ranks x wall time, SweepTrial::usage), and the Pareto front (no other trial both cheaper and
/// at least as good) joined by a red step line. `hoursLabel` names the axis (GPU-hours, CPU-hours).
CostPareto drawCostPareto(QCustomPlot* plot, const SweepData& sweep, bool minimize,
                          const QString& hoursLabel);
/// The indices (in sweep.trials) of the cost Pareto front, cheapest first.
QVector<qsizetype> costParetoFront(const SweepData& sweep, bool minimize);
/// "GPU-hours" when every started trial ran on GPUs, "CPU-hours" when none did, else
/// "Device-hours".
QString hoursLabel(const SweepData& sweep);

/// Sets the title row setupPlot() made.
void setPlotTitle(QCustomPlot* plot, const QString& title);

/// Empties a plot (graphs, plottables, items) and gives its x axis a plain ticker again.
void resetPlot(QCustomPlot* plot);
/// A grey note in the middle of the axis rect ("No finished trial yet").
void placeholder(QCustomPlot* plot, const QString& text);
/// Styles a compare plot: white, light grid, a bold title row, the legend in a row under the
/// axis rect (never over the data).
void setupPlot(QCustomPlot* plot, const QString& title);
/// Wraps the legend into as many columns as the plot's width holds (setupPlot() calls it
/// before every replot).
void fitLegend(QCustomPlot* plot);

}  // namespace shardscope::ui::compare
