#include "ui/plots/plotaxes.h"

#include <QCoreApplication>
#include <QDateTime>

#include <algorithm>
#include <cmath>
#include <vector>

namespace shardscope::ui {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

QString tr(const char* text) { return QCoreApplication::translate("PlotAxes", text); }

// Per axis: its name in the menu, and its label under the plot.
struct XAxisText {
  XAxis axis;
  const char* name;
  const char* label;
};
constexpr XAxisText kXAxisTexts[] = {
    {XAxis::step, "step", "step"},
    {XAxis::wallTime, "wall time", "wall time"},
    {XAxis::relativeTime, "relative time", "time since start (h:mm:ss)"},
    {XAxis::tokens, "tokens seen", "tokens seen (est. from tokens/s)"},
};

const XAxisText* textOf(XAxis axis) {
  for (const XAxisText& t : kXAxisTexts)
    if (t.axis == axis) return &t;
  return nullptr;
}

}  // namespace

QList<XAxis> xAxes() {
  QList<XAxis> axes;
  for (const XAxisText& t : kXAxisTexts) axes << t.axis;
  return axes;
}

QString xAxisName(XAxis axis) {
  const XAxisText* t = textOf(axis);
  return t ? tr(t->name) : QString();
}

QString xAxisLabel(XAxis axis) {
  const XAxisText* t = textOf(axis);
  return t ? tr(t->label) : QString();
}

double RunClock::start() const {
  if (std::isfinite(startedAt) && std::isfinite(firstTime)) return std::min(startedAt, firstTime);
  if (std::isfinite(startedAt)) return startedAt;
  if (std::isfinite(firstTime)) return firstTime;
  return times.isEmpty() ? kNaN : times.first();
}

double RunClock::timeAt(double step) const {
  if (steps.isEmpty() || steps.size() != times.size()) return kNaN;
  if (step <= steps.first()) return times.first();
  if (step >= steps.last()) return times.last();
  const auto after = std::lower_bound(steps.cbegin(), steps.cend(), step);
  const auto i = after - steps.cbegin();
  const double s0 = steps[i - 1];
  const double s1 = steps[i];
  const double f = s1 > s0 ? (step - s0) / (s1 - s0) : 0.0;
  return times[i - 1] + f * (times[i] - times[i - 1]);
}

double RunClock::tokensPerStep() const {
  std::vector<double> perStep;
  const qsizetype n = std::min({steps.size(), times.size(), tps.size()});
  for (qsizetype i = 1; i < n; ++i) {
    const double ds = steps[i] - steps[i - 1];
    const double dt = times[i] - times[i - 1];
    const double estimate = tps[i] * dt / ds;
    if (ds > 0 && dt > 0 && std::isfinite(estimate) && estimate > 0) perStep.push_back(estimate);
  }
  if (perStep.empty()) return kNaN;
  const auto middle = perStep.begin() + std::ptrdiff_t(perStep.size() / 2);
  std::nth_element(perStep.begin(), middle, perStep.end());
  return *middle;
}

QVector<double> mapX(XAxis axis, const RunClock& clock, const QVector<double>& steps,
                     const QVector<double>& times) {
  if (axis == XAxis::step) return steps;
  QVector<double> xs(steps.size(), kNaN);
  const bool ownTimes = times.size() == steps.size();
  if (axis == XAxis::tokens) {
    const double perStep = clock.tokensPerStep();
    for (qsizetype i = 0; i < steps.size(); ++i) xs[i] = steps[i] * perStep;
    return xs;
  }
  const double origin = axis == XAxis::relativeTime ? clock.start() : 0.0;
  for (qsizetype i = 0; i < steps.size(); ++i)
    xs[i] = (ownTimes ? times[i] : clock.timeAt(steps[i])) - origin;
  return xs;
}

QString xText(XAxis axis, double x) {
  if (!std::isfinite(x)) return QStringLiteral("?");
  switch (axis) {
    case XAxis::step:
      return tr("step %1").arg(QString::number(x, 'f', 0));
    case XAxis::wallTime:
      return QDateTime::fromMSecsSinceEpoch(qint64(x * 1000)).toString("yyyy-MM-dd hh:mm:ss");
    case XAxis::relativeTime: {
      const auto total = qint64(std::llround(std::max(0.0, x)));
      return QStringLiteral("%1:%2:%3")
          .arg(total / 3600)
          .arg((total / 60) % 60, 2, 10, QLatin1Char('0'))
          .arg(total % 60, 2, 10, QLatin1Char('0'));
    }
    case XAxis::tokens:
      return tr("%1 tokens").arg(QString::number(x, 'g', 4));
  }
  return {};
}

}  // namespace shardscope::ui
