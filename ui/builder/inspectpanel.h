// The builder's Inspect data tab: the data inspector (data/inspect.h, the trainer's own tokenizer,
// chat template, image processor and packing code) on the experiment's data.train_path and
// data.eval_path, on a thread of its own: the figures per file, the token-length histogram with
// data.seq_len as a line, the refused and over-long lines (a click shows the line), the largest
// images, and one line's rendered chat with the tokens that carry loss highlighted and each
// image's <|image_pad|> run shown as its thumbnail. Inspect and Show run off the GUI thread and can
// be cancelled; the panel never blocks (a 1 GB JSONL streams while the window stays live).
#pragma once

#include <QString>
#include <QWidget>
#include <atomic>
#include <functional>
#include <memory>

#include "data/inspect.h"
#include "spec/experiment.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QThread;

namespace shardscope::ui {

class SampleBrowser;

class InspectPanel : public QWidget {
  Q_OBJECT

 public:
  explicit InspectPanel(QWidget* parent = nullptr);
  ~InspectPanel() override;

  /// The experiment the next Inspect reads (the builder's, as edited).
  void setExperiment(const spec::Experiment& exp);

  /// Starts the inspection on its thread (the Inspect data button); no-op while one runs.
  void inspect();
  /// Shows line `line` of the train (or eval) file on the thread (the Show button).
  void showLine(std::int64_t line, bool eval = false);
  /// Asks the running job to stop at its next line.
  void cancel();
  bool isBusy() const { return m_thread != nullptr; }

  QPushButton* inspectButton() const { return m_inspect; }
  QPushButton* cancelButton() const { return m_cancel; }
  /// The figures per file as plain text (tests, screen readers).
  QString figuresText() const;
  /// What the panel is doing, or the inspector's error.
  QString statusText() const;
  QCustomPlot* histogram() const { return m_plot; }
  /// Refused and over-long lines: file, line, kind, reason.
  QTableWidget* linesTable() const { return m_lines; }
  QTableWidget* imagesTable() const { return m_images; }
  /// The shown sample as plain text, and its loss-carrying text (highlighted in the view).
  QString sampleText() const;
  QString sampleLossText() const { return m_lossText; }
  int sampleThumbnails() const { return m_thumbnails; }
  /// The last inspection (empty files before the first).
  const data::Inspection& inspection() const { return m_result; }

 signals:
  /// An inspection or a sample finished (or failed, or was cancelled).
  void finished();

 private:
  void startJob(std::function<void()> job);
  void jobDone();
  void showInspection(const Result<data::Inspection>& result);
  void showSample(const Result<data::SampleView>& result);
  void showProgress(qint64 bytes, qint64 total);
  void drawHistogram();
  void lineClicked(int row);

  spec::Experiment m_exp;
  data::Inspection m_result;
  QThread* m_thread = nullptr;
  std::shared_ptr<std::atomic<bool>> m_stop;
  QPushButton* m_inspect = nullptr;
  QPushButton* m_cancel = nullptr;
  QProgressBar* m_progress = nullptr;
  QLabel* m_status = nullptr;
  QLabel* m_figures = nullptr;
  QComboBox* m_histFile = nullptr;
  QCustomPlot* m_plot = nullptr;
  QTableWidget* m_lines = nullptr;
  QTableWidget* m_images = nullptr;
  QComboBox* m_sampleFile = nullptr;
  QSpinBox* m_sampleLine = nullptr;
  QPushButton* m_show = nullptr;
  SampleBrowser* m_sample = nullptr;
  QString m_lossText;
  int m_thumbnails = 0;
};

}  // namespace shardscope::ui
