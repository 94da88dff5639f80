#include "ui/runs/runtablemodel.h"

#include <QDateTime>
#include <QHash>
#include <QJsonValue>
#include <QPainter>
#include <QPixmap>

#include <algorithm>
#include <cmath>

#include "backend/lifecycle/runcleanup.h"
#include "ui/data/verdictstext.h"

namespace shardscope::ui {

RunTableModel::RunTableModel(QObject* parent) : QAbstractTableModel(parent) {}

QColor RunTableModel::statusColor(spec::RunStatus status) {
  using spec::RunStatus;
  switch (status) {
    case RunStatus::queued:
      return {0x9e, 0x9e, 0x9e};
    case RunStatus::running:
      return {0x2f, 0x7e, 0xd8};
    case RunStatus::complete:
      return {0x3a, 0xa5, 0x5d};
    case RunStatus::stopped:
      return {0xe0, 0xa1, 0x1b};
    case RunStatus::pruned:
      return {0x8e, 0x6c, 0xc0};
    case RunStatus::failed:
      return {0xd6, 0x3b, 0x3b};
    case RunStatus::oom:
      return {0xa3, 0x1f, 0x5a};
    case RunStatus::infeasible:
      return {0x6d, 0x6d, 0x6d};
  }
  return Qt::gray;
}

QIcon RunTableModel::statusIcon(spec::RunStatus status) {
  static QHash<int, QIcon> cache;
  const int key = static_cast<int>(status);
  if (auto it = cache.constFind(key); it != cache.cend()) return *it;
  QPixmap pixmap(16, 16);
  pixmap.fill(Qt::transparent);
  QPainter painter(&pixmap);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setPen(QPen(statusColor(status).darker(130), 1));
  painter.setBrush(statusColor(status));
  painter.drawEllipse(QRectF(2.5, 2.5, 11, 11));
  painter.end();
  QIcon icon(pixmap);
  cache.insert(key, icon);
  return icon;
}

QString RunTableModel::paramsSummary(const QJsonObject& params) {
  QStringList keys = params.keys();
  keys.sort();
  QStringList parts;
  for (const QString& key : keys) {
    const QJsonValue value = params.value(key);
    QString text;
    if (value.isDouble()) {
      text = QString::number(value.toDouble(), 'g', 4);
    } else if (value.isString()) {
      text = value.toString();
    } else if (value.isBool()) {
      text = value.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    } else {
      text = QStringLiteral("…");
    }
    parts.append(key + QLatin1Char('=') + text);
  }
  return parts.join(QStringLiteral(", "));
}

QString RunTableModel::durationText(const backend::RunRecord& run, double now) {
  if (!run.startedAt) return {};
  const double end = run.endedAt.value_or(now);
  const auto seconds = static_cast<qint64>(std::max(0.0, std::round(end - *run.startedAt)));
  if (seconds >= 3600) {
    return QStringLiteral("%1 h %2 min")
        .arg(seconds / 3600)
        .arg((seconds % 3600) / 60, 2, 10, QLatin1Char('0'));
  }
  if (seconds >= 60) return QStringLiteral("%1 min %2 s").arg(seconds / 60).arg(seconds % 60);
  return QStringLiteral("%1 s").arg(seconds);
}

void RunTableModel::setRuns(const QVector<RunSummary>& runs) {
  m_now = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
  const bool sameIds =
      runs.size() == m_runs.size() &&
      std::equal(runs.begin(), runs.end(), m_runs.begin(),
                 [](const auto& a, const auto& b) { return a.record.id == b.record.id; });
  if (sameIds) {
    m_runs = runs;
    updateUsageHeader();
    if (!m_runs.isEmpty()) emit dataChanged(index(0, 0), index(rowCount() - 1, Count - 1));
    emit headerDataChanged(Qt::Horizontal, UsageCol, UsageCol);
    return;
  }
  // Runs only ever appear (newest first), so rebuilding keeps ids; the view's selection model
  // is re-seated by the panel from the ids it had.
  beginResetModel();
  m_runs = runs;
  m_rows.clear();
  m_rows.reserve(m_runs.size());
  for (int row = 0; row < m_runs.size(); ++row) m_rows.insert(m_runs[row].record.id, row);
  updateUsageHeader();
  endResetModel();
}

const RunSummary* RunTableModel::runAt(int row) const {
  return row >= 0 && row < m_runs.size() ? &m_runs[row] : nullptr;
}

int RunTableModel::rowOf(qint64 id) const { return m_rows.value(id, -1); }

const RunSummary* RunTableModel::runById(qint64 id) const { return runAt(rowOf(id)); }

int RunTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int RunTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : Count;
}

QVariant RunTableModel::display(const RunSummary& run, int column) const {
  const auto& r = run.record;
  switch (column) {
    case StatusCol:
      return QString::fromLatin1(spec::to_string(r.status).data());
    case NameCol:
      return r.name;
    case TagsCol:
      return run.tags.join(QLatin1Char(' '));
    case ParamsCol:
      return paramsSummary(r.params);
    case ObjectiveCol:
      return r.objective ? QString::number(*r.objective, 'g', 5) : QString();
    case DurationCol:
      return durationText(r, m_now);
    case HostCol:
      return run.host;
    case StepCol:
      return run.lastStep >= 0 ? QString::number(run.lastStep) : QString();
    case DiskCol: {
      const auto it = m_disk.constFind(r.id);
      if (it == m_disk.constEnd()) return QString();
      QString text = backend::humanBytes(it->bytes);
      if (it->checkpoints > 0) text += tr(" (ckpt %1)").arg(backend::humanBytes(it->checkpoints));
      return text;
    }
    case VerdictsCol:
      return verdictsText(run.verdicts);
    case UsageCol: {
      if (!r.startedAt) return QString();
      const double h = run.usage.hours;
      QString text = backend::hoursText(h);
      if (m_mixedDevices) text += run.usage.gpu ? tr(" GPU") : tr(" CPU");
      return text;
    }
    case CostCol: {
      const auto c = cost(run);
      return c ? QString::number(*c, 'f', 2) : QString();
    }
    default:
      return {};
  }
}

void RunTableModel::setPrices(const backend::HostPrices& prices) {
  m_prices = prices;
  if (!m_runs.isEmpty()) emit dataChanged(index(0, CostCol), index(rowCount() - 1, CostCol));
}

std::optional<double> RunTableModel::cost(const RunSummary& run) const {
  if (!run.record.startedAt) return std::nullopt;
  return backend::usageCost(run.usage, run.priceHost, m_prices);
}

void RunTableModel::updateUsageHeader() {
  bool gpu = false;
  bool cpu = false;
  for (const auto& run : m_runs) {
    if (!run.record.startedAt) continue;
    (run.usage.gpu ? gpu : cpu) = true;
  }
  m_mixedDevices = gpu && cpu;
  m_usageHeader = m_mixedDevices ? tr("Device-hours") : cpu ? tr("CPU-hours") : tr("GPU-hours");
}

QVariant RunTableModel::sortValue(const RunSummary& run, int column) const {
  const auto& r = run.record;
  switch (column) {
    case StatusCol:
      return static_cast<int>(r.status);
    case ObjectiveCol:
      return r.objective ? *r.objective : qInf();
    case DurationCol:
      return r.startedAt ? r.endedAt.value_or(m_now) - *r.startedAt : -1.0;
    case StepCol:
      return run.lastStep;
    case DiskCol:
      return diskBytes(r.id);
    case VerdictsCol:
      return run.verdicts.goodRate().value_or(-1.0);
    case UsageCol:
      return r.startedAt ? run.usage.hours : -1.0;
    case CostCol:
      return cost(run).value_or(-1.0);
    default:
      return display(run, column);
  }
}

bool RunTableModel::lessThan(int left, int right, int column) const {
  const RunSummary* a = runAt(left);
  const RunSummary* b = runAt(right);
  if (a == nullptr || b == nullptr) return false;
  const auto& x = a->record;
  const auto& y = b->record;
  switch (column) {
    case StatusCol:
      return static_cast<int>(x.status) < static_cast<int>(y.status);
    case NameCol:
      return QString::compare(x.name, y.name) < 0;
    case ObjectiveCol:
      return x.objective.value_or(qInf()) < y.objective.value_or(qInf());
    case DurationCol:
      return sortValue(*a, column).toDouble() < sortValue(*b, column).toDouble();
    case HostCol:
      return QString::compare(a->host, b->host) < 0;
    case StepCol:
      return a->lastStep < b->lastStep;
    case DiskCol:
      return diskBytes(x.id) < diskBytes(y.id);
    case VerdictsCol:
      return a->verdicts.goodRate().value_or(-1.0) < b->verdicts.goodRate().value_or(-1.0);
    case UsageCol:
    case CostCol:
      return sortValue(*a, column).toDouble() < sortValue(*b, column).toDouble();
    default:
      return QString::compare(display(*a, column).toString(), display(*b, column).toString()) < 0;
  }
}

QVariant RunTableModel::data(const QModelIndex& index, int role) const {
  const RunSummary* run = runAt(index.row());
  if (run == nullptr) return {};
  switch (role) {
    case Qt::DisplayRole:
      return display(*run, index.column());
    case SortRole:
      return sortValue(*run, index.column());
    case RunIdRole:
      return run->record.id;
    case TagsRole:
      return run->tags;
    case TagColorsRole:
      return run->tagColors;
    case Qt::DecorationRole:
      return index.column() == StatusCol ? QVariant(statusIcon(run->record.status)) : QVariant();
    case Qt::ToolTipRole:
      if (!run->record.error.isEmpty()) return run->record.error;
      // A run replanned after running out of memory (search.on_oom, run --replan-on-oom): which
      // plan ran and why (RunLifecycle::replannedParams).
      if (index.column() == StatusCol &&
          run->record.params.contains(QLatin1String(backend::kReplanParam))) {
        return tr("Replanned after running out of memory: %1")
            .arg(run->record.params.value(QLatin1String(backend::kReplanParam)).toString());
      }
      if (index.column() == NameCol && !run->note.isEmpty()) return run->note;
      if (index.column() == DiskCol && m_disk.contains(run->record.id)) {
        const Disk d = m_disk.value(run->record.id);
        return tr("%1 bytes, of which %2 in checkpoints (ckpt/)").arg(d.bytes).arg(d.checkpoints);
      }
      if (index.column() == CostCol) {
        if (const auto c = cost(*run)) {
          return tr("%1 %2 x %3 per hour on %4")
              .arg(QString::number(run->usage.hours, 'f', 3),
                   run->usage.gpu ? tr("GPU-hours") : tr("CPU-hours"),
                   QString::number(m_prices.value(run->priceHost)), run->priceHost);
        }
        return tr("No price per hour is set for %1 (Settings)").arg(run->priceHost);
      }
      if (index.column() == UsageCol) {
        return tr("%1 ranks x the wall time of every attempt, on %2")
            .arg(run->record.worldSize)
            .arg(run->usage.gpu ? tr("GPUs") : tr("CPUs"));
      }
      return index.column() == ParamsCol ? paramsSummary(run->record.params) : QVariant();
    case Qt::TextAlignmentRole:
      if (index.column() == ObjectiveCol || index.column() == StepCol ||
          index.column() == DurationCol || index.column() == DiskCol ||
          index.column() == UsageCol || index.column() == CostCol) {
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      }
      return {};
    default:
      return {};
  }
}

void RunTableModel::setDiskUse(qint64 runId, qint64 bytes, qint64 checkpointBytes) {
  m_disk.insert(runId, {bytes, checkpointBytes});
  const int row = rowOf(runId);
  if (row >= 0) emit dataChanged(index(row, DiskCol), index(row, DiskCol));
}

qint64 RunTableModel::diskBytes(qint64 runId) const {
  const auto it = m_disk.constFind(runId);
  return it == m_disk.constEnd() ? -1 : it->bytes;
}

qint64 RunTableModel::totalDiskBytes() const {
  qint64 total = 0;
  for (const auto& run : m_runs) total += std::max<qint64>(diskBytes(run.record.id), 0);
  return total;
}

QVariant RunTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const QStringList names = {tr("Status"),    tr("Name"),     tr("Tags"), tr("Parameters"),
                                    tr("Objective"), tr("Duration"), tr("Host"), tr("Step"),
                                    tr("Disk"),      tr("Verdicts")};
  if (section == UsageCol) return usageHeader();
  if (section == CostCol) return tr("Cost");
  return names.value(section);
}

}  // namespace shardscope::ui
