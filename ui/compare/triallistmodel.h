// TrialListModel: a list of trials (a label and a run id each) for the Compare panel's choosers:
// the config diff's two combo boxes share one, and the overlay's list is a checkable one. One
// model over a vector instead of 10,000 widget items filled one by one: a sweep of 10,000 trials
// is set with one reset. Each row shows its trial's verdict counts after the label (the runs
// table's counts, from RunLog's runsLoaded: setVerdicts), once any of its answers is marked.
#pragma once

#include <QAbstractListModel>
#include <QHash>
#include <QSet>
#include <QVector>

#include "backend/store/verdicts.h"

namespace shardscope::ui::compare {

class TrialListModel : public QAbstractListModel {
  Q_OBJECT

 public:
  /// Qt::UserRole on a row: its run id.
  static constexpr int RunIdRole = Qt::UserRole;

  struct Entry {
    qint64 runId = 0;
    QString label;
  };

  /// checkable: rows carry a check box (the overlay's list).
  explicit TrialListModel(bool checkable, QObject* parent = nullptr);

  /// Replaces the rows; checked run ids that are no longer listed are dropped.
  void setEntries(QVector<Entry> entries);
  const QVector<Entry>& entries() const { return m_entries; }
  /// The checked run ids, in row order.
  QList<qint64> checkedRuns() const;
  /// Checks exactly these runs (others are unchecked); emits checksChanged() only when asked.
  void setCheckedRuns(const QList<qint64>& runIds, bool notify);
  /// The row of run `runId`, or -1.
  int rowOf(qint64 runId) const;
  /// Every run's verdict counts (runs absent: none marked); rows show "label · 2 good · 1 bad
  /// (67%)". Emits dataChanged for the rows whose counts changed.
  void setVerdicts(const QHash<qint64, backend::VerdictCounts>& verdicts);
  /// A row's text: its label, then its verdict counts when any answer is marked.
  QString displayText(int row) const;

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

 signals:
  /// The user (or setCheckedRuns with notify) changed which rows are checked.
  void checksChanged();

 private:
  bool m_checkable;
  QVector<Entry> m_entries;
  QHash<qint64, int> m_rows;  // run id -> row
  QSet<qint64> m_checked;
  QHash<qint64, backend::VerdictCounts> m_verdicts;  // run id -> marks (only runs with marks)
};

}  // namespace shardscope::ui::compare
