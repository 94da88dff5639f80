// The Compare panel's study views: a contour of two parameters (objective as colour), parameter
// importance bars (backend/sweep/importance), the Pareto front of two objectives and an overlay
// of chosen trials' loss curves. The computations are free functions over plain values so tests
// check what is drawn; the draw* functions put them on a QCustomPlot.
#pragma once

#include <QHash>
#include <QJsonObject>
#include <QMetaType>
#include <QPointF>
#include <QStringList>
#include <QVector>

#include <optional>
#include <vector>

#include "spec/result.h"
#include "ui/data/runlogtypes.h"

class QCustomPlot;

namespace shardscope::ui::compare {

/// What the run log adds to a sweep when its runs belong to a study (schema v3).
struct StudyInfo {
  qint64 experimentId = -1;  ///< the sweep this was read for
  qint64 studyId = -1;       ///< -1: the sweep is not a study
  QString name;
  QString config;                      ///< the experiment TOML with its [search] section
  QStringList objectives;              ///< metric names, one per objective
  QStringList directions;              ///< "minimize"/"maximize", one per objective
  QHash<qint64, qint64> trialNumbers;  ///< run id -> trial number
  QHash<qint64, std::vector<double>> objectiveValues;  ///< run id -> one value per objective
  QHash<qint64, QVector<QPointF>> lossCurves;          ///< run id -> (step, loss) of rank 0
};

/// One finished trial as the study views use it: params and every objective value.
struct TrialPoint {
  qint64 runId = 0;
  QString label;  ///< "#3 name" (trial number when known)
  QJsonObject params;
  std::vector<double> values;  ///< one per objective; size 1 for a sweep outside a study
};

/// The finished trials of `sweep` (complete, with every objective value finite); a group's with
/// only the parameters every run of the group has (paramNames).
QVector<TrialPoint> finishedTrials(const SweepData& sweep, const StudyInfo& study);

/// Indices into `points` of the non-dominated ones (minimize/maximize per axis).
QVector<int> paretoFront(const QVector<QPointF>& points, bool minimizeX, bool minimizeY);

/// A parameter axis: numbers as they are (log10 when the values span 2+ decades), categorical
/// values as the index of their text.
struct ParamAxis {
  QString name;
  bool log = false;
  QStringList categories;  ///< non-empty: categorical
  double coord(const QJsonValue& value) const;
};
ParamAxis paramAxis(const QVector<TrialPoint>& trials, const QString& name);

/// The contour: a grid where each cell takes the objective of the nearest trial (in coordinates
/// scaled to [0, 1] per axis), and the trials' own positions.
struct ContourData {
  ParamAxis x;
  ParamAxis y;
  int nx = 0;
  int ny = 0;
  double xLo = 0, xHi = 1, yLo = 0, yHi = 1;   ///< range the grid covers (axis coordinates)
  QVector<double> cells;                       ///< ny rows of nx values, row 0 at yLo
  QVector<QPointF> points;                     ///< trial positions (axis coordinates)
  QVector<double> values;                      ///< their objective
  double valueAt(double xc, double yc) const;  ///< the cell value containing (xc, yc)
};
ContourData contourData(const QVector<TrialPoint>& trials, const QString& xParam,
                        const QString& yParam, int objective = 0, int cells = 60);

/// Parameter importance (PED-ANOVA) of the finished trials for objective number `objective`
/// (named `objectiveName`), largest first. The space comes from the study's [search] section
/// when it names that objective, else it is inferred from the values.
struct Importance {
  QString name;
  double share = 0;
};
[[nodiscard]] Result<QVector<Importance>> importance(const QVector<TrialPoint>& trials,
                                                     const QString& config,
                                                     const QString& objectiveName, bool minimize,
                                                     int objective = 0);

void drawContour(QCustomPlot* plot, const ContourData& data, bool minimize,
                 const QString& objectiveName);
void drawImportance(QCustomPlot* plot, const Result<QVector<Importance>>& bars);
/// Draws every trial and the front (highlighted, joined); `front` indexes `points`.
void drawPareto(QCustomPlot* plot, const QVector<QPointF>& points, const QVector<int>& front,
                const QString& xName, const QString& yName, const QString& emptyText);

}  // namespace shardscope::ui::compare

Q_DECLARE_METATYPE(shardscope::ui::compare::StudyInfo)
