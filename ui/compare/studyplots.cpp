#include "ui/compare/studyplots.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "search/importance.h"
#include "search/space.h"
#include "ui/compare/compareplots.h"
#include "ui/widgets/curveplot.h"

namespace shardscope::ui::compare {

namespace {

constexpr double kLogSpan = 100.0;  // values spanning this factor get a log axis

// Sequential colour scale for the objective: dark blue (best) to yellow (worst).
QCPColorGradient objectiveGradient(bool minimize) {
  QCPColorGradient g;
  g.setColorStopAt(0.0, QColor(0x1f, 0x3a, 0x93));
  g.setColorStopAt(0.5, QColor(0x2a, 0x9d, 0x8f));
  g.setColorStopAt(1.0, QColor(0xf4, 0xd3, 0x5e));
  if (!minimize) g = g.inverted();
  return g;
}

search::ParamValue toParamValue(const search::Param& p, const QJsonValue& v) {
  switch (p.type) {
    case search::ParamType::Float:
      return v.toDouble();
    case search::ParamType::Int:
      return static_cast<std::int64_t>(std::llround(v.toDouble()));
    case search::ParamType::Bool:
      return v.toBool();
    case search::ParamType::Categorical:
      break;
  }
  for (const auto& choice : p.choices) {
    if (std::holds_alternative<std::string>(choice) && v.isString() &&
        std::get<std::string>(choice) == v.toString().toStdString())
      return choice;
    if (std::holds_alternative<bool>(choice) && v.isBool()) return v.toBool();
    if (std::holds_alternative<std::int64_t>(choice) && v.isDouble())
      return static_cast<std::int64_t>(std::llround(v.toDouble()));
    if (std::holds_alternative<double>(choice) && v.isDouble()) return v.toDouble();
  }
  return v.toString().toStdString();
}

// A search space read off the values themselves, for a sweep whose [search] is not stored.
search::SearchSpace inferSpace(const QVector<TrialPoint>& trials, bool minimize) {
  search::SearchSpace space;
  space.objectives.push_back(
      {"objective", minimize ? search::Direction::Minimize : search::Direction::Maximize});
  QStringList names;
  for (const TrialPoint& t : trials) {
    for (const QString& key : t.params.keys())
      if (compare::isAxisParam(key) && !names.contains(key)) names.append(key);
  }
  names.sort();
  for (const QString& name : names) {
    search::Param p;
    p.name = name.toStdString();
    const ParamAxis axis = paramAxis(trials, name);
    if (!axis.categories.isEmpty()) {
      p.type = search::ParamType::Categorical;
      for (const QString& c : axis.categories) p.choices.emplace_back(c.toStdString());
    } else {
      double lo = std::numeric_limits<double>::infinity();
      double hi = -lo;
      bool integral = true;
      for (const TrialPoint& t : trials) {
        const double v = t.params.value(name).toDouble();
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        integral = integral && v == std::floor(v);
      }
      p.type = integral ? search::ParamType::Int : search::ParamType::Float;
      p.low = lo;
      p.high = hi > lo ? hi : lo + 1.0;
      p.log = axis.log;
    }
    space.params.push_back(std::move(p));
  }
  return space;
}

void setAxisTicks(QCPAxis* axis, const ParamAxis& p, double lo, double hi) {
  if (!p.categories.isEmpty()) {
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (qsizetype c = 0; c < p.categories.size(); ++c) ticker->addTick(double(c), p.categories[c]);
    axis->setTicker(ticker);
  } else if (p.log) {
    // Coordinates are log10(value): label the decades with the values themselves.
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    const auto first = static_cast<int>(std::ceil(lo));
    const auto last = static_cast<int>(std::floor(hi));
    for (int d = first; d <= last; ++d)
      ticker->addTick(double(d), QString::number(std::pow(10.0, d), 'g', 3));
    axis->setTicker(ticker);
  } else {
    axis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  axis->setLabel(p.log ? QObject::tr("%1 (log scale)").arg(p.name) : p.name);
}

}  // namespace

QVector<TrialPoint> finishedTrials(const SweepData& sweep, const StudyInfo& study) {
  const bool isStudy = study.studyId >= 0 && study.experimentId == sweep.experimentId;
  // A group's runs may come from different experiments: the contour and the importance are over
  // the parameters they all share (paramNames), as the parallel coordinates and slice are.
  const bool group = groupOfSweep(sweep.experimentId) >= 0;
  const QStringList shared = group ? paramNames(sweep) : QStringList();
  QVector<TrialPoint> out;
  for (const SweepTrial& trial : sweep.trials) {
    if (trial.status != spec::RunStatus::complete) continue;
    TrialPoint point{trial.runId, trial.name, trial.params, {}};
    if (group) {
      for (const QString& key : trial.params.keys()) {
        if (!shared.contains(key)) point.params.remove(key);
      }
    }
    if (isStudy && study.objectiveValues.contains(trial.runId)) {
      point.values = study.objectiveValues.value(trial.runId);
    } else if (trial.objective) {
      point.values = {*trial.objective};
    }
    if (isStudy && study.trialNumbers.contains(trial.runId))
      point.label = QStringLiteral("#%1").arg(study.trialNumbers.value(trial.runId));
    const bool finite = std::all_of(point.values.begin(), point.values.end(),
                                    [](double v) { return std::isfinite(v); });
    if (!point.values.empty() && finite) out.append(std::move(point));
  }
  return out;
}

QVector<int> paretoFront(const QVector<QPointF>& points, bool minimizeX, bool minimizeY) {
  const auto better = [](double a, double b, bool minimize) { return minimize ? a < b : a > b; };
  const auto noWorse = [](double a, double b, bool minimize) { return minimize ? a <= b : a >= b; };
  QVector<int> front;
  for (int i = 0; i < points.size(); ++i) {
    bool dominated = false;
    for (int j = 0; j < points.size() && !dominated; ++j) {
      const QPointF& a = points[j];
      const QPointF& b = points[i];
      dominated = j != i && noWorse(a.x(), b.x(), minimizeX) && noWorse(a.y(), b.y(), minimizeY) &&
                  (better(a.x(), b.x(), minimizeX) || better(a.y(), b.y(), minimizeY));
    }
    if (!dominated) front.append(i);
  }
  return front;
}

double ParamAxis::coord(const QJsonValue& value) const {
  if (!categories.isEmpty()) {
    const QString text = value.isString() ? value.toString()
                         : value.isBool() ? (value.toBool() ? "true" : "false")
                                          : QString::number(value.toDouble());
    return double(categories.indexOf(text));
  }
  const double v = value.toDouble();
  return log ? std::log10(v) : v;
}

ParamAxis paramAxis(const QVector<TrialPoint>& trials, const QString& name) {
  ParamAxis axis;
  axis.name = name;
  double lo = std::numeric_limits<double>::infinity();
  double hi = 0;
  bool numeric = true;
  for (const TrialPoint& t : trials) {
    const QJsonValue v = t.params.value(name);
    if (!v.isDouble()) numeric = false;
    if (v.isDouble()) {
      lo = std::min(lo, v.toDouble());
      hi = std::max(hi, v.toDouble());
    }
  }
  if (!numeric) {
    for (const TrialPoint& t : trials) {
      const QJsonValue v = t.params.value(name);
      const QString text = v.isString() ? v.toString()
                           : v.isBool() ? (v.toBool() ? "true" : "false")
                                        : QString::number(v.toDouble());
      if (!axis.categories.contains(text)) axis.categories.append(text);
    }
    return axis;
  }
  axis.log = lo > 0 && hi / lo >= kLogSpan;
  return axis;
}

double ContourData::valueAt(double xc, double yc) const {
  if (nx == 0 || ny == 0) return qQNaN();
  const int i = std::clamp(int((xc - xLo) / (xHi - xLo) * nx), 0, nx - 1);
  const int j = std::clamp(int((yc - yLo) / (yHi - yLo) * ny), 0, ny - 1);
  return cells[j * nx + i];
}

ContourData contourData(const QVector<TrialPoint>& trials, const QString& xParam,
                        const QString& yParam, int objective, int cells) {
  ContourData d;
  d.x = paramAxis(trials, xParam);
  d.y = paramAxis(trials, yParam);
  for (const TrialPoint& t : trials) {
    if (!t.params.contains(xParam) || !t.params.contains(yParam)) continue;
    if (objective >= int(t.values.size())) continue;
    d.points.append({d.x.coord(t.params.value(xParam)), d.y.coord(t.params.value(yParam))});
    d.values.append(t.values[size_t(objective)]);
  }
  if (d.points.isEmpty()) return d;
  double xl = qInf(), xh = -qInf(), yl = qInf(), yh = -qInf();
  for (const QPointF& p : std::as_const(d.points)) {
    xl = std::min(xl, p.x());
    xh = std::max(xh, p.x());
    yl = std::min(yl, p.y());
    yh = std::max(yh, p.y());
  }
  // Half a cell (or half a category) of margin so the outermost trials sit inside the map.
  const auto pad = [](double& lo, double& hi, bool categorical) {
    const double m = categorical ? 0.5 : (hi > lo ? 0.05 * (hi - lo) : 0.5);
    lo -= m;
    hi += m;
  };
  pad(xl, xh, !d.x.categories.isEmpty());
  pad(yl, yh, !d.y.categories.isEmpty());
  d.xLo = xl, d.xHi = xh, d.yLo = yl, d.yHi = yh;
  d.nx = d.ny = cells;
  d.cells.resize(qsizetype(cells) * cells);
  for (int j = 0; j < cells; ++j) {
    const double yc = yl + (j + 0.5) / cells * (yh - yl);
    for (int i = 0; i < cells; ++i) {
      const double xc = xl + (i + 0.5) / cells * (xh - xl);
      double best = qInf();
      for (qsizetype k = 0; k < d.points.size(); ++k) {
        const double dx = (d.points[k].x() - xc) / (xh - xl);
        const double dy = (d.points[k].y() - yc) / (yh - yl);
        if (dx * dx + dy * dy < best) {
          best = dx * dx + dy * dy;
          d.cells[j * cells + i] = d.values[k];
        }
      }
    }
  }
  return d;
}

namespace {

// The [search] tables of an experiment file (a study stores the whole experiment).
std::string searchSection(const QString& config) {
  std::string out;
  bool inSearch = false;
  for (const QString& line : config.split(QLatin1Char('\n'))) {
    const QString t = line.trimmed();
    if (t.startsWith(QLatin1Char('['))) {
      inSearch = t.startsWith(QStringLiteral("[search]")) ||
                 t.startsWith(QStringLiteral("[search.")) ||
                 t.startsWith(QStringLiteral("[[search."));
    }
    if (inSearch) out += line.toStdString() + '\n';
  }
  return out;
}

}  // namespace

Result<QVector<Importance>> importance(const QVector<TrialPoint>& trials, const QString& config,
                                       const QString& objectiveName, bool minimize, int objective) {
  search::SearchSpace space;
  std::size_t spaceObjective = 0;
  auto parsed = search::parse_search_space(searchSection(config), "study");
  const auto named = [&](const search::SearchSpace& s) {
    for (std::size_t i = 0; i < s.objectives.size(); ++i)
      if (QString::fromStdString(s.objectives[i].metric) == objectiveName) return int(i);
    return -1;
  };
  if (parsed && !parsed->params.empty() && named(*parsed) >= 0) {
    spaceObjective = std::size_t(named(*parsed));
    space = std::move(*parsed);
  } else {
    space = inferSpace(trials, minimize);
  }
  std::vector<search::Trial> converted;
  for (const TrialPoint& t : trials) {
    if (objective >= int(t.values.size())) continue;
    search::Trial trial;
    trial.number = std::int64_t(converted.size());
    trial.state = search::TrialState::Complete;
    for (const search::Param& p : space.params) {
      const QString key = QString::fromStdString(p.name);
      if (t.params.contains(key)) trial.params[p.name] = toParamValue(p, t.params.value(key));
    }
    trial.values.assign(space.objectives.size(), 0.0);
    trial.values[spaceObjective] = t.values[size_t(objective)];
    converted.push_back(std::move(trial));
  }
  search::ImportanceOptions options;
  options.objective = spaceObjective;
  // With few trials the top 10% is one trial; a quarter keeps the estimate meaningful.
  options.target_quantile = converted.size() < 40 ? 0.25 : 0.1;
  auto ranked = search::param_importance(space, converted, options);
  if (!ranked) return fail("importance: " + ranked.message());
  QVector<Importance> out;
  for (const auto& r : *ranked) out.append({QString::fromStdString(r.name), r.importance});
  return out;
}

void drawContour(QCustomPlot* plot, const ContourData& data, bool minimize,
                 const QString& objectiveName) {
  resetPlot(plot);
  // The colour scale is a layout element beside the axis rect: drop the previous draw's.
  QCPLayoutGrid* layout = plot->plotLayout();
  if (auto* old = layout->columnCount() > 1 && layout->rowCount() > 1
                      ? qobject_cast<QCPColorScale*>(layout->element(1, 1))
                      : nullptr) {
    plot->plotLayout()->remove(old);
    plot->plotLayout()->simplify();
  }
  plot->legend->setVisible(false);
  plot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  if (data.points.size() < 2) {
    placeholder(plot, QObject::tr("Needs 2 finished trials that set both parameters"));
    plot->replot();
    return;
  }
  auto* map = new QCPColorMap(plot->xAxis, plot->yAxis);
  map->data()->setSize(data.nx, data.ny);
  map->data()->setRange(QCPRange(data.xLo + 0.5 * (data.xHi - data.xLo) / data.nx,
                                 data.xHi - 0.5 * (data.xHi - data.xLo) / data.nx),
                        QCPRange(data.yLo + 0.5 * (data.yHi - data.yLo) / data.ny,
                                 data.yHi - 0.5 * (data.yHi - data.yLo) / data.ny));
  for (int j = 0; j < data.ny; ++j) {
    for (int i = 0; i < data.nx; ++i) map->data()->setCell(i, j, data.cells[j * data.nx + i]);
  }
  map->setGradient(objectiveGradient(minimize));
  map->setInterpolate(false);
  auto* scale = new QCPColorScale(plot);
  plot->plotLayout()->addElement(1, 1, scale);
  scale->setType(QCPAxis::atRight);
  scale->axis()->setLabel(QObject::tr("%1 (dark = best)").arg(objectiveName));
  map->setColorScale(scale);  // takes the scale's range: rescale after
  map->rescaleDataRange(true);
  auto* group = new QCPMarginGroup(plot);
  plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, group);
  scale->setMarginGroup(QCP::msBottom | QCP::msTop, group);
  QCPGraph* dots = plot->addGraph();
  dots->setLineStyle(QCPGraph::lsNone);
  dots->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::white, 1.5),
                                        QBrush(QColor(0, 0, 0, 160)), 7));
  QVector<double> xs, ys;
  for (const QPointF& p : data.points) {
    xs.append(p.x());
    ys.append(p.y());
  }
  dots->setData(xs, ys);
  setAxisTicks(plot->xAxis, data.x, data.xLo, data.xHi);
  setAxisTicks(plot->yAxis, data.y, data.yLo, data.yHi);
  plot->xAxis->setRange(data.xLo, data.xHi);
  plot->yAxis->setRange(data.yLo, data.yHi);
  plot->replot();
}

void drawImportance(QCustomPlot* plot, const Result<QVector<Importance>>& bars) {
  resetPlot(plot);
  plot->legend->setVisible(false);
  plot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  plot->yAxis->setTickLabels(true);
  if (!bars || bars->isEmpty()) {
    placeholder(plot, bars ? QObject::tr("No parameter") : QString::fromStdString(bars.message()));
    plot->replot();
    return;
  }
  // Horizontal bars, the most important at the top.
  auto* bar = new QCPBars(plot->yAxis, plot->xAxis);
  bar->setPen(Qt::NoPen);
  bar->setBrush(CurvePlot::seriesColor(0));
  bar->setWidth(0.6);
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const qsizetype n = bars->size();
  for (qsizetype i = 0; i < n; ++i) {
    const double pos = double(n - 1 - i);
    bar->addData(pos, (*bars)[i].share);
    ticker->addTick(pos, (*bars)[i].name);
    auto* label = new QCPItemText(plot);
    label->position->setCoords((*bars)[i].share, pos);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    label->setPadding(QMargins(4, 0, 0, 0));
    label->setText(QString::number((*bars)[i].share * 100.0, 'f', 0) + QLatin1Char('%'));
    label->setFont(QFont(plot->font().family(), 8));
  }
  plot->yAxis->setTicker(ticker);
  plot->yAxis->setLabel(QString());
  plot->yAxis->setRange(-0.6, double(n) - 0.4);
  plot->xAxis->setLabel(QObject::tr("share of importance (PED-ANOVA)"));
  plot->xAxis->setRange(0, 1.15);
  plot->replot();
}

void drawPareto(QCustomPlot* plot, const QVector<QPointF>& points, const QVector<int>& front,
                const QString& xName, const QString& yName, const QString& emptyText) {
  resetPlot(plot);
  plot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  plot->xAxis->setLabel(xName);
  plot->yAxis->setLabel(yName);
  if (points.isEmpty()) {
    plot->legend->setVisible(false);
    placeholder(plot, emptyText);
    plot->replot();
    return;
  }
  QVector<double> xs, ys, fx, fy;
  for (const QPointF& p : points) {
    xs.append(p.x());
    ys.append(p.y());
  }
  QVector<int> sorted = front;
  std::sort(sorted.begin(), sorted.end(),
            [&](int a, int b) { return points[a].x() < points[b].x(); });
  for (int i : sorted) {
    fx.append(points[i].x());
    fy.append(points[i].y());
  }
  QCPGraph* all = plot->addGraph();
  all->setName(QObject::tr("dominated"));
  all->setLineStyle(QCPGraph::lsNone);
  all->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(0xa0, 0xa0, 0xa0), 7));
  all->setData(xs, ys);
  QCPGraph* best = plot->addGraph();
  best->setName(QObject::tr("Pareto front (%1)").arg(front.size()));
  best->setPen(QPen(QColor(0xd6, 0x27, 0x28), 1.5, Qt::DashLine));
  best->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(0xd6, 0x27, 0x28), 10));
  best->setData(fx, fy, true);
  plot->legend->setVisible(true);
  plot->rescaleAxes();
  plot->xAxis->scaleRange(1.15, plot->xAxis->range().center());
  plot->yAxis->scaleRange(1.15, plot->yAxis->range().center());
  plot->replot();
}

}  // namespace shardscope::ui::compare
