// StudyViews: the second row of the Compare panel: contour of two chosen parameters, parameter
// importance, Pareto front of two objectives, and the chosen trials' loss curves overlaid, with
// their choosers. Fed by ComparePanel with the sweep and its study (RunLog's summaries) and the
// overlay's curves (streamed by RunLog after them).
#pragma once

#include <QWidget>

#include "ui/compare/studyplots.h"

class QComboBox;
class QCustomPlot;
class QListWidget;

namespace shardscope::ui::compare {

class StudyViews : public QWidget {
  Q_OBJECT

 public:
  explicit StudyViews(QWidget* parent = nullptr);

  /// New data; the choices (parameters, objectives, ticked trials) are kept where still valid.
  void setData(const SweepData& sweep, const StudyInfo& study, bool minimize);
  /// New loss curves for the overlay (run id -> (step, loss)); redraws the overlay only.
  void setOverlayCurves(const QHash<qint64, QVector<QPointF>>& curves);
  /// Runs whose loss the overlay shows (ticked in the list); the panel loads their curves.
  QList<qint64> overlayRuns() const;
  void setOverlayRuns(const QList<qint64>& runIds);
  void setContourParams(const QString& x, const QString& y);
  void setParetoObjectives(int x, int y);

  const QVector<TrialPoint>& trials() const { return m_trials; }
  const ContourData& contour() const { return m_contour; }
  const Result<QVector<Importance>>& importanceBars() const { return m_importance; }
  /// The Pareto plot's points (one per finished trial) and the indices of the front.
  const QVector<QPointF>& paretoPoints() const { return m_paretoPoints; }
  const QVector<int>& paretoFrontIndices() const { return m_front; }
  int overlayCurves() const { return m_overlayCurves; }
  QCustomPlot* contourPlot() const { return m_contourPlot; }
  QCustomPlot* importancePlot() const { return m_importancePlot; }
  QCustomPlot* paretoPlot() const { return m_paretoPlot; }
  QCustomPlot* overlayPlot() const { return m_overlayPlot; }
  QListWidget* trialList() const { return m_trialList; }
  /// A widget for the panel's bottom row: the overlay's trial list.
  QWidget* overlayChooser() const { return m_chooser; }

 signals:
  /// The ticked trials changed: their curves must be (re)loaded.
  void overlayRunsChanged();

 private:
  void fillChoosers();
  void redraw();
  void drawOverlayView();
  void drawParetoView();
  bool minimizeObjective(int index) const;

  SweepData m_sweep;
  StudyInfo m_study;
  bool m_minimize = true;
  bool m_filling = false;
  bool m_overlayChosen = false;
  QVector<TrialPoint> m_trials;
  ContourData m_contour;
  Result<QVector<Importance>> m_importance = QVector<Importance>{};
  QVector<QPointF> m_paretoPoints;
  QVector<int> m_front;
  int m_overlayCurves = 0;
  QComboBox* m_contourX = nullptr;
  QComboBox* m_contourY = nullptr;
  QComboBox* m_paretoX = nullptr;
  QComboBox* m_paretoY = nullptr;
  QListWidget* m_trialList = nullptr;
  QWidget* m_chooser = nullptr;
  QCustomPlot* m_contourPlot = nullptr;
  QCustomPlot* m_importancePlot = nullptr;
  QCustomPlot* m_paretoPlot = nullptr;
  QCustomPlot* m_overlayPlot = nullptr;
};

}  // namespace shardscope::ui::compare
