// LineBounds: the bounds of many polylines' finite points, widened as points arrive, and the
// key and value ranges a QCPAbstractPlottable that draws them reports (DensityLines, and
// compare's TrialLines). A range in one sign domain (a log axis asks for the positive one) is
// counted over the lines when asked; the range of every point is kept.
#pragma once

#include <qcustomplot.h>

#include <QVector>

#include <algorithm>
#include <cmath>
#include <optional>

namespace shardscope::ui {

class LineBounds {
 public:
  void clear() {
    m_keys.reset();
    m_values.reset();
  }
  /// Widens the bounds by points [from, min(xs, ys)) of a line; NaN and infinities are gaps.
  void grow(const QVector<double>& xs, const QVector<double>& ys, qsizetype from) {
    const qsizetype n = std::min(xs.size(), ys.size());
    for (qsizetype i = from; i < n; ++i) {
      if (!std::isfinite(xs[i]) || !std::isfinite(ys[i])) continue;
      m_keys = unite(m_keys, xs[i]);
      m_values = unite(m_values, ys[i]);
    }
  }
  /// The keys' range in `domain` over `lines` (each with `xs`), as getKeyRange reports it.
  template <class Lines>
  QCPRange keys(bool& found, QCP::SignDomain domain, const Lines& lines) const {
    return range(found, domain, m_keys, lines, [](const auto& line) { return &line.xs; });
  }
  /// The values' range in `domain` over `lines` (each with `ys`), as getValueRange reports it.
  template <class Lines>
  QCPRange values(bool& found, QCP::SignDomain domain, const Lines& lines) const {
    return range(found, domain, m_values, lines, [](const auto& line) { return &line.ys; });
  }

 private:
  static QCPRange unite(const std::optional<QCPRange>& range, double v) {
    return range ? QCPRange(std::min(range->lower, v), std::max(range->upper, v)) : QCPRange(v, v);
  }
  static bool inDomain(double v, QCP::SignDomain domain) {
    return domain == QCP::sdBoth || (domain == QCP::sdPositive && v > 0) ||
           (domain == QCP::sdNegative && v < 0);
  }
  template <class Lines, class Coords>
  static QCPRange range(bool& found, QCP::SignDomain domain, const std::optional<QCPRange>& all,
                        const Lines& lines, Coords coords) {
    if (domain == QCP::sdBoth) {
      found = all.has_value();
      return all.value_or(QCPRange());
    }
    std::optional<QCPRange> out;
    for (const auto& line : lines) {
      for (const double v : *coords(line)) {
        if (std::isfinite(v) && inDomain(v, domain)) out = unite(out, v);
      }
    }
    found = out.has_value();
    return out.value_or(QCPRange());
  }

  std::optional<QCPRange> m_keys;
  std::optional<QCPRange> m_values;
};

}  // namespace shardscope::ui
