#include "ui/samples/samplesdelegate.h"

#include <QApplication>
#include <QImage>
#include <QPainter>

#include <algorithm>

#include "ui/samples/samplesmodel.h"

namespace shardscope::ui {
namespace {

QFont smaller(QFont font) {
  font.setPointSizeF(font.pointSizeF() * 0.85);
  return font;
}

}  // namespace

SamplesDelegate::SamplesDelegate(QObject* parent) : QStyledItemDelegate(parent) {}

QColor SamplesDelegate::goodColor() { return {0x2e, 0x7d, 0x32}; }
QColor SamplesDelegate::badColor() { return {0xc6, 0x28, 0x28}; }

int SamplesDelegate::rowHeight(const QFont& font) const {
  const QFontMetrics text(font);
  const QFontMetrics small(smaller(font));
  return std::max(kThumbnailPx, kTextLines * text.lineSpacing()) + small.lineSpacing() + 3 * kPad;
}

QSize SamplesDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex&) const {
  return {260, rowHeight(option.font)};
}

QTextLayout& SamplesDelegate::layoutFor(quint64 key, const QString& text,
                                        const QList<QTextLayout::FormatRange>& formats,
                                        const QFont& font, int width, int height) const {
  const quint64 cacheKey = key ^ (quint64(width) * 0x9E3779B97F4A7C15ull);
  if (Cached* hit = m_cache.object(cacheKey); hit != nullptr && hit->text == text)
    return hit->layout;
  auto* entry = new Cached;
  entry->text = text;
  // A line break in an answer is a line break in the cell (same length: the ranges still fit).
  QString shown = text;
  if (!text.isEmpty() && text.trimmed().isEmpty()) {
    // White space alone (what a model that has learnt little often answers: "\n\n\n") shows its
    // characters as marks, one for one, so it is not taken for no answer at all.
    for (QChar& c : shown) {
      c = c == QLatin1Char('\n')   ? QChar(0x21B5)   // return arrow
          : c == QLatin1Char('\t') ? QChar(0x2192)   // rightwards arrow
                                   : QChar(0x00B7);  // middle dot
    }
  } else {
    shown.replace(QLatin1Char('\n'), QChar::LineSeparator);
  }
  entry->layout.setText(shown);
  entry->layout.setFont(font);
  QTextOption wrap;
  wrap.setWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
  entry->layout.setTextOption(wrap);
  entry->layout.setFormats(formats);
  entry->layout.beginLayout();
  qreal y = 0;
  while (y < height) {  // lines past the cell's height are left unlaid (the tooltip has them)
    QTextLine line = entry->layout.createLine();
    if (!line.isValid()) break;
    line.setLineWidth(width);
    line.setPosition(QPointF(0, y));
    y += line.height();
  }
  entry->layout.endLayout();
  ++m_built;
  m_cache.insert(cacheKey, entry);
  return m_cache.object(cacheKey)->layout;
}

void SamplesDelegate::setPixelCacheEnabled(bool on) {
  m_pixelCache = on;
  if (!on) m_pixels.clear();
}

quint64 SamplesDelegate::pixelKey(const QStyleOptionViewItem& option, const QModelIndex& index,
                                  QString& text) const {
  // Each part folded in as boost::hash_combine does, so equal parts in other places do not cancel.
  quint64 key = index.data(SamplesModel::LayoutKeyRole).toULongLong();
  const auto mix = [&key](quint64 part) {
    key ^= part + 0x9E3779B97F4A7C15ull + (key << 6) + (key >> 2);
  };
  text = index.data(Qt::DisplayRole).toString();
  mix(qHash(text));
  mix(quint64(index.column() == 0));
  if (index.column() == 0) {
    for (const QImage& thumb : index.data(SamplesModel::ThumbnailsRole).value<QList<QImage>>())
      mix(quint64(thumb.cacheKey()));
  } else {
    mix(qHash(index.data(SamplesModel::ScoresRole).toString()));
    mix(quint64(index.data(SamplesModel::VerdictRole).toInt()) + 2);
  }
  mix(quint64(option.rect.width()) << 32 | quint64(option.rect.height()));
  const QStyle::State states = QStyle::State_Selected | QStyle::State_MouseOver |
                               QStyle::State_HasFocus | QStyle::State_Active |
                               QStyle::State_Enabled;
  mix(quint64((option.state & states).toInt()));
  mix(quint64(option.palette.cacheKey()));
  mix(qHash(option.font.key()));
  const qreal dpr = option.widget ? option.widget->devicePixelRatioF() : qApp->devicePixelRatio();
  mix(quint64(qRound(dpr * 100)));
  return key;
}

void SamplesDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                            const QModelIndex& index) const {
  if (option.rect.isEmpty()) return;
  if (!m_pixelCache) {
    ++m_rendered;
    paintCell(painter, option, index);
    return;
  }
  QString text;
  const quint64 key = pixelKey(option, index, text);
  if (CachedPixels* hit = m_pixels.object(key); hit != nullptr && hit->text == text) {
    painter->drawPixmap(option.rect.topLeft(), hit->pixels);
    return;
  }
  const qreal dpr = option.widget ? option.widget->devicePixelRatioF() : qApp->devicePixelRatio();
  QPixmap pixels(option.rect.size() * dpr);
  pixels.setDevicePixelRatio(dpr);
  pixels.fill(Qt::transparent);
  {
    QPainter cell(&pixels);
    QStyleOptionViewItem local = option;
    local.rect = QRect(QPoint(0, 0), option.rect.size());
    cell.setFont(painter->font());
    paintCell(&cell, local, index);
  }
  ++m_rendered;
  painter->drawPixmap(option.rect.topLeft(), pixels);
  const int kib = std::max(1, int(qint64(pixels.width()) * pixels.height() * 4 / 1024));
  m_pixels.insert(key, new CachedPixels{text, std::move(pixels)}, kib);
}

void SamplesDelegate::paintCell(QPainter* painter, const QStyleOptionViewItem& option,
                                const QModelIndex& index) const {
  QStyleOptionViewItem panel = option;
  initStyleOption(&panel, index);
  panel.text.clear();
  const QWidget* widget = option.widget;
  QStyle* style = widget ? widget->style() : QApplication::style();
  style->drawPrimitive(QStyle::PE_PanelItemViewItem, &panel, painter, widget);
  painter->save();
  painter->setClipRect(option.rect);
  if (index.column() == 0)
    paintProbe(painter, option, index);
  else
    paintAnswer(painter, option, index);
  painter->restore();
}

void SamplesDelegate::paintProbe(QPainter* painter, const QStyleOptionViewItem& option,
                                 const QModelIndex& index) const {
  QRect area = option.rect.adjusted(kPad, kPad, -kPad, -kPad);
  const auto thumbs = index.data(SamplesModel::ThumbnailsRole).value<QList<QImage>>();
  for (const QImage& thumb : thumbs) {
    if (area.width() < 2 * kThumbnailPx) break;
    const QImage scaled = thumb.scaled(kThumbnailPx, kThumbnailPx, Qt::KeepAspectRatio);
    painter->drawImage(area.topLeft(), scaled);
    area.setLeft(area.left() + kThumbnailPx + kPad);
  }
  const QString prompt = index.data(Qt::DisplayRole).toString();
  const QString reference = index.data(SamplesModel::ReferenceRole).toString();
  QString text = prompt;
  QList<QTextLayout::FormatRange> formats;
  if (!reference.isEmpty()) {
    text += QChar::LineSeparator + QStringLiteral("→ ") + reference;
    QTextCharFormat ref;
    ref.setForeground(QColor(0x2e, 0x7d, 0x32));  // the expected answer, in green
    ref.setFontItalic(true);
    formats.append({int(prompt.size()) + 1, int(text.size() - prompt.size() - 1), ref});
  }
  const quint64 key = index.data(SamplesModel::LayoutKeyRole).toULongLong() * 31 + 7;
  QTextLayout& layout = layoutFor(key, text, formats, option.font, area.width(), area.height());
  painter->setPen(option.palette.color(QPalette::Text));
  layout.draw(painter, area.topLeft());
}

void SamplesDelegate::paintAnswer(QPainter* painter, const QStyleOptionViewItem& option,
                                  const QModelIndex& index) const {
  const QVariant text = index.data(Qt::DisplayRole);
  const QRect area = option.rect.adjusted(kPad, kPad, -kPad, -kPad);
  const QFont small = smaller(option.font);
  const int scoresHeight = QFontMetrics(small).lineSpacing();
  if (!text.isValid()) {  // no answer of this probe at this step
    painter->setPen(option.palette.color(QPalette::PlaceholderText));
    painter->setFont(small);
    painter->drawText(area, Qt::AlignLeft | Qt::AlignTop, tr("(no answer)"));
    return;
  }
  const auto formats =
      index.data(SamplesModel::FormatsRole).value<QList<QTextLayout::FormatRange>>();
  const quint64 key = index.data(SamplesModel::LayoutKeyRole).toULongLong();
  QTextLayout& layout = layoutFor(key, text.toString(), formats, option.font, area.width(),
                                  area.height() - scoresHeight - kPad);
  painter->setPen(option.palette.color(QPalette::Text));
  painter->save();
  painter->setClipRect(area.adjusted(0, 0, 0, -scoresHeight - kPad));
  layout.draw(painter, area.topLeft());
  painter->restore();
  painter->setFont(small);
  painter->setPen(option.palette.color(QPalette::PlaceholderText));
  const QRect scores(area.left(), area.bottom() - scoresHeight + 1, area.width(), scoresHeight);
  painter->drawText(scores, Qt::AlignLeft | Qt::AlignVCenter,
                    index.data(SamplesModel::ScoresRole).toString());
  // A person's mark: a coloured edge on the left and a tick or cross at the scores' right.
  const int verdict = index.data(SamplesModel::VerdictRole).toInt();
  if (verdict == 0) return;
  const QColor color = verdict > 0 ? goodColor() : badColor();
  painter->fillRect(
      QRect(option.rect.left(), option.rect.top(), kVerdictEdge, option.rect.height()), color);
  painter->setPen(color);
  QFont bold = small;
  bold.setBold(true);
  painter->setFont(bold);
  painter->drawText(scores, Qt::AlignRight | Qt::AlignVCenter,
                    verdict > 0 ? tr("✓ good") : tr("✗ bad"));
}

}  // namespace shardscope::ui
