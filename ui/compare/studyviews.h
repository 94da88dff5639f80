// StudyViews: the second row of the Compare panel: contour of two chosen parameters, parameter
// importance, Pareto front of two objectives, and every trial's train and eval curves overlaid,
// with their choosers. Fed by ComparePanel with the sweep and its study (RunLog's summaries) and
// the overlay's curves (streamed by RunLog after them). Importance and the default contour take a
// while on 10,000 trials, so setData() computes them on a pool thread (the plots say "computing…"
// meanwhile) and the first paint does not wait.
#pragma once

#include <QFutureWatcher>
#include <QHash>
#include <QWidget>

#include "backend/store/verdicts.h"
#include "ui/compare/studyplots.h"
#include "ui/compare/trialoverlay.h"

class QComboBox;
class QCustomPlot;
class QListView;

namespace shardscope::ui::compare {

class TrialListModel;

/// What the pool thread computes for setData(): importance, and the contour of the two
/// parameters it ranks first (or of the ones the user had chosen).
struct Analysis {
  quint64 generation = 0;
  Result<QVector<Importance>> importance = QVector<Importance>{};
  QString x;
  QString y;
  ContourData contour;
};

class StudyViews : public QWidget {
  Q_OBJECT

 public:
  explicit StudyViews(QWidget* parent = nullptr);

  /// New data; the choices (parameters, objectives, ticked trials) are kept where still valid.
  void setData(const SweepData& sweep, const StudyInfo& study, bool minimize);
  /// New train loss curves for the overlay (run id -> (step, loss)); redraws the overlay only.
  void setOverlayCurves(const QHash<qint64, QVector<QPointF>>& curves);
  /// The sweep again with its streamed eval curves (the trials' steps/values); redraws the
  /// overlay only. Ignored for another sweep than setData()'s.
  void setSweepCurves(const SweepData& sweep);
  /// Runs the overlay highlights (ticked in the list); it draws every trial.
  QList<qint64> overlayRuns() const;
  void setOverlayRuns(const QList<qint64>& runIds);
  void setContourParams(const QString& x, const QString& y);
  void setParetoObjectives(int x, int y);
  /// Every run's verdict counts: the trial list shows them beside each trial's values.
  void setVerdicts(const QHash<qint64, backend::VerdictCounts>& verdicts);

  const QVector<TrialPoint>& trials() const { return m_trials; }
  const ContourData& contour() const { return m_contour; }
  const Result<QVector<Importance>>& importanceBars() const { return m_importance; }
  /// The Pareto plot's points (one per finished trial) and the indices of the front.
  const QVector<QPointF>& paretoPoints() const { return m_paretoPoints; }
  const QVector<int>& paretoFrontIndices() const { return m_front; }
  /// Trials drawn in the overlay (every one with a curve).
  int overlayCurves() const { return m_overlay.trials; }
  /// What the overlay drew last: its density, the best trial, the highlighted ones.
  const TrialOverlay& overlay() const { return m_overlay; }
  /// Importance and the contour of the last setData() are computed and drawn.
  bool isAnalysed() const { return m_analysed; }
  QCustomPlot* contourPlot() const { return m_contourPlot; }
  QCustomPlot* importancePlot() const { return m_importancePlot; }
  QCustomPlot* paretoPlot() const { return m_paretoPlot; }
  QCustomPlot* overlayPlot() const { return m_overlayPlot; }
  /// The overlay's checkable trial list (best first); its model's Qt::UserRole is the run id.
  QListView* trialList() const { return m_trialList; }
  /// A widget for the panel's bottom row: the overlay's trial list.
  QWidget* overlayChooser() const { return m_chooser; }

 signals:
  /// The ticked trials changed: their curves must be (re)loaded.
  void overlayRunsChanged();
  /// isAnalysed() became true.
  void analysed();

 private:
  void fillChoosers();
  void startAnalysis();
  void onAnalysis();
  void redraw();
  void drawContourView();
  /// The objective the contour and importance show (the study's first, else the sweep's key).
  QString objectiveName() const;
  void drawOverlayView();
  void drawParetoView();
  bool minimizeObjective(int index) const;

  SweepData m_sweep;
  StudyInfo m_study;
  bool m_minimize = true;
  bool m_filling = false;
  bool m_overlayChosen = false;
  bool m_analysed = false;
  bool m_contourTouched = false;  // the user chose contour parameters during an analysis
  qint64 m_analysedSweep = -2;    // the sweep the drawn importance and contour belong to
  quint64 m_generation = 0;       // of the analysis the views wait for
  QFutureWatcher<Analysis> m_analysis;
  QVector<TrialPoint> m_trials;
  ContourData m_contour;
  Result<QVector<Importance>> m_importance = QVector<Importance>{};
  QVector<QPointF> m_paretoPoints;
  QVector<int> m_front;
  TrialOverlay m_overlay;
  QComboBox* m_contourX = nullptr;
  QComboBox* m_contourY = nullptr;
  QComboBox* m_paretoX = nullptr;
  QComboBox* m_paretoY = nullptr;
  QListView* m_trialList = nullptr;
  TrialListModel* m_trialModel = nullptr;
  QWidget* m_chooser = nullptr;
  QCustomPlot* m_contourPlot = nullptr;
  QCustomPlot* m_importancePlot = nullptr;
  QCustomPlot* m_paretoPlot = nullptr;
  QCustomPlot* m_overlayPlot = nullptr;
};

}  // namespace shardscope::ui::compare
