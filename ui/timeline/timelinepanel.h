// TimelinePanel: the selected run's phases per rank (TimelineView) under the straggler verdict
// (backend::nameStraggler, as `shardscope-cli why` prints it), with a legend and a Fit action.
// Its data come from the run log's worker thread (RunLog::watchPhases), so it follows a live run.
#pragma once

#include <QWidget>

#include "ui/data/phasesdata.h"

class QLabel;
class QToolButton;

namespace shardscope::ui {

class RunLog;
class TimelineView;
class UnitView;

class TimelinePanel : public QWidget {
  Q_OBJECT

 public:
  explicit TimelinePanel(RunLog& runLog, QWidget* parent = nullptr);

  /// Shows run `runId` (-1: none).
  void setRun(qint64 runId);
  qint64 run() const { return m_runId; }
  TimelineView* view() const { return m_view; }
  QLabel* verdict() const { return m_verdict; }
  QToolButton* fitButton() const { return m_fit; }
  /// One step's per-unit streams, shown under the steps once a step is double-clicked.
  UnitView* unitView() const { return m_unitView; }
  QLabel* unitLabel() const { return m_unitLabel; }
  /// True once the selected run's phases were read at least once.
  bool isLoaded() const { return m_loaded; }

 signals:
  /// The selected run's phases arrived (first read or new steps).
  void loaded();
  /// A double-click on a step (TimelineView::stepActivated): its per-unit trace is read.
  void stepActivated(qint64 runId, qint64 step, int rank);
  /// The double-clicked step's per-unit trace was read (shown, or why not in unitLabel()).
  void unitStepShown();

 private:
  void onPhases(const PhasesDelta& delta);
  void onUnitStep(const UnitStepData& data);

  RunLog& m_runLog;
  TimelineView* m_view = nullptr;
  QLabel* m_verdict = nullptr;
  QToolButton* m_fit = nullptr;
  UnitView* m_unitView = nullptr;
  QLabel* m_unitLabel = nullptr;
  qint64 m_runId = -1;
  bool m_loaded = false;
};

}  // namespace shardscope::ui
