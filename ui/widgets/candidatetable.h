// CandidateTable: every candidate of an autotune in one table, as the builder (its progress) and
// the Compare panel (the autotune as a sweep) show it: number, status, the objective's value, the
// estimate and the measured peak, the tuned settings and the run. Candidates that never ran or
// did not measure are marked (infeasible and duplicates grey, oom and failures red, stopped
// amber) and the winner's row is bold on green, its status "measured (winner)".
#pragma once

#include <QTableWidget>

#include "ui/data/runlogtypes.h"

namespace shardscope::ui {

class CandidateTable : public QTableWidget {
  Q_OBJECT

 public:
  /// The fixed columns; the tuned settings follow from kFirstSetting, one column per field.
  enum Column { NumberCol, StatusCol, ValueCol, EstimateCol, PeakCol, RunCol, kFirstSetting };

  explicit CandidateTable(QWidget* parent = nullptr);

  /// Shows `autotune`'s candidates (replacing what was shown).
  void setAutotune(const AutotuneData& autotune);
  /// The row of candidate `number` (-1: not shown).
  int rowOf(int number) const;
  /// The status text of a row ("measured", "infeasible", "duplicate of #2", "measured (winner)").
  QString statusText(int row) const;
  /// True when the row is the winner's (drawn highlighted).
  bool isWinnerRow(int row) const;
  /// The settings columns' field names ("shard.strategy", ...), in column order.
  QStringList settingFields() const { return m_fields; }
  /// The text of the cell of candidate row `row` under setting `field`.
  QString settingText(int row, const QString& field) const;

 private:
  QStringList m_fields;
  int m_winnerRow = -1;
};

}  // namespace shardscope::ui
