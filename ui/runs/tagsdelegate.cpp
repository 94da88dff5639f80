#include "ui/runs/tagsdelegate.h"

#include <QApplication>
#include <QPainter>
#include <QPainterPath>

#include "ui/runs/runtablemodel.h"

namespace shardscope::ui {

namespace {

constexpr int kPadX = 5;  // inside a chip, left and right
constexpr int kGap = 4;   // between chips

QColor textOn(const QColor& fill) {
  // Relative luminance (sRGB weights): dark text on light chips, white on dark ones.
  const double y = 0.2126 * fill.redF() + 0.7152 * fill.greenF() + 0.0722 * fill.blueF();
  return y > 0.6 ? QColor(Qt::black) : QColor(Qt::white);
}

}  // namespace

void TagsDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                         const QModelIndex& index) const {
  QStyleOptionViewItem base = option;
  initStyleOption(&base, index);
  base.text.clear();  // the background and the selection, without the plain text
  const QWidget* widget = option.widget;
  QStyle* style = widget != nullptr ? widget->style() : QApplication::style();
  style->drawControl(QStyle::CE_ItemViewItem, &base, painter, widget);

  const QStringList tags = index.data(RunTableModel::TagsRole).toStringList();
  const QStringList colors = index.data(RunTableModel::TagColorsRole).toStringList();
  painter->save();
  painter->setRenderHint(QPainter::Antialiasing);
  painter->setClipRect(option.rect);
  const QFontMetrics metrics(option.font);
  const int height = std::min(option.rect.height() - 4, metrics.height() + 2);
  int x = option.rect.left() + 3;
  const int y = option.rect.top() + (option.rect.height() - height) / 2;
  for (qsizetype i = 0; i < tags.size() && x < option.rect.right(); ++i) {
    const QColor fill(colors.value(i, QStringLiteral("#7f7f7f")));
    const int width = metrics.horizontalAdvance(tags[i]) + 2 * kPadX;
    const QRectF chip(x, y, width, height);
    QPainterPath path;
    path.addRoundedRect(chip, height / 2.0, height / 2.0);
    painter->fillPath(path, fill.isValid() ? fill : QColor(Qt::gray));
    painter->setPen(textOn(fill));
    painter->drawText(chip, Qt::AlignCenter, tags[i]);
    x += width + kGap;
  }
  painter->restore();
}

QSize TagsDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const {
  const QFontMetrics metrics(option.font);
  int width = 6;
  for (const QString& tag : index.data(RunTableModel::TagsRole).toStringList())
    width += metrics.horizontalAdvance(tag) + 2 * kPadX + kGap;
  return {width, QStyledItemDelegate::sizeHint(option, index).height()};
}

}  // namespace shardscope::ui
