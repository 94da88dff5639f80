// CurveGraph: the QCPGraph CurvePlot draws each series with. A dense line (more points in view
// than the axis rect has pixel columns) is drawn as one span per pixel column: from the lowest to
// the highest point in that column, joined to the previous column's last point, widened by the
// pen. Every column's min and max are painted, exactly as a stroked polyline would reach them;
// what goes is the stroking (Qt strokes a 2 px polyline of thousands of jagged points as one
// path: seconds a replot) and the pass over every point: the graph keeps a min/max pyramid of its
// points (blocks of kBlock points, blocks of kFanout such blocks, and so on up), kept in data
// coordinates, so it holds whatever the axes do and grows in O(new points) as a live run appends.
// A replot finds each pixel column's points by a galloping search on their keys and reads their
// min and max off the pyramid: about 2 x log8 blocks and a few points per column, whatever the
// number of points in it.
// A sparse stretch (a gap of more than one column between two points) is stroked as usual.
// The reduced points are kept between replots: a replot that changed neither the graph's points
// nor its axes (the other curves' points changed, the smoothing slider moved, a repaint) reads
// none of its data again, and one after points appended at the end with the axes unchanged (a
// live run whose axes the user fixed) reduces again only from the last pixel column it had.
#pragma once

#include <qcustomplot.h>

#include <QRect>

#include <vector>

namespace shardscope::ui {

class CurveGraph : public QCPGraph {
 public:
  CurveGraph(QCPAxis* key, QCPAxis* value) : QCPGraph(key, value) {}

  /// Points per block of the summary's lowest level.
  static constexpr int kBlock = 8;
  /// Blocks of one level per block of the level above.
  static constexpr int kFanout = 8;

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

  /// Min and max of a block of points (kBlock of them at the lowest level).
  struct Block {
    double lo = 0;
    double hi = 0;
    bool finite = true;  // every value of the block is finite
  };
  /// The lowest level of the summary of `data` (its whole blocks), as a draw would make it (the
  /// levels above are made from it, in N / kBlock / 7 steps): for points made
  /// on another thread, so the GUI thread need not read them all again (adoptData).
  static std::vector<Block> summarize(const QCPGraphDataContainer& data);
  /// Takes `data` as the graph's points, with summarize(data) as their summary.
  void adoptData(QSharedPointer<QCPGraphDataContainer> data, std::vector<Block> summary);

  /// Whether reducedLines() reuses its last result while the points (as pointsChanged() and
  /// growth tell), the axes' ranges, scales and the axis rect are the same (default: on; off,
  /// every replot reduces every point again: the way before, for benches).
  void setReuseLines(bool on);
  /// Whether a change reduces again only what it touched and reads the pyramid (default: on).
  /// Off: the way before, for benches: every change to the points reduces them from the start,
  /// walking the 64-point blocks and reading every point of a block that straddles two columns.
  void setIncremental(bool on);
  /// As QCPGraph's, but for every point of finite values in any sign off the pyramid (its top
  /// blocks and the trailing points), not a pass over every point: PlotsPanel fits its axes
  /// to every curve before each replot of a live run.
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;
  /// The first point the last reduction read: the axes' lower end for one from the start, the
  /// last pixel column's first point for one that went on (for tests and benches).
  int lastReductionStart() const { return m_lastStart; }

 protected:
  void draw(QCPPainter* painter) override;
  void drawLinePlot(QCPPainter* painter, const QVector<QPointF>& lines) const override;

 private:
  /// Summarises the blocks that changed since the last call (pointsChanged(), growth), at
  /// every level of the pyramid.
  void updateSummary() const;
  /// Min and max of the values of points [begin, end) off the pyramid (finite: false as soon as
  /// one value is not finite; lo and hi are then meaningless).
  Block rangeSummary(int begin, int end) const;
  /// Paints `lines` (pixels, in line order) as spans per column and strokes the sparse gaps.
  void drawDense(QCPPainter* painter, const QVector<QPointF>& lines) const;

  // The pyramid: m_levels[0] the min and max of each whole block of kBlock points, m_levels[L]
  // of each whole block of kFanout blocks of level L - 1; trailing partial blocks are read point
  // by point. Kept up to date lazily by draws (const), hence mutable.
  mutable std::vector<std::vector<Block>> m_levels;
  mutable int m_summarized = 0;  // points the lowest level is valid for
  mutable int m_levelsFrom = 0;  // the first lowest-level block the levels above must read again
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
  /// Where a reduction may go on from: the first point of the last pixel column it started,
  /// the reduced points written before it, and whether the last of those broke the line.
  struct Resume {
    int from = -1;  // the first point the reduction read (the axes' lower end)
    int index = 0;
    qsizetype size = 0;
    bool broken = true;
  };
  /// Reduces the points from `resume.index` (those before it gave `out`) to the end of the view
  /// and writes into `resume` where the next reduction may go on from.
  QVector<QPointF> computeReducedLines(QVector<QPointF> out, Resume& resume) const;
  /// A reduction from the start (the axes' lower end); keeps where the next may go on from.
  QVector<QPointF> computeReducedLines() const;
  /// The reduction before the pyramid (setIncremental(false)): 64-point blocks, walked.
  QVector<QPointF> computeReducedLinesByBlocks() const;
  quint64 m_version = 0;
  bool m_reuseLines = true;
  bool m_incremental = true;
  mutable int m_changedFrom =
      0;  // the first point changed since the last reduction (pointsChanged())
  mutable Resume m_resume;
  mutable int m_lastStart = 0;
  mutable bool m_linesValid = false;
  mutable LinesKey m_linesKey;
  mutable QVector<QPointF> m_lines;
};

}  // namespace shardscope::ui
