#include "spec/search_space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "spec/experiment_query.h"
#include "spec/search_names.h"

namespace shardscope::spec {
namespace {

// Messages: "<source>: search.space."train.lr".low: <what>; <fix>".
// With `where`, the prefix is the field's place in the file instead of the source name.
struct Ctx {
  std::string source;
  std::function<std::string(std::string_view)> where;
  Error err(const std::string& field, const std::string& what) const {
    std::string prefix = where ? where(field) : source;
    return fail((prefix.empty() ? std::string() : prefix + ": ") + field + ": " + what);
  }
};

std::string param_field(const std::string& name) { return "search.space.\"" + name + "\""; }

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string keys_of(const std::vector<std::string_view>& keys) {
  std::string out;
  for (std::string_view k : keys) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

/// The registered names, listed for an error message ("tpe, random, ...").
template <typename Kind, std::size_t N>
std::string names_of(const std::array<SearchName<Kind>, N>& names) {
  std::vector<std::string_view> keys;
  keys.reserve(N);
  for (const SearchName<Kind>& n : names) keys.push_back(n.name);
  return keys_of(keys);
}

Result<void> check_keys(const toml::table& t, const std::vector<std::string_view>& known,
                        const std::string& field, const Ctx& ctx) {
  for (const auto& [key, node] : t) {
    if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
      return ctx.err(field + "." + std::string(key.str()),
                     "unknown key; the known keys are " + keys_of(known));
    }
  }
  return ok();
}

std::optional<ParamValue> to_value(const toml::node& node) {
  if (auto v = node.value_exact<bool>()) return ParamValue(*v);
  if (auto v = node.value_exact<std::int64_t>()) return ParamValue(*v);
  if (auto v = node.value_exact<double>()) return ParamValue(*v);
  if (auto v = node.value_exact<std::string>()) return ParamValue(*v);
  return std::nullopt;
}

std::optional<double> as_number(const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}

Result<double> get_number(const toml::table& t, std::string_view key, double fallback,
                          const std::string& field, const Ctx& ctx) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  auto v = n->value<double>();
  if (!v || n->is_boolean()) return ctx.err(field, "must be a number");
  if (!std::isfinite(*v)) return ctx.err(field, "must be finite (got " + num(*v) + ")");
  return *v;
}

// Most of these fields are ints: a larger value (population_size = 4294967298) wrapped around
// to a small or negative one when stored, so `max` defaults to INT_MAX.
Result<std::int64_t> get_int(const toml::table& t, std::string_view key, std::int64_t fallback,
                             std::int64_t min, const std::string& field, const Ctx& ctx,
                             std::int64_t max = std::numeric_limits<int>::max()) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  auto v = n->value_exact<std::int64_t>();
  if (!v) return ctx.err(field, "must be an integer, e.g. " + std::to_string(fallback));
  if (*v < min) {
    return ctx.err(field,
                   "must be >= " + std::to_string(min) + " (got " + std::to_string(*v) + ")");
  }
  if (*v > max) {
    return ctx.err(field,
                   "must be <= " + std::to_string(max) + " (got " + std::to_string(*v) + ")");
  }
  return *v;
}

Result<bool> get_bool(const toml::table& t, std::string_view key, bool fallback,
                      const std::string& field, const Ctx& ctx) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  auto v = n->value_exact<bool>();
  if (!v) return ctx.err(field, "must be true or false");
  return *v;
}

Result<void> parse_type(const toml::table& t, Param& p, const Ctx& ctx) {
  const std::string field = param_field(p.name) + ".type";
  const toml::node* n = t.get("type");
  if (n == nullptr) {
    return ctx.err(field, "missing; set type = \"float\", \"int\", \"categorical\" or \"bool\"");
  }
  const std::string type = n->value_or(std::string());
  if (type == "float")
    p.type = ParamType::Float;
  else if (type == "int")
    p.type = ParamType::Int;
  else if (type == "categorical")
    p.type = ParamType::Categorical;
  else if (type == "bool")
    p.type = ParamType::Bool;
  else
    return ctx.err(field, "unknown type \"" + type + "\"; use float, int, categorical or bool");
  return ok();
}

Result<void> check_numeric(Param& p, bool has_step, const Ctx& ctx) {
  const std::string f = param_field(p.name);
  if (!(p.low < p.high)) {
    return ctx.err(f + ".low", "must be below high (low " + num(p.low) + ", high " + num(p.high) +
                                   "); swap them or widen the range");
  }
  if (p.log && p.low <= 0.0) {
    return ctx.err(f + ".low", "must be > 0 with log = true (got " + num(p.low) +
                                   "); raise low or set log = false");
  }
  if (p.type == ParamType::Int) {
    if (p.low != std::floor(p.low) || p.high != std::floor(p.high)) {
      return ctx.err(f + ".low", "int bounds must be whole numbers (low " + num(p.low) + ", high " +
                                     num(p.high) + ")");
    }
    if (!has_step) p.step = 1.0;
    if (p.step != std::floor(p.step)) return ctx.err(f + ".step", "must be a whole number for int");
  }
  if (has_step && p.step <= 0.0)
    return ctx.err(f + ".step", "must be > 0 (got " + num(p.step) + ")");
  if (p.log && has_step && (p.type == ParamType::Float || p.step != 1.0)) {
    return ctx.err(f + ".step", "cannot be combined with log = true; drop step or log");
  }
  if (p.step > 0.0) {
    const double k = (p.high - p.low) / p.step;
    if (std::abs(k - std::round(k)) > 1e-9 * std::max(1.0, k)) {
      return ctx.err(f + ".step", "must divide high - low (" + num(p.high - p.low) + " / " +
                                      num(p.step) + " = " + num(k) +
                                      "); change step or high so the range is a multiple of it");
    }
  }
  return ok();
}

Result<void> parse_choices(const toml::table& t, Param& p, const Ctx& ctx) {
  const std::string f = param_field(p.name) + ".choices";
  if (p.type == ParamType::Bool) {
    if (t.contains("choices")) return ctx.err(f, "a bool has the choices false and true; drop it");
    p.choices = {ParamValue(false), ParamValue(true)};
    return ok();
  }
  const toml::array* arr = t.get_as<toml::array>("choices");
  if (arr == nullptr)
    return ctx.err(f, "missing; give a list, e.g. choices = [\"adamw\", \"sgd\"]");
  if (arr->empty()) return ctx.err(f, "is empty; list at least one choice");
  for (const toml::node& n : *arr) {
    auto v = to_value(n);
    if (!v) return ctx.err(f, "choices must be strings, numbers or bools");
    for (const ParamValue& seen : p.choices) {
      if (same_value(seen, *v)) return ctx.err(f, "lists " + format_value(*v) + " twice");
    }
    p.choices.push_back(std::move(*v));
  }
  return ok();
}

Result<void> parse_when(const toml::table& t, Param& p, const Ctx& ctx) {
  const toml::node* n = t.get("when");
  if (n == nullptr) return ok();
  const toml::table* w = n->as_table();
  const std::string f = param_field(p.name) + ".when";
  if (w == nullptr) return ctx.err(f, "must be a table, e.g. when = {\"lora.enabled\" = true}");
  for (const auto& [key, node] : *w) {
    auto v = to_value(node);
    if (!v) return ctx.err(f, "condition values must be strings, numbers or bools");
    p.when.push_back({std::string(key.str()), std::move(*v)});
  }
  return ok();
}

Result<Param> parse_param(const std::string& name, const toml::node& node, const Ctx& ctx) {
  const std::string f = param_field(name);
  const toml::table* t = node.as_table();
  if (t == nullptr) return ctx.err(f, "must be a table with type = ...");
  Param p;
  p.name = name;
  if (auto r = parse_type(*t, p, ctx); !r) return r.error();
  if (auto r = parse_when(*t, p, ctx); !r) return r.error();
  if (!p.numeric()) {
    if (auto r = check_keys(*t, {"type", "choices", "when"}, f, ctx); !r) return r.error();
    if (auto r = parse_choices(*t, p, ctx); !r) return r.error();
    return p;
  }
  if (auto r = check_keys(*t, {"type", "low", "high", "log", "step", "when"}, f, ctx); !r) {
    return r.error();
  }
  if (!t->contains("low") || !t->contains("high")) {
    return ctx.err(f, "needs low and high, e.g. low = 1e-5, high = 1e-2");
  }
  auto low = get_number(*t, "low", 0.0, f + ".low", ctx);
  auto high = get_number(*t, "high", 0.0, f + ".high", ctx);
  auto log = get_bool(*t, "log", false, f + ".log", ctx);
  auto step = get_number(*t, "step", 0.0, f + ".step", ctx);
  if (!low) return low.error();
  if (!high) return high.error();
  if (!log) return log.error();
  if (!step) return step.error();
  p.low = *low;
  p.high = *high;
  p.log = *log;
  p.step = *step;
  if (auto r = check_numeric(p, t->contains("step"), ctx); !r) return r.error();
  return p;
}

// Checks every condition names a parameter and a legal value of it, then orders the params so
// each comes after the ones its conditions name (cycles are errors).
Result<void> order_params(std::vector<Param>& params, const Ctx& ctx) {
  for (const Param& p : params) {
    for (const Condition& c : p.when) {
      auto it = std::find_if(params.begin(), params.end(),
                             [&](const Param& q) { return q.name == c.param; });
      const std::string f = param_field(p.name) + ".when";
      if (it == params.end()) {
        return ctx.err(f, "names \"" + c.param +
                              "\", which is not a searched parameter; add [search.space.\"" +
                              c.param + "\"] or drop the condition");
      }
      if (!it->contains(c.value)) {
        return ctx.err(f, "\"" + c.param + "\" can never be " + format_value(c.value) +
                              "; use one of its values");
      }
    }
  }
  std::vector<Param> ordered;
  std::set<std::string> placed;
  while (ordered.size() < params.size()) {
    const std::size_t before = ordered.size();
    for (const Param& p : params) {
      if (placed.count(p.name) != 0) continue;
      const bool ready = std::all_of(p.when.begin(), p.when.end(), [&](const Condition& c) {
        return placed.count(c.param) != 0;
      });
      if (ready) {
        ordered.push_back(p);
        placed.insert(p.name);
      }
    }
    if (ordered.size() == before) {
      return ctx.err("search.space",
                     "conditions form a cycle; a `when` may only name parameters "
                     "that do not depend on it");
    }
  }
  params = std::move(ordered);
  return ok();
}

Result<void> parse_objectives(const toml::table& s, SearchSpace& space, const Ctx& ctx) {
  const toml::node* n = s.get("objectives");
  if (n == nullptr) {
    space.objectives = {{"objective", Direction::Minimize}};
    return ok();
  }
  const toml::table* t = n->as_table();
  if (t == nullptr || t->empty()) {
    return ctx.err("search.objectives",
                   "must be a table of metric = \"minimize\"|\"maximize\", "
                   "e.g. objectives = {\"eval.loss\" = \"minimize\"}");
  }
  for (const auto& [key, node] : *t) {
    const std::string d = node.value_or(std::string());
    if (d != "minimize" && d != "maximize") {
      return ctx.err("search.objectives.\"" + std::string(key.str()) + "\"",
                     "must be \"minimize\" or \"maximize\"");
    }
    const std::string_view name = key.str();
    if (name.rfind("probes.", 0) == 0 && name != kGoodRateObjective) {
      return ctx.err("search.objectives.\"" + std::string(name) + "\"",
                     "is not an objective of the probes: the one there is \"" +
                         std::string(kGoodRateObjective) +
                         "\" (good / marked of people's verdicts on the answers)");
    }
    if (name == kGoodRateObjective && d != "maximize") {
      return ctx.err("search.objectives.\"" + std::string(name) + "\"",
                     "must be \"maximize\": it is the share of answers marked good");
    }
    space.objectives.push_back(
        {std::string(key.str()), d == "minimize" ? Direction::Minimize : Direction::Maximize});
  }
  return ok();
}

// The probability-like sampler settings: each in [0, 1].
Result<void> parse_sampler_probs(const toml::table& t, SamplerConfig& c, const Ctx& ctx) {
  for (auto [key, field] :
       {std::pair<std::string_view, double*>{"crossover_prob", &c.crossover_prob},
        {"swapping_prob", &c.swapping_prob},
        {"mutation_prob", &c.mutation_prob}}) {
    const std::string f = "search.sampler." + std::string(key);
    auto v = get_number(t, key, *field, f, ctx);
    if (!v) return v.error();
    if (*v < 0.0 || *v > 1.0) return ctx.err(f, "must be in [0, 1] (got " + num(*v) + ")");
    *field = *v;
  }
  auto s0 = get_number(t, "sigma0", c.sigma0, "search.sampler.sigma0", ctx);
  if (!s0) return s0.error();
  if (*s0 < 0.0 || *s0 > 1.0) {
    return ctx.err("search.sampler.sigma0",
                   "must be in (0, 1], a step size in the unit box (0 = the default 1/6)");
  }
  c.sigma0 = *s0;
  return ok();
}

// TPE's model settings beyond Optuna's: local candidates and rank weights of "below".
Result<void> parse_sampler_local(const toml::table& t, SamplerConfig& c, const Ctx& ctx) {
  auto n = get_int(t, "n_local_candidates", c.n_local_candidates, 0,
                   "search.sampler.n_local_candidates", ctx);
  if (!n) return n.error();
  auto w = get_number(t, "local_width", c.local_width, "search.sampler.local_width", ctx);
  if (!w) return w.error();
  if (!(*w > 0.0) || *w > 1.0) {
    return ctx.err("search.sampler.local_width",
                   "must be in (0, 1], a fraction of the kernel's width (got " + num(*w) + ")");
  }
  auto r = get_bool(t, "rank_weights", c.rank_weights, "search.sampler.rank_weights", ctx);
  if (!r) return r.error();
  c.n_local_candidates = static_cast<int>(*n);
  c.local_width = *w;
  c.rank_weights = *r;
  return ok();
}

Result<void> parse_sampler_table(const toml::table& t, SamplerConfig& c, const Ctx& ctx) {
  if (auto r =
          check_keys(t,
                     {"type", "n_startup_trials", "n_ei_candidates", "n_ei_candidates_numeric",
                      "multivariate", "n_local_candidates", "local_width", "rank_weights", "group",
                      "constant_liar", "prior_weight", "magic_clip", "population_size", "sigma0",
                      "crossover_prob", "swapping_prob", "mutation_prob"},
                     "search.sampler", ctx);
      !r) {
    return r;
  }
  c.type = t.get("type") != nullptr ? t.get("type")->value_or(std::string()) : c.type;
  if (c.type == "cmaes") c.n_startup_trials = 1;  // Optuna's CmaEsSampler default
  auto a =
      get_int(t, "n_startup_trials", c.n_startup_trials, 0, "search.sampler.n_startup_trials", ctx);
  auto b =
      get_int(t, "n_ei_candidates", c.n_ei_candidates, 1, "search.sampler.n_ei_candidates", ctx);
  auto bn = get_int(t, "n_ei_candidates_numeric", c.n_ei_candidates_numeric, 0,
                    "search.sampler.n_ei_candidates_numeric", ctx);
  auto m = get_bool(t, "multivariate", c.multivariate, "search.sampler.multivariate", ctx);
  auto g = get_bool(t, "group", c.group, "search.sampler.group", ctx);
  auto l = get_bool(t, "constant_liar", c.constant_liar, "search.sampler.constant_liar", ctx);
  auto w = get_number(t, "prior_weight", c.prior_weight, "search.sampler.prior_weight", ctx);
  auto k = get_bool(t, "magic_clip", c.magic_clip, "search.sampler.magic_clip", ctx);
  auto ps =
      get_int(t, "population_size", c.population_size, 0, "search.sampler.population_size", ctx);
  if (!a) return a.error();
  if (!b) return b.error();
  if (!bn) return bn.error();
  if (!m) return m.error();
  if (!g) return g.error();
  if (!l) return l.error();
  if (!w) return w.error();
  if (!k) return k.error();
  if (!ps) return ps.error();
  if (*ps == 1) return ctx.err("search.sampler.population_size", "must be 0 (automatic) or >= 2");
  c.n_startup_trials = static_cast<int>(*a);
  c.n_ei_candidates = static_cast<int>(*b);
  c.n_ei_candidates_numeric = static_cast<int>(*bn);
  c.multivariate = *m;
  c.group = *g;
  c.constant_liar = *l;
  c.prior_weight = *w;
  c.magic_clip = *k;
  c.population_size = static_cast<int>(*ps);
  if (auto r = parse_sampler_local(t, c, ctx); !r) return r;
  return parse_sampler_probs(t, c, ctx);
}

Result<void> parse_sampler(const toml::table& s, SamplerConfig& c, const Ctx& ctx) {
  const toml::node* n = s.get("sampler");
  if (n == nullptr) return ok();
  const toml::table* t = n->as_table();
  if (t == nullptr) {
    if (!n->is_string()) return ctx.err("search.sampler", "must be a name or a table");
    c.type = n->value_or(std::string());
    if (c.type == "cmaes") c.n_startup_trials = 1;  // Optuna's CmaEsSampler default
  } else if (auto r = parse_sampler_table(*t, c, ctx); !r) {
    return r;
  }
  if (!kind_of(kSamplers, c.type)) {
    return ctx.err("search.sampler",
                   "unknown sampler \"" + c.type + "\"; use " + names_of(kSamplers));
  }
  return ok();
}

Result<void> parse_pruner_table(const toml::table& t, PrunerConfig& c, const Ctx& ctx) {
  if (auto r = check_keys(t,
                          {"type", "percentile", "n_startup_trials", "n_warmup_steps",
                           "interval_steps", "n_min_trials", "min_resource", "max_resource",
                           "reduction_factor", "min_early_stopping_rate", "bootstrap_count"},
                          "search.pruner", ctx);
      !r) {
    return r;
  }
  if (const toml::node* n = t.get("type")) c.type = n->value_or(std::string());
  const std::string f = "search.pruner.";
  auto pct = get_number(t, "percentile", c.percentile, f + "percentile", ctx);
  auto st = get_int(t, "n_startup_trials", c.n_startup_trials, 0, f + "n_startup_trials", ctx);
  auto wu = get_int(t, "n_warmup_steps", c.n_warmup_steps, 0, f + "n_warmup_steps", ctx);
  auto iv = get_int(t, "interval_steps", c.interval_steps, 1, f + "interval_steps", ctx);
  auto mt = get_int(t, "n_min_trials", c.n_min_trials, 1, f + "n_min_trials", ctx);
  auto minr = get_int(t, "min_resource", c.min_resource.value_or(1), 1, f + "min_resource", ctx,
                      std::numeric_limits<std::int64_t>::max());
  auto maxr = get_int(t, "max_resource", c.max_resource.value_or(1), 1, f + "max_resource", ctx,
                      std::numeric_limits<std::int64_t>::max());
  auto rf = get_int(t, "reduction_factor", c.reduction_factor, 2, f + "reduction_factor", ctx);
  auto es = get_int(t, "min_early_stopping_rate", c.min_early_stopping_rate, 0,
                    f + "min_early_stopping_rate", ctx);
  auto bc = get_int(t, "bootstrap_count", c.bootstrap_count, 0, f + "bootstrap_count", ctx);
  for (const auto* r : {&st, &wu, &iv, &mt, &minr, &maxr, &rf, &es, &bc}) {
    if (!*r) return r->error();
  }
  if (!pct) return pct.error();
  if (*pct < 0.0 || *pct > 100.0) return ctx.err(f + "percentile", "must be in [0, 100]");
  c.percentile = *pct;
  c.n_startup_trials = static_cast<int>(*st);
  c.n_warmup_steps = static_cast<int>(*wu);
  c.interval_steps = static_cast<int>(*iv);
  c.n_min_trials = static_cast<int>(*mt);
  if (t.contains("min_resource")) c.min_resource = *minr;
  if (t.contains("max_resource")) c.max_resource = *maxr;
  c.reduction_factor = static_cast<int>(*rf);
  c.min_early_stopping_rate = static_cast<int>(*es);
  c.bootstrap_count = static_cast<int>(*bc);
  return ok();
}

Result<void> parse_pruner(const toml::table& s, PrunerConfig& c, const Ctx& ctx) {
  const toml::node* n = s.get("pruner");
  if (n == nullptr) return ok();
  if (const toml::table* t = n->as_table()) {
    if (auto r = parse_pruner_table(*t, c, ctx); !r) return r;
  } else if (n->is_string()) {
    c.type = n->value_or(std::string());
  } else {
    return ctx.err("search.pruner", "must be a name or a table");
  }
  if (!kind_of(kPruners, c.type)) {
    return ctx.err("search.pruner", "unknown pruner \"" + c.type + "\"; use " + names_of(kPruners));
  }
  if (c.type == "median") c.percentile = 50.0;
  if (c.min_resource && c.max_resource && *c.max_resource <= *c.min_resource) {
    return ctx.err("search.pruner.max_resource", "must be above min_resource");
  }
  return ok();
}

Result<void> parse_program(const toml::table& s, SearchSpace& space, const Ctx& ctx) {
  const toml::node* n = s.get("program");
  if (n == nullptr) return ok();
  const toml::array* a = n->as_array();
  if (a == nullptr || a->empty()) {
    return ctx.err("search.program", "must be a non-empty list, e.g. [\"python3\", \"obj.py\"]");
  }
  for (const toml::node& e : *a) {
    if (!e.is_string()) return ctx.err("search.program", "every element must be a string");
    space.program.push_back(e.value_or(std::string()));
  }
  return ok();
}

Result<void> parse_scalars(const toml::table& s, SearchSpace& space, const Ctx& ctx) {
  if (const toml::node* n = s.get("name")) {
    if (!n->is_string() || n->value_or(std::string()).empty()) {
      return ctx.err("search.name", "must be a non-empty string");
    }
    space.name = n->value_or(std::string());
  }
  auto seed =
      get_int(s, "seed", 0, 0, "search.seed", ctx, std::numeric_limits<std::int64_t>::max());
  auto n = get_int(s, "n_trials", space.n_trials, 1, "search.n_trials", ctx,
                   std::numeric_limits<std::int64_t>::max());
  auto c = get_int(s, "concurrency", space.concurrency, 1, "search.concurrency", ctx);
  auto t = get_number(s, "timeout_s", space.timeout_s, "search.timeout_s", ctx);
  auto g = get_number(s, "stop_grace_s", space.stop_grace_s, "search.stop_grace_s", ctx);
  auto resume = get_bool(s, "retry_from_checkpoint", space.retry_from_checkpoint,
                         "search.retry_from_checkpoint", ctx);
  if (!seed) return seed.error();
  if (!n) return n.error();
  if (!c) return c.error();
  if (!t) return t.error();
  if (!g) return g.error();
  if (!resume) return resume.error();
  if (const toml::node* oom = s.get("on_oom")) {
    const std::string text = oom->value_or(std::string());
    if (text == "replan") {
      space.on_oom = OnOom::replan;
    } else if (text == "record") {
      space.on_oom = OnOom::record;
    } else {
      return ctx.err("search.on_oom",
                     "must be \"replan\" (retry an out-of-memory trial in a plan that fits, the "
                     "default) or \"record\" (end it oom)");
    }
  }
  if (*t < 0.0) return ctx.err("search.timeout_s", "must be >= 0 (0 = no limit)");
  if (*g < 0.0) return ctx.err("search.stop_grace_s", "must be >= 0");
  space.seed = static_cast<std::uint64_t>(*seed);
  space.n_trials = *n;
  space.concurrency = static_cast<int>(*c);
  space.timeout_s = *t;
  space.stop_grace_s = *g;
  space.retry_from_checkpoint = *resume;
  return ok();
}

Result<std::vector<double>> pbt_factors(const toml::table& t, const std::vector<double>& fallback,
                                        const Ctx& ctx) {
  const std::string f = "search.pbt.factors";
  const toml::node* n = t.get("factors");
  if (n == nullptr) return fallback;
  const toml::array* a = n->as_array();
  if (a == nullptr || a->empty() || a->size() > 64) {
    return ctx.err(f, "must be a list of 1 to 64 numbers, e.g. [0.8, 1.2]");
  }
  std::vector<double> out;
  for (const toml::node& e : *a) {
    auto v = e.value<double>();
    if (!v || e.is_boolean()) return ctx.err(f, "every element must be a number, e.g. [0.8, 1.2]");
    if (!std::isfinite(*v) || *v <= 0.0) {
      return ctx.err(f, "every factor must be finite and > 0 (got " + num(*v) + ")");
    }
    out.push_back(*v);
  }
  return out;
}

// `mutable`: names of kPbtMutable, each a numeric parameter of the space, once.
Result<std::vector<std::string>> pbt_mutable(const toml::table& t, const SearchSpace& space,
                                             const Ctx& ctx) {
  const std::string f = "search.pbt.mutable";
  std::vector<std::string_view> known(kPbtMutable.begin(), kPbtMutable.end());
  const toml::array* a = t.get_as<toml::array>("mutable");
  if (a == nullptr || a->empty()) {
    return ctx.err(f,
                   "must be a non-empty list of the parameters that may change mid-run, some of " +
                       keys_of(known));
  }
  std::vector<std::string> out;
  for (const toml::node& e : *a) {
    const std::string name = e.value_or(std::string());
    if (!e.is_string() || std::find(known.begin(), known.end(), name) == known.end()) {
      return ctx.err(f, "\"" + name + "\" cannot change mid-run; use some of " + keys_of(known));
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      return ctx.err(f, "\"" + name + "\" is listed twice");
    }
    const int i = space.index_of(name);
    if (i < 0 || !space.params[static_cast<std::size_t>(i)].numeric()) {
      return ctx.err(f, "\"" + name +
                            "\" is not a float or int parameter of the search space; add " +
                            param_field(name) + " with its range");
    }
    if (!space.params[static_cast<std::size_t>(i)].when.empty()) {
      return ctx.err(f, "\"" + name +
                            "\" has a `when` condition; a mutable parameter must be "
                            "active in every trial");
    }
    out.push_back(name);
  }
  return out;
}

// [search.pbt]: read after the space, whose parameters `mutable` names.
Result<void> parse_pbt(const toml::table& s, SearchSpace& space, const Ctx& ctx) {
  const toml::node* n = s.get("pbt");
  if (n == nullptr) return ok();
  const toml::table* t = n->as_table();
  if (t == nullptr) return ctx.err("search.pbt", "must be a table ([search.pbt])");
  if (auto r = check_keys(*t,
                          {"population", "interval_steps", "quantile", "factors", "mutable",
                           "resample_probability"},
                          "search.pbt", ctx);
      !r) {
    return r;
  }
  PbtConfig c;
  const std::string f = "search.pbt.";
  auto pop = get_int(*t, "population", c.population, 2, f + "population", ctx, 1024);
  if (!pop) return pop.error();
  if (!t->contains("interval_steps")) {
    return ctx.err(f + "interval_steps",
                   "missing; set the steps each segment trains before exploit and explore, e.g. "
                   "interval_steps = 50");
  }
  auto iv = get_int(*t, "interval_steps", 1, 1, f + "interval_steps", ctx,
                    std::numeric_limits<std::int64_t>::max());
  if (!iv) return iv.error();
  auto q = get_number(*t, "quantile", c.quantile, f + "quantile", ctx);
  if (!q) return q.error();
  if (!(*q > 0.0 && *q <= 0.5)) {
    return ctx.err(f + "quantile", "must be in (0, 0.5] (got " + num(*q) + "), e.g. 0.25");
  }
  auto rp = get_number(*t, "resample_probability", c.resample_probability,
                       f + "resample_probability", ctx);
  if (!rp) return rp.error();
  if (*rp < 0.0 || *rp > 1.0) {
    return ctx.err(f + "resample_probability", "must be in [0, 1] (got " + num(*rp) + ")");
  }
  auto factors = pbt_factors(*t, c.factors, ctx);
  if (!factors) return factors.error();
  auto mut = pbt_mutable(*t, space, ctx);
  if (!mut) return mut.error();
  if (!space.program.empty()) {
    return ctx.err("search.pbt",
                   "needs shardtrain trials (a segment resumes from a sharded "
                   "checkpoint); remove search.program or [search.pbt]");
  }
  if (space.pruner.type != "none") {
    return ctx.err("search.pbt",
                   "replaces the pruner (the bottom quantile is replaced at every "
                   "interval); remove search.pruner");
  }
  if (space.objectives.size() != 1) {
    return ctx.err("search.pbt", "ranks trials on one objective; keep one in search.objectives");
  }
  c.population = static_cast<int>(*pop);
  c.interval_steps = *iv;
  c.quantile = *q;
  c.resample_probability = *rp;
  c.factors = std::move(*factors);
  c.mutable_params = std::move(*mut);
  space.pbt = std::move(c);
  return ok();
}

std::string stem_of(const std::string& path) {
  std::string base = path.substr(path.find_last_of("/\\") + 1);
  const auto dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

Result<SearchSpace> parse_section(const toml::table& s, const Ctx& ctx) {
  if (auto r = check_keys(
          s,
          {"name", "sampler", "seed", "n_trials", "timeout_s", "concurrency", "stop_grace_s",
           "retry_from_checkpoint", "on_oom", "objectives", "pruner", "program", "space", "pbt"},
          "search", ctx);
      !r) {
    return r.error();
  }
  SearchSpace space;
  space.name = stem_of(ctx.source);
  for (auto* step : {&parse_scalars, &parse_objectives, &parse_program}) {
    if (auto r = step(s, space, ctx); !r) return r.error();
  }
  if (auto r = parse_sampler(s, space.sampler, ctx); !r) return r.error();
  if (auto r = parse_pruner(s, space.pruner, ctx); !r) return r.error();
  const toml::table* sp = s.get_as<toml::table>("space");
  if (sp == nullptr || sp->empty()) {
    return ctx.err("search.space",
                   "no parameters; add e.g. [search.space.\"train.lr\"] with "
                   "type = \"float\", low = 1e-5, high = 1e-2, log = true");
  }
  for (const auto& [key, node] : *sp) {
    auto p = parse_param(std::string(key.str()), node, ctx);
    if (!p) return p.error();
    space.params.push_back(std::move(*p));
  }
  if (auto r = order_params(space.params, ctx); !r) return r.error();
  if (auto r = parse_pbt(s, space, ctx); !r) return r.error();
  return space;
}

}  // namespace

std::int64_t Param::cardinality() const {
  if (!numeric()) return static_cast<std::int64_t>(choices.size());
  if (step <= 0.0) return 0;
  return static_cast<std::int64_t>(std::llround((high - low) / step)) + 1;
}

double Param::internal_low() const {
  if (!numeric()) return 0.0;
  if (log) return std::log(step > 0.0 ? low - 0.5 * step : low);
  return step > 0.0 ? low - 0.5 * step : low;
}

double Param::internal_high() const {
  if (!numeric()) return static_cast<double>(choices.size());
  if (log) return std::log(step > 0.0 ? high + 0.5 * step : high);
  return step > 0.0 ? high + 0.5 * step : high;
}

double Param::to_internal(const ParamValue& v) const {
  if (!numeric()) {
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (same_value(choices[i], v)) return static_cast<double>(i);
    }
    return -1.0;
  }
  const double x = as_number(v).value_or(low);
  return log ? std::log(x) : x;
}

ParamValue Param::from_internal(double x) const {
  if (!numeric()) {
    const auto n = static_cast<double>(choices.size());
    const double i = std::clamp(std::floor(x), 0.0, n - 1.0);
    return choices[static_cast<std::size_t>(i)];
  }
  double v = log ? std::exp(x) : x;
  if (step > 0.0) {
    const double k =
        std::clamp(std::round((v - low) / step), 0.0, static_cast<double>(cardinality() - 1));
    v = std::min(low + k * step, high);
  }
  v = std::clamp(v, low, high);
  if (type == ParamType::Int) return static_cast<std::int64_t>(std::llround(v));
  return v;
}

ParamValue Param::from_unit(double u) const {
  const double lo = internal_low();
  const double hi = internal_high();
  return from_internal(std::min(lo + u * (hi - lo), std::nextafter(hi, lo)));
}

bool Param::contains(const ParamValue& v) const {
  if (!numeric()) return to_internal(v) >= 0.0;
  if (type == ParamType::Int && !std::holds_alternative<std::int64_t>(v)) return false;
  if (type == ParamType::Float && !std::holds_alternative<double>(v)) return false;
  const double x = *as_number(v);
  if (!(x >= low && x <= high)) return false;
  if (step <= 0.0) return true;
  const double k = (x - low) / step;
  return std::abs(k - std::round(k)) <= 1e-9 * std::max(1.0, k);
}

std::vector<ParamValue> Param::values() const {
  if (!numeric()) return choices;
  std::vector<ParamValue> out;
  const std::int64_t n = cardinality();
  for (std::int64_t k = 0; k < n; ++k) {
    const double v = std::min(low + static_cast<double>(k) * step, high);
    if (type == ParamType::Int)
      out.emplace_back(static_cast<std::int64_t>(std::llround(v)));
    else
      out.emplace_back(v);
  }
  return out;
}

int SearchSpace::index_of(std::string_view name) const {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool SearchSpace::active(const Param& p, const TrialParams& chosen) const {
  return std::all_of(p.when.begin(), p.when.end(), [&](const Condition& c) {
    auto it = chosen.find(c.param);
    return it != chosen.end() && same_value(it->second, c.value);
  });
}

Result<void> SearchSpace::check(const TrialParams& values) const {
  TrialParams seen;
  for (const Param& p : params) {
    auto it = values.find(p.name);
    const bool on = active(p, seen);
    if (on && it == values.end()) return fail(p.name + ": active but missing");
    if (!on && it != values.end()) return fail(p.name + ": inactive but present");
    if (!on) continue;
    if (!p.contains(it->second)) {
      return fail(p.name + ": " + format_value(it->second) + " is outside the space");
    }
    seen.insert(*it);
  }
  if (seen.size() != values.size()) return fail("trial has values for unknown parameters");
  return ok();
}

Result<SearchSpace> parse_search_space(std::string_view toml_text, const std::string& source_name) {
  return parse_search_space(toml_text, source_name, {});
}

Result<SearchSpace> parse_search_space(
    std::string_view toml_text, const std::string& source_name,
    const std::function<std::string(std::string_view field)>& where) {
  Ctx ctx{source_name, where};
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name.empty() ? std::string("search") : source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "not valid TOML at line " << e.source().begin.line << ": " << e.description();
    return ctx.err("search", msg.str());
  }
  const toml::table* s = &root;
  if (const toml::table* inner = root.get_as<toml::table>("search"); inner && root.size() == 1) {
    s = inner;
  }
  return parse_section(*s, ctx);
}

Result<SearchSpace> stored_search_space(std::string_view text, const std::string& source_name) {
  Ctx ctx{source_name, {}};
  toml::table root;
  try {
    root = toml::parse(text, source_name.empty() ? std::string("study") : source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "not valid TOML at line " << e.source().begin.line << ": " << e.description();
    return ctx.err("search", msg.str());
  }
  // The canonical form is the [search] table alone; a whole experiment (an older study's) holds
  // it among its other sections.
  const toml::table* s = root.get_as<toml::table>("search");
  if (s == nullptr) {
    return ctx.err("search",
                   "the stored text has no [search] table (objectives, sampler and "
                   "[search.space.\"<field>\"] tables; see docs/config.md)");
  }
  return parse_section(*s, ctx);
}

bool same_value(const ParamValue& a, const ParamValue& b) {
  auto na = as_number(a);
  auto nb = as_number(b);
  if (na && nb) return *na == *nb;
  return a == b;
}

std::string format_value(const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return num(*d);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

std::vector<std::string> program_arguments(const SearchSpace& space, const TrialParams& params) {
  std::vector<std::string> out;
  for (const Param& p : space.params) {
    auto it = params.find(p.name);
    if (it != params.end()) out.push_back("--" + p.name + "=" + format_value(it->second));
  }
  return out;
}

std::string experiment_override(const std::string& name, const ParamValue& value) {
  std::string literal = format_value(value);
  if (const auto* d = std::get_if<double>(&value);
      d && std::isfinite(*d) && literal.find_first_of(".eE") == std::string::npos) {
    literal += ".0";
  }
  if (const auto* s = std::get_if<std::string>(&value)) {
    literal = "\"";
    for (const char c : *s) {
      if (c == '"' || c == '\\') literal += '\\';
      literal += c;
    }
    literal += '"';
  }
  return name + "=" + literal;
}

}  // namespace shardscope::spec
