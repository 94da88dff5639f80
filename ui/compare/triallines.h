// TrialLines: one QCustomPlot plottable that draws many polylines (one per trial), each with its
// own pen, in the order they were added. A sweep of 10,000 trials is one plottable instead of
// 10,000 QCPGraphs: QCustomPlot registers, layers and legend-checks each plottable, which made
// the Compare panel's first paint take seconds. Dense lines are reduced per pixel column
// (first, min, max, last) when drawn, so a replot costs about the pixels, not the points.
#pragma once

#include <qcustomplot.h>

#include <QVector>

#include "ui/widgets/linebounds.h"

namespace shardscope::ui::compare {

class TrialLines : public QCPAbstractPlottable {
  Q_OBJECT

 public:
  /// Registers itself with the axes' plot (as every QCPAbstractPlottable does).
  TrialLines(QCPAxis* keyAxis, QCPAxis* valueAxis);

  struct Line {
    QVector<double> xs;  ///< keys (NaN: a gap)
    QVector<double> ys;  ///< values (NaN: a gap)
    QPen pen;
    /// Drawn at the last point (a pruned trial's cut); ssNone: nothing.
    QCPScatterStyle end;
  };

  /// Appends a line; returns its index. Lines draw in index order (later ones on top).
  int addLine(Line line);
  /// Replaces (reset) or extends line `index`'s points.
  void setPoints(int index, const QVector<double>& xs, const QVector<double>& ys, bool reset);
  void clearLines();
  int lineCount() const { return static_cast<int>(m_lines.size()); }
  const Line& line(int index) const { return m_lines[index]; }
  /// Points held by every line together.
  qsizetype pointCount() const { return m_points; }

  double selectTest(const QPointF& pos, bool onlySelectable,
                    QVariant* details = nullptr) const override;
  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  /// Coordinates to pixels for one draw.
  struct Mapping {
    bool vertical = false;  ///< the key axis is vertical (pixel columns are rows then)
    bool linear = true;     ///< both axes linear: the slopes below apply
    double keyOrigin = 0, keySlope = 1, valueOrigin = 0, valueSlope = 1;
    QPointF pixel(const TrialLines& lines, double key, double value) const;
  };
  /// Strokes one line, or appends its segments to `segments` when given (a batch of one pen).
  void drawLine(QCPPainter* painter, const Line& line, const Mapping& map, QVector<QPointF>& pixels,
                QVector<QLineF>* segments) const;

  QVector<Line> m_lines;
  qsizetype m_points = 0;
  LineBounds m_bounds;
};

}  // namespace shardscope::ui::compare
