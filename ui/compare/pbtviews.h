// PbtViews: Compare's two views of a population-based training study (SweepData::pbt).
// The lineage: each segment of each member a bar over the training steps it ran, one lane per
// member; an arrow from the segment whose checkpoint a segment went on from (red and dashed where
// it exploited another member's), the best member's chain drawn bold. Its schedule: each mutable
// parameter of the best chain as a step plot over the training steps, one axis each (log where
// the parameter is searched on a log scale). Hovering a segment tells its run, values and
// objective; a click selects it (segmentClicked: Compare puts it and its source in the diff).
#pragma once

#include <QVector>
#include <QWidget>

#include "ui/data/runlogtypes.h"

class QCustomPlot;
class QCPGraph;

namespace shardscope::ui::compare {

/// A continuation drawn in the lineage: segment `to` of `toMember` started from the checkpoint
/// of segment `to - 1` of `fromMember`.
struct LineageEdge {
  int segment = 0;  ///< the segment that started (to)
  int fromMember = 0;
  int toMember = 0;
  bool exploited = false;
  bool best = false;  ///< on the best member's chain
};

class PbtViews : public QWidget {
  Q_OBJECT

 public:
  explicit PbtViews(QWidget* parent = nullptr);

  /// Draws `sweep`'s lineage and schedule (nothing drawn, and hidden, when it has none).
  void setData(const SweepData& sweep);
  QCustomPlot* lineagePlot() const { return m_lineage; }
  QCustomPlot* schedulePlot() const { return m_schedule; }
  /// The segments drawn (one bar each) and the edges between them.
  int nodeCount() const { return m_nodes; }
  const QVector<LineageEdge>& edges() const { return m_edges; }
  /// The parameters of the schedule plot, top first, and the step graph of each.
  QStringList scheduleParams() const { return m_params; }
  QCPGraph* scheduleGraph(const QString& param) const;
  /// The segment (its row in the lineage) under `pixel` of the lineage plot; null: none.
  const backend::PbtSegment* segmentAt(const QPoint& pixel) const;
  /// The tooltip of a segment: member, segment, run, where it started, its values and objective.
  static QString segmentTip(const backend::PbtSegment& segment);

 signals:
  /// A click (no drag) on a segment in the lineage.
  void segmentClicked(qint64 runId, qint64 fromRunId);

 private:
  void drawLineage();
  void drawSchedule();

  QCustomPlot* m_lineage = nullptr;
  QCustomPlot* m_schedule = nullptr;
  std::optional<PbtData> m_data;
  QVector<LineageEdge> m_edges;
  QStringList m_params;
  QVector<QCPGraph*> m_graphs;  // one per m_params
  int m_nodes = 0;
  QPoint m_press;
};

}  // namespace shardscope::ui::compare
