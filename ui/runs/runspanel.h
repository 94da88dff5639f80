// RunsPanel: the run table's controller. Sorting and filtering (the query language of
// backend/store/runquery.h: words over name, parameters and host, tag:, status:, name:,
// parameter and metric comparisons; a bad query is named beside the box; and a status choice),
// selection drives the plots, and the actions ask for a stop or a clone-and-edit by signals: the
// app wires them to the backend and the builder. Tags and notes are edited here (a context menu
// on the table, several runs at once for tags) and written through the RunLog's worker; the
// current run's note is shown rendered (Markdown) below the table. Disk use is measured in the
// background (RunFiles) into the Disk column and a total; Delete (after a confirmation naming the
// bytes), Archive and "Keep the best N checkpoints" of a sweep are in the context menu
// (runspanel_files.cpp). Groups (schema 12): "Add to group..." and "Remove from group" in the
// context menu act on the selected runs; "Group by" shows the rows under collapsible parents by
// sweep, group or tag (RunGroupModel); "Compare group" opens a group in Compare, and "Rename
// group..." and "Delete group..." (its runs stay) act on the group under the cursor.
#pragma once

#include <QAction>
#include <QHash>
#include <QPointer>
#include <QSet>
#include <QWidget>

#include "ui/data/runlogtypes.h"

class QCheckBox;
class QComboBox;
class QInputDialog;
class QMessageBox;
class QLabel;
class QLineEdit;
class QMenu;
class QSortFilterProxyModel;
class QTreeView;
class QTextBrowser;

namespace shardscope::ui {

class CheckpointsDialog;
class NoteDialog;
class RunFiles;
class RunLog;
class GroupDialog;
class RunGroupModel;
class RunTableModel;
class TagEditDialog;

class RunsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunsPanel(RunLog& runLog, QWidget* parent = nullptr);

  /// True once the first list of runs arrived.
  bool isLoaded() const { return m_loaded; }
  RunTableModel* model() const { return m_model; }
  /// The table: a tree, flat unless rows are grouped (groupBy()).
  QTreeView* view() const { return m_view; }
  /// "Group by": none, sweep, group or tag.
  QComboBox* groupBy() const { return m_groupBy; }
  RunGroupModel* groupModel() const { return m_groups; }
  /// Opens GroupDialog for the selected runs (non-blocking); accepted, they join the group.
  QAction* addToGroupAction() const { return m_addToGroup; }
  /// The dialog addToGroupAction opened, while it is open.
  GroupDialog* groupDialog() const;
  /// The groups of the selected runs, one action each: takes them out of that group.
  QMenu* removeFromGroupMenu() const { return m_removeFromGroup; }
  /// Opens in Compare the group whose parent row was right-clicked (grouped by group), else the
  /// one group every selected run is in; disabled when there is none.
  QAction* compareGroupAction() const { return m_compareGroup; }
  /// Rename and delete the group compareGroupAction would open (a dialog each, non-blocking:
  /// renameGroupDialog, deleteGroupDialog). Deleting a group keeps its runs.
  QAction* renameGroupAction() const { return m_renameGroup; }
  QAction* deleteGroupAction() const { return m_deleteGroup; }
  QInputDialog* renameGroupDialog() const;
  QMessageBox* deleteGroupDialog() const;
  /// Shown instead of the table while the run log has no run: how to start one.
  QLabel* emptyState() const { return m_empty; }
  QLineEdit* filterEdit() const { return m_filter; }
  QAction* stopAction() const { return m_stop; }
  QAction* cloneAction() const { return m_clone; }
  QAction* pruneAction() const { return m_prune; }
  QAction* resumeAction() const { return m_resume; }
  /// Opens the tag editor for the selected runs (TagEditDialog, non-blocking).
  QAction* editTagsAction() const { return m_editTags; }
  /// Opens the note editor of the current run (NoteDialog, non-blocking).
  QAction* editNoteAction() const { return m_editNote; }
  /// The editor the last editTagsAction / editNoteAction opened, while it is open.
  TagEditDialog* tagDialog() const;
  NoteDialog* noteDialog() const;
  /// Deletes the selected runs (folders and rows) after deleteDialog() is confirmed; disabled
  /// while any of them runs.
  QAction* deleteAction() const { return m_delete; }
  /// Archives the selected runs (hidden unless showArchived()), or brings archived ones back.
  QAction* archiveAction() const { return m_archive; }
  QAction* unarchiveAction() const { return m_unarchive; }
  /// Asks for N, then keeps the checkpoints of the best N trials of the current run's sweep.
  QAction* keepBestAction() const { return m_keepBest; }
  /// Opens the Checkpoints dialog of the current run (CheckpointsDialog, non-blocking).
  QAction* checkpointsAction() const { return m_checkpoints; }
  /// The dialog checkpointsAction opened last, while it is open.
  CheckpointsDialog* checkpointsDialog() const;
  /// Opens the Checkpoints dialog of run `runId` (listed in the table); nullptr when it is not.
  CheckpointsDialog* openCheckpoints(qint64 runId);
  /// "Show archived": archived runs are listed too.
  QCheckBox* showArchived() const { return m_showArchived; }
  /// The confirmation deleteAction opened, while it is open (its text names the bytes).
  QMessageBox* deleteDialog() const;
  /// For the status bar: the disk use of every run listed.
  QLabel* diskTotal() const { return m_diskTotal; }
  RunFiles* files() const { return m_files; }
  /// Beside the filter box: what is wrong with the query (hidden while it parses).
  QLabel* queryError() const { return m_queryError; }
  /// The current run's note, rendered (hidden when it has none).
  QTextBrowser* noteView() const { return m_noteView; }
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
  /// The user asked for a new run from run `runId`'s sharded checkpoint of `step`.
  void resumeFromCheckpointRequested(qint64 runId, const QString& runName, qint64 step);
  /// The user asked for run `runId`'s probe answers at `step` (the Samples panel).
  void samplesAtStepRequested(qint64 runId, qint64 step);
  /// The user asked for a new run like this one: the builder opens it for editing.
  void cloneRequested(qint64 runId, const QJsonObject& params);
  /// The user asked to compare group `groupId`'s runs (Compare opens it as a sweep).
  void compareGroupRequested(qint64 groupId);
  /// What a tag or note edit did, or why it failed (for the status bar).
  void message(const QString& text);

 private:
  void onRunsLoaded(const QVector<RunSummary>& runs);
  void onSelectionChanged();
  void applyStatusFilter();
  void applyQuery(const QString& text);
  void openTagEditor();
  void openNoteEditor();
  void showNote();
  void updateActions();
  void setupGroupActions();
  void applyGroupBy();
  /// After the rows were regrouped: parents span the row, stay collapsed as the user left them,
  /// and the selection is put back.
  void onRegrouped();
  void openGroupDialog();
  void fillRemoveFromGroup();
  /// The context menu's group actions, for the group under `at` (groupAt).
  void aimGroupActions(const QPoint& at);
  void askRenameGroup();
  void confirmDeleteGroup();
  /// The group compareGroupAction acts on ("" when none), from the row under `at` (viewport).
  QString groupAt(const QPoint& at) const;
  void connectSelection();
  // runspanel_files.cpp
  void setupFileActions();
  void measureChanged(const QVector<RunSummary>& runs);
  void onMeasured(qint64 runId, qint64 bytes, qint64 checkpointBytes, const QString& error);
  void confirmDelete();
  void askKeepBest();
  void updateFileActions(const QList<qint64>& ids);
  /// Stopped, failed or oom, outside a sweep: what Resume acts on.
  static bool resumable(const RunSummary& run);

  RunTableModel* m_model = nullptr;
  QSortFilterProxyModel* m_proxy = nullptr;
  QLabel* m_empty = nullptr;
  QTreeView* m_view = nullptr;
  RunGroupModel* m_groups = nullptr;
  QComboBox* m_groupBy = nullptr;
  QAction* m_addToGroup = nullptr;
  QMenu* m_removeFromGroup = nullptr;
  QAction* m_compareGroup = nullptr;
  QAction* m_renameGroup = nullptr;
  QAction* m_deleteGroup = nullptr;
  QString m_menuGroup;  // the group the context menu's group actions act on ("": none)
  QPointer<QInputDialog> m_renameGroupDialog;
  QPointer<QMessageBox> m_deleteGroupDialog;
  QPointer<GroupDialog> m_groupDialog;
  QHash<QString, qint64> m_groupIds;      // the run log's groups: name -> id
  QStringList m_groupNames;               // ... by name
  QHash<int, QSet<QString>> m_collapsed;  // per Group by choice: the parents the user closed
  QLineEdit* m_filter = nullptr;
  QComboBox* m_statusFilter = nullptr;
  QAction* m_stop = nullptr;
  QAction* m_clone = nullptr;
  QAction* m_prune = nullptr;
  QAction* m_resume = nullptr;
  QAction* m_editTags = nullptr;
  QAction* m_editNote = nullptr;
  QAction* m_delete = nullptr;
  QAction* m_archive = nullptr;
  QAction* m_unarchive = nullptr;
  QAction* m_keepBest = nullptr;
  QAction* m_checkpoints = nullptr;
  QPointer<CheckpointsDialog> m_checkpointsDialog;
  QCheckBox* m_showArchived = nullptr;
  QLabel* m_diskTotal = nullptr;
  RunFiles* m_files = nullptr;
  QPointer<QMessageBox> m_deleteDialog;
  QHash<qint64, QString> m_measuredAs;  // run id -> what it was measured as (status, folder)
  QLabel* m_queryError = nullptr;
  QAction* m_queryErrorAction = nullptr;  // the toolbar's slot of m_queryError
  QTextBrowser* m_noteView = nullptr;
  QPointer<TagEditDialog> m_tagDialog;
  QPointer<NoteDialog> m_noteDialog;
  QStringList m_knownTags;
  RunLog& m_runLog;
  QList<qint64> m_selected;
  qint64 m_current = -1;  // currentRunId() as last announced
  bool m_loaded = false;
  bool m_restoring = false;
};

}  // namespace shardscope::ui
