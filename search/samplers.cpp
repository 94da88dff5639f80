// random, grid and qmc samplers, the sampler factory and Rng::normal.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "search/autosampler.h"
#include "search/cmaes.h"
#include "search/gp.h"
#include "search/nsga2.h"
#include "search/sampler.h"
#include "search/tpe.h"
#include "spec/search_names.h"

namespace shardscope::search {
namespace {

// Joe & Kuo's primitive polynomials and initial direction numbers for dimensions 2..21
// (dimension 1 is the van der Corput sequence): degree s, coefficients a, m_1..m_s.
struct SobolPoly {
  int s;
  std::uint32_t a;
  std::uint32_t m[7];
};
constexpr SobolPoly kSobol[] = {
    {1, 0, {1}},
    {2, 1, {1, 3}},
    {3, 1, {1, 3, 1}},
    {3, 2, {1, 1, 1}},
    {4, 1, {1, 1, 3, 3}},
    {4, 4, {1, 3, 5, 13}},
    {5, 2, {1, 1, 5, 5, 17}},
    {5, 4, {1, 1, 5, 5, 5}},
    {5, 7, {1, 1, 7, 11, 19}},
    {5, 11, {1, 1, 5, 1, 1}},
    {5, 13, {1, 1, 1, 3, 11}},
    {5, 14, {1, 3, 5, 5, 31}},
    {6, 1, {1, 3, 3, 9, 7, 49}},
    {6, 13, {1, 1, 1, 15, 21, 21}},
    {6, 16, {1, 3, 1, 13, 27, 49}},
    {6, 19, {1, 1, 1, 15, 7, 5}},
    {6, 22, {1, 3, 1, 15, 13, 25}},
    {6, 25, {1, 1, 5, 5, 19, 61}},
    {7, 1, {1, 3, 7, 11, 23, 15, 103}},
    {7, 4, {1, 3, 7, 13, 13, 15, 69}},
};
static_assert(std::size(kSobol) + 1 == QmcSampler::kMaxDims);

// Direction numbers v_1..v_32 of one dimension, scaled to 32-bit fractions.
void direction_numbers(int dim, std::uint32_t* v) {
  if (dim == 0) {
    for (int j = 0; j < 32; ++j) v[j] = 1U << (31 - j);
    return;
  }
  const SobolPoly& p = kSobol[dim - 1];
  for (int j = 0; j < p.s; ++j) v[j] = p.m[j] << (31 - j);
  for (int j = p.s; j < 32; ++j) {
    std::uint32_t x = v[j - p.s] ^ (v[j - p.s] >> p.s);
    for (int k = 1; k < p.s; ++k) {
      if (((p.a >> (p.s - 1 - k)) & 1U) != 0) x ^= v[j - k];
    }
    v[j] = x;
  }
}

std::string point_key(const TrialParams& params) {
  std::string key;
  for (const auto& [name, value] : params) key += name + "=" + format_value(value) + "\n";
  return key;
}

void expand_grid(const SearchSpace& space, std::size_t i, TrialParams& cur,
                 std::vector<TrialParams>& out) {
  if (i == space.params.size()) {
    out.push_back(cur);
    return;
  }
  const Param& p = space.params[i];
  if (!space.active(p, cur)) {
    expand_grid(space, i + 1, cur, out);
    return;
  }
  for (const ParamValue& v : p.values()) {
    cur[p.name] = v;
    expand_grid(space, i + 1, cur, out);
  }
  cur.erase(p.name);
}

}  // namespace

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

Result<TrialParams> RandomSampler::sample(const SearchSpace& space, const std::vector<Trial>&,
                                          const std::vector<Trial>&, Rng& rng) {
  TrialParams out;
  for (const Param& p : space.params) {
    if (space.active(p, out)) out[p.name] = p.from_unit(rng.uniform());
  }
  return out;
}

Result<std::vector<TrialParams>> GridSampler::points(const SearchSpace& space) {
  double total = 1.0;
  for (const Param& p : space.params) {
    if (!p.discrete()) {
      return fail("search.space.\"" + p.name +
                  "\": the grid sampler needs a finite set of values; give this float a step or "
                  "use another sampler");
    }
    total *= static_cast<double>(p.cardinality());
  }
  if (total > 1e6) {
    return fail(
        "search.sampler: the grid has more than 1,000,000 points; use larger steps, "
        "fewer parameters or another sampler");
  }
  std::vector<TrialParams> out;
  TrialParams cur;
  expand_grid(space, 0, cur, out);
  return out;
}

Result<TrialParams> GridSampler::sample(const SearchSpace& space,
                                        const std::vector<Trial>& finished,
                                        const std::vector<Trial>& pending, Rng& rng) {
  if (m_points.empty()) {
    auto pts = points(space);
    if (!pts) return pts.error();
    m_points = std::move(*pts);
  }
  std::set<std::string> taken;
  for (const auto* list : {&finished, &pending}) {
    for (const Trial& t : *list) taken.insert(point_key(t.params));
  }
  std::vector<std::size_t> free;
  for (std::size_t i = 0; i < m_points.size(); ++i) {
    if (taken.count(point_key(m_points[i])) == 0) free.push_back(i);
  }
  if (free.empty()) {
    return fail("search.n_trials: all " + std::to_string(m_points.size()) +
                " grid points were proposed; set n_trials to at most that");
  }
  return m_points[free[rng.below(free.size())]];
}

void QmcSampler::prepare(int dims) {
  if (dims == m_dims) return;
  m_dims = dims;
  m_direction.assign(static_cast<std::size_t>(dims) * 32, 0);
  m_scrambled.assign(m_direction.size(), 0);
  m_shift.assign(static_cast<std::size_t>(dims), 0);
  Rng rng(m_seed ^ 0x5EED50B01ULL);
  for (int d = 0; d < dims; ++d) {
    std::uint32_t* v = &m_direction[static_cast<std::size_t>(d) * 32];
    direction_numbers(d, v);
    // Linear matrix scramble: a random lower-triangular binary matrix L with a unit diagonal
    // mixes each direction number's digits (digit i becomes the parity of L's row i & digits).
    std::uint32_t rows[32];
    for (int i = 0; i < 32; ++i) {
      const std::uint32_t below_diag =
          i == 0 ? 0U : static_cast<std::uint32_t>(rng.bits()) & ~((1U << (32 - i)) - 1U);
      rows[i] = below_diag | (1U << (31 - i));
    }
    for (int j = 0; j < 32; ++j) {
      std::uint32_t out = 0;
      for (int i = 0; i < 32; ++i) {
        if ((__builtin_popcount(rows[i] & v[j]) & 1) != 0) out |= 1U << (31 - i);
      }
      m_scrambled[static_cast<std::size_t>(d) * 32 + static_cast<std::size_t>(j)] = out;
    }
    m_shift[static_cast<std::size_t>(d)] = static_cast<std::uint32_t>(rng.bits());
  }
}

std::vector<double> QmcSampler::point(std::uint64_t index, int dims, bool scramble) {
  prepare(dims);
  std::vector<double> out(static_cast<std::size_t>(dims));
  const auto& dirs = scramble ? m_scrambled : m_direction;
  for (int d = 0; d < dims; ++d) {
    std::uint32_t x = scramble ? m_shift[static_cast<std::size_t>(d)] : 0U;
    for (int j = 0; j < 32 && (index >> j) != 0; ++j) {
      if (((index >> j) & 1U) != 0)
        x ^= dirs[static_cast<std::size_t>(d) * 32 + static_cast<std::size_t>(j)];
    }
    out[static_cast<std::size_t>(d)] = static_cast<double>(x) * 0x1.0p-32;
  }
  return out;
}

Result<TrialParams> QmcSampler::sample(const SearchSpace& space, const std::vector<Trial>& finished,
                                       const std::vector<Trial>& pending, Rng&) {
  const int dims = static_cast<int>(space.params.size());
  if (dims > kMaxDims) {
    return fail("search.sampler: qmc supports up to " + std::to_string(kMaxDims) +
                " parameters (got " + std::to_string(dims) + "); use tpe or random");
  }
  const std::vector<double> u = point(finished.size() + pending.size(), dims, true);
  TrialParams out;
  for (std::size_t i = 0; i < space.params.size(); ++i) {
    const Param& p = space.params[i];
    if (space.active(p, out)) out[p.name] = p.from_unit(u[i]);
  }
  return out;
}

Result<std::unique_ptr<Sampler>> make_sampler(const SearchSpace& space) {
  const std::string& type = space.sampler.type;
  const std::optional<spec::SamplerKind> kind = spec::kind_of(spec::kSamplers, type);
  if (!kind) return fail("search.sampler: unknown sampler \"" + type + "\"");
  const bool one_objective = *kind == spec::SamplerKind::tpe || *kind == spec::SamplerKind::cmaes ||
                             *kind == spec::SamplerKind::gp;
  if (one_objective && space.objectives.size() != 1) {
    return fail("search.sampler: " + type +
                " optimises one objective; several objectives need sampler = \"nsga2\" (or "
                "random or qmc)");
  }
  // Every kind has its case (-Wswitch, warnings are errors): a name registered in
  // spec/search_names.h cannot lack its sampler.
  switch (*kind) {
    case spec::SamplerKind::auto_:
      return std::unique_ptr<Sampler>(std::make_unique<AutoSampler>(space, auto_choice(space)));
    case spec::SamplerKind::random:
      return std::unique_ptr<Sampler>(std::make_unique<RandomSampler>());
    case spec::SamplerKind::grid: {
      auto pts = GridSampler::points(space);
      if (!pts) return pts.error();
      return std::unique_ptr<Sampler>(std::make_unique<GridSampler>());
    }
    case spec::SamplerKind::qmc:
      if (static_cast<int>(space.params.size()) > QmcSampler::kMaxDims) {
        return fail("search.sampler: qmc supports up to " + std::to_string(QmcSampler::kMaxDims) +
                    " parameters; use tpe or random");
      }
      return std::unique_ptr<Sampler>(std::make_unique<QmcSampler>(space.seed));
    case spec::SamplerKind::tpe:
      return std::unique_ptr<Sampler>(
          std::make_unique<TpeSampler>(space.sampler, space.objectives.front().direction));
    case spec::SamplerKind::cmaes:
      if (CmaEsSampler::driven(space).empty()) {
        return fail(
            "search.sampler: cmaes needs at least one float or int parameter without `when`; "
            "this space has none, so use tpe");
      }
      return std::unique_ptr<Sampler>(
          std::make_unique<CmaEsSampler>(space.sampler, space.objectives.front().direction));
    case spec::SamplerKind::gp:
      return std::unique_ptr<Sampler>(
          std::make_unique<GpSampler>(space.sampler, space.objectives.front().direction));
    case spec::SamplerKind::nsga2:
      return std::unique_ptr<Sampler>(
          std::make_unique<Nsga2Sampler>(space.sampler, space.objectives));
  }
  return fail("search.sampler: unknown sampler \"" + type + "\"");
}

}  // namespace shardscope::search
