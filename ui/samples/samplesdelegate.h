// SamplesDelegate: paints the Samples view's cells without a widget per cell. An answer cell is
// its text laid out with the model's format ranges (changed and wrong words) over the cell's
// width, and the scores in small grey type under it, with a coloured edge and mark when a person
// judged it (green good, red bad); the probe cell is its thumbnails beside the prompt and the
// reference. Each text layout is built once per (content, width) and kept in a cache; each painted
// cell's pixels are kept too, keyed by what they show (content, size, selection and hover state,
// verdict, palette, device pixel ratio), so the repaint of an unchanged cell is one blit and a
// changed cell, whose key differs, is painted afresh.
#pragma once

#include <QCache>
#include <QPixmap>
#include <QStyledItemDelegate>
#include <QTextLayout>

namespace shardscope::ui {

class SamplesDelegate : public QStyledItemDelegate {
  Q_OBJECT

 public:
  explicit SamplesDelegate(QObject* parent = nullptr);

  void paint(QPainter* painter, const QStyleOptionViewItem& option,
             const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;

  /// The height each row is given: kTextLines lines of text and the scores line.
  int rowHeight(const QFont& font) const;
  /// Text layouts built so far (a cache hit builds none).
  qint64 layoutsBuilt() const { return m_built; }
  /// Cells painted afresh (not blitted from the pixel cache) so far.
  qint64 cellsRendered() const { return m_rendered; }
  /// Whether painted cells are kept as pixels (default true; false paints every cell from its
  /// laid-out text, as before the cache: the benchmark's peer).
  void setPixelCacheEnabled(bool on);
  /// The colour of a good / bad mark (the cell's edge and its ✓ / ✗).
  static QColor goodColor();
  static QColor badColor();
  /// Width of the mark's edge, in pixels.
  static constexpr int kVerdictEdge = 4;
  /// Lines of answer text a cell shows (the rest in its tooltip).
  static constexpr int kTextLines = 5;
  static constexpr int kThumbnailPx = 56;
  static constexpr int kPad = 4;

 private:
  struct Cached {
    QString text;
    QTextLayout layout;
  };
  /// The layout of `text` with `formats` at `width`, from the cache or built now.
  QTextLayout& layoutFor(quint64 key, const QString& text,
                         const QList<QTextLayout::FormatRange>& formats, const QFont& font,
                         int width, int height) const;
  struct CachedPixels {
    QString text;
    QPixmap pixels;
  };
  /// The cell's whole look (background, content) at (0, 0) of `option.rect`'s size.
  void paintCell(QPainter* painter, const QStyleOptionViewItem& option,
                 const QModelIndex& index) const;
  /// What the cell's pixels depend on, as one key; `text` gets the text it shows.
  quint64 pixelKey(const QStyleOptionViewItem& option, const QModelIndex& index,
                   QString& text) const;
  void paintProbe(QPainter* painter, const QStyleOptionViewItem& option,
                  const QModelIndex& index) const;
  void paintAnswer(QPainter* painter, const QStyleOptionViewItem& option,
                   const QModelIndex& index) const;

  mutable QCache<quint64, Cached> m_cache{4000};
  mutable QCache<quint64, CachedPixels> m_pixels{qsizetype(96) * 1024};  // cost: KiB of pixels
  mutable qint64 m_built = 0;
  mutable qint64 m_rendered = 0;
  bool m_pixelCache = true;
};

}  // namespace shardscope::ui
