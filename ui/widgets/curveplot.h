// CurvePlot: named curves (loss, lr, memory per rank...) over a shared x axis, drawn by
// QCustomPlot with a legend, labelled axes, a light grid and a fixed palette.
// Smoothing (setSmoothing): each series keeps its points as given (its "raw" graph, what
// pointCount, the CSV export and fitting read) and gains a second graph of the same name with
// their debiased EMA (smoothing.h), drawn on top in the series' colour while the raw one is
// drawn faint behind it; the smoothed graphs are refreshed before each replot, only for series
// whose points changed: points appended at the end are smoothed on from where the EMA stood, so a
// live run's new steps cost what they add, and a replot that changed nothing smooths nothing.
// Each graph keeps a min/max pyramid of its points (curvegraph.h), so a replot of a million
// points reads a few dozen values per pixel column, not N, and one after a live run's append
// with the axes unchanged reduces only from the last column on. Hovering shows each series' nearest
// point at the pointer's x (a dot on the curve and one tooltip listing every series).
// A new weight (the slider dragged) over many points is smoothed off the GUI thread: one
// background pass at a time, for the latest weight only (the weights chosen while it ran are
// skipped), and each curve keeps its previous smoothed points until the pass's arrive, so a
// replot during a drag costs a replot, not an EMA of every point.
#pragma once

#include <QColor>
#include <QHash>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <QVector>
#include <QWidget>

#include <functional>
#include <memory>

#include "spec/result.h"
#include "ui/widgets/smoothing.h"

class QCPGraph;
class QCPItemTracer;
class QCustomPlot;
class QMouseEvent;
template <typename T>
class QFutureWatcher;

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
  /// Whether a new weight over kBackgroundPoints points or more (all series whose EMA starts
  /// again, together) is smoothed on a worker thread (default: on). Off: every replot after a
  /// new weight smooths every point on the GUI thread first (the way before; benches compare).
  void setBackgroundSmoothing(bool on) { m_background = on; }
  /// Whether each curve keeps its reduced points between replots that changed neither its
  /// points nor the axes (CurveGraph::setReuseLines; default: on; off for benches' "before").
  void setReuseLines(bool on);
  /// Whether each curve reduces again only what a change touched, off its min/max pyramid
  /// (CurveGraph::setIncremental; default: on; off for benches' "before").
  void setIncrementalLines(bool on);
  /// Points from which a new weight is smoothed in the background.
  static constexpr int kBackgroundPoints = 100'000;
  /// Whether some smoothed curve still shows an earlier weight's (or, for a curve whose points
  /// were replaced, the raw) values: a background pass is running or about to start.
  bool isSmoothingPending() const;
  /// Brings every smoothed curve to the current weight now, on this thread (waiting for a
  /// pass that runs): before a picture is saved, which must show the weight chosen.
  void finishSmoothing();

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

 signals:
  /// A background pass has brought every smoothed curve to the current weight (the replot
  /// that draws them is queued).
  void smoothingSettled();

 private:
  QCPGraph* graphFor(const QString& name);
  /// Brings every smoothed graph whose series changed up to date (before each replot).
  void refreshSmoothed();
  /// Starts a background pass over the deferred series, unless one is running.
  void startPass();
  /// A pass is done: its curves replace the drawn ones where still current; the next starts.
  void onPassDone();
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
  // Series whose whole EMA awaits a background pass, each with the generation its points and
  // weight were deferred at (a pass's result for an older generation is dropped).
  QHash<QString, quint64> m_deferred;
  quint64 m_nextGeneration = 1;
  struct SmoothPass;                   // curveplot.cpp
  std::shared_ptr<SmoothPass> m_pass;  // the pass running, if any
  QFutureWatcher<void>* m_passWatcher = nullptr;
  bool m_background = true;
  bool m_reuseLines = true;
  bool m_incrementalLines = true;
  QString m_hoverText;
  std::function<QString(double)> m_xText;
  double m_smoothing = 0.0;
  int m_nextColor = 0;
  double m_lineWidth = 2.0;
};

}  // namespace shardscope::ui
