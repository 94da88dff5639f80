// Tree-structured Parzen Estimator (Bergstra et al. 2011; the variant Optuna ships):
// finished trials split into the best gamma(n) = min(ceil(n/10), 25) ("below") and the rest
// ("above"); a Parzen mixture (one truncated-normal kernel per observation plus a wide prior
// kernel, categorical kernels for categoricals) is fitted to each in the internal space; the
// candidate of n_ei_candidates drawn from l(x) with the largest log l(x) - log g(x) wins (a
// group without a categorical parameter draws n_ei_candidates_numeric instead; see space.h).
// Two changes to Optuna's model, each a [search.sampler] key: n_local_candidates more candidates
// drawn around the best "below" trial with narrower widths (local_width), scored by the same
// l/g; and "below" observations weighted by their rank (rank_weights), so l(x) leans towards
// the best ones (bench/search/README.md has the figures).
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

#include "search/parzen.h"
#include "search/sampler.h"

namespace shardscope::search {

/// The "above" estimator of one group, kept between calls: observations live in slots (a
/// finished trial's position, or a pending trial's), with their centres sorted per continuous
/// dimension, so adding or removing one observation refits only its neighbours. The estimator it
/// writes should be kept for the next call too: kernels whose slot and fit did not change since
/// are not copied again.
class AboveCache {
 public:
  /// Starts empty for a group of `dims`.
  void reset(const std::vector<ParzenDim>& dims);
  /// Makes the cached set exactly `items` (slot, a trial's internal row; the group's values at
  /// row[group[j]]) and writes into `est`, kernels in `items` order, the estimator that
  /// ParzenEstimator::fit would build from them with `weights`. Even slots below 2 * `stable`
  /// hold the same row as at the last build (the caller knows): their centres are not compared.
  void build(const std::vector<ParzenDim>& dims, const std::vector<int>& group,
             const std::vector<std::pair<std::size_t, const double*>>& items,
             const std::vector<double>& weights, const SamplerConfig& cfg, std::size_t stable,
             ParzenEstimator& est);

 private:
  void grow(std::size_t slots);
  void update(const std::vector<std::pair<std::size_t, const double*>>& items,
              const std::vector<int>& group, std::size_t stable);
  void insert(std::size_t slot, const double* row, const std::vector<int>& group);
  void remove(std::size_t slot);
  void rebuild_sorted();
  std::size_t position(std::size_t j, std::size_t slot) const;
  void refit_at(std::size_t j, std::size_t r, double min_sigma);
  void gather(const std::vector<ParzenDim>& dims,
              const std::vector<std::pair<std::size_t, const double*>>& items,
              const std::vector<double>& weights, const SamplerConfig& cfg, bool cached_norm,
              ParzenEstimator& est);
  void normalise(const std::vector<std::pair<std::size_t, const double*>>& items,
                 ParzenEstimator& est);

  std::vector<ParzenDim> m_dims;
  std::vector<char> m_incremental;  // (dims) continuous numeric dimension kept sorted
  std::size_t m_count = 0;          // live observations
  std::uint32_t m_generation = 0;
  double m_clip = -1.0;               // min(100, 1 + kernels) the widths were clipped with
  std::vector<char> m_live;           // (slots)
  std::vector<std::uint32_t> m_seen;  // (slots) generation that last asked for it
  std::vector<double> m_centre;       // (slots, dims)
  std::vector<double> m_raw;          // (slots, dims) width before the clip
  std::vector<double> m_sigma;        // (slots, dims)
  std::vector<double> m_inv;          // (slots, dims)
  std::vector<double> m_mass;         // (slots, dims)
  std::vector<double> m_lognorm;      // (slots) log of the product normaliser
  std::vector<char> m_lognorm_ok;     // (slots)
  std::vector<std::vector<std::pair<double, std::size_t>>> m_sorted;  // per dim (centre, slot)
  std::vector<std::size_t> m_ties;                                    // per dim: equal pairs
  std::vector<char> m_stale;                                          // per dim
  std::vector<std::vector<std::size_t>> m_dirty;                      // per dim: slots to refit
  std::vector<std::size_t> m_insert;                                  // update()'s scratch
  std::vector<double> m_obs;                                          // gather()'s scratch
  // What the last gather() wrote into its estimator, to skip unchanged kernels.
  std::vector<std::uint32_t> m_version;       // (slots) bumped when a slot's fit changes
  const ParzenEstimator* m_filled = nullptr;  // the estimator, and its layout then
  std::uint64_t m_filled_layout = 0;
  std::vector<std::size_t> m_filled_slot;   // (kernels) slot written at each position
  std::vector<std::uint32_t> m_filled_ver;  // (kernels) its version then
  std::vector<char> m_filled_dim;           // (dims) dimension written from the cache
};

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
  bool unchanged(const Trial& t, std::size_t i) const;
  void update_history(const SearchSpace& space, const std::vector<Trial>& finished);
  void split(const std::vector<Trial>& finished);
  void prepare_space(const SearchSpace& space);
  std::size_t below_weights(std::size_t nb);
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
  // Bumped whenever the rows are recomputed from the start; per group, the epoch and history
  // length of its cache's last build (its rows below that length are unchanged in that epoch).
  std::uint64_t m_epoch = 0;
  std::vector<std::uint64_t> m_cache_epoch;  // (groups)
  std::vector<std::size_t> m_cache_rows;     // (groups)
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
  std::vector<std::size_t> m_rank;      // (finished) rank of a "below" position (0 = best)
  // Per-call scratch, reused.
  ParzenEstimator m_l;
  std::vector<ParzenEstimator> m_g;  // (groups) kept for their AboveCache
  std::vector<double> m_obs;
  std::vector<double> m_weights;
  std::vector<std::size_t> m_order;  // below_weights' sort buffer
  std::vector<std::pair<std::size_t, const double*>> m_items;
  std::vector<double> m_candidates;  // (dims, n_ei_candidates)
  std::vector<double> m_score_l;
  std::vector<double> m_score_g;
};

}  // namespace shardscope::search
