// What the Compare plots colour trials by: their objective (the default: best blue, worst
// orange), or a figure of their steps (mean MFU, mean exposed-communication share), so a sweep
// over sharding settings shows why the winner won. A figure is drawn on one colour scale, from
// kFigureLow (the sweep's lowest value) to kFigureHigh (its highest), shown under the plot
// with the figure's name; a trial without the figure (no step events with it) is grey.
#pragma once

#include <QColor>
#include <QHash>
#include <QString>

#include <optional>
#include <utility>

class QCPColorGradient;
class QCustomPlot;

namespace shardscope::ui::compare {

/// The figure scale's ends and the grey of a trial without the figure.
inline constexpr QRgb kFigureLow = 0x440154;   // dark purple
inline constexpr QRgb kFigureMid = 0x21918c;   // teal
inline constexpr QRgb kFigureHigh = 0xfde725;  // yellow
inline constexpr QRgb kNoFigure = 0xb4b4b4;

struct TrialColouring {
  QString name;                  ///< the figure's name ("MFU"); empty: by objective
  QHash<qint64, double> values;  ///< run id -> the trial's figure
  bool byFigure() const { return !name.isEmpty(); }
  /// The lowest and highest value (nullopt: none).
  std::optional<std::pair<double, double>> range() const;
  /// A trial's colour on the scale (in `shades` steps, both ends exact), grey without a value.
  QColor colour(qint64 runId, int shades = 64) const;
  /// What a tooltip says of a trial: "MFU 0.41", or that it has none and is drawn grey.
  QString describe(qint64 runId) const;
};

/// The figure scale as a QCustomPlot gradient (the same stops as TrialColouring::colour).
QCPColorGradient figureGradient();
/// Puts the colouring's scale under the plot's axis rect, named by the figure, or removes it
/// (by objective, or no trial has the figure).
void setFigureScale(QCustomPlot* plot, const TrialColouring& colouring);

}  // namespace shardscope::ui::compare
