// RunTableModel: the run table's rows (one per run) with a status icon, the tags (TagsDelegate
// draws them as coloured chips), the parameters in one line, the objective, the duration, the
// host, the last step, the disk use (checkpoints apart) and the people's verdicts on its probe
// answers (good and bad counts, good rate). Sort roles give numbers.
#pragma once

#include <QAbstractTableModel>
#include <QHash>
#include <QIcon>
#include <QVector>

#include <optional>

#include "ui/data/runlogtypes.h"

namespace shardscope::ui {

class RunTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    StatusCol,
    NameCol,
    TagsCol,
    ParamsCol,
    ObjectiveCol,
    DurationCol,
    HostCol,
    StepCol,
    DiskCol,
    VerdictsCol,
    UsageCol,  ///< device-hours; the header says GPU-hours, CPU-hours or Device-hours (mixed)
    CostCol,   ///< device-hours x the price set for the run's host ("" when none is)
    Count
  };
  /// Qt::UserRole + 1 on any cell: the run id; SortRole: the value to sort by.
  static constexpr int RunIdRole = Qt::UserRole + 1;
  static constexpr int SortRole = Qt::UserRole + 2;
  /// On TagsCol: the run's tags (QStringList) and their colours ("#rrggbb", same order).
  static constexpr int TagsRole = Qt::UserRole + 3;
  static constexpr int TagColorsRole = Qt::UserRole + 4;

  explicit RunTableModel(QObject* parent = nullptr);

  /// Replaces the rows, keeping rows of unchanged runs in place (selection survives).
  void setRuns(const QVector<RunSummary>& runs);
  const RunSummary* runAt(int row) const;
  const RunSummary* runById(qint64 id) const;
  int rowOf(qint64 id) const;
  /// Whether row `left` sorts before row `right` by `column`: what SortRole compares, without
  /// building two QVariants a comparison (sorting 10,000 runs makes ~140,000 of them).
  bool lessThan(int left, int right, int column) const;

  /// A filled circle in the status's colour (green complete, blue running, red failed...).
  static QIcon statusIcon(spec::RunStatus status);
  static QColor statusColor(spec::RunStatus status);
  /// "lr=3e-4, lora.rank=8" (keys sorted).
  static QString paramsSummary(const QJsonObject& params);
  /// The bytes run `runId`'s folders take (checkpoints apart), as measured in the background
  /// (RunFiles); the Disk cell shows them ("" until measured).
  void setDiskUse(qint64 runId, qint64 bytes, qint64 checkpointBytes);
  /// The measured bytes of a run (-1 until measured) and of every run shown now.
  qint64 diskBytes(qint64 runId) const;
  qint64 totalDiskBytes() const;
  /// Prices per device-hour by host (Settings); the Cost cells follow.
  void setPrices(const backend::HostPrices& prices);
  const backend::HostPrices& prices() const { return m_prices; }
  /// UsageCol's header: "GPU-hours" when every run that has hours ran on GPUs, "CPU-hours" when
  /// none did, "Device-hours" for a mix (each cell then names its device).
  QString usageHeader() const { return m_usageHeader; }
  /// A run's cost (nullopt when no price is set for its host).
  std::optional<double> cost(const RunSummary& run) const;
  /// "1 h 02 min", "3 min 20 s", "12 s"; "" when it never started.
  static QString durationText(const backend::RunRecord& run, double now);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  QVariant display(const RunSummary& run, int column) const;
  QVariant sortValue(const RunSummary& run, int column) const;
  void updateUsageHeader();

  QVector<RunSummary> m_runs;
  QHash<qint64, int> m_rows;  // run id -> row, so lookups stay O(1) with 10,000 runs
  struct Disk {
    qint64 bytes = 0;
    qint64 checkpoints = 0;
  };
  QHash<qint64, Disk> m_disk;  // run id -> measured bytes (kept across setRuns)
  double m_now = 0;
  backend::HostPrices m_prices;
  QString m_usageHeader = QStringLiteral("GPU-hours");  // usageHeader(), as of setRuns
  bool m_mixedDevices = false;  // runs on GPUs and on CPUs: each Usage cell names its device
};

}  // namespace shardscope::ui
