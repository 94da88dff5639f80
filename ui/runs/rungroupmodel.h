// RunGroupModel: the runs table's rows grouped under collapsible parent rows, by sweep, by group
// (schema 12) or by tag. It sits over the filtered, sorted flat model (the panel's proxy): each
// parent row is one bucket ("group baseline · 2 runs"), its children the proxy's rows in the
// proxy's order, so sorting, filtering and every column keep working. A run in several groups or
// with several tags is a child of each; runs in none sit under a last "no group" (tag, sweep)
// parent. Parents come in name order. When the buckets change (a filter, a new group), the model
// resets and says so (regrouped) for the panel to put its selection and collapsed parents back;
// otherwise a change of the rows' data only passes through.
#pragma once

#include <QAbstractItemModel>
#include <QHash>
#include <QPointer>
#include <QVector>

#include "ui/data/runlogtypes.h"

namespace shardscope::ui {

class RunTableModel;

class RunGroupModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum class GroupBy { none, sweep, group, tag };
  /// On a parent row: its bucket's name ("" for the runs in none); absent on a run's row.
  static constexpr int BucketRole = Qt::UserRole + 20;

  /// `rows`: the flat rows (the panel's filter proxy over `runs`).
  RunGroupModel(QAbstractItemModel* rows, const RunTableModel* runs, QObject* parent = nullptr);

  void setGroupBy(GroupBy by);
  GroupBy groupBy() const { return m_by; }
  /// The sweeps' names by study id (the "sweep" buckets).
  void setStudyNames(const QHash<qint64, QString>& names);
  /// The parent row of bucket `name` ("" for the runs in none); invalid when there is none.
  QModelIndex bucketIndex(const QString& name) const;
  /// The rows of run `runId` (one per bucket it is in).
  QModelIndexList indexesOfRun(qint64 runId, int column = 0) const;
  /// The flat row a run's index shows (invalid for a parent).
  QModelIndex mapToRows(const QModelIndex& index) const;

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  void sort(int column, Qt::SortOrder order) override;

 signals:
  /// The buckets were rebuilt (a reset): selection and expansion are to be put back.
  void regrouped();

 private:
  struct Bucket {
    QString name;       // "" = the runs in none
    QVector<int> rows;  // rows of m_rows, in its order
  };
  QVector<Bucket> buckets() const;
  QStringList keysOf(int row) const;
  void rebuild();
  void onDataChanged(const QModelIndex& topLeft, const QModelIndex& bottomRight,
                     const QList<int>& roles);

  QAbstractItemModel* m_rows;
  const RunTableModel* m_runs;
  GroupBy m_by = GroupBy::none;
  QHash<qint64, QString> m_studyNames;
  QVector<Bucket> m_buckets;
};

}  // namespace shardscope::ui
