#include "ui/runs/rungroupmodel.h"

#include <QFont>
#include <QMap>
#include <QSortFilterProxyModel>

#include <algorithm>

#include "ui/runs/runtablemodel.h"

namespace shardscope::ui {

namespace {

// A child's internal id is its bucket + 1 (0 marks a parent row).
quintptr childTag(int bucket) { return static_cast<quintptr>(bucket) + 1; }

}  // namespace

RunGroupModel::RunGroupModel(QAbstractItemModel* rows, const RunTableModel* runs, QObject* parent)
    : QAbstractItemModel(parent), m_rows(rows), m_runs(runs) {
  connect(m_rows, &QAbstractItemModel::modelReset, this, &RunGroupModel::rebuild);
  connect(m_rows, &QAbstractItemModel::layoutChanged, this, &RunGroupModel::rebuild);
  connect(m_rows, &QAbstractItemModel::rowsInserted, this, &RunGroupModel::rebuild);
  connect(m_rows, &QAbstractItemModel::rowsRemoved, this, &RunGroupModel::rebuild);
  connect(m_rows, &QAbstractItemModel::dataChanged, this, &RunGroupModel::onDataChanged);
}

void RunGroupModel::setGroupBy(GroupBy by) {
  if (by == m_by) return;
  m_by = by;
  rebuild();
}

void RunGroupModel::setStudyNames(const QHash<qint64, QString>& names) {
  if (names == m_studyNames) return;
  m_studyNames = names;
  if (m_by == GroupBy::sweep) rebuild();
}

QStringList RunGroupModel::keysOf(int row) const {
  const auto* proxy = qobject_cast<const QSortFilterProxyModel*>(m_rows);
  const int source = proxy != nullptr ? proxy->mapToSource(proxy->index(row, 0)).row() : row;
  const RunSummary* run = m_runs->runAt(source);
  if (run == nullptr) return {QString()};
  QStringList keys;
  switch (m_by) {
    case GroupBy::none:
      break;
    case GroupBy::sweep:
      if (run->record.studyId)
        keys << m_studyNames.value(*run->record.studyId, tr("study %1").arg(*run->record.studyId));
      break;
    case GroupBy::group:
      keys = run->groups;
      break;
    case GroupBy::tag:
      keys = run->tags;
      break;
  }
  if (keys.isEmpty()) keys << QString();
  return keys;
}

QVector<RunGroupModel::Bucket> RunGroupModel::buckets() const {
  if (m_by == GroupBy::none) return {};
  QMap<QString, QVector<int>> byName;  // name order; "" (none) first, moved last below
  const int rows = m_rows->rowCount();
  for (int row = 0; row < rows; ++row) {
    for (const QString& key : keysOf(row)) byName[key].append(row);
  }
  QVector<Bucket> out;
  for (auto it = byName.cbegin(); it != byName.cend(); ++it) {
    if (!it.key().isEmpty()) out.append({it.key(), it.value()});
  }
  if (byName.contains(QString())) out.append({QString(), byName.value(QString())});
  return out;
}

void RunGroupModel::rebuild() {
  beginResetModel();
  m_buckets = buckets();
  endResetModel();
  emit regrouped();
}

void RunGroupModel::onDataChanged(const QModelIndex& topLeft, const QModelIndex& bottomRight,
                                  const QList<int>& roles) {
  if (m_by == GroupBy::none) {
    emit dataChanged(index(topLeft.row(), topLeft.column()),
                     index(bottomRight.row(), bottomRight.column()), roles);
    return;
  }
  // A change that leaves the first column alone (a disk figure) is no new list of runs: their
  // sweeps, groups and tags only come with a whole list (RunTableModel::setRuns), so the buckets
  // stand; a grouping pass per cell would be quadratic in a table of 10,000 runs.
  QVector<Bucket> now = topLeft.column() > 0 ? m_buckets : buckets();
  const bool same = std::equal(
      now.cbegin(), now.cend(), m_buckets.cbegin(), m_buckets.cend(),
      [](const Bucket& a, const Bucket& b) { return a.name == b.name && a.rows == b.rows; });
  if (!same) {
    rebuild();
    return;
  }
  // The same buckets: the rows' cells changed only (a refresh, a disk figure).
  for (int b = 0; b < m_buckets.size(); ++b) {
    const auto& rows = m_buckets[b].rows;
    if (rows.isEmpty()) continue;
    const QModelIndex parentIndex = index(b, 0);
    emit dataChanged(index(0, 0, parentIndex),
                     index(static_cast<int>(rows.size()) - 1, columnCount() - 1, parentIndex),
                     roles);
    emit dataChanged(parentIndex, index(b, columnCount() - 1));
  }
}

QModelIndex RunGroupModel::bucketIndex(const QString& name) const {
  for (int b = 0; b < m_buckets.size(); ++b) {
    if (m_buckets[b].name == name) return index(b, 0);
  }
  return {};
}

QModelIndexList RunGroupModel::indexesOfRun(qint64 runId, int column) const {
  QModelIndexList out;
  const int source = m_runs->rowOf(runId);
  if (source < 0) return out;
  const auto* proxy = qobject_cast<const QSortFilterProxyModel*>(m_rows);
  const int row = proxy != nullptr
                      ? proxy->mapFromSource(proxy->sourceModel()->index(source, 0)).row()
                      : source;
  if (row < 0) return out;
  if (m_by == GroupBy::none) {
    out.append(index(row, column));
    return out;
  }
  for (int b = 0; b < m_buckets.size(); ++b) {
    const qsizetype at = m_buckets[b].rows.indexOf(row);
    if (at >= 0) out.append(index(static_cast<int>(at), column, index(b, 0)));
  }
  return out;
}

QModelIndex RunGroupModel::mapToRows(const QModelIndex& index) const {
  if (!index.isValid() || index.model() != this) return {};
  if (m_by == GroupBy::none) return m_rows->index(index.row(), index.column());
  if (index.internalId() == 0) return {};
  const int bucket = static_cast<int>(index.internalId()) - 1;
  return m_rows->index(m_buckets[bucket].rows.value(index.row(), -1), index.column());
}

QModelIndex RunGroupModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= columnCount()) return {};
  if (m_by == GroupBy::none) {
    return !parent.isValid() && row < m_rows->rowCount() ? createIndex(row, column, quintptr(0))
                                                         : QModelIndex();
  }
  if (!parent.isValid()) {
    return row < m_buckets.size() ? createIndex(row, column, quintptr(0)) : QModelIndex();
  }
  if (parent.internalId() != 0 || parent.row() >= m_buckets.size()) return {};
  if (row >= m_buckets[parent.row()].rows.size()) return {};
  return createIndex(row, column, childTag(parent.row()));
}

QModelIndex RunGroupModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || m_by == GroupBy::none || child.internalId() == 0) return {};
  return createIndex(static_cast<int>(child.internalId()) - 1, 0, quintptr(0));
}

int RunGroupModel::rowCount(const QModelIndex& parent) const {
  if (m_by == GroupBy::none) return parent.isValid() ? 0 : m_rows->rowCount();
  if (!parent.isValid()) return static_cast<int>(m_buckets.size());
  if (parent.internalId() != 0 || parent.column() != 0) return 0;
  return static_cast<int>(m_buckets.value(parent.row()).rows.size());
}

int RunGroupModel::columnCount(const QModelIndex&) const { return m_rows->columnCount(); }

QVariant RunGroupModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  const bool parentRow = m_by != GroupBy::none && index.internalId() == 0;
  if (!parentRow) return mapToRows(index).data(role);
  const Bucket& bucket = m_buckets[index.row()];
  if (role == BucketRole) return bucket.name;
  if (index.column() != 0) return {};
  if (role == Qt::DisplayRole) {
    const QString none = m_by == GroupBy::sweep   ? tr("no sweep")
                         : m_by == GroupBy::group ? tr("no group")
                                                  : tr("no tag");
    const QString kind = m_by == GroupBy::sweep   ? tr("sweep")
                         : m_by == GroupBy::group ? tr("group")
                                                  : tr("tag");
    const QString name = bucket.name.isEmpty() ? none : kind + QLatin1Char(' ') + bucket.name;
    const auto count = bucket.rows.size();
    return count == 1 ? tr("%1 · 1 run").arg(name) : tr("%1 · %2 runs").arg(name).arg(count);
  }
  if (role == Qt::FontRole) {
    QFont font;
    font.setBold(true);
    return font;
  }
  return {};
}

QVariant RunGroupModel::headerData(int section, Qt::Orientation orientation, int role) const {
  return m_rows->headerData(section, orientation, role);
}

Qt::ItemFlags RunGroupModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  // A parent row is not a run: it opens and closes, and is never part of the selection.
  if (m_by != GroupBy::none && index.internalId() == 0) return Qt::ItemIsEnabled;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable;
}

void RunGroupModel::sort(int column, Qt::SortOrder order) { m_rows->sort(column, order); }

}  // namespace shardscope::ui
