#include "ui/compare/compareplots.h"

#include <qcustomplot.h>
#include <QHash>
#include <QMap>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "ui/compare/parallellabels.h"
#include "ui/compare/triallines.h"
#include "ui/widgets/curveplot.h"

namespace shardscope::ui::compare {

namespace {

constexpr qsizetype kLegendTrials = 12;  // more trials: no legend (it would not be legible)

// Objective colour: good (blue) to bad (orange), t in [0, 1] with 0 the best.
QColor rankColor(double t) {
  const QColor good(0x2c, 0x6f, 0xbb);
  const QColor bad(0xf0, 0x8a, 0x24);
  t = std::clamp(t, 0.0, 1.0);
  return QColor::fromRgbF(float(good.redF() + t * (bad.redF() - good.redF())),
                          float(good.greenF() + t * (bad.greenF() - good.greenF())),
                          float(good.blueF() + t * (bad.blueF() - good.blueF())));
}

// A filled disc scatter. Above kAntialiasedTrials points it is drawn once into a pixmap that is
// blitted per point: 10,000 antialiased ellipses take a third of a second per replot.
QCPScatterStyle discStyle(const QColor& color, double size, qsizetype points) {
  if (points <= kAntialiasedTrials) return {QCPScatterStyle::ssDisc, color, size};
  const int side = int(std::ceil(size)) + 2;
  QPixmap pixmap(side, side);
  pixmap.fill(Qt::transparent);
  QPainter painter(&pixmap);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setPen(QPen(color, 1));
  painter.setBrush(color);
  painter.drawEllipse(QPointF(side / 2.0, side / 2.0), size / 2.0, size / 2.0);
  painter.end();
  return QCPScatterStyle(pixmap);
}

}  // namespace

void resetPlot(QCustomPlot* plot) {
  plot->clearGraphs();
  plot->clearPlottables();
  plot->clearItems();
  plot->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
}

void placeholder(QCustomPlot* plot, const QString& text) {
  auto* label = new QCPItemText(plot);
  label->position->setType(QCPItemPosition::ptAxisRectRatio);
  label->position->setCoords(0.5, 0.5);
  label->setText(text);
  label->setColor(QColor(0x80, 0x80, 0x80));
}

void setupPlot(QCustomPlot* plot, const QString& title) {
  plot->setBackground(Qt::white);
  plot->axisRect()->setupFullAxesBox(true);
  plot->xAxis2->setTickLabels(false);
  plot->yAxis2->setTickLabels(false);
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    axis->grid()->setPen(QPen(QColor(0xdd, 0xdd, 0xdd), 1));
  }
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(
      0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold)));
  plot->legend->setFont(QFont(plot->font().family(), 8));
  plot->legend->setBrush(Qt::NoBrush);
  plot->legend->setBorderPen(Qt::NoPen);
  plot->legend->setMargins(QMargins(4, 0, 4, 2));
  // The legend is a row under the axis rect, never over the data; it wraps into as many
  // columns as the plot's width holds, refitted before every replot (resizes included).
  plot->axisRect()->insetLayout()->take(plot->legend);
  plot->plotLayout()->addElement(2, 0, plot->legend);
  plot->plotLayout()->setRowStretchFactor(2, 0.001);
  QObject::connect(plot, &QCustomPlot::beforeReplot, plot, [plot] { fitLegend(plot); });
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
}

void fitLegend(QCustomPlot* plot) {
  QCPLegend* legend = plot->legend;
  int widest = 1;
  int items = 0;
  for (int i = 0; i < legend->itemCount(); ++i) {  // cells of a wrapped legend may be empty
    if (const QCPAbstractLegendItem* item = legend->item(i)) {
      widest = std::max(widest, item->minimumOuterSizeHint().width());
      ++items;
    }
  }
  // No more columns than entries: empty columns would still take their spacing from the row.
  const int spare = plot->width() - legend->margins().left() - legend->margins().right();
  const int fit = (spare + legend->columnSpacing()) / (widest + legend->columnSpacing());
  const int columns = std::clamp(fit, 1, std::max(1, items));
  const bool packed = legend->itemCount() == items || legend->columnCount() <= 1;
  if (packed && legend->wrap() == columns && legend->fillOrder() == QCPLayoutGrid::foColumnsFirst)
    return;
  legend->setWrap(columns);
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
  legend->simplify();  // entries removed by resetPlot() leave empty cells behind
  // An empty grid's maximum width is its margins: kept in the plot's one column, it would
  // squeeze the axis rect to that. One empty cell has no maximum.
  if (items == 0) legend->expandTo(1, 1);
}

QVector<double> bestSoFar(const QVector<double>& objectives, bool minimize) {
  QVector<double> best;
  best.reserve(objectives.size());
  for (double value : objectives) {
    if (best.isEmpty()) {
      best.append(value);
    } else {
      best.append(minimize ? std::min(best.last(), value) : std::max(best.last(), value));
    }
  }
  return best;
}

bool isAxisParam(const QString& key) {
  return key != QLatin1String(backend::kReplanParam) &&
         key != QLatin1String(backend::kResumedFromParam);
}

QStringList paramNames(const SweepData& sweep) {
  QStringList names;
  for (const SweepTrial& trial : sweep.trials) {
    for (const QString& key : trial.params.keys()) {
      if (isAxisParam(key) && !names.contains(key)) names.append(key);
    }
  }
  // A group's runs may come from different experiments: an axis is a parameter they all share.
  if (groupOfSweep(sweep.experimentId) >= 0) {
    names.removeIf([&sweep](const QString& key) {
      return std::any_of(sweep.trials.cbegin(), sweep.trials.cend(),
                         [&key](const SweepTrial& trial) { return !trial.params.contains(key); });
    });
  }
  names.sort();
  return names;
}

double paramNumber(const QJsonValue& value, QStringList& categories) {
  if (value.isDouble()) return value.toDouble();
  if (value.isBool()) return value.toBool() ? 1.0 : 0.0;
  const QString text = value.isString() ? value.toString() : QStringLiteral("(none)");
  qsizetype index = categories.indexOf(text);
  if (index < 0) {
    categories.append(text);
    index = categories.size() - 1;
  }
  return double(index);
}

namespace {

// The history's dots coloured by a figure: one graph per colour (a handful of shades, and the
// grey of the trials without it), the first named by the figure in the legend.
void addFigureDots(QCustomPlot* plot, const SweepData& sweep, const TrialColouring& colouring,
                   qsizetype points) {
  const int shades = points > kAntialiasedTrials ? 32 : 64;
  QMap<QRgb, std::pair<QVector<double>, QVector<double>>> byColour;
  for (qsizetype i = 0; i < sweep.trials.size(); ++i) {
    const SweepTrial& trial = sweep.trials[i];
    if (!trial.objective) continue;  // as history()
    auto& [xs, ys] = byColour[colouring.colour(trial.runId, shades).rgb()];
    xs.append(double(trial.trialNumber.value_or(i)));
    ys.append(*trial.objective);
  }
  bool named = false;
  for (auto it = byColour.cbegin(); it != byColour.cend(); ++it) {
    QCPGraph* dots = plot->addGraph();
    dots->setLineStyle(QCPGraph::lsNone);
    dots->setScatterStyle(discStyle(QColor(it.key()), 7, points));
    dots->setData(it->first, it->second);
    const bool grey = it.key() == QColor(kNoFigure).rgb();
    if (grey) {
      dots->setName(QObject::tr("no %1 (grey)").arg(colouring.name));
    } else if (!named) {
      dots->setName(QObject::tr("objective, coloured by %1").arg(colouring.name));
      named = true;
    } else {
      dots->removeFromLegend();
    }
  }
}

}  // namespace

void setPlotTitle(QCustomPlot* plot, const QString& title) {
  if (auto* text = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0)))
    text->setText(title);
}

History history(const SweepData& sweep, bool minimize) {
  History h;
  for (qsizetype i = 0; i < sweep.trials.size(); ++i) {
    const SweepTrial& trial = sweep.trials[i];
    if (!trial.objective) continue;
    h.trialNumbers.append(double(trial.trialNumber.value_or(i)));
    h.objectives.append(*trial.objective);
  }
  h.best = bestSoFar(h.objectives, minimize);
  return h;
}

void drawHistory(QCustomPlot* plot, const SweepData& sweep, bool minimize,
                 const TrialColouring& colouring) {
  resetPlot(plot);
  const History h = history(sweep, minimize);
  plot->xAxis->setLabel(QObject::tr("trial"));
  plot->yAxis->setLabel(sweep.objectiveKey.isEmpty()
                            ? QObject::tr("objective")
                            : QObject::tr("objective (%1)").arg(sweep.objectiveKey));
  if (h.objectives.isEmpty())
    placeholder(plot, QObject::tr("No finished trial with an objective yet"));
  if (colouring.byFigure()) {
    addFigureDots(plot, sweep, colouring, h.objectives.size());
  } else {
    QCPGraph* dots = plot->addGraph();
    dots->setName(QObject::tr("objective"));
    dots->setLineStyle(QCPGraph::lsNone);
    dots->setScatterStyle(discStyle(CurvePlot::seriesColor(0), 7, h.objectives.size()));
    dots->setData(h.trialNumbers, h.objectives, true);
  }
  setFigureScale(plot, colouring);
  QCPGraph* best = plot->addGraph();
  best->setName(minimize ? QObject::tr("best so far (min)") : QObject::tr("best so far (max)"));
  best->setLineStyle(QCPGraph::lsStepLeft);
  best->setPen(QPen(CurvePlot::seriesColor(2), 2));
  best->setData(h.trialNumbers, h.best, true);
  plot->legend->setVisible(true);
  plot->rescaleAxes();
  // Trials count from 0, as their numbers do.
  const double lastTrial = h.trialNumbers.isEmpty() ? 1.0 : h.trialNumbers.last();
  plot->xAxis->setRange(-0.5, std::max({1.0, lastTrial, double(sweep.trials.size() - 1)}) + 0.5);
  plot->yAxis->scaleRange(1.15, plot->yAxis->range().center());
  plot->replot();
}

namespace {

// The best trial (or PBT member) once more on top, bold and dark (the last line: the panel
// extends it with its streamed points), named `name` in the legend, with the grey of the pruned
// when `namePruned`.
void addBestLine(QCustomPlot* plot, TrialLines* lines, const QVector<double>& xs,
                 const QVector<double>& ys, const QString& name, bool namePruned) {
  const QPen pen(QColor(0x10, 0x2a, 0x6b), 2.6);
  TrialLines::Line line;
  line.pen = pen;
  line.xs = xs;
  line.ys = ys;
  lines->addLine(std::move(line));
  QCPGraph* entry = plot->addGraph();
  entry->setName(QObject::tr("best: %1").arg(name));
  entry->setPen(pen);
  entry->addToLegend();
  if (!namePruned) return;
  QCPGraph* grey = plot->addGraph();
  grey->setName(QObject::tr("pruned (grey)"));
  grey->setPen(QPen(QColor(0x99, 0x99, 0x99), 2));
  grey->addToLegend();
}

// A population-based training study's intermediate values: one line per member running across
// its segments (one trial each), as Ray Tune's PBT plots show a population; the best member (the
// end of the best chain, PbtData::best) once more on top.
TrialLines* drawMemberLines(QCustomPlot* plot, const SweepData& sweep, bool minimize, int* best,
                            int* bestLine) {
  const int population = std::max(1, sweep.pbt->lineage.population);
  const bool legend = population <= kLegendTrials;
  auto* lines = new TrialLines(plot->xAxis, plot->yAxis);
  for (int member = 0; member < population; ++member) {
    TrialLines::Line line;
    line.pen = QPen(CurvePlot::seriesColor(member), 1.8);
    intermediatePoints(sweep, member, line.xs, line.ys);
    if (legend) {
      QCPGraph* entry = plot->addGraph();
      entry->setName(QObject::tr("member %1").arg(member));
      entry->setPen(line.pen);
      entry->addToLegend();
    }
    lines->addLine(std::move(line));
  }
  const int top = bestTrial(sweep, minimize);
  int member = top >= 0 ? intermediateLine(sweep, top) : -1;
  if (!sweep.pbt->best.empty()) member = sweep.pbt->best.back().member;
  if (member >= 0 && member < population) {
    QVector<double> xs;
    QVector<double> ys;
    intermediatePoints(sweep, member, xs, ys);
    addBestLine(plot, lines, xs, ys, QObject::tr("member %1").arg(member), false);
  } else {
    member = -1;
  }
  plot->legend->setVisible(!sweep.trials.isEmpty());
  if (sweep.trials.isEmpty()) placeholder(plot, QObject::tr("No segments yet"));
  if (best != nullptr) *best = top;
  if (bestLine != nullptr) *bestLine = member;
  return lines;
}

}  // namespace

int intermediateLine(const SweepData& sweep, int index) {
  if (index < 0 || index >= sweep.trials.size()) return -1;
  if (!sweep.pbt) return index;
  const SweepTrial& trial = sweep.trials[index];
  const int population = std::max(1, sweep.pbt->lineage.population);
  if (trial.trialNumber) return int(*trial.trialNumber % population);
  for (const backend::PbtSegment& s : sweep.pbt->lineage.segments) {
    if (s.runId == trial.runId) return s.member;
  }
  return -1;
}

void intermediatePoints(const SweepData& sweep, int line, QVector<double>& xs,
                        QVector<double>& ys) {
  xs.clear();
  ys.clear();
  std::vector<std::pair<double, double>> points;
  for (int i = 0; i < int(sweep.trials.size()); ++i) {
    if (intermediateLine(sweep, i) != line) continue;
    const SweepTrial& trial = sweep.trials[i];
    for (qsizetype k = 0; k < std::min(trial.steps.size(), trial.values.size()); ++k)
      points.emplace_back(trial.steps[k], trial.values[k]);
  }
  // A member's segments cover successive step ranges: in step order, its curve runs across them.
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  xs.reserve(qsizetype(points.size()));
  ys.reserve(qsizetype(points.size()));
  for (const auto& [x, y] : points) {
    xs.append(x);
    ys.append(y);
  }
}

TrialLines* drawIntermediate(QCustomPlot* plot, const SweepData& sweep, bool minimize, int* dimmed,
                             int* best, int* bestLine) {
  resetPlot(plot);
  const bool many = sweep.trials.size() > kAntialiasedTrials;
  plot->setNotAntialiasedElements(many ? QCP::aePlottables : QCP::aeNone);
  plot->xAxis->setLabel(QObject::tr("step"));
  plot->yAxis->setLabel(sweep.objectiveKey);
  plot->setAutoAddPlottableToLegend(false);
  if (sweep.pbt) {
    TrialLines* lines = drawMemberLines(plot, sweep, minimize, best, bestLine);
    plot->rescaleAxes();
    plot->yAxis->scaleRange(1.1, plot->yAxis->range().center());
    plot->replot();
    if (dimmed != nullptr) *dimmed = 0;
    return lines;
  }
  const bool legend = sweep.trials.size() <= kLegendTrials;
  auto* lines = new TrialLines(plot->xAxis, plot->yAxis);
  int pruned = 0;
  int colour = 0;
  for (const SweepTrial& trial : sweep.trials) {
    TrialLines::Line line;
    const bool cut = trial.status == spec::RunStatus::pruned;
    const QColor c = cut ? QColor(0x99, 0x99, 0x99, 110) : CurvePlot::seriesColor(colour++);
    // Thousands of curves: 1-pixel solid pens take the rasteriser's fast path (wide or dashed
    // pens go through the stroker, seconds per replot); pruned ones stay grey.
    line.pen = many ? QPen(c, 0) : QPen(c, cut ? 1.2 : 1.8, cut ? Qt::DashLine : Qt::SolidLine);
    if (cut) {
      ++pruned;
      // The last value before pruning marked with a cross: where the pruner cut it.
      line.end = QCPScatterStyle(QCPScatterStyle::ssCross, QColor(0x70, 0x70, 0x70), 8);
    }
    line.xs = trial.steps;
    line.ys = trial.values;
    if (legend) {
      // A legible legend: an empty graph per trial carries its name and pen (draws nothing).
      QCPGraph* entry = plot->addGraph();
      entry->setName(trial.name);
      entry->setPen(line.pen);
      entry->addToLegend();
    }
    lines->addLine(std::move(line));
  }
  const int top = bestTrial(sweep, minimize);
  if (top >= 0) {
    const SweepTrial& t = sweep.trials[top];
    addBestLine(plot, lines, t.steps, t.values, t.name, !legend);
  }
  plot->legend->setVisible(!sweep.trials.isEmpty());
  if (sweep.trials.isEmpty()) placeholder(plot, QObject::tr("No trials"));
  plot->rescaleAxes();
  plot->yAxis->scaleRange(1.1, plot->yAxis->range().center());
  plot->replot();
  if (dimmed != nullptr) *dimmed = pruned;
  if (best != nullptr) *best = top;
  if (bestLine != nullptr) *bestLine = top;
  return lines;
}

int bestTrial(const SweepData& sweep, bool minimize) {
  int best = -1;
  for (qsizetype i = 0; i < sweep.trials.size(); ++i) {
    const SweepTrial& trial = sweep.trials[i];
    if (trial.status != spec::RunStatus::complete || !trial.objective) continue;
    const double v = *trial.objective;
    if (!std::isfinite(v)) continue;
    const double b = best < 0 ? 0.0 : *sweep.trials[best].objective;
    if (best < 0 || (minimize ? v < b : v > b)) best = int(i);
  }
  return best;
}

void appendIntermediate(TrialLines* lines, int index, const SeriesChunk& chunk) {
  lines->setPoints(index, chunk.steps, chunk.values, chunk.reset);
}

namespace {

// Each axis's name and, when there are values (`any`), its lowest and highest one as text.
QVector<ParallelAxisLabels> axisLabels(const QStringList& axes,
                                       const QVector<QStringList>& categories,
                                       const QVector<double>& lo, const QVector<double>& hi,
                                       bool any) {
  QVector<ParallelAxisLabels> labels(axes.size());
  for (qsizetype a = 0; a < axes.size(); ++a) {
    labels[a].name = axes[a];
    if (!any) continue;
    const auto text = [&](double v) {
      return categories[a].isEmpty() ? QString::number(v, 'g', 3)
                                     : categories[a].value(qsizetype(v));
    };
    labels[a].low = text(lo[a]);
    labels[a].high = text(hi[a]);
  }
  return labels;
}

}  // namespace

int drawParallel(QCustomPlot* plot, const SweepData& sweep, bool minimize,
                 const TrialColouring& colouring) {
  resetPlot(plot);
  plot->setAutoAddPlottableToLegend(false);  // no legend; and adding is quadratic
  plot->setNotAntialiasedElements(sweep.trials.size() > kAntialiasedTrials ? QCP::aePlottables
                                                                           : QCP::aeNone);
  plot->legend->setVisible(false);
  QStringList axes = paramNames(sweep);
  axes.append(QObject::tr("objective"));
  QVector<const SweepTrial*> done;
  for (const SweepTrial& trial : sweep.trials) {
    if (trial.objective) done.append(&trial);
  }
  // Raw values per axis (categorical ones as category indices), then min-max per axis.
  const qsizetype n = axes.size();
  QVector<QVector<double>> raw(done.size(), QVector<double>(n, 0.0));
  QVector<QStringList> categories(n);
  for (qsizetype t = 0; t < done.size(); ++t) {
    for (qsizetype a = 0; a + 1 < n; ++a) {
      raw[t][a] = paramNumber(done[t]->params.value(axes[a]), categories[a]);
    }
    raw[t][n - 1] = *done[t]->objective;
  }
  QVector<double> lo(n, qInf()), hi(n, -qInf());
  for (const auto& row : raw) {
    for (qsizetype a = 0; a < n; ++a) {
      lo[a] = std::min(lo[a], row[a]);
      hi[a] = std::max(hi[a], row[a]);
    }
  }
  const auto norm = [&](qsizetype a, double v) {
    return hi[a] > lo[a] ? (v - lo[a]) / (hi[a] - lo[a]) : 0.5;
  };
  // Draw the worst first so the best lines end up on top.
  QVector<qsizetype> order(done.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](qsizetype x, qsizetype y) {
    return minimize ? raw[x][n - 1] > raw[y][n - 1] : raw[x][n - 1] < raw[y][n - 1];
  });
  // One plottable for every line: 10,000 QCPCurves would take seconds to register and draw.
  const bool many = done.size() > kAntialiasedTrials;
  constexpr int kShades = 32;  // colours of a many-trial plot (the eye tells fewer apart)
  auto* lines = new TrialLines(plot->xAxis, plot->yAxis);
  QVector<double> xs(n);
  std::iota(xs.begin(), xs.end(), 0.0);
  for (qsizetype t : order) {
    TrialLines::Line line;
    line.xs = xs;
    line.ys.reserve(n);
    for (qsizetype a = 0; a < n; ++a) line.ys.append(norm(a, raw[t][a]));
    double goodness = norm(n - 1, raw[t][n - 1]);
    if (many) goodness = std::round(goodness * kShades) / kShades;  // runs of one pen: one call
    const QColor colour = colouring.byFigure()
                              ? colouring.colour(done[t]->runId, many ? kShades : 64)
                              : rankColor(minimize ? goodness : 1.0 - goodness);
    line.pen = QPen(colour, many ? 0.0 : 1.8);
    lines->addLine(std::move(line));
  }
  // The axes are the grid's vertical lines (a tick each); their names and value ranges are
  // labels laid out so they never overlap (parallellabels.h).
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (qsizetype a = 0; a < n; ++a) ticker->addTick(double(a), QString());
  setParallelLabels(plot, axisLabels(axes, categories, lo, hi, !done.isEmpty()));
  plot->xAxis->setTicker(ticker);
  plot->xAxis->grid()->setPen(QPen(QColor(0x70, 0x70, 0x70), 1));
  plot->xAxis->setRange(-0.5, double(n - 1) + 0.5);  // half an axis's room at each end
  plot->yAxis->setRange(-0.1, 1.1);
  plot->yAxis->setTickLabels(false);
  plot->yAxis->setLabel(QObject::tr("min → max per axis"));
  if (done.isEmpty()) placeholder(plot, QObject::tr("No finished trial with an objective yet"));
  setPlotTitle(plot, colouring.byFigure()
                         ? QObject::tr("Parallel coordinates (colour: %1)").arg(colouring.name)
                         : QObject::tr("Parallel coordinates (blue = best)"));
  setFigureScale(plot, colouring);
  plot->replot();
  return static_cast<int>(done.size());
}

int drawSlice(QCustomPlot* plot, const SweepData& sweep, const QString& param,
              const TrialColouring& colouring) {
  resetPlot(plot);
  plot->setAutoAddPlottableToLegend(false);
  plot->legend->setVisible(false);
  QStringList categories;
  QVector<double> xs, ys, order;
  for (qsizetype i = 0; i < sweep.trials.size(); ++i) {
    const SweepTrial& trial = sweep.trials[i];
    if (!trial.objective || !trial.params.contains(param)) continue;
    xs.append(paramNumber(trial.params.value(param), categories));
    ys.append(*trial.objective);
    order.append(double(i));
  }
  plot->xAxis->setLabel(param);
  plot->yAxis->setLabel(QObject::tr("objective"));
  // Later trials darker (or the figure's colour): one graph per shade (kShades of them), not
  // one per point, so 10,000 trials stay a handful of plottables.
  constexpr int kShades = 16;
  struct Group {
    QColor colour;
    QVector<double> xs, ys;
  };
  QVector<Group> groups;  // in the order of their first trial: the darker, later ones on top
  QHash<QRgb, qsizetype> groupOf;
  const double n = std::max<double>(1, double(sweep.trials.size()));
  for (qsizetype i = 0; i < xs.size(); ++i) {
    const int shade = std::clamp(int(order[i] / n * kShades), 0, kShades - 1);
    const qint64 runId = sweep.trials[qsizetype(order[i])].runId;
    const QColor colour = colouring.byFigure() ? colouring.colour(runId, kShades * 2)
                                               : rankColor(1.0 - (shade + 1.0) / kShades);
    auto at = groupOf.constFind(colour.rgb());
    if (at == groupOf.constEnd()) {
      at = groupOf.insert(colour.rgb(), groups.size());
      groups.append({colour, {}, {}});
    }
    groups[*at].xs.append(xs[i]);
    groups[*at].ys.append(ys[i]);
  }
  for (const Group& group : std::as_const(groups)) {
    QCPGraph* graph = plot->addGraph();
    graph->setLineStyle(QCPGraph::lsNone);
    graph->setScatterStyle(discStyle(group.colour, 8, xs.size()));
    graph->setData(group.xs, group.ys);  // sorts by x once
  }
  setFigureScale(plot, colouring);
  if (!categories.isEmpty()) {
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (qsizetype c = 0; c < categories.size(); ++c) ticker->addTick(double(c), categories[c]);
    plot->xAxis->setTicker(ticker);
  }
  if (xs.isEmpty()) placeholder(plot, QObject::tr("No finished trial sets %1").arg(param));
  plot->rescaleAxes();
  plot->xAxis->scaleRange(1.15, plot->xAxis->range().center());
  plot->yAxis->scaleRange(1.15, plot->yAxis->range().center());
  plot->replot();
  return static_cast<int>(xs.size());
}

QString hoursLabel(const SweepData& sweep) {
  bool gpu = false;
  bool cpu = false;
  for (const SweepTrial& t : sweep.trials) {
    if (t.started) (t.usage.gpu ? gpu : cpu) = true;
  }
  if (gpu && cpu) return QObject::tr("Device-hours");
  return cpu ? QObject::tr("CPU-hours") : QObject::tr("GPU-hours");
}

QVector<qsizetype> costParetoFront(const SweepData& sweep, bool minimize) {
  // (hours, objective, index) of each started trial with a finite objective.
  struct Point {
    double hours;
    double value;
    qsizetype index;
  };
  QVector<Point> points;
  for (qsizetype i = 0; i < sweep.trials.size(); ++i) {
    const SweepTrial& t = sweep.trials[i];
    const double value = t.objective.value_or(qQNaN());
    if (t.started && std::isfinite(value)) points.append({t.usage.hours, value, i});
  }
  const auto better = [minimize](double a, double b) { return minimize ? a < b : a > b; };
  std::sort(points.begin(), points.end(), [&](const Point& x, const Point& y) {
    if (x.hours != y.hours) return x.hours < y.hours;
    return better(x.value, y.value);
  });
  // Cheapest first: a trial is on the front when it beats every cheaper one.
  QVector<qsizetype> front;
  double best = qQNaN();
  for (const Point& p : std::as_const(points)) {
    if (!front.isEmpty() && !better(p.value, best)) continue;
    front.append(p.index);
    best = p.value;
  }
  return front;
}

CostPareto drawCostPareto(QCustomPlot* plot, const SweepData& sweep, bool minimize,
                          const QString& hoursLabel) {
  resetPlot(plot);
  plot->setAutoAddPlottableToLegend(false);
  plot->legend->setVisible(false);
  plot->xAxis->setLabel(hoursLabel);
  plot->yAxis->setLabel(QObject::tr("objective"));
  QVector<double> xs, ys;
  for (const SweepTrial& t : sweep.trials) {
    if (!t.objective || !std::isfinite(*t.objective) || !t.started) continue;
    xs.append(t.usage.hours);
    ys.append(*t.objective);
  }
  QCPGraph* all = plot->addGraph();
  all->setLineStyle(QCPGraph::lsNone);
  all->setScatterStyle(discStyle(QColor(70, 110, 170), 8, xs.size()));
  all->setData(xs, ys);
  const QVector<qsizetype> front = costParetoFront(sweep, minimize);
  QVector<double> fx, fy;
  for (const qsizetype i : front) {
    fx.append(sweep.trials[i].usage.hours);
    fy.append(sweep.trials[i].objective.value_or(qQNaN()));
  }
  QCPGraph* line = plot->addGraph();
  line->setLineStyle(QCPGraph::lsStepLeft);
  line->setPen(QPen(QColor(200, 40, 40), 2));
  line->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCircle, QColor(200, 40, 40), QColor(200, 40, 40), 9));
  line->setData(fx, fy, true);
  if (xs.isEmpty()) placeholder(plot, QObject::tr("No finished trial has device-hours yet"));
  plot->rescaleAxes();
  plot->xAxis->scaleRange(1.15, plot->xAxis->range().center());
  plot->yAxis->scaleRange(1.15, plot->yAxis->range().center());
  plot->replot();
  return {static_cast<int>(xs.size()), static_cast<int>(front.size())};
}

}  // namespace shardscope::ui::compare
