// PlotsPanel: live curves of the selected runs, one CurvePlot per quantity (train/eval loss, lr,
// grad norm, tokens/s, MFU, memory per rank), and the selected run's log. Points arrive
// incrementally from the run log's worker and are appended to the curves; replots are coalesced
// to one per 50 ms (a paint that comes first catches up, so nothing shows stale axes).
// Axes: x spans the first to the last point; y fits the data, never below 0 when every value is
// non-negative, and a series that is all zeros gets 0..1 (log scale: the positive points). Legends
// sit outside the data area.
// Above the charts, PlotControls: smoothing (every chart's curves, CurvePlot::setSmoothing), the
// x axis (plotaxes.h: step, wall time, relative time, tokens seen) and log scale per axis. The
// panel keeps each series' points as read (steps, values, times), so a new x axis redraws them
// all; a chart's context menu saves it as a picture at a chosen size (plotexport.h) or as CSV.
#pragma once

#include <QHash>
#include <QSet>
#include <QTimer>
#include <QWidget>

class QCPTextElement;
class QLabel;
class QMenu;
class QStackedWidget;

#include "spec/result.h"
#include "ui/data/runlogtypes.h"
#include "ui/plots/plotaxes.h"

namespace shardscope::ui {

class CurvePlot;
class LogView;
class PlotControls;
class RunLog;

class PlotsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit PlotsPanel(RunLog& runLog, QWidget* parent = nullptr);

  /// The plot ids, in the order shown: loss, lr, grad_norm, tokens_per_s, mfu, memory, and per
  /// rank gpu_util (%), power (W) and comm_exposed (exposed communication, % of the step's wall).
  static QStringList plotIds();
  /// Plots per grid row: plotIds()[i] sits in column i % kGridColumns.
  static constexpr int kGridColumns = 3;
  /// The series name a metric row is drawn as ("run-3 train", "run-3 r1 peak").
  static QString seriesName(const QString& runName, const QString& key, int rank);
  /// The plot a metric key is drawn in ("" when none).
  static QString plotFor(const QString& key);

  CurvePlot* plot(const QString& id) const { return m_plots.value(id); }
  /// The words shown in place of plot `id` (gpu_util, power, comm_exposed) while none of the
  /// selected runs has its data ("No GPU metrics for run-3: it ran on the CPU, ..."); nullptr
  /// while the plot is shown. When only some runs lack it, the plot's title names them.
  QLabel* missingNote(const QString& id) const;
  LogView* logView() const { return m_log; }
  /// Shown instead of the plots while no run is selected: which run to pick, or, when the run
  /// log has none, how to start one (the Builder's demo template).
  QLabel* emptyState() const { return m_empty; }
  /// Shows these runs (names and world sizes come from `runs`); the log shows `logRun` (one of
  /// them: the current one; -1: the first).
  void setRuns(const QList<qint64>& runIds, const QVector<RunSummary>& runs, qint64 logRun = -1);
  const QList<qint64>& runs() const { return m_runIds; }
  /// True once the series of the current selection have been read at least once.
  bool isLoaded() const { return m_loaded; }

  /// Fits plot `id`'s axes to its data (the rules above) and lays its legend out; no replot.
  void fitAxes(const QString& id);

  /// Writes plot `id` as PNG, SVG or PDF (by the file's suffix) at width x height.
  [[nodiscard]] Result<void> exportPlot(const QString& id, const QString& path, int width,
                                        int height) const;
  /// Writes every series of plot `id` as CSV: series,step,value (the points as read: never
  /// smoothed, x always the step).
  [[nodiscard]] Result<void> exportCsv(const QString& id, const QString& path) const;

  /// Smoothing, x axis and log scale, as the user sets them.
  PlotControls* controls() const { return m_controls; }
  XAxis xAxis() const { return m_axis; }
  /// The context menu of plot `id` (save as a picture, save as CSV); the caller owns it.
  QMenu* plotMenu(const QString& id);
  /// Asks for a file and a size (ExportDialog) and saves plot `id` there.
  void savePlotDialog(const QString& id);

 signals:
  void loaded();
  /// Points were added (after the coalesced replot).
  void replotted();

 private:
  /// The points of one series as read (memory in MiB), whatever the x axis shows.
  struct StoredSeries {
    qint64 runId = 0;
    QVector<double> steps;
    QVector<double> values;
    QVector<double> times;
  };

  void onSeries(const QVector<SeriesChunk>& chunks);
  /// Draws (reset) or appends these points of series `name` of plot `id` at the x axis's xs.
  void drawPoints(const QString& id, const QString& name, const StoredSeries& points, bool reset);
  /// Draws again every series of run `runId` (every series when -1) at the x axis's xs.
  void redrawSeries(qint64 runId);
  void setXAxis(XAxis axis);
  void setLogScale(bool x, bool y);
  void setSmoothing(double weight);
  /// The x axis's ticker, label and read-out text on every plot.
  void styleXAxes();
  void onPassDone(const QList<qint64>& runIds, int generation);
  void scheduleReplot();
  void replotNow();
  /// Gives the plots in `id`'s grid column one legend width (the widest legend's), so their
  /// axis rects end at the same x; marks the others it changed dirty.
  void alignLegends(const QString& id);
  void showPlotMenu(const QString& id, const QPoint& where);
  bool eventFilter(QObject* watched, QEvent* event) override;
  /// The plots when runs are selected, else the empty state with the text that fits.
  void updateEmptyState();
  /// For each plot that runs may lack the data of: the plot, or the words saying which runs
  /// lack it (after the selection's first read).
  void updateNotes();
  static QString missingText(const QString& id, const QStringList& runs, bool live);

  RunLog& m_runLog;
  QHash<QString, CurvePlot*> m_plots;
  QHash<QString, QCPTextElement*> m_titles;
  QHash<QString, QLabel*> m_notes;  // the plots runs may lack data for: their words
  struct RunInfo {
    QString name;
    bool ended = true;
  };
  QHash<qint64, RunInfo> m_runInfo;  // the selected runs' names and whether they ended
  PlotControls* m_controls = nullptr;
  XAxis m_axis = XAxis::step;
  QHash<QString, QHash<QString, StoredSeries>> m_series;  // plot id -> series name -> points
  QHash<qint64, RunClock> m_clocks;                       // run id -> its start and step events
  LogView* m_log = nullptr;
  QStackedWidget* m_stack = nullptr;  // the plot grid, or m_empty
  QWidget* m_grid = nullptr;
  QLabel* m_empty = nullptr;
  int m_runCount = -1;  // runs in the run log as last read (-1: not read yet)
  QList<qint64> m_runIds;
  QTimer m_replotTimer;
  QSet<QString> m_dirty;
  bool m_loaded = false;
  // Counts the selections asked of the reader: a pass it finished for an earlier selection of
  // the same runs (queued before the plots were cleared) must not mark this one loaded.
  int m_watchGeneration = 0;
};

}  // namespace shardscope::ui
