// Labels of the parallel-coordinates plot that never overlap: each axis's name under the axis
// rect and its min and max values at the axis's ends, laid out again after every layout of the
// plot (QCustomPlot::afterLayout) from the pixels one axis has. Wide enough: horizontal, centred
// on the axis. Too narrow for the widest label: every label turns vertical (names hang under the
// axis rect, values run along the axis line), and the room under the axis rect follows the
// longest name. Narrower than a line of text: only every k-th name is shown, without values.
#pragma once

#include <QRectF>
#include <QStringList>
#include <QVector>

class QCustomPlot;
class QCPItemText;

namespace shardscope::ui::compare {

/// The labels of one axis: its name and the texts of its lowest and highest value (empty: none).
struct ParallelAxisLabels {
  QString name;
  QString low;
  QString high;
};

/// Replaces the plot's axis labels with these (axis i sits at x = i) and lays them out now and
/// after every later layout of the plot.
void setParallelLabels(QCustomPlot* plot, const QVector<ParallelAxisLabels>& axes);

/// The visible labels setParallelLabels() made, as the plot last laid them out.
QVector<QCPItemText*> parallelLabels(QCustomPlot* plot);

/// The box, in the plot's pixels, that `item` paints its text (padding included) into, as
/// QCPItemText::draw() computes it (alignment and rotation applied).
QRectF itemTextBox(const QCPItemText* item);

}  // namespace shardscope::ui::compare
