#include "ui/compare/parallellabels.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace shardscope::ui::compare {

namespace {

// Dynamic properties that mark the labels setParallelLabels() made.
constexpr char kRole[] = "shardscopeParallelRole";  // Role
constexpr char kAxis[] = "shardscopeParallelAxis";  // axis index
constexpr char kFull[] = "shardscopeParallelText";  // the unelided text
constexpr char kHooked[] = "shardscopeParallelHooked";
constexpr int kGap = 4;          // pixels between two labels at least
constexpr int kMaxNamePx = 110;  // a longer vertical name is elided
constexpr int kNamePad = 3;      // pixels between the axis rect and the names

enum Role { kName = 0, kLow = 1, kHigh = 2 };

struct Labels {
  QVector<QCPItemText*> names;
  QVector<QCPItemText*> lows;
  QVector<QCPItemText*> highs;
};

Labels collect(QCustomPlot* plot) {
  Labels out;
  for (int i = 0; i < plot->itemCount(); ++i) {
    auto* item = qobject_cast<QCPItemText*>(plot->item(i));
    if (item == nullptr || !item->property(kRole).isValid()) continue;
    const int axis = item->property(kAxis).toInt();
    QVector<QCPItemText*>& list = item->property(kRole).toInt() == kName  ? out.names
                                  : item->property(kRole).toInt() == kLow ? out.lows
                                                                          : out.highs;
    if (list.size() <= axis) list.resize(axis + 1, nullptr);
    list[axis] = item;
  }
  return out;
}

int fullWidth(const QCPItemText* item) {
  const QString text = item->property(kFull).toString();
  if (text.isEmpty()) return 0;
  return QFontMetrics(item->font()).horizontalAdvance(text) + item->padding().left() +
         item->padding().right();
}

enum class Mode { horizontal, vertical, sparse };

// Names: under the axis rect, centred on their axis (horizontal) or hanging from it, reading
// upwards (vertical: rotated -90 degrees, so the unrotated right edge is at the anchor).
void placeName(QCPItemText* item, Mode mode, bool shown) {
  item->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
  item->position->setCoords(item->property(kAxis).toDouble(), 1.0);
  const QString full = item->property(kFull).toString();
  if (mode == Mode::horizontal) {
    item->setRotation(0);
    item->setPositionAlignment(Qt::AlignTop | Qt::AlignHCenter);
    item->setPadding(QMargins(1, kNamePad, 1, 0));
    item->setText(full);
  } else {
    item->setRotation(-90);
    item->setPositionAlignment(Qt::AlignRight | Qt::AlignVCenter);
    item->setPadding(QMargins(1, 0, kNamePad, 0));
    item->setText(QFontMetrics(item->font()).elidedText(full, Qt::ElideMiddle, kMaxNamePx));
  }
  item->setVisible(shown);
}

// Values: the highest above the axis's top end and the lowest under its bottom end
// (horizontal), or along the axis line on its right, from each end inwards (vertical).
// A vertical value gets at most half the axis's length (`room` pixels), so the two of one axis
// never meet.
void placeValue(QCPItemText* item, Mode mode, bool high, int room) {
  const double axis = item->property(kAxis).toDouble();
  item->position->setCoords(axis, high ? 1.0 : 0.0);
  const QString full = item->property(kFull).toString();
  if (mode == Mode::horizontal) {
    item->setRotation(0);
    item->setPositionAlignment(Qt::AlignHCenter | (high ? Qt::AlignBottom : Qt::AlignTop));
    item->setText(full);
  } else {
    item->setRotation(-90);
    item->setPositionAlignment(Qt::AlignTop | (high ? Qt::AlignRight : Qt::AlignLeft));
    const int pad = item->padding().left() + item->padding().right();
    item->setText(QFontMetrics(item->font()).elidedText(full, Qt::ElideRight, room - pad));
  }
  item->setVisible(mode != Mode::sparse && !full.isEmpty());
}

void layoutLabels(QCustomPlot* plot) {
  const Labels labels = collect(plot);
  if (labels.names.isEmpty() || labels.names.first() == nullptr) return;
  const double spacing = std::abs(plot->xAxis->coordToPixel(1.0) - plot->xAxis->coordToPixel(0.0));
  const int line = QFontMetrics(labels.names.first()->font()).height() + 2;
  int widest = 0;
  int longestName = 0;
  for (const auto* list : {&labels.names, &labels.lows, &labels.highs}) {
    for (const QCPItemText* item : *list)
      if (item != nullptr) widest = std::max(widest, fullWidth(item));
  }
  for (const QCPItemText* item : labels.names) {
    if (item != nullptr) longestName = std::max(longestName, std::min(fullWidth(item), kMaxNamePx));
  }
  const Mode mode = widest + kGap <= spacing ? Mode::horizontal
                    : line + kGap <= spacing ? Mode::vertical
                                             : Mode::sparse;
  const int every =
      mode == Mode::sparse ? int(std::ceil((line + kGap) / std::max(1.0, spacing))) : 1;
  for (QCPItemText* item : labels.names) {
    if (item != nullptr) placeName(item, mode, item->property(kAxis).toInt() % every == 0);
  }
  const double length = std::abs(plot->yAxis->coordToPixel(1.0) - plot->yAxis->coordToPixel(0.0));
  const int half = std::max(1, int(length / 2.0) - kGap);
  for (QCPItemText* item : labels.lows) {
    if (item != nullptr) placeValue(item, mode, false, half);
  }
  for (QCPItemText* item : labels.highs) {
    if (item != nullptr) placeValue(item, mode, true, half);
  }
  // Room under the axis rect for the names; a change lays the plot out again (the axis rect's
  // width, which the mode came from, stays).
  const int room = (mode == Mode::horizontal ? line + kNamePad : longestName + kNamePad + 2) + 2;
  if (plot->xAxis->padding() != room) {
    plot->xAxis->setPadding(room);
    plot->plotLayout()->update(QCPLayoutElement::upMargins);
    plot->plotLayout()->update(QCPLayoutElement::upLayout);
  }
}

QCPItemText* makeLabel(QCustomPlot* plot, int axis, Role role, const QString& text) {
  auto* item = new QCPItemText(plot);
  item->setProperty(kRole, int(role));
  item->setProperty(kAxis, axis);
  item->setProperty(kFull, text);
  item->setText(text);
  item->setClipToAxisRect(false);
  item->position->setTypeX(QCPItemPosition::ptPlotCoords);
  item->position->setTypeY(QCPItemPosition::ptPlotCoords);
  if (role == kName) {
    item->setFont(QFont(plot->font().family(), 8));
    item->setColor(QColor(0x20, 0x20, 0x20));
  } else {
    item->setFont(QFont(plot->font().family(), 7));
    item->setColor(QColor(0x50, 0x50, 0x50));
    item->setBrush(QColor(255, 255, 255, 200));  // legible over the lines it may cross
    item->setPadding(QMargins(1, 0, 1, 0));
  }
  return item;
}

}  // namespace

void setParallelLabels(QCustomPlot* plot, const QVector<ParallelAxisLabels>& axes) {
  for (int i = plot->itemCount() - 1; i >= 0; --i) {
    if (plot->item(i)->property(kRole).isValid()) plot->removeItem(i);
  }
  for (int a = 0; a < axes.size(); ++a) {
    makeLabel(plot, a, kName, axes[a].name);
    if (!axes[a].low.isEmpty()) makeLabel(plot, a, kLow, axes[a].low);
    if (!axes[a].high.isEmpty()) makeLabel(plot, a, kHigh, axes[a].high);
  }
  plot->xAxis->setTickLabels(false);
  if (!plot->property(kHooked).toBool()) {
    plot->setProperty(kHooked, true);
    QObject::connect(plot, &QCustomPlot::afterLayout, plot, [plot] { layoutLabels(plot); });
  }
}

QVector<QCPItemText*> parallelLabels(QCustomPlot* plot) {
  QVector<QCPItemText*> out;
  for (int i = 0; i < plot->itemCount(); ++i) {
    auto* item = qobject_cast<QCPItemText*>(plot->item(i));
    if (item != nullptr && item->property(kRole).isValid() && item->visible()) out.append(item);
  }
  return out;
}

QRectF itemTextBox(const QCPItemText* item) {
  const QPointF pos = item->position->pixelPosition();
  const QFontMetrics metrics(item->font());
  const QRect text =
      metrics.boundingRect(0, 0, 0, 0, Qt::TextDontClip | item->textAlignment(), item->text());
  const QMargins pad = item->padding();
  const QRect box = text.adjusted(-pad.left(), -pad.top(), pad.right(), pad.bottom());
  const Qt::Alignment align = item->positionAlignment();
  const double x = (align & Qt::AlignHCenter) != 0 ? -box.width() / 2.0
                   : (align & Qt::AlignRight) != 0 ? -double(box.width())
                                                   : 0.0;
  const double y = (align & Qt::AlignVCenter) != 0  ? -box.height() / 2.0
                   : (align & Qt::AlignBottom) != 0 ? -double(box.height())
                                                    : 0.0;
  QTransform transform;
  transform.translate(pos.x(), pos.y());
  transform.rotate(item->rotation());
  return transform.mapRect(QRectF(QPointF(x, y).toPoint(), box.size()));
}

}  // namespace shardscope::ui::compare
