// SamplesDelegate: paints the Samples view's cells without a widget per cell. An answer cell is
// its text laid out with the model's format ranges (changed and wrong words) over the cell's
// width, and the scores in small grey type under it; the probe cell is its thumbnails beside
// the prompt and the reference. Each text layout is built once per (content, width) and kept in
// a cache, so scrolling repaints from ready layouts.
#pragma once

#include <QCache>
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
  void paintProbe(QPainter* painter, const QStyleOptionViewItem& option,
                  const QModelIndex& index) const;
  void paintAnswer(QPainter* painter, const QStyleOptionViewItem& option,
                   const QModelIndex& index) const;

  mutable QCache<quint64, Cached> m_cache{4000};
  mutable qint64 m_built = 0;
};

}  // namespace shardscope::ui
