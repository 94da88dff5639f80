#include "ui/compare/pbtviews.h"

#include <qcustomplot.h>
#include <QHBoxLayout>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <limits>
#include <variant>

#include "ui/compare/compareplots.h"

namespace shardscope::ui::compare {

namespace {

const QColor kBest(0x2c, 0x6f, 0xbb);   // the best member's chain (Compare's "best" blue)
const QColor kOther(0xa9, 0xbc, 0xd0);  // every other segment
const QColor kFailed(0xd6, 0x27, 0x28);
const QColor kRunning(0xcc, 0xcc, 0xcc);
const QColor kStopped(0x80, 0x80, 0x80);  // stopped by the user with the study
const QColor kExploit(0xf0, 0x8a, 0x24);  // an exploit arrow off the best chain

// Bars stop this fraction of a segment short of each end, so two segments of one lane read as
// two.
constexpr double kGap = 0.03;

// A mutable parameter's value as a number (they are numeric: spec checks [search.pbt] mutable).
std::optional<double> numeric(const search::TrialParams& params, const QString& name) {
  const auto it = params.find(name.toStdString());
  if (it == params.end()) return std::nullopt;
  if (const auto* d = std::get_if<double>(&it->second)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return double(*i);
  return std::nullopt;
}

bool onBestChain(const PbtData& data, const backend::PbtSegment& s) {
  return std::any_of(data.best.begin(), data.best.end(), [&s](const backend::PbtSegment& b) {
    return b.segment == s.segment && b.member == s.member;
  });
}

}  // namespace

PbtViews::PbtViews(QWidget* parent)
    : QWidget(parent), m_lineage(new QCustomPlot(this)), m_schedule(new QCustomPlot(this)) {
  m_lineage->setObjectName(QStringLiteral("pbtLineage"));
  m_schedule->setObjectName(QStringLiteral("pbtSchedule"));
  setupPlot(m_lineage, tr("PBT lineage"));
  m_lineage->setInteractions({});  // lanes and steps are the whole picture: no drag, no zoom
  m_lineage->setToolTip(
      tr("Each bar: one segment of one member (its run), over the steps it trained. An arrow: "
         "the segment went on from another member's checkpoint (exploit) with explored values. "
         "Blue: the best member's chain. Hover for a segment's values, click to diff it against "
         "its source."));
  m_schedule->setBackground(Qt::white);
  m_schedule->setToolTip(
      tr("The best trial's parameter schedule: the values of each mutable parameter along the "
         "chain of segments the best member's weights went through"));
  for (QCustomPlot* plot : {m_lineage, m_schedule}) plot->setMinimumHeight(120);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_lineage, 3);
  layout->addWidget(m_schedule, 2);

  m_lineage->setMouseTracking(true);
  connect(m_lineage, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) {
    const backend::PbtSegment* s = segmentAt(event->pos());
    if (s == nullptr) {
      QToolTip::hideText();
    } else {
      QToolTip::showText(event->globalPosition().toPoint(), segmentTip(*s), m_lineage);
    }
  });
  connect(m_lineage, &QCustomPlot::mousePress, this,
          [this](QMouseEvent* event) { m_press = event->pos(); });
  connect(m_lineage, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* event) {
    if ((event->pos() - m_press).manhattanLength() > 3) return;
    if (const backend::PbtSegment* s = segmentAt(event->pos()); s != nullptr && s->runId > 0)
      emit segmentClicked(s->runId, s->fromRunId);
  });
  hide();
}

void PbtViews::setData(const SweepData& sweep) {
  m_data = sweep.pbt;
  setVisible(m_data.has_value());
  drawLineage();
  drawSchedule();
}

QCPGraph* PbtViews::scheduleGraph(const QString& param) const {
  const auto at = m_params.indexOf(param);
  return at < 0 ? nullptr : m_graphs[at];
}

const backend::PbtSegment* PbtViews::segmentAt(const QPoint& pixel) const {
  if (!m_data) return nullptr;
  constexpr double kNearPx = 6;
  const QCPAxis* x = m_lineage->xAxis;
  const QCPAxis* y = m_lineage->yAxis;
  for (const backend::PbtSegment& s : m_data->lineage.segments) {
    const double x0 = x->coordToPixel(double(s.startStep));
    const double x1 = x->coordToPixel(double(s.endStep));
    const double py = y->coordToPixel(double(s.member));
    if (pixel.x() >= std::min(x0, x1) && pixel.x() <= std::max(x0, x1) &&
        std::abs(pixel.y() - py) <= kNearPx)
      return &s;
  }
  return nullptr;
}

QString PbtViews::segmentTip(const backend::PbtSegment& s) {
  QString from = tr("from scratch");
  if (s.fromMember >= 0) {
    from = (s.exploited ? tr("exploited member %1 (run %2) at step %3")
                        : tr("continued member %1 (run %2) at step %3"))
               .arg(s.fromMember)
               .arg(s.fromRunId)
               .arg(s.startStep);
  }
  QStringList values;
  for (const auto& [name, value] : s.params) {
    // Six significant digits as the diff shows them (format_value's %.17g is for programs).
    const auto* d = std::get_if<double>(&value);
    values << QString::fromStdString(name) + QStringLiteral(" = ") +
                  (d != nullptr ? QString::number(*d, 'g', 6)
                                : QString::fromStdString(search::format_value(value)));
  }
  return tr("member %1, segment %2 (trial %3, run %4)\nsteps %5-%6, %7\n%8\n%9: %10")
      .arg(s.member)
      .arg(s.segment)
      .arg(s.trial)
      .arg(s.runId)
      .arg(s.startStep + 1)
      .arg(s.endStep)
      .arg(from, values.join(QLatin1Char('\n')), s.state,
           s.value ? QString::number(*s.value, 'g', 6) : QStringLiteral("—"));
}

void PbtViews::drawLineage() {
  resetPlot(m_lineage);
  m_edges.clear();
  m_nodes = 0;
  if (!m_data || m_data->lineage.segments.empty()) {
    if (m_data) placeholder(m_lineage, tr("No segment has started yet"));
    m_lineage->replot();
    return;
  }
  const PbtData& data = *m_data;
  const int population = std::max(1, data.lineage.population);
  qint64 lastStep = 1;
  for (const backend::PbtSegment& s : data.lineage.segments)
    lastStep = std::max(lastStep, s.endStep);
  for (const backend::PbtSegment& s : data.lineage.segments) {
    const bool best = onBestChain(data, s);
    const double gap = kGap * double(std::max<qint64>(1, s.endStep - s.startStep));
    auto* bar = new QCPItemLine(m_lineage);
    bar->start->setCoords(double(s.startStep) + gap, s.member);
    bar->end->setCoords(double(s.endStep) - gap, s.member);
    QColor colour = best ? kBest : kOther;
    if (s.state == QLatin1String("failed")) colour = kFailed;
    if (s.state == QLatin1String("running")) colour = kRunning;
    if (s.state == QLatin1String("stopped")) colour = kStopped;
    QPen pen(colour, best ? 9 : 6);
    pen.setCapStyle(Qt::FlatCap);
    bar->setPen(pen);
    ++m_nodes;
    if (s.value) {  // the objective at the segment's end, over its bar
      auto* label = new QCPItemText(m_lineage);
      label->position->setCoords(double(s.endStep) - gap, s.member);
      label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
      label->setPadding(QMargins(0, 0, 0, 6));
      label->setText(QString::number(*s.value, 'g', 3));
      label->setFont(QFont(font().family(), 7, best ? QFont::Bold : QFont::Normal));
      label->setColor(best ? kBest : QColor(0x55, 0x55, 0x55));
      label->setClipToAxisRect(false);
    }
    if (s.segment == 0 || s.fromMember < 0) continue;
    const backend::PbtSegment* source = data.lineage.at(s.segment - 1, s.fromMember);
    const bool bestEdge = best && source != nullptr && onBestChain(data, *source);
    m_edges.append({s.segment, s.fromMember, s.member, s.exploited, bestEdge});
    if (s.fromMember == s.member) continue;  // a lane going on: the bars show it
    auto* arrow = new QCPItemLine(m_lineage);
    arrow->start->setCoords(double(s.startStep), s.fromMember);
    arrow->end->setCoords(double(s.startStep), s.member);
    arrow->setHead(QCPLineEnding(QCPLineEnding::esSpikeArrow, 8, 10));
    QPen edgePen(bestEdge ? kBest : kExploit, bestEdge ? 2.5 : 1.5);
    if (!bestEdge) edgePen.setStyle(Qt::DashLine);
    arrow->setPen(edgePen);
  }
  QSharedPointer<QCPAxisTickerText> lanes(new QCPAxisTickerText);
  for (int m = 0; m < population; ++m) lanes->addTick(m, tr("member %1").arg(m));
  m_lineage->yAxis->setTicker(lanes);
  m_lineage->yAxis->setRangeReversed(true);  // member 0 on top
  m_lineage->yAxis->setRange(-0.7, population - 0.4);
  m_lineage->yAxis->grid()->setVisible(false);
  m_lineage->xAxis->setLabel(tr("training step"));
  m_lineage->xAxis->setRange(0, double(lastStep) * 1.02);
  const QString title =
      data.best.empty()
          ? tr("PBT lineage: %1 members, %2 segments (no segment complete yet)")
                .arg(population)
                .arg(m_nodes)
          : tr("PBT lineage: %1 members (blue: best member %2's chain; arrows: exploit)")
                .arg(population)
                .arg(data.best.back().member);
  setPlotTitle(m_lineage, title);
  m_lineage->replot();
}

// One axis rect per mutable parameter, stacked, sharing the step axis; rebuilt on every draw.
void PbtViews::drawSchedule() {
  m_schedule->clearPlottables();
  m_schedule->clearItems();
  m_schedule->plotLayout()->clear();
  m_params.clear();
  m_graphs.clear();
  const QString title = m_data && !m_data->best.empty()
                            ? tr("Best trial's schedule (member %1, %2 segments)")
                                  .arg(m_data->best.back().member)
                                  .arg(m_data->best.size())
                            : tr("Best trial's schedule (none yet: no segment complete)");
  m_schedule->plotLayout()->addElement(
      0, 0, new QCPTextElement(m_schedule, title, QFont(font().family(), 10, QFont::Bold)));
  if (!m_data) {
    m_schedule->replot();
    return;
  }
  const PbtData& data = *m_data;
  auto* margins = new QCPMarginGroup(m_schedule);
  for (const QString& param : data.mutableParams) {
    auto* rect = new QCPAxisRect(m_schedule);
    rect->setupFullAxesBox(true);
    rect->axis(QCPAxis::atTop)->setTickLabels(false);
    rect->axis(QCPAxis::atRight)->setTickLabels(false);
    rect->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    QCPAxis* y = rect->axis(QCPAxis::atLeft);
    for (QCPAxis* axis : {x, y}) axis->grid()->setPen(QPen(QColor(0xdd, 0xdd, 0xdd), 1));
    y->setLabel(param);
    y->setLabelFont(QFont(font().family(), 8));
    y->setTickLabelFont(QFont(font().family(), 7));
    x->setTickLabelFont(QFont(font().family(), 7));
    if (data.logParams.contains(param)) {
      y->setScaleType(QCPAxis::stLogarithmic);
      y->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    }
    m_schedule->plotLayout()->addElement(m_schedule->plotLayout()->rowCount(), 0, rect);
    QCPGraph* graph = m_schedule->addGraph(x, y);
    graph->setName(param);
    graph->setLineStyle(QCPGraph::lsStepLeft);
    graph->setPen(QPen(kBest, 2));
    graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, kBest, Qt::white, 6));
    // The value of each segment from its first step; the last one held to the chain's end.
    for (const backend::PbtSegment& s : data.best) {
      if (const auto v = numeric(s.params, param)) graph->addData(double(s.startStep), *v);
    }
    if (!data.best.empty()) {
      if (const auto v = numeric(data.best.back().params, param))
        graph->addData(double(data.best.back().endStep), *v);
    }
    // The value range from the data (QCustomPlot's rescale widens a flat line to +-1, which
    // squashes a learning rate to nothing): a margin around it, a flat line centred.
    double low = std::numeric_limits<double>::infinity();
    double high = -low;
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) {
      low = std::min(low, it->value);
      high = std::max(high, it->value);
    }
    if (low > high) {
      low = 0;
      high = 1;
    }
    if (y->scaleType() == QCPAxis::stLogarithmic && low > 0) {
      const double pad = high > low ? std::pow(high / low, 0.15) : 2.0;
      y->setRange(low / pad, high * pad);
    } else {
      const double pad = high > low ? (high - low) * 0.15 : std::max(std::abs(low) * 0.5, 1e-3);
      y->setRange(low - pad, high + pad);
    }
    m_params.append(param);
    m_graphs.append(graph);
  }
  if (!m_graphs.isEmpty()) {  // one step range, as the lineage's; its label once, at the bottom
    m_graphs.last()->keyAxis()->setLabel(tr("training step"));
    const double end = data.best.empty() ? 1.0 : double(data.best.back().endStep);
    for (QCPGraph* g : std::as_const(m_graphs)) g->keyAxis()->setRange(0, end * 1.02);
  }
  m_schedule->replot();
}

}  // namespace shardscope::ui::compare
