// The Compare panel's overlay: the train loss and the eval curve (the sweep's objective key) of
// every trial of a sweep in one plot. The bulk is one DensityLines plottable (train, eval and
// pruned trials as three shaded groups: pruned ones grey and faint), so 10,000 trials x 1,000
// steps replot like a handful of graphs; on top, the best trial in bold and the trials ticked
// in the overlay list as ordinary graphs.
#pragma once

#include <QHash>
#include <QList>
#include <QPointF>
#include <QVector>

#include "ui/data/runlogtypes.h"

class QCustomPlot;

namespace shardscope::ui {
class DensityLines;
}

namespace shardscope::ui::compare {

/// What drawTrialOverlay() put on the plot.
struct TrialOverlay {
  DensityLines* density = nullptr;  ///< every trial's curves (owned by the plot)
  int trials = 0;                   ///< trials with a train or eval curve in the density
  int pruned = 0;                   ///< of them, pruned (drawn in the faint grey group)
  int highlighted = 0;              ///< ticked trials drawn as graphs on top (best excluded)
  qint64 bestRun = -1;              ///< drawn in bold (-1: none has a curve)
};

/// The density's groups, in paint order.
enum OverlayGroup { kPrunedGroup = 0, kTrainGroup = 1, kEvalGroup = 2 };

/// Draws every trial of `sweep`: its train loss from `train` (run id -> (step, loss)) and its
/// eval curve from the trial's steps/values; `bestRun` in bold, `ticked` highlighted in colour
/// (labelled with `names`, run id -> text).
TrialOverlay drawTrialOverlay(QCustomPlot* plot, const SweepData& sweep,
                              const QHash<qint64, QVector<QPointF>>& train, qint64 bestRun,
                              const QList<qint64>& ticked, const QHash<qint64, QString>& names);

}  // namespace shardscope::ui::compare
