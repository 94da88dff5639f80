// RunsPanel: the run table's controller. Sorting and filtering (text over name, parameters and
// host; a status choice), selection drives the plots, and the actions ask for a stop or a
// clone-and-edit by signals: the app wires them to the backend and the builder.
#pragma once

#include <QAction>
#include <QWidget>

#include "ui/data/runlogtypes.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;

namespace shardscope::ui {

class RunLog;
class RunTableModel;

class RunsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunsPanel(RunLog& runLog, QWidget* parent = nullptr);

  /// True once the first list of runs arrived.
  bool isLoaded() const { return m_loaded; }
  RunTableModel* model() const { return m_model; }
  QTableView* view() const { return m_view; }
  /// Shown instead of the table while the run log has no run: how to start one.
  QLabel* emptyState() const { return m_empty; }
  QLineEdit* filterEdit() const { return m_filter; }
  QAction* stopAction() const { return m_stop; }
  QAction* cloneAction() const { return m_clone; }
  QAction* pruneAction() const { return m_prune; }
  QAction* resumeAction() const { return m_resume; }
  /// The ids of the selected runs, in table order.
  QList<qint64> selectedRunIds() const;
  /// Selects these runs (others are deselected) and makes the first one current; the plots
  /// follow.
  void selectRuns(const QList<qint64>& runIds);
  /// The run the log shows: the current (last clicked) one when it is selected, else the first
  /// selected; -1 when none is.
  qint64 currentRunId() const;
  /// Rows shown after filtering.
  int visibleRowCount() const;

 signals:
  void loaded();
  void selectionChanged(const QList<qint64>& runIds);
  /// The user asked to stop a run outside a sweep (the app stops it through the backend).
  void stopRequested(qint64 runId, const QString& runName);
  /// The user asked to prune or stop a running trial: its sweep does it (never a signal, so
  /// the sweep records it as asked and does not retry it).
  void trialRequested(qint64 runId, const QString& runName,
                      shardscope::backend::TrialRequest request);
  /// The user asked to resume a stopped or failed run (outside a sweep) from its checkpoint.
  void resumeRequested(qint64 runId, const QString& runName);
  /// The user asked for a new run like this one: the builder opens it for editing.
  void cloneRequested(qint64 runId, const QJsonObject& params);

 private:
  void onRunsLoaded(const QVector<RunSummary>& runs);
  void onSelectionChanged();
  void applyStatusFilter();
  void updateActions();
  /// Stopped, failed or oom, outside a sweep: what Resume acts on.
  static bool resumable(const RunSummary& run);

  RunTableModel* m_model = nullptr;
  QSortFilterProxyModel* m_proxy = nullptr;
  QLabel* m_empty = nullptr;
  QTableView* m_view = nullptr;
  QLineEdit* m_filter = nullptr;
  QComboBox* m_statusFilter = nullptr;
  QAction* m_stop = nullptr;
  QAction* m_clone = nullptr;
  QAction* m_prune = nullptr;
  QAction* m_resume = nullptr;
  QList<qint64> m_selected;
  qint64 m_current = -1;  // currentRunId() as last announced
  bool m_loaded = false;
  bool m_restoring = false;
};

}  // namespace shardscope::ui
