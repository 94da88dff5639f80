// CurveGraph: the QCPGraph CurvePlot draws each series with. A dense line (more points in view
// than the axis rect has pixel columns) is drawn as one span per pixel column: from the lowest to
// the highest point in that column, joined to the previous column's last point, widened by the
// pen. Every column's min and max are painted, exactly as a stroked polyline would reach them;
// what goes is the stroking (Qt strokes a 2 px polyline of thousands of jagged points as one
// path: seconds a replot) and the pass over every point: the graph keeps the min and max of each
// block of kBlock points (its block summary), so a column that holds whole blocks reads their
// summaries, and a replot of a million points reads about N / kBlock + kBlock x columns values.
// A sparse stretch (a gap of more than one column between two points) is stroked as usual.
// The reduced points are kept between replots: a replot that changed neither the graph's points
// nor its axes (the other curves' points changed, the smoothing slider moved, a repaint) reads
// none of its data again.
#pragma once

#include <qcustomplot.h>

#include <QRect>

#include <vector>

namespace shardscope::ui {

class CurveGraph : public QCPGraph {
 public:
  CurveGraph(QCPAxis* key, QCPAxis* value) : QCPGraph(key, value) {}

  /// Points per block of the summary.
  static constexpr int kBlock = 64;

  /// The spans per pixel column the dense drawing paints for these pixel points (in line
  /// order): x of the column, lowest and highest y, widened by `width`; NaN breaks the line.
  static QVector<QRectF> columnSpans(const QVector<QPointF>& lines, double width);

  /// Says that the points from index `from` on changed, were added or removed (setData() and
  /// the data container's own calls do not tell the graph): their blocks are summarised again
  /// at the next draw. A graph whose container grew at its end notices by itself.
  void pointsChanged(int from = 0);

  /// The points in view (and one beyond each end), in pixels, reduced for the dense drawing:
  /// per run of consecutive points in one pixel column, its first, lowest, highest and last
  /// point (one point when the run has one); a non-finite point where the line breaks.
  /// columnSpans() of these equals columnSpans() of every point in pixels.
  QVector<QPointF> reducedLines() const;

  /// Min and max of a block of kBlock points.
  struct Block {
    double lo = 0;
    double hi = 0;
    bool finite = true;  // every value of the block is finite
  };
  /// The block summary of `data` (its whole blocks), as a draw would make it: for points made
  /// on another thread, so the GUI thread need not read them all again (adoptData).
  static std::vector<Block> summarize(const QCPGraphDataContainer& data);
  /// Takes `data` as the graph's points, with summarize(data) as their summary.
  void adoptData(QSharedPointer<QCPGraphDataContainer> data, std::vector<Block> summary);

  /// Whether reducedLines() reuses its last result while the points (as pointsChanged() and
  /// growth tell), the axes' ranges, scales and the axis rect are the same (default: on; off,
  /// every replot reduces every point again: the way before, for benches).
  void setReuseLines(bool on);

 protected:
  void draw(QCPPainter* painter) override;
  void drawLinePlot(QCPPainter* painter, const QVector<QPointF>& lines) const override;

 private:
  /// Summarises the blocks that changed since the last call (pointsChanged(), growth).
  void updateSummary() const;
  /// Paints `lines` (pixels, in line order) as spans per column and strokes the sparse gaps.
  void drawDense(QCPPainter* painter, const QVector<QPointF>& lines) const;

  // Min and max of each whole block of the data; the trailing partial block is read point by
  // point. Kept up to date lazily by draws (const), hence mutable.
  mutable std::vector<Block> m_blocks;
  mutable int m_summarized = 0;  // points the summary is valid for
  mutable const QCPGraphDataContainer* m_summaryOf = nullptr;
  // The last reducedLines() and what it was computed for.
  struct LinesKey {
    const QCPGraphDataContainer* data = nullptr;
    int size = -1;
    quint64 version = 0;  // pointsChanged() calls
    QCPRange keyRange, valueRange;
    QRect rect;
    QCPAxis::ScaleType keyScale = QCPAxis::stLinear, valueScale = QCPAxis::stLinear;
    bool keyReversed = false, valueReversed = false;
    bool operator==(const LinesKey& o) const {
      return data == o.data && size == o.size && version == o.version && keyRange == o.keyRange &&
             valueRange == o.valueRange && rect == o.rect && keyScale == o.keyScale &&
             valueScale == o.valueScale && keyReversed == o.keyReversed &&
             valueReversed == o.valueReversed;
    }
  };
  LinesKey linesKey(const QCPAxis& keyAxis, const QCPAxis& valueAxis) const;
  QVector<QPointF> computeReducedLines() const;
  quint64 m_version = 0;
  bool m_reuseLines = true;
  mutable bool m_linesValid = false;
  mutable LinesKey m_linesKey;
  mutable QVector<QPointF> m_lines;
};

}  // namespace shardscope::ui
