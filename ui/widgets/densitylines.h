// DensityLines: one QCustomPlot plottable that draws thousands of polylines (every trial of a
// sweep, train and eval) as a density: each pixel is shaded by how many lines of its group pass
// through it, groups (e.g. train, eval, pruned) in their own colour and opacity. The lines are
// rasterised into a per-group count buffer at the axis rect's resolution (a line counts once per
// pixel, whatever its points per pixel column), so the picture costs O(points + pixels) and the
// result is kept as an image: a replot of an unchanged view blits it (opaque over a backdrop
// colour, so without blending).
// Level of detail while the user pans or zooms: the last image is drawn moved and scaled to the
// new ranges at once, and the exact one is rasterised after the view has been still for
// kRefineMs (coalesced by a single-shot timer). A change of the data or of the pixel size is
// rasterised in the replot itself, so what a replot after new data shows is always exact.
#pragma once

#include <qcustomplot.h>

#include <QImage>
#include <QTimer>
#include <QVector>

#include "ui/widgets/linebounds.h"

namespace shardscope::ui {

class DensityLines : public QCPAbstractPlottable {
  Q_OBJECT

 public:
  /// Registers itself with the axes' plot (as every QCPAbstractPlottable does).
  DensityLines(QCPAxis* keyAxis, QCPAxis* valueAxis);

  /// A group's colour and the opacity of a pixel one line crosses (the busiest pixel is opaque).
  struct Group {
    QColor color;
    double minAlpha = 0.35;
  };
  /// Adds a group; returns its index. Groups paint in index order (later ones on top).
  int addGroup(const Group& group);
  int groupCount() const { return static_cast<int>(m_groups.size()); }
  const Group& group(int index) const { return m_groups[index]; }

  /// Appends a line (NaN: a gap) to `group`; returns its index.
  int addLine(int group, const QVector<double>& xs, const QVector<double>& ys);
  /// Replaces (reset) or extends line `index`'s points.
  void setPoints(int index, const QVector<double>& xs, const QVector<double>& ys, bool reset);
  void clearLines();
  int lineCount() const { return static_cast<int>(m_lines.size()); }
  qsizetype pointCount() const { return m_points; }
  /// Lines of `group`.
  int linesIn(int group) const;

  /// Composites the image over `color` (opaque: blitted without blending, several times faster
  /// for a full axis rect; what is under the plottable, e.g. the grid, is then hidden: draw it
  /// on a layer above). Invalid (the default): a transparent image.
  void setBackdrop(const QColor& color);

  /// Rasterisations so far (tests: a replot of an unchanged view adds none).
  int rasterCount() const { return m_rasters; }
  /// The image drawn last matches the data and the view (no refinement pending).
  bool isExact() const { return !m_image.isNull() && !m_refine.isActive() && m_drawnExact; }
  /// The last rasterised image (axis rect size; transparent where no line passes).
  const QImage& image() const { return m_image; }

  /// Still time after a pan or zoom before the exact image is rasterised.
  static constexpr int kRefineMs = 60;

  double selectTest(const QPointF& pos, bool onlySelectable,
                    QVariant* details = nullptr) const override;
  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  struct Line {
    int group = 0;
    QVector<double> xs;
    QVector<double> ys;
  };
  /// What an image was rasterised for.
  struct View {
    QRect rect;
    QCPRange keys;
    QCPRange values;
    quint64 generation = 0;
    bool operator==(const View& o) const {
      return rect == o.rect && keys == o.keys && values == o.values && generation == o.generation;
    }
  };
  View currentView() const;
  void onRefine();
  void rasterise(const View& view);
  /// Adds line `line`'s pixels to `counts` (one per pixel it crosses; `stamp` dedups).
  void rasteriseLine(const Line& line, int id, const View& view, std::vector<quint16>& counts,
                     std::vector<int>& stamp) const;
  QImage composite(const std::vector<std::vector<quint16>>& counts, QSize size) const;

  QVector<Group> m_groups;
  QVector<Line> m_lines;
  qsizetype m_points = 0;
  quint64 m_generation = 1;
  LineBounds m_bounds;
  QColor m_backdrop;
  QImage m_image;
  View m_imageView;
  bool m_drawnExact = false;
  bool m_refineDue = false;  // the view is still: rasterise it exactly at the next draw
  int m_rasters = 0;
  QTimer m_refine;
};

}  // namespace shardscope::ui
