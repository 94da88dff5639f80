// TagsDelegate: draws the runs table's Tags cell as coloured chips, one rounded box a tag in the
// tag's colour with its name in white or black, whichever reads better on it.
#pragma once

#include <QStyledItemDelegate>

namespace shardscope::ui {

class TagsDelegate : public QStyledItemDelegate {
  Q_OBJECT

 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option,
             const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

}  // namespace shardscope::ui
