// NSGA-II: constrained non-dominated sorting, crowding distance, elite selection replayed from
// the trial list, tournament, uniform crossover and mutation; the Pareto front and 2-D
// hypervolume used by the CLI, the GUI and the tests.
#include "search/nsga2.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace shardscope::search {
namespace {

// a dominates b (minimisation): no worse everywhere, better somewhere.
bool dominates(const std::vector<double>& a, const std::vector<double>& b) {
  bool better = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] > b[i]) return false;
    better = better || a[i] < b[i];
  }
  return better;
}

bool usable(const Trial& t, std::size_t n_objectives) {
  if (t.state == TrialState::Infeasible || t.state == TrialState::Oom) return true;
  if (t.state != TrialState::Complete || t.values.size() != n_objectives) return false;
  return std::all_of(t.values.begin(), t.values.end(), [](double v) { return std::isfinite(v); });
}

bool feasible(const Trial& t) { return t.state == TrialState::Complete; }

}  // namespace

std::vector<double> minimised(const std::vector<double>& values,
                              const std::vector<Objective>& objectives) {
  std::vector<double> out(values);
  for (std::size_t i = 0; i < out.size() && i < objectives.size(); ++i) {
    if (objectives[i].direction == Direction::Maximize) out[i] = -out[i];
  }
  return out;
}

std::vector<int> nondominated_ranks(const std::vector<std::vector<double>>& points,
                                    const std::vector<bool>& feasible) {
  const std::size_t n = points.size();
  // Constrained domination: feasible beats infeasible; infeasible points are all equal.
  const auto beats = [&](std::size_t a, std::size_t b) {
    if (feasible[a] != feasible[b]) return static_cast<bool>(feasible[a]);
    return feasible[a] && dominates(points[a], points[b]);
  };
  std::vector<int> dominated_by(n, 0);
  std::vector<std::vector<std::size_t>> dominates_list(n);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a != b && beats(a, b)) {
        dominates_list[a].push_back(b);
        ++dominated_by[b];
      }
    }
  }
  std::vector<int> rank(n, -1);
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < n; ++i) {
    if (dominated_by[i] == 0) front.push_back(i);
  }
  for (int r = 0; !front.empty(); ++r) {
    std::vector<std::size_t> next;
    for (std::size_t a : front) {
      rank[a] = r;
      for (std::size_t b : dominates_list[a]) {
        if (--dominated_by[b] == 0) next.push_back(b);
      }
    }
    front = std::move(next);
  }
  return rank;
}

std::vector<double> crowding_distance(const std::vector<std::vector<double>>& points) {
  const std::size_t n = points.size();
  std::vector<double> dist(n, 0.0);
  if (n == 0) return dist;
  std::vector<std::size_t> order(n);
  for (std::size_t m = 0; m < points.front().size(); ++m) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return points[a][m] < points[b][m]; });
    const double span = points[order.back()][m] - points[order.front()][m];
    dist[order.front()] = std::numeric_limits<double>::infinity();
    dist[order.back()] = std::numeric_limits<double>::infinity();
    if (span <= 0.0) continue;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      dist[order[i]] += (points[order[i + 1]][m] - points[order[i - 1]][m]) / span;
    }
  }
  return dist;
}

std::vector<std::size_t> pareto_front(const std::vector<Trial>& trials,
                                      const std::vector<Objective>& objectives) {
  std::vector<std::size_t> idx;
  std::vector<std::vector<double>> pts;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    if (feasible(trials[i]) && usable(trials[i], objectives.size())) {
      idx.push_back(i);
      pts.push_back(minimised(trials[i].values, objectives));
    }
  }
  std::vector<std::size_t> out;
  for (std::size_t a = 0; a < pts.size(); ++a) {
    bool dominated = false;
    for (std::size_t b = 0; b < pts.size() && !dominated; ++b)
      dominated = dominates(pts[b], pts[a]);
    if (!dominated) out.push_back(idx[a]);
  }
  std::sort(out.begin(), out.end(),
            [&](std::size_t a, std::size_t b) { return trials[a].number < trials[b].number; });
  return out;
}

double hypervolume_2d(std::vector<std::vector<double>> points,
                      const std::vector<double>& reference) {
  std::erase_if(points, [&](const std::vector<double>& p) {
    return !(p[0] < reference[0] && p[1] < reference[1]);
  });
  std::sort(points.begin(), points.end());
  // Sweep by the first objective: each point that improves the second one adds a slab.
  double hv = 0.0;
  double prev = reference[1];
  for (const auto& p : points) {
    if (p[1] < prev) {
      hv += (reference[0] - p[0]) * (prev - p[1]);
      prev = p[1];
    }
  }
  return hv;
}

std::vector<Nsga2Sampler::Member> Nsga2Sampler::elite(std::vector<const Trial*> pool) const {
  std::sort(pool.begin(), pool.end(),
            [](const Trial* a, const Trial* b) { return a->number < b->number; });
  pool.erase(std::unique(pool.begin(), pool.end(),
                         [](const Trial* a, const Trial* b) { return a->number == b->number; }),
             pool.end());
  std::vector<std::vector<double>> pts;
  std::vector<bool> ok;
  for (const Trial* t : pool) {
    ok.push_back(feasible(*t));
    pts.push_back(feasible(*t) ? minimised(t->values, m_objectives)
                               : std::vector<double>(m_objectives.size(), 0.0));
  }
  const std::vector<int> rank = nondominated_ranks(pts, ok);
  std::vector<Member> out;
  const auto limit = static_cast<std::size_t>(population());
  for (int r = 0; out.size() < limit; ++r) {
    std::vector<std::size_t> front;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      if (rank[i] == r) front.push_back(i);
    }
    if (front.empty()) break;
    std::vector<std::vector<double>> fp;
    fp.reserve(front.size());
    for (std::size_t i : front) fp.push_back(pts[i]);
    const std::vector<double> crowd = crowding_distance(fp);
    std::vector<std::size_t> order(front.size());
    std::iota(order.begin(), order.end(), 0);
    // Most isolated first; ties (and infeasible points, all at distance 0) by trial number.
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return crowd[a] > crowd[b]; });
    for (std::size_t k = 0; k < order.size() && out.size() < limit; ++k) {
      out.push_back({pool[front[order[k]]], r, crowd[order[k]]});
    }
  }
  return out;
}

std::vector<Nsga2Sampler::Member> Nsga2Sampler::parents(const std::vector<Trial>& finished,
                                                        const std::vector<Trial>& pending) const {
  std::map<std::int64_t, const Trial*> ordered;
  for (const Trial& t : finished) ordered[t.number] = &t;
  for (const Trial& t : pending) ordered[t.number] = &t;
  const auto size = static_cast<std::size_t>(population());
  // The current generation is the one the next trial joins; its parents come from all before.
  const std::size_t current = ordered.size() / size;
  std::vector<Member> pop;
  std::vector<const Trial*> generation;
  std::size_t index = 0;
  for (const auto& [number, t] : ordered) {
    if (index / size >= current) break;
    if (usable(*t, m_objectives.size())) generation.push_back(t);
    if (++index % size == 0) {
      for (const Member& m : pop) generation.push_back(m.trial);
      pop = elite(std::move(generation));
      generation.clear();
    }
  }
  return pop;
}

const Trial* Nsga2Sampler::tournament(const std::vector<Member>& pop, Rng& rng) const {
  const Member& a = pop[rng.below(pop.size())];
  const Member& b = pop[rng.below(pop.size())];
  if (a.rank != b.rank) return a.rank < b.rank ? a.trial : b.trial;
  return a.crowding >= b.crowding ? a.trial : b.trial;
}

Result<TrialParams> Nsga2Sampler::sample(const SearchSpace& space,
                                         const std::vector<Trial>& finished,
                                         const std::vector<Trial>& pending, Rng& rng) {
  const std::vector<Member> pop = parents(finished, pending);
  if (pop.size() < 2) return m_random.sample(space, finished, pending, rng);
  const Trial* first = tournament(pop, rng);
  TrialParams child = first->params;
  if (rng.uniform() < m_cfg.crossover_prob) {
    const Trial* second = tournament(pop, rng);
    for (const auto& [name, value] : second->params) {
      if (child.count(name) == 0 || rng.uniform() < m_cfg.swapping_prob) child[name] = value;
    }
  }
  const double mutation = m_cfg.mutation_prob > 0.0
                              ? m_cfg.mutation_prob
                              : 1.0 / std::max<double>(1.0, static_cast<double>(child.size()));
  TrialParams out;
  for (const Param& p : space.params) {
    if (!space.active(p, out)) continue;
    auto it = child.find(p.name);
    const bool keep = it != child.end() && p.contains(it->second) && rng.uniform() >= mutation;
    out[p.name] = keep ? it->second : p.from_unit(rng.uniform());
  }
  return out;
}

}  // namespace shardscope::search
