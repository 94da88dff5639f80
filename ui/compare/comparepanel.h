// ComparePanel: the trials of one sweep (runs sharing an experiment) side by side: optimisation
// history with best-so-far, intermediate values (pruned dimmed), parallel coordinates, a slice
// plot of a chosen parameter, and a config diff of two chosen trials; below them the study views
// (StudyViews: contour, importance, Pareto front, loss overlay).
// An autotune's study is such a sweep too: its candidates' runs are the trials (the tuned
// settings their parameters, the measured value their objective, maximised); a candidate table
// beside the diff lists every candidate, those never started too, with its status, and the
// winner highlighted.
// Everything comes from RunLog's one reader thread: the summaries (sweepLoaded) draw the
// history, parallel coordinates, slice and study views at once; the curves (intermediate values,
// overlay) stream in afterwards (sweepCurvesLoaded) and are appended to their graphs, with a
// progress bar, replotted at most every kCurveReplotMs.
#pragma once

#include <QHash>
#include <QTimer>
#include <QWidget>

#include <functional>

#include "spec/result.h"
#include "ui/compare/compareplots.h"
#include "ui/compare/studyplots.h"
#include "ui/compare/trialcolours.h"
#include "ui/data/runlogtypes.h"

class QGridLayout;
class QComboBox;
class QCustomPlot;
class QLabel;
class QStackedWidget;
class QProgressBar;
class QTableWidget;

namespace shardscope::ui {

class CandidateTable;
class RunLog;
namespace compare {
class PbtViews;
class StudyViews;
class TrialLines;
class TrialListModel;
}  // namespace compare

class ComparePanel : public QWidget {
  Q_OBJECT

 public:
  explicit ComparePanel(RunLog& runLog, QWidget* parent = nullptr);

  /// Shows sweep `experimentId` (-1: the one with the most runs).
  void showSweep(qint64 experimentId);
  /// Every plot has all its data: summaries, every trial's curve and the overlay's curves.
  bool isLoaded() const { return m_loaded; }
  /// The summaries of the shown sweep are drawn (history, parallel coordinates, slice, study
  /// views); curves may still be streaming.
  bool isSummaryDrawn() const { return m_summaryDrawn; }
  /// Trials whose curve has arrived in the current pass / trials the pass reads.
  int curvesDone() const { return m_curvesDone; }
  int curvesTotal() const { return m_curvesTotal; }
  /// The sweep picker (its items: the study's name, else "experiment N").
  QComboBox* sweepPicker() const { return m_experiment; }
  const SweepData& sweep() const { return m_sweep; }
  /// Shown instead of the plots while the run log has no sweep (nor any run of an
  /// experiment): what a sweep is and how to start one.
  QLabel* emptyState() const { return m_empty; }
  /// The best-so-far curve shown in the history plot.
  QVector<double> bestSoFar() const;
  bool minimize() const { return m_minimize; }
  void setMinimize(bool minimize);
  /// Trials drawn dimmed in the intermediate values (pruned ones).
  int dimmedTrials() const { return m_dimmed; }
  /// Index in sweep().trials of the best trial, drawn bold on top (-1: none finished).
  int bestTrial() const { return m_bestTrial; }
  int parallelLines() const { return m_parallelLines; }
  int slicePoints() const { return m_slicePoints; }
  /// Compares two trials (by run id) in the config diff table.
  void setDiffRuns(qint64 a, qint64 b);
  QTableWidget* diffTable() const { return m_diff; }
  /// Every candidate of the shown autotune (hidden when the sweep is not an autotune's).
  CandidateTable* candidateTable() const { return m_candidates; }
  QCustomPlot* historyPlot() const { return m_history; }
  QCustomPlot* intermediatePlot() const { return m_intermediate; }
  /// The intermediate values' one plottable: line i is trial i of sweep() (for a PBT study:
  /// member i, across its segments), the last line the best trial (member) again (bold).
  compare::TrialLines* intermediateLines() const { return m_intermediateLines; }
  QCustomPlot* parallelPlot() const { return m_parallel; }
  QCustomPlot* slicePlot() const { return m_slice; }
  /// The "Slice by" combo: the parameters, then the cost view (objective against GPU-hours,
  /// the Pareto front joined).
  QComboBox* slicePicker() const { return m_sliceParam; }
  /// Puts the slice plot in its cost mode (what choosing "GPU-hours (Pareto front)" does).
  void showCostPareto();
  /// The slice plot shows objective against device-hours.
  bool showsCostPareto() const;
  /// What the cost mode drew last (zeros when it is not shown).
  compare::CostPareto costPareto() const { return m_costPareto; }
  /// Contour, importance, Pareto front and loss overlay.
  compare::StudyViews* studyViews() const { return m_views; }
  /// A population-based training study's lineage and best schedule (hidden for another sweep).
  compare::PbtViews* pbtViews() const { return m_pbt; }
  /// Milliseconds each step of the last summary draw took (bench_dashboard prints them).
  const QList<QPair<QString, double>>& drawTimings() const { return m_timings; }
  /// Writes the whole page (plots, study views and tables, as shown) to `path` (.png, .svg or
  /// .pdf) at width x height.
  [[nodiscard]] Result<void> exportPage(const QString& path, int width, int height);
  /// Asks for a file and a size (ExportDialog) and saves the page, or `plot` alone, there.
  void savePageDialog(QCustomPlot* plot = nullptr);
  /// The study of the shown sweep as last read (studyId -1: the sweep is not a study), with the
  /// overlay's loss curves.
  const compare::StudyInfo& study() const { return m_study; }
  /// The trial (its run id) whose point in the optimisation history is within a few pixels of
  /// `at` (the history plot's coordinates); -1: none.
  qint64 trialAtHistory(const QPoint& at) const;
  /// What the history, parallel coordinates and slice colour trials by (the "Colour by" combo).
  QComboBox* colourPicker() const { return m_colourBy; }
  /// The colouring drawn now: by objective (name empty), or by a figure with its values.
  const compare::TrialColouring& colouring() const { return m_colouring; }
  /// The history's tooltip for a trial: its name, objective and, coloured by a figure, its
  /// value or that it has none (drawn grey).
  QString trialTip(qint64 runId) const;

 signals:
  /// isLoaded() became true.
  void loaded();
  /// The summaries of a sweep were drawn (isSummaryDrawn() became true).
  void summaryDrawn();
  /// A click on a trial's point in the optimisation history: that trial (its run id).
  void trialActivated(qint64 runId);
  /// The plots were drawn with colouring() (after a choice in the combo, once its figures
  /// arrived, or a new sweep).
  void colouringDrawn();

 private:
  void onSweep(const SweepData& sweep);
  void onCurves(const SweepCurves& curves);
  /// Asks the run log for the shown sweep's figures when the colouring needs them.
  void requestFigures();
  void onFigures(const TrialFigures& figures);
  /// m_colouring from the combo and the figures last read.
  void updateColouring();
  void mergeIntermediate(const SweepCurves& curves);
  void mergeOverlay(const SweepCurves& curves);
  void adoptStudyDirection();
  void requestOverlay();
  void updateLoaded();
  void updateProgress();
  void replotCurves();
  /// Draws the summary plots; `lap` (optional) is called with each plot's name once drawn.
  void redraw(const std::function<void(const QString&)>& lap = {});
  void fillCombos();
  void updateDiff();
  QWidget* buildDiff();
  /// Each plot of the page gets a context menu: save it, or the whole page, as a picture.
  void addSaveMenus();

  RunLog& m_runLog;
  SweepData m_sweep;
  QPoint m_historyPress;  // where the last press on the history began (a click, not a drag)
  QComboBox* m_experiment = nullptr;
  QComboBox* m_direction = nullptr;
  QComboBox* m_sliceParam = nullptr;
  QComboBox* m_colourBy = nullptr;
  QComboBox* m_diffA = nullptr;
  QComboBox* m_diffB = nullptr;
  QLabel* m_summary = nullptr;
  QStackedWidget* m_stack = nullptr;  // the plots and tables, or m_empty
  QWidget* m_content = nullptr;
  QLabel* m_empty = nullptr;
  QCustomPlot* m_history = nullptr;
  QCustomPlot* m_intermediate = nullptr;
  QCustomPlot* m_parallel = nullptr;
  QCustomPlot* m_slice = nullptr;
  QTableWidget* m_diff = nullptr;
  CandidateTable* m_candidates = nullptr;
  compare::StudyViews* m_views = nullptr;
  compare::PbtViews* m_pbt = nullptr;
  QGridLayout* m_grid = nullptr;  // the plots' grid: row 2, the PBT views, stretches when shown
  QProgressBar* m_progress = nullptr;
  compare::StudyInfo m_study;
  compare::TrialColouring m_colouring;
  TrialFigures m_figures;  // the shown sweep's, as last read (experimentId -1: none)
  compare::TrialListModel* m_diffModel = nullptr;      // the two diff combos' trials
  QHash<qint64, int> m_trialIndex;                     // run id -> index in m_sweep.trials
  compare::TrialLines* m_intermediateLines = nullptr;  // line i: trial i (owned by the plot)
  QTimer m_curveTimer;                                 // coalesces replots while curves stream
  QList<QPair<QString, double>> m_timings;
  bool m_minimize = true;
  bool m_loaded = false;
  bool m_summaryDrawn = false;
  bool m_curvesComplete = false;
  bool m_curvesChanged = false;  // curves merged since the last replotCurves()
  int m_curvesDone = 0;
  int m_curvesTotal = 0;
  bool m_filling = false;
  int m_dimmed = 0;
  int m_bestTrial = -1;
  int m_bestLine = -1;             // the intermediate values' line drawn again bold (last)
  QList<qint64> m_overlayWatched;  // runs whose train loss the overlay asked the run log for
  int m_parallelLines = 0;
  int m_slicePoints = 0;
  compare::CostPareto m_costPareto;
  static constexpr int kCurveReplotMs = 100;
};

}  // namespace shardscope::ui
