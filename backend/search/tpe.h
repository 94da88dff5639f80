// Tree-structured Parzen Estimator (Bergstra et al. 2011; the variant Optuna ships):
// finished trials split into the best gamma(n) = min(ceil(n/10), 25) ("below") and the rest
// ("above"); a Parzen mixture (one truncated-normal kernel per observation plus a wide prior
// kernel, categorical kernels for categoricals) is fitted to each in the internal space; the
// candidate of n_ei_candidates drawn from l(x) with the largest log l(x) - log g(x) wins (a
// group without a categorical parameter draws n_ei_candidates_numeric instead; see space.h).
// Pruned trials rank after complete ones (later step first), infeasible/oom after those;
// with constant_liar the pending trials join "above" as if they were the worst results.
//
// Speed: the sampler keeps state between calls. The ranking of finished trials is updated by
// the trials appended since the last call, and each group's "above" estimator keeps its
// per-dimension sorted centres, so a new observation only changes its neighbours' widths and
// truncation masses. Any other change of the history (a trial changed state or value, trials
// removed or reordered) is detected and rebuilt, so the proposals equal a fresh sampler's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/search/parzen.h"
#include "backend/search/sampler.h"

namespace shardscope::search {

class TpeSampler : public Sampler {
 public:
  TpeSampler(SamplerConfig cfg, Direction direction)
      : m_cfg(std::move(cfg)), m_direction(direction) {}
  Result<TrialParams> sample(const SearchSpace& space, const std::vector<Trial>& finished,
                             const std::vector<Trial>& pending, Rng& rng) override;

 private:
  // One finished trial as the ranking sees it; equal entries mean an unchanged trial.
  struct Entry {
    std::int64_t number = 0;
    int kind = 0;       // 0 complete, 1 pruned, 2 violated, 3 not ranked
    double key0 = 0.0;  // complete: loss; pruned: -step
    double key1 = 0.0;  // pruned: loss of the last report
    bool operator==(const Entry& o) const;
  };
  struct Ranked {
    double key0;
    double key1;
    std::int64_t number;
    std::size_t pos;
  };
  Entry entry_of(const Trial& t) const;
  void update_history(const SearchSpace& space, const std::vector<Trial>& finished);
  void split(const std::vector<Trial>& finished);
  void prepare_space(const SearchSpace& space);
  void sample_group(std::size_t g, const std::vector<Trial>& pending, Rng& rng, TrialParams& out);
  std::size_t m_row_width = 0;  // parameters per row

  SamplerConfig m_cfg;
  Direction m_direction;
  RandomSampler m_random;
  // The space the caches belong to, its groups (parameter indices) and their dimensions.
  std::vector<Param> m_space;
  std::vector<std::vector<int>> m_groups;
  std::vector<std::vector<ParzenDim>> m_group_dims;
  std::vector<AboveCache> m_above_cache;  // (groups)
  // The history as last seen: entries and internal coordinates per finished position.
  std::vector<Entry> m_entries;
  std::vector<double> m_rows;           // (finished, params), NaN where inactive
  std::vector<double> m_pending_rows;   // (pending, params)
  std::vector<Ranked> m_complete;       // by (loss, number)
  std::vector<Ranked> m_pruned;         // by (-step, loss, number)
  std::vector<std::size_t> m_violated;  // positions, in history order
  bool m_by_number = true;              // finished positions ascend by number
  int m_ranked = 0;                     // trials that count for n_startup_trials
  std::vector<std::size_t> m_below;     // positions, by number
  std::vector<std::size_t> m_above;     // positions, by number
  std::vector<char> m_is_below;         // (finished)
  // Per-call scratch, reused.
  ParzenEstimator m_l;
  ParzenEstimator m_g;
  std::vector<double> m_obs;
  std::vector<double> m_weights;
  std::vector<std::pair<std::size_t, const double*>> m_items;
  std::vector<double> m_candidates;  // (dims, n_ei_candidates)
  std::vector<double> m_score_l;
  std::vector<double> m_score_g;
};

}  // namespace shardscope::search
