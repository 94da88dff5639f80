// CurvePlot: named curves (loss, lr, memory per rank...) over a shared x axis, drawn by
// QCustomPlot with a legend, labelled axes, a light grid and a fixed palette.
// Smoothing (setSmoothing): each series keeps its points as given (its "raw" graph, what
// pointCount, the CSV export and fitting read) and gains a second graph of the same name with
// their debiased EMA (smoothing.h), drawn on top in the series' colour while the raw one is
// drawn faint behind it; the smoothed graphs are refreshed before each replot, only for series
// whose points changed: points appended at the end are smoothed on from where the EMA stood, so a
// live run's new steps cost what they add, and a replot that changed nothing smooths nothing.
// Each graph keeps a min/max summary per block of points (curvegraph.h), so a replot of a
// million points reads about N / 64 values per curve, not N. Hovering shows each series' nearest
// point at the pointer's x (a dot on the curve and one tooltip listing every series).
#pragma once

#include <QColor>
#include <QHash>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <QVector>
#include <QWidget>

#include <functional>

#include "spec/result.h"
#include "ui/widgets/smoothing.h"

class QCPGraph;
class QCPItemTracer;
class QCustomPlot;
class QMouseEvent;

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

  /// Draws series `name` with this pen style (dashed, for an estimate) and, when `dots`, a
  /// small circle at each point (sparse evaluations); its smoothed graph follows.
  void setSeriesStyle(const QString& name, Qt::PenStyle style, bool dots = false);
  /// The series' names, in the order they were created.
  const QStringList& seriesNames() const { return m_order; }
  /// The graph holding series `name`'s points as given (never smoothed); nullptr when none.
  QCPGraph* rawGraph(const QString& name) const { return m_graphs.value(name); }
  /// The graph series `name` is drawn with: the smoothed one while smoothing is on.
  QCPGraph* drawnGraph(const QString& name) const;

  /// Smoothing weight, 0 (off) .. kMaxSmoothing (smoothing.h); the stored points never change.
  void setSmoothing(double weight);
  double smoothing() const { return m_smoothing; }

  /// The hover read-out at plot x `x`: one line per series, its nearest point by x ("name: y
  /// at x", with the raw value beside a smoothed one); the dots are placed, not replotted.
  QString readoutAt(double x);
  /// How the read-out writes an x (default: the number; a time axis shows a time).
  void setXText(std::function<QString(double)> text) { m_xText = std::move(text); }
  /// The text of the read-out last shown ("" when the pointer is not over the plot).
  const QString& hoverText() const { return m_hoverText; }

  /// Line width in pixels for every series (default 2).
  void setLineWidth(double pixels);
  /// Fixes the axis ranges (rescale() fits them to the data again).
  void setRanges(double xLower, double xUpper, double yLower, double yUpper);
  /// Fits both axes to the data of all series, then redraws.
  void rescale();
  void replot();

  /// Renders the plot at width x height pixels into a PNG file.
  [[nodiscard]] Result<void> savePng(const QString& path, int width, int height);

  /// How a dense line (more points than the axis rect has pixel columns) is drawn: one span per
  /// pixel column x, from its lowest to its highest point (and the previous column's last
  /// point, which the line joins), widened by half the pen above and below. `pixels`: the
  /// line's points in pixels, in x order; NaN breaks it.
  static QVector<QRectF> columnSpans(const QVector<QPointF>& pixels, double penWidth);

  /// The QCustomPlot inside, for what this class does not wrap (and for pixel tests).
  QCustomPlot* customPlot() const { return m_plot; }

 private:
  QCPGraph* graphFor(const QString& name);
  /// Brings every smoothed graph whose series changed up to date (before each replot).
  void refreshSmoothed();
  /// Gives series `name` its smoothed graph (smoothing on) or removes it (off), with the pens.
  void applySmoothingTo(const QString& name);
  void onMouseMove(QMouseEvent* event);
  bool eventFilter(QObject* watched, QEvent* event) override;
  void hideReadout();
  /// A series of many points is drawn with a cosmetic 1-pixel pen and no antialiasing: Qt strokes
  /// wide pens through its path stroker, seconds for a million points; thin lines are raster.
  void fitPens(const QString& name);

  struct Style {
    Qt::PenStyle pen = Qt::SolidLine;
    bool dots = false;
  };

  QCustomPlot* m_plot = nullptr;
  QHash<QString, QCPGraph*> m_graphs;    // the raw graph of each series
  QHash<QString, QCPGraph*> m_smoothed;  // its smoothed graph, while smoothing is on
  QHash<QString, QColor> m_colors;
  QHash<QString, Style> m_styles;
  QHash<QString, QCPItemTracer*> m_tracers;  // the hover dots, made on the first hover
  QStringList m_order;
  // Series whose smoothed graph lags, and from which raw point on: points appended at the end
  // (a live run) are smoothed on from the EMA's last state (m_ema); a new weight recomputes the
  // values from the start, keeping the keys; new points elsewhere copy everything again.
  struct Stale {
    int from = 0;       // the first raw point whose smoothed value is out of date
    bool keys = false;  // the keys before `from` changed too (copied again)
  };
  void markStale(const QString& name, Stale stale);
  QHash<QString, Stale> m_stale;
  QHash<QString, EmaState> m_ema;  // where each smoothed graph's EMA stands (its last point)
  QString m_hoverText;
  std::function<QString(double)> m_xText;
  double m_smoothing = 0.0;
  int m_nextColor = 0;
  double m_lineWidth = 2.0;
};

}  // namespace shardscope::ui
