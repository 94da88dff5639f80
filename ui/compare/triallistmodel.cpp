#include "ui/compare/triallistmodel.h"

#include <algorithm>

#include "ui/data/verdictstext.h"

namespace shardscope::ui::compare {

TrialListModel::TrialListModel(bool checkable, QObject* parent)
    : QAbstractListModel(parent), m_checkable(checkable) {}

void TrialListModel::setEntries(QVector<Entry> entries) {
  beginResetModel();
  m_entries = std::move(entries);
  m_rows.clear();
  m_rows.reserve(m_entries.size());
  for (qsizetype row = 0; row < m_entries.size(); ++row)
    m_rows.insert(m_entries[row].runId, int(row));
  for (auto it = m_checked.begin(); it != m_checked.end();)
    it = m_rows.contains(*it) ? std::next(it) : m_checked.erase(it);
  endResetModel();
}

QList<qint64> TrialListModel::checkedRuns() const {
  QList<qint64> ids;
  for (const Entry& entry : m_entries) {
    if (m_checked.contains(entry.runId)) ids.append(entry.runId);
  }
  return ids;
}

void TrialListModel::setCheckedRuns(const QList<qint64>& runIds, bool notify) {
  QSet<qint64> checked;
  for (qint64 id : runIds) {
    if (m_rows.contains(id)) checked.insert(id);
  }
  if (checked == m_checked) return;
  m_checked = checked;
  if (!m_entries.isEmpty()) emit dataChanged(index(0), index(rowCount() - 1), {Qt::CheckStateRole});
  if (notify) emit checksChanged();
}

int TrialListModel::rowOf(qint64 runId) const { return m_rows.value(runId, -1); }

void TrialListModel::setVerdicts(const QHash<qint64, backend::VerdictCounts>& verdicts) {
  QHash<qint64, backend::VerdictCounts> marked;
  for (auto it = verdicts.begin(); it != verdicts.end(); ++it)
    if (it->marked() > 0) marked.insert(it.key(), *it);
  QVector<int> changed;
  for (qsizetype row = 0; row < m_entries.size(); ++row) {
    const qint64 id = m_entries[row].runId;
    const backend::VerdictCounts was = m_verdicts.value(id);
    const backend::VerdictCounts now = marked.value(id);
    if (was.good != now.good || was.bad != now.bad) changed.append(int(row));
  }
  m_verdicts = std::move(marked);
  for (int row : std::as_const(changed))
    emit dataChanged(index(row), index(row), {Qt::DisplayRole, Qt::ToolTipRole});
}

QString TrialListModel::displayText(int row) const {
  if (row < 0 || row >= m_entries.size()) return {};
  const Entry& entry = m_entries[row];
  const auto it = m_verdicts.constFind(entry.runId);
  if (it == m_verdicts.constEnd()) return entry.label;
  return entry.label + QStringLiteral("  · ") + verdictsText(*it);
}

int TrialListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_entries.size());
}

QVariant TrialListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_entries.size()) return {};
  const Entry& entry = m_entries[index.row()];
  switch (role) {
    case Qt::DisplayRole:
    case Qt::ToolTipRole:
      return displayText(index.row());
    case RunIdRole:
      return entry.runId;
    case Qt::CheckStateRole:
      if (!m_checkable) return {};
      return m_checked.contains(entry.runId) ? Qt::Checked : Qt::Unchecked;
    default:
      return {};
  }
}

bool TrialListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (!m_checkable || role != Qt::CheckStateRole || !index.isValid() ||
      index.row() >= m_entries.size())
    return false;
  const qint64 id = m_entries[index.row()].runId;
  const bool on = value.toInt() == Qt::Checked;
  if (on == m_checked.contains(id)) return true;
  if (on) {
    m_checked.insert(id);
  } else {
    m_checked.remove(id);
  }
  emit dataChanged(index, index, {Qt::CheckStateRole});
  emit checksChanged();
  return true;
}

Qt::ItemFlags TrialListModel::flags(const QModelIndex& index) const {
  Qt::ItemFlags f = QAbstractListModel::flags(index);
  if (m_checkable && index.isValid()) f |= Qt::ItemIsUserCheckable;
  return f;
}

}  // namespace shardscope::ui::compare
