// ComparePanel: the trials of one sweep (runs sharing an experiment) side by side: optimisation
// history with best-so-far, intermediate values (pruned dimmed), parallel coordinates, a slice
// plot of a chosen parameter, and a config diff of two chosen trials; below them the study views
// (StudyViews: contour, importance, Pareto front, loss overlay) fed by a StudyLoader.
#pragma once

#include <QWidget>

#include "ui/compare/studyplots.h"
#include "ui/data/runlogtypes.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QTableWidget;

namespace shardscope::ui {

class RunLog;
namespace compare {
class StudyLoader;
class StudyViews;
}  // namespace compare

class ComparePanel : public QWidget {
  Q_OBJECT

 public:
  explicit ComparePanel(RunLog& runLog, QWidget* parent = nullptr);

  /// Shows sweep `experimentId` (-1: the one with the most runs).
  void showSweep(qint64 experimentId);
  bool isLoaded() const { return m_loaded; }
  const SweepData& sweep() const { return m_sweep; }
  /// The best-so-far curve shown in the history plot.
  QVector<double> bestSoFar() const;
  bool minimize() const { return m_minimize; }
  void setMinimize(bool minimize);
  /// Trials drawn dimmed in the intermediate values (pruned ones).
  int dimmedTrials() const { return m_dimmed; }
  int parallelLines() const { return m_parallelLines; }
  int slicePoints() const { return m_slicePoints; }
  /// Compares two trials (by run id) in the config diff table.
  void setDiffRuns(qint64 a, qint64 b);
  QTableWidget* diffTable() const { return m_diff; }
  QCustomPlot* historyPlot() const { return m_history; }
  QCustomPlot* intermediatePlot() const { return m_intermediate; }
  QCustomPlot* parallelPlot() const { return m_parallel; }
  QCustomPlot* slicePlot() const { return m_slice; }
  /// Contour, importance, Pareto front and loss overlay.
  compare::StudyViews* studyViews() const { return m_views; }
  /// The study of the shown sweep as last read (studyId -1: the sweep is not a study).
  const compare::StudyInfo& study() const { return m_study; }

 signals:
  void loaded();

 private:
  void onSweep(const SweepData& sweep);
  void onStudy(const compare::StudyInfo& info);
  void requestStudy();
  void redraw();
  void fillCombos();
  void updateDiff();
  QWidget* buildDiff();

  RunLog& m_runLog;
  SweepData m_sweep;
  QComboBox* m_experiment = nullptr;
  QComboBox* m_direction = nullptr;
  QComboBox* m_sliceParam = nullptr;
  QComboBox* m_diffA = nullptr;
  QComboBox* m_diffB = nullptr;
  QLabel* m_summary = nullptr;
  QCustomPlot* m_history = nullptr;
  QCustomPlot* m_intermediate = nullptr;
  QCustomPlot* m_parallel = nullptr;
  QCustomPlot* m_slice = nullptr;
  QTableWidget* m_diff = nullptr;
  compare::StudyViews* m_views = nullptr;
  compare::StudyLoader* m_studyLoader = nullptr;
  compare::StudyInfo m_study;
  bool m_minimize = true;
  bool m_loaded = false;
  bool m_filling = false;
  int m_dimmed = 0;
  int m_parallelLines = 0;
  int m_slicePoints = 0;
};

}  // namespace shardscope::ui
