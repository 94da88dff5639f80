#include "ui/compare/trialoverlay.h"

#include <qcustomplot.h>

#include <utility>

#include "ui/compare/compareplots.h"
#include "ui/widgets/curveplot.h"
#include "ui/widgets/densitylines.h"

namespace shardscope::ui::compare {

namespace {

constexpr int kLegendTicked = 6;  // ticked trials named in the legend (more are drawn, unnamed)

const QColor kTrainColor(0x2c, 0x6f, 0xbb);
const QColor kEvalColor(0xe0, 0x7b, 0x1a);
const QColor kPrunedColor(0x90, 0x90, 0x90);

std::pair<QVector<double>, QVector<double>> split(const QVector<QPointF>& curve) {
  QVector<double> xs, ys;
  xs.reserve(curve.size());
  ys.reserve(curve.size());
  for (const QPointF& p : curve) {
    xs.append(p.x());
    ys.append(p.y());
  }
  return {xs, ys};
}

// A legend entry that draws nothing: the density's groups are one plottable, named per group.
void legendEntry(QCustomPlot* plot, const QString& name, const QPen& pen) {
  QCPGraph* entry = plot->addGraph();
  entry->setName(name);
  entry->setPen(pen);
  entry->addToLegend();
}

// drawTrialOverlay()'s inputs, for the helpers.
struct OverlayInput {
  const SweepData& sweep;
  const QHash<qint64, QVector<QPointF>>& train;
  qint64 bestRun;
  const QList<qint64>& ticked;
  const QHash<qint64, QString>& names;
};

QCPGraph* curveGraph(QCustomPlot* plot, const QVector<double>& xs, const QVector<double>& ys,
                     const QPen& pen, const QString& name) {
  QCPGraph* graph = plot->addGraph();
  graph->setPen(pen);
  graph->setData(xs, ys, true);
  graph->setName(name);
  if (!name.isEmpty()) graph->addToLegend();
  return graph;
}

// Every trial's curves into the density (pruned ones into the faint group); returns the best
// trial when it has curves.
const SweepTrial* fillDensity(TrialOverlay& out, const SweepData& sweep,
                              const QHash<qint64, QVector<QPointF>>& train, qint64 bestRun,
                              bool withEval) {
  const SweepTrial* best = nullptr;
  for (const SweepTrial& trial : sweep.trials) {
    const bool pruned = trial.status == spec::RunStatus::pruned;
    const QVector<QPointF> curve = train.value(trial.runId);
    if (curve.isEmpty() && trial.steps.isEmpty()) continue;
    ++out.trials;
    out.pruned += pruned ? 1 : 0;
    if (!curve.isEmpty()) {
      const auto [xs, ys] = split(curve);
      out.density->addLine(pruned ? kPrunedGroup : kTrainGroup, xs, ys);
    }
    if (!trial.steps.isEmpty() && withEval)
      out.density->addLine(pruned ? kPrunedGroup : kEvalGroup, trial.steps, trial.values);
    if (trial.runId == bestRun) best = &trial;
  }
  return best;
}

// The ticked trials' train loss in colour, then the best trial's curves, bold, on top.
void drawHighlights(QCustomPlot* plot, TrialOverlay& out, const OverlayInput& in,
                    const SweepTrial* best, bool withEval) {
  int colour = 0;
  for (qint64 id : in.ticked) {
    const auto it = in.train.constFind(id);
    if (id == in.bestRun || it == in.train.constEnd() || it->isEmpty()) continue;
    const auto [xs, ys] = split(*it);
    const QString name =
        colour < kLegendTicked ? in.names.value(id, QString::number(id)) : QString();
    curveGraph(plot, xs, ys, QPen(CurvePlot::seriesColor(3 + colour), 1.5), name);
    ++colour;
    ++out.highlighted;
  }
  if (best == nullptr) return;
  out.bestRun = in.bestRun;
  const QString label = in.names.value(in.bestRun, best->name);
  const auto [xs, ys] = split(in.train.value(in.bestRun));
  if (!xs.isEmpty())
    curveGraph(plot, xs, ys, QPen(QColor(0x10, 0x2a, 0x6b), 2.6),
               QObject::tr("best %1 train").arg(label));
  if (withEval && !best->steps.isEmpty())
    curveGraph(plot, best->steps, best->values, QPen(QColor(0xa3, 0x3c, 0x00), 2.6),
               QObject::tr("best %1 %2").arg(label, in.sweep.objectiveKey));
}

}  // namespace

TrialOverlay drawTrialOverlay(QCustomPlot* plot, const SweepData& sweep,
                              const QHash<qint64, QVector<QPointF>>& train, qint64 bestRun,
                              const QList<qint64>& ticked, const QHash<qint64, QString>& names) {
  resetPlot(plot);
  plot->setAutoAddPlottableToLegend(false);
  plot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  plot->xAxis->setLabel(QObject::tr("step"));
  plot->yAxis->setLabel(sweep.objectiveKey.isEmpty() || sweep.objectiveKey == QLatin1String("loss")
                            ? QObject::tr("loss")
                            : QObject::tr("loss / %1").arg(sweep.objectiveKey));
  TrialOverlay out;
  out.density = new DensityLines(plot->xAxis, plot->yAxis);
  // Opaque over the plot's white, so a replot blits it without blending; the grid, which it
  // would hide, is drawn on the axes' layer above it.
  out.density->setBackdrop(Qt::white);
  plot->xAxis->grid()->setLayer(QStringLiteral("axes"));
  plot->yAxis->grid()->setLayer(QStringLiteral("axes"));
  out.density->addGroup({kPrunedColor, 0.22});
  out.density->addGroup({kTrainColor, 0.3});
  out.density->addGroup({kEvalColor, 0.3});
  // An objective key of "loss" is the train curve itself: no second group then.
  const bool withEval = !sweep.objectiveKey.isEmpty() && sweep.objectiveKey != "loss";
  const SweepTrial* best = fillDensity(out, sweep, train, bestRun, withEval);
  legendEntry(plot, QObject::tr("train (all %1)").arg(out.trials), QPen(kTrainColor, 2));
  if (withEval)
    legendEntry(plot, QObject::tr("%1 (all)").arg(sweep.objectiveKey), QPen(kEvalColor, 2));
  if (out.pruned > 0)
    legendEntry(plot, QObject::tr("pruned (%1)").arg(out.pruned), QPen(kPrunedColor, 2));
  drawHighlights(plot, out, {sweep, train, bestRun, ticked, names}, best, withEval);
  plot->legend->setVisible(out.trials > 0);
  if (out.trials == 0) placeholder(plot, QObject::tr("No trial has a loss curve yet"));
  plot->rescaleAxes();
  plot->yAxis->scaleRange(1.1, plot->yAxis->range().center());
  fitLegend(plot);
  plot->replot();
  return out;
}

}  // namespace shardscope::ui::compare
