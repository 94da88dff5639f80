// The builder's memory panel: spec's per-rank estimate for the configured world size as
// one stacked bar per rank (params, grads, optimizer, gathered, activations, other), with the
// device budget as a line; everything turns red when a rank is over the budget. A QLoRA base
// (lora.quantize = "nf4") is part of the params bar, named in its legend entry and the status.
// Chat data bounds the rows by its longest sample, as `shardscope-cli estimate` and the sweep's
// memory check do (backend/databound.h): the file is read on a worker thread of the panel's, never
// on the GUI thread, once per file (its size and modification time), model folder and
// data.seq_len; until it is read, and when it cannot be, the rows are bounded by data.seq_len and
// the status says so and why.
#pragma once

#include <QVector>
#include <QWidget>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "spec/calibration.h"
#include "spec/estimate.h"
#include "spec/experiment.h"

class QCustomPlot;
class QCPBars;
class QCPItemStraightLine;
class QCPItemText;
class QDoubleSpinBox;
class QLabel;
class QThread;

namespace shardscope::ui {

class MemoryChart : public QWidget {
  Q_OBJECT

 public:
  /// Stacked categories, bottom to top, at the moment of the peak; "other" is logits and
  /// accumulation buffers (head's backward) or gradient buffers (end of backward).
  enum Category { Params, Grads, Optimizer, Gathered, Activations, Other, CategoryCount };

  explicit MemoryChart(QWidget* parent = nullptr);
  ~MemoryChart() override;

  /// Recomputes the estimate for launch.nnodes x launch.nproc_per_node ranks and replots. Chat
  /// data: asks the worker for the data's bound (a file already read shows its bound at once).
  void setExperiment(const spec::Experiment& exp);
  /// The run log's corrections (RunLog::calibrationsLoaded): the experiment's kind of run, when
  /// they hold it, has its peak corrected by what completed runs measured; replots.
  void setCalibrations(const spec::Calibrations& calibrations);
  /// The correction applied to the shown experiment (runs 0: none, the formulas' figure).
  spec::Calibration calibration() const { return m_calibration; }
  /// The peak per rank the panel states: the stack's top, corrected.
  std::int64_t peakBytes() const;
  /// Sets the budget by hand (the source reads "entered here" until the next experiment).
  void setBudgetGiB(double gib);
  double budgetBytes() const;
  /// Where the budget comes from: "launch.device_memory_gib = 80", "nvidia-smi on this
  /// machine: GPU 0, ...", "memory of this machine ... CPU run", "entered here", or the error.
  QString budgetSource() const;
  /// The bytes the budget holds: the estimate's device bytes (GPU budget) or its total.
  std::int64_t budgetedBytes() const;
  /// Bytes of one category on one rank's bar (0 when there is no estimate).
  std::int64_t barBytes(Category c, int rank) const;
  /// The top of a rank's stack in bytes.
  std::int64_t stackBytes(int rank) const;
  int rankCount() const { return m_ranks; }
  bool overBudget() const;
  /// "Estimate: 1.2 MiB per rank ..." or the reason there is none.
  QString statusText() const;
  /// Every reason there is no estimate, one a line (the status shows the first).
  QString statusToolTip() const;
  QCustomPlot* plot() const { return m_plot; }
  /// The budget line's label (its text and where it is drawn).
  QCPItemText* budgetLabel() const { return m_budgetLabel; }
  /// True when the bars show the head's backward (activations held), false for backward's end.
  bool headMoment() const { return m_headMoment; }
  /// What the rows are bounded by, for people: "rows bounded by the data: longest 412 tokens
  /// (120 samples of train.jsonl)", "rows bounded by data.seq_len = 2048" with the reason when
  /// the data could not be read, or that it is being read.
  QString rowsText() const { return m_rowsText; }
  /// The bound the shown estimate took (nullopt: data.seq_len).
  const std::optional<spec::DataBound>& dataBound() const { return m_rows; }
  /// The worker is reading the data, or has a request waiting.
  bool isReadingData() const { return m_boundThread != nullptr; }

 signals:
  /// The worker answered for the shown experiment's data (the bound, or why there is none) and
  /// the estimate took it.
  void dataBoundRead();

 private:
  void replot();
  void fitRange();
  void applyBudget(const spec::Experiment& exp);
  /// Estimates m_shown with the bound known for its data (none yet: data.seq_len).
  void estimate();
  /// Reads (or, unchanged, looks up) the bound of `exp`'s data on the worker thread.
  void requestBound(const spec::Experiment& exp);
  void boundRead(const QString& key, const std::optional<spec::DataBound>& bound,
                 const QString& error);

  // The data bound of one key (boundKey: the fields that change it) as the worker last read it.
  struct KnownBound {
    std::optional<spec::DataBound> bound;
    QString error;  // why the data could not be read (the seq_len bound is used)
  };

  QCustomPlot* m_plot = nullptr;
  std::array<QCPBars*, CategoryCount> m_bars{};
  QCPItemStraightLine* m_budgetLine = nullptr;
  QCPItemText* m_budgetLabel = nullptr;
  QCPItemStraightLine* m_calibratedLine = nullptr;  // the calibrated peak, when runs measured it
  QCPItemText* m_calibratedLabel = nullptr;
  QDoubleSpinBox* m_budget = nullptr;
  QLabel* m_status = nullptr;
  QLabel* m_budgetSource = nullptr;
  double m_highest = 1;         // the highest bar or budget line, in the axis's unit
  double m_headroom = 1.3;      // the least room above it, as a factor
  QString m_budgetError;        // device_budget's error (Slurm without launch.device_memory_gib)
  bool m_budgetGpu = true;      // the budget holds device bytes (else the total)
  std::int64_t m_budgeted = 0;  // the bytes the budget holds, per rank
  spec::Calibrations m_calibrations;            // the run log's, by calibration_key
  spec::Calibration m_calibration;              // the shown experiment's
  std::optional<spec::Experiment> m_shown;      // re-estimated when the corrections change
  std::optional<spec::DetectedMemory> m_local;  // this machine, for launch.gpus = m_localGpus
  std::vector<int> m_localGpus;
  int m_ranks = 0;
  std::array<std::int64_t, CategoryCount> m_perRank{};
  std::int64_t m_nf4 = 0;        // of the params bar: the NF4 base's shards (lora.quantize)
  std::int64_t m_nf4Packed = 0;  // the NF4 base's records over the whole model
  QString m_error;
  bool m_headMoment = true;  // the peak holds gathered units and activations (not the end of
                             // backward, not rank 0's MFU probe)
  QString m_moment;          // spec::MemoryEstimate::peak_moment
  std::map<QString, KnownBound> m_bounds;          // by boundKey
  std::optional<spec::DataBound> m_rows;           // the shown estimate's bound
  QString m_rowsText;                              // rowsText()
  QThread* m_boundThread = nullptr;                // the worker reading a bound
  QString m_boundJob;                              // the boundKey it reads
  std::shared_ptr<std::atomic<bool>> m_boundStop;  // set to stop it (other fields, or closing)
  std::optional<spec::Experiment> m_boundNext;     // asked for while the worker was busy
};

/// "1.50 GiB", "12.0 MiB", "640 B".
QString formatBytes(double bytes);

}  // namespace shardscope::ui
