// PED-ANOVA: grid counts per parameter, a Scott-bandwidth Parzen estimator on the grid, and the
// Pearson divergence between the top trials' and the region's estimates.
#include "search/importance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace shardscope::search {
namespace {

constexpr double kPriorWeight = 1.0;   // weight of the uniform prior kernel
constexpr int kMinTrialsInRegime = 2;  // a parameter active in fewer trials is not assessed

double raw_number(const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return 0.0;
}

// Grid cells of a parameter: the choices of a categorical, else at most `steps` cells (fewer
// for a coarse int or stepped float).
int grid_size(const Param& p, int steps) {
  if (!p.numeric()) return static_cast<int>(p.cardinality());
  if (p.type == ParamType::Int && p.log) {
    const int cells = static_cast<int>(std::ceil(std::log2(p.high - p.low + 1.0))) + 1;
    return std::min(cells, steps);
  }
  if (p.step > 0.0) {
    return std::min(static_cast<int>(std::lround((p.high - p.low) / p.step)) + 1, steps);
  }
  return steps;
}

// Counts of the trials' values of `p` per grid cell.
std::vector<double> grid_counts(const Param& p, const std::vector<const Trial*>& trials,
                                int cells) {
  std::vector<double> counts(static_cast<std::size_t>(cells), 0.0);
  const double lo = p.log ? std::log(p.low) : p.low;
  const double hi = p.log ? std::log(p.high) : p.high;
  for (const Trial* t : trials) {
    const ParamValue& v = t->params.at(p.name);
    int cell = 0;
    if (!p.numeric()) {
      cell = static_cast<int>(p.to_internal(v));
    } else if (cells > 1) {
      const double x = p.log ? std::log(raw_number(v)) : raw_number(v);
      // Nearest cell centre; a midpoint goes to the lower cell.
      cell = static_cast<int>(std::ceil((x - lo) / ((hi - lo) / (cells - 1)) - 0.5));
    }
    counts[static_cast<std::size_t>(std::clamp(cell, 0, cells - 1))] += 1.0;
  }
  return counts;
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Scott's rule bandwidth of weighted grid indices, floored so 90% of a kernel spans a cell.
double scott_sigma(const std::vector<double>& obs, const std::vector<double>& w) {
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  double mean = 0.0;
  for (std::size_t i = 0; i < obs.size(); ++i) mean += obs[i] * w[i] / total;
  double var = 0.0;
  for (std::size_t i = 0; i < obs.size(); ++i) var += (obs[i] - mean) * (obs[i] - mean) * w[i];
  const double sd = std::sqrt(var / std::max(1.0, total - 1.0));
  // Interquartile range from the cumulative weights (whole-count quartile positions).
  std::vector<double> cum(w.size());
  std::partial_sum(w.begin(), w.end(), cum.begin());
  const double q1 = std::floor(total / 4.0);
  const double q3 = std::floor(total * 3.0 / 4.0);
  const auto i1 =
      static_cast<std::size_t>(std::lower_bound(cum.begin(), cum.end(), q1) - cum.begin());
  const auto i3 =
      static_cast<std::size_t>(std::upper_bound(cum.begin(), cum.end(), q3) - cum.begin());
  const double iqr = obs[std::min(obs.size() - 1, i3)] - obs[std::min(obs.size() - 1, i1)];
  const double sigma = 1.059 * std::min(iqr / 1.34, sd) * std::pow(total, -0.2);
  return std::max(sigma, 0.5 / 1.64);
}

// Probability of each grid cell under the Parzen estimator of `counts`: one kernel per occupied
// cell weighted by its count, plus the prior (uniform for categoricals, a wide normal else).
std::vector<double> parzen_on_grid(const std::vector<double>& counts, bool categorical) {
  const std::size_t cells = counts.size();
  std::vector<double> obs;
  std::vector<double> w;
  for (std::size_t k = 0; k < cells; ++k) {
    if (counts[k] > 0.0) {
      obs.push_back(static_cast<double>(k));
      w.push_back(counts[k]);
    }
  }
  std::vector<double> pdf(cells, 0.0);
  if (obs.empty()) return std::vector<double>(cells, 1.0 / static_cast<double>(cells));
  const double total = std::accumulate(w.begin(), w.end(), 0.0) + kPriorWeight;
  const double n_kernels = static_cast<double>(obs.size()) + 1.0;
  const double hi = static_cast<double>(cells) - 1.0;
  const double sigma = categorical ? 0.0 : scott_sigma(obs, w);
  for (std::size_t i = 0; i <= obs.size(); ++i) {
    const bool prior = i == obs.size();
    const double weight = (prior ? kPriorWeight : w[i]) / total;
    if (categorical) {
      // Each kernel: prior_weight / n_kernels on every choice, +1 on its own, normalised.
      const double norm = kPriorWeight / n_kernels * static_cast<double>(cells) + (prior ? 0 : 1);
      for (std::size_t k = 0; k < cells; ++k) {
        const double mass = kPriorWeight / n_kernels + (!prior && obs[i] == k ? 1.0 : 0.0);
        pdf[k] += weight * mass / norm;
      }
      continue;
    }
    const double mu = prior ? hi / 2.0 : obs[i];
    const double s = prior ? hi + 1.0 : sigma;
    const double z = normal_cdf((hi + 0.5 - mu) / s) - normal_cdf((-0.5 - mu) / s);
    for (std::size_t k = 0; k < cells; ++k) {
      const double x = static_cast<double>(k);
      pdf[k] += weight * (normal_cdf((x + 0.5 - mu) / s) - normal_cdf((x - 0.5 - mu) / s)) / z;
    }
  }
  return pdf;
}

// Pearson divergence of the top trials' grid distribution from the region's.
double pearson_divergence(const Param& p, const std::vector<const Trial*>& top,
                          const std::vector<const Trial*>& region, int steps) {
  const int cells = grid_size(p, steps);
  if (cells < 2) return 0.0;
  const std::vector<double> pt = parzen_on_grid(grid_counts(p, top, cells), !p.numeric());
  const std::vector<double> pr = parzen_on_grid(grid_counts(p, region, cells), !p.numeric());
  double d = 0.0;
  for (std::size_t k = 0; k < pt.size(); ++k) {
    const double a = pt[k] + 1e-12;
    const double b = pr[k] + 1e-12;
    d += b * (a / b - 1.0) * (a / b - 1.0);
  }
  return d;
}

// The trials whose loss is within the best `q` fraction (ties at the cutoff kept).
std::vector<const Trial*> best_fraction(const std::vector<const Trial*>& trials,
                                        const std::vector<double>& loss, double q) {
  if (q >= 1.0) return trials;
  std::vector<double> sorted(loss);
  const auto cut = static_cast<std::size_t>(
      std::max(0.0, std::ceil(q * static_cast<double>(loss.size())) - 1.0));
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(cut), sorted.end());
  std::vector<const Trial*> out;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (loss[i] <= sorted[cut]) out.push_back(trials[i]);
  }
  return out;
}

}  // namespace

Result<std::vector<ParamImportance>> param_importance(const SearchSpace& space,
                                                      const std::vector<Trial>& trials,
                                                      const ImportanceOptions& options) {
  if (!(options.target_quantile > 0.0 && options.target_quantile < options.region_quantile &&
        options.region_quantile <= 1.0)) {
    return fail("importance: need 0 < target_quantile < region_quantile <= 1");
  }
  if (options.objective >= space.objectives.size()) {
    return fail("importance: objective " + std::to_string(options.objective) +
                " does not exist; search.objectives has " +
                std::to_string(space.objectives.size()));
  }
  const bool maximize = space.objectives[options.objective].direction == Direction::Maximize;
  std::vector<const Trial*> done;
  std::vector<double> loss;
  for (const Trial& t : trials) {
    if (t.state != TrialState::Complete || t.values.size() <= options.objective) continue;
    const double v = t.values[options.objective];
    if (!std::isfinite(v)) continue;
    done.push_back(&t);
    loss.push_back(maximize ? -v : v);
  }
  if (done.size() < 2) {
    return fail("importance: needs at least 2 complete trials (have " +
                std::to_string(done.size()) + "); run more trials");
  }
  const std::vector<const Trial*> top = best_fraction(done, loss, options.target_quantile);
  const std::vector<const Trial*> region = best_fraction(done, loss, options.region_quantile);
  const double ratio = static_cast<double>(top.size()) / static_cast<double>(region.size());
  std::vector<ParamImportance> out;
  double sum = 0.0;
  for (const Param& p : space.params) {
    // The regime where p is active; the inactive regime has nothing to measure.
    const auto active = [&](const std::vector<const Trial*>& from) {
      std::vector<const Trial*> a;
      for (const Trial* t : from) {
        if (t->params.count(p.name) != 0) a.push_back(t);
      }
      return a;
    };
    const std::vector<const Trial*> top_a = active(top);
    const std::vector<const Trial*> region_a = active(region);
    double imp = 0.0;
    if (static_cast<int>(region_a.size()) >= kMinTrialsInRegime && !top_a.empty()) {
      const double alpha = static_cast<double>(top_a.size()) / static_cast<double>(top.size());
      const double beta = static_cast<double>(region_a.size()) / static_cast<double>(region.size());
      imp = alpha * alpha / beta * pearson_divergence(p, top_a, region_a, options.grid_steps) *
            ratio * ratio;
    }
    out.push_back({p.name, imp});
    sum += imp;
  }
  for (ParamImportance& pi : out) pi.importance = sum > 0.0 ? pi.importance / sum : 0.0;
  std::stable_sort(out.begin(), out.end(), [](const ParamImportance& a, const ParamImportance& b) {
    return a.importance > b.importance;
  });
  return out;
}

}  // namespace shardscope::search
