// CurvePlot: named curves (loss, lr, memory per rank...) over a shared x axis, drawn by
// QCustomPlot with a legend, labelled axes, a light grid and a fixed palette.
#pragma once

#include <QColor>
#include <QHash>
#include <QString>
#include <QVector>
#include <QWidget>

#include "spec/result.h"

class QCPGraph;
class QCustomPlot;

namespace shardscope::ui {

class CurvePlot : public QWidget {
  Q_OBJECT

 public:
  explicit CurvePlot(QWidget* parent = nullptr);

  /// The colour of the index-th series; the palette repeats after paletteSize() colours.
  static QColor seriesColor(int index);
  static int paletteSize();

  void setAxisLabels(const QString& xLabel, const QString& yLabel);
  /// Replaces the points of series `name`, creating it (with the next palette colour) if new.
  void setSeries(const QString& name, const QVector<double>& xs, const QVector<double>& ys);
  /// Adds points to series `name`, creating it if new; xs need not be sorted.
  void appendPoints(const QString& name, const QVector<double>& xs, const QVector<double>& ys);
  void removeSeries(const QString& name);
  void clear();
  bool hasSeries(const QString& name) const { return m_graphs.contains(name); }
  int seriesCount() const { return static_cast<int>(m_graphs.size()); }
  /// Number of points in series `name` (0 when there is no such series).
  int pointCount(const QString& name) const;

  /// Line width in pixels for every series (default 2).
  void setLineWidth(double pixels);
  /// Fixes the axis ranges (rescale() fits them to the data again).
  void setRanges(double xLower, double xUpper, double yLower, double yUpper);
  /// Fits both axes to the data of all series, then redraws.
  void rescale();
  void replot();

  /// Renders the plot at width x height pixels into a PNG file.
  [[nodiscard]] Result<void> savePng(const QString& path, int width, int height);

  /// The QCustomPlot inside, for what this class does not wrap (and for pixel tests).
  QCustomPlot* customPlot() const { return m_plot; }

 private:
  QCPGraph* graphFor(const QString& name);
  /// A series of many points is drawn with a cosmetic 1-pixel pen and no antialiasing: Qt strokes
  /// wide pens through its path stroker, seconds for a million points; thin lines are raster.
  void fitPen(QCPGraph* graph) const;

  QCustomPlot* m_plot = nullptr;
  QHash<QString, QCPGraph*> m_graphs;
  int m_nextColor = 0;
  double m_lineWidth = 2.0;
};

}  // namespace shardscope::ui
