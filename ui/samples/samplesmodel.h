// SamplesModel: the Samples view's table. One row per probe (column 0: its prompt, reference and
// image thumbnails); one column per evaluation step of one run, or, in trials mode, one column
// per run (its best step by the watched objective when known, else its last). Each answer cell
// holds the generated text with its words highlighted: those that changed from the cell to its
// left (changedFormat) and those that differ from the reference (wrongFormat), as format ranges
// computed once per cell and kept (the delegate lays them out). It takes the run-log worker's
// deltas (SamplesDelta) as they come, so a live run's new answers appear in place.
// Each answer also carries the people's verdict on it (good, bad or none; schema 11), delivered
// with the answers and replaced whole when a mark changes.
// SamplesFilter hides the probes whose answers never changed, or that are never wrong.
#pragma once

#include <QAbstractTableModel>
#include <QHash>
#include <QImage>
#include <QSortFilterProxyModel>
#include <QTextLayout>

#include <map>
#include <optional>

#include "ui/data/samplesdata.h"

namespace shardscope::ui {

class SamplesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Role {
    /// QList<QTextLayout::FormatRange> of the answer text (changed and wrong words).
    FormatsRole = Qt::UserRole + 1,
    ChangedWordsRole,  ///< QStringList: the words that changed from the cell to the left
    WrongWordsRole,    ///< QStringList: the words not in the reference
    ChangedRole,       ///< bool: the answer differs from the cell to its left
    WrongRole,         ///< bool: exact match is 0 (a reference exists)
    ScoresRole,        ///< QString: "EM 0 · F1 0.50 · CER 0.33 · 7 tok"
    ReferenceRole,     ///< QString (column 0): the probe's reference ("" when none)
    ThumbnailsRole,    ///< QList<QImage> (column 0): the probe's images as thumbnails
    LayoutKeyRole,     ///< quint64: changes whenever the cell's text or formats change
    StepRole,          ///< qint64: the step the cell's answer is of (-1: none)
    RunRole,           ///< qint64: the run of the column
    VerdictRole,       ///< int: +1 marked good, -1 marked bad, 0 unmarked (answer cells)
    ProbeRole,         ///< QString: the row's probe id (any column)
  };

  explicit SamplesModel(QObject* parent = nullptr);

  /// Shows `runIds`: the steps of the first as columns, or, when `trials`, one column per run.
  /// Empties the table until the worker's first delivery (apply) for this watch.
  void setRuns(const QList<qint64>& runIds, bool trials);
  const QList<qint64>& runs() const { return m_runs; }
  bool trialsMode() const { return m_trials; }
  /// Takes a delivery of the run-log worker (ignored unless it answers the current runs).
  void apply(const SamplesDelta& delta);

  /// The column that shows run `runId` (trials mode) or its step `step` (-1: its last); -1: none.
  int columnOf(qint64 runId, qint64 step = -1) const;
  int probeCount() const { return int(m_probes.size()); }
  /// Whether some answer of probe `row` changed from its left neighbour / is wrong.
  bool rowChanged(int row) const;
  bool rowWrong(int row) const;
  /// The marks on run `runId`'s answers counted (all its steps, shown or not).
  backend::VerdictCounts verdictCounts(qint64 runId) const;

  /// How changed words and words not in the reference are drawn (both: both).
  static QTextCharFormat changedFormat();
  static QTextCharFormat wrongFormat();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  struct Probe {
    QString id;
    QString prompt;
    QString reference;
    QStringList images;
  };
  struct Column {
    qint64 run = -1;
    qint64 step = -1;  // -1: the run has no answer yet (trials mode)
    bool best = false;
    bool operator==(const Column&) const = default;
  };
  // One answer cell; its formats are computed on first use and kept.
  struct Cell {
    const SampleCell* sample = nullptr;
    const SampleCell* left = nullptr;
    bool changed = false;
    bool wrong = false;
    mutable bool formatted = false;
    mutable QList<QTextLayout::FormatRange> formats;
    mutable QStringList changedWords;
    mutable QStringList wrongWords;
    mutable quint64 key = 0;
  };

  QVector<Column> computeColumns() const;
  /// The column's identity: the same after a live update means "the same column, new data".
  bool sameColumn(const Column& a, const Column& b) const;
  void buildGrid();
  const Cell* cellAt(int row, int column) const;
  void format(const Cell& cell) const;

  QList<qint64> m_runs;
  bool m_trials = false;
  bool m_delivered = false;  // the current watch's first delivery came
  QHash<qint64, QString> m_names;
  QHash<qint64, std::optional<qint64>> m_best;
  // run -> step -> probe id -> answer (std::map: the cells point into it)
  std::map<qint64, std::map<qint64, std::map<QString, SampleCell>>> m_answers;
  QVector<Probe> m_probes;
  QHash<QString, int> m_probeRow;
  QHash<QString, QImage> m_thumbnails;
  QVector<Column> m_columns;  // the answer columns (model column i + 1)
  int m_rows = 0;             // rows announced to the views
  QVector<Cell> m_grid;       // m_rows x m_columns.size(), row-major
  QVector<bool> m_rowChanged;
  QVector<bool> m_rowWrong;
  QHash<qint64, QHash<AnswerKey, backend::Verdict>> m_verdicts;  // run -> (probe, step) -> mark
};

/// Shows only probes whose answer changed (from some column to the next) and/or is wrong.
class SamplesFilter : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit SamplesFilter(QObject* parent = nullptr) : QSortFilterProxyModel(parent) {}
  void setChangedOnly(bool on);
  void setWrongOnly(bool on);
  bool changedOnly() const { return m_changed; }
  bool wrongOnly() const { return m_wrong; }

 protected:
  bool filterAcceptsRow(int row, const QModelIndex& parent) const override;

 private:
  bool m_changed = false;
  bool m_wrong = false;
};

}  // namespace shardscope::ui
