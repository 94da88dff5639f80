// bench_search: our samplers on standard test functions, and TPE's time per suggestion.
// Driven by bench_search.py, which runs Optuna on the same functions in the same script.
//   bench_search run --func NAME --sampler auto|tpe|random|cmaes|gp|TABLE|auto@N:S --seeds A B
//       --trials N
//       (TABLE: a TOML inline table, e.g. '{type = "tpe", n_ei_candidates = 48}'; auto@N:S:
//       sampler = "auto" with another switch, the GP for N trials then S (tpe, cmaes), to
//       measure the rule)
//       one line per seed: "NAME SEED TRUE_VALUE_OF_BEST_OBSERVED"
//   bench_search eval --func NAME k=v...   the noise-free value at one point
//   bench_search speed [--sampler S] [--reps R] N...   ms per suggestion with N finished
//       trials: "N FIXED_MS GROWING_MS" (see cmd_speed); S as for run (default "tpe"); R
//       suggestions timed per figure (default 200, 20 from 10,000 trials on)
//   bench_search list                       the function names
//   bench_search pareto --func zdt1|zdt2 --seeds A B --trials N
//       NSGA-II on a two-objective function: one line per seed, "SEED f1,f2 f1,f2 ..." with
//       every trial's objective values (the script computes the hypervolume of both sides)
//   bench_search trace --func NAME --seeds A B --trials N [--sampler S]
//       every proposal, one line each ("SEED TRIAL k=v ..." with %.17g floats): a diff of two
//       builds' traces proves a speed change left the proposals identical
//   bench_search ask --dim D --low L --high H --sampler S --seed N --trials N
//       ask/tell over stdio, for functions evaluated elsewhere (bench_bbob.py: COCO's bbob):
//       the box [L, H]^D as floats x0..x{D-1}; per trial one line "x0 x1 ..." (%.17g) on
//       stdout, then one value read from stdin (the objective, minimised); S as for run
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "search/autosampler.h"
#include "search/sampler.h"
#include "search/space.h"

using namespace shardscope::search;

namespace {

double num(const TrialParams& p, const std::string& k) {
  const ParamValue& v = p.at(k);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(std::get<std::int64_t>(v));
}

std::vector<double> xs(const TrialParams& p, int d) {
  std::vector<double> x;
  for (int i = 0; i < d; ++i) {
    std::string key = "x";  // (not "x" + ...: GCC 12 -Wrestrict false positive)
    key += std::to_string(i);
    x.push_back(num(p, key));
  }
  return x;
}

std::string box(int d, double lo, double hi) {
  std::string s;
  for (int i = 0; i < d; ++i) {
    s += "[search.space.x" + std::to_string(i) +
         "]\ntype = \"float\"\nlow = " + std::to_string(lo) + "\nhigh = " + std::to_string(hi) +
         "\n";
  }
  return s;
}

double branin(const TrialParams& p) {
  const double x1 = num(p, "x0");
  const double x2 = num(p, "x1");
  const double b = 5.1 / (4.0 * M_PI * M_PI);
  const double c = 5.0 / M_PI;
  const double t = 1.0 / (8.0 * M_PI);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6.0, 2) + 10.0 * (1.0 - t) * std::cos(x1) + 10.0;
}

double hartmann6(const TrialParams& p) {
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double a[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                 {0.05, 10, 17, 0.1, 8, 14},
                                 {3, 3.5, 1.7, 10, 17, 8},
                                 {17, 8, 0.05, 10, 0.1, 14}};
  static const double pp[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                  {2329, 4135, 8307, 3736, 1004, 9991},
                                  {2348, 1451, 3522, 2883, 3047, 6650},
                                  {4047, 8828, 8732, 5743, 1091, 381}};
  const auto x = xs(p, 6);
  double f = 0.0;
  for (int i = 0; i < 4; ++i) {
    double s = 0.0;
    for (int j = 0; j < 6; ++j)
      s += a[i][j] * std::pow(x[static_cast<std::size_t>(j)] - 1e-4 * pp[i][j], 2);
    f -= alpha[i] * std::exp(-s);
  }
  return f;
}

double rosenbrock10(const TrialParams& p) {
  const auto x = xs(p, 10);
  double f = 0.0;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) {
    f += 100.0 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1.0 - x[i], 2);
  }
  return f;
}

double styblinski8(const TrialParams& p) {
  double f = 0.0;
  for (double v : xs(p, 8)) f += 0.5 * (v * v * v * v - 16.0 * v * v + 5.0 * v);
  return f;
}

double ackley5(const TrialParams& p) {
  const auto x = xs(p, 5);
  double sq = 0.0;
  double cs = 0.0;
  for (double v : x) {
    sq += v * v;
    cs += std::cos(2.0 * M_PI * v);
  }
  const double n = static_cast<double>(x.size());
  return -20.0 * std::exp(-0.2 * std::sqrt(sq / n)) - std::exp(cs / n) + 20.0 + M_E;
}

// A categorical choice shifts the continuous optimum and adds an offset; an int joins in.
double mixed(const TrialParams& p) {
  const std::string c = std::get<std::string>(p.at("kind"));
  const double shift = c == "a" ? 1.0 : c == "b" ? -2.0 : c == "c" ? 3.0 : 0.0;
  const double offset = c == "a" ? 0.5 : c == "b" ? 0.0 : c == "c" ? 1.0 : 2.0;
  return std::pow(num(p, "x0") - shift, 2) + std::pow(num(p, "x1") + shift, 2) + offset +
         0.1 * std::pow(num(p, "n") - 7.0, 2);
}

// Two models with their own parameters (conditional space).
double conditional(const TrialParams& p) {
  if (std::get<std::string>(p.at("model")) == "linear") {
    return std::pow(std::log10(num(p, "lr")) + 2.0, 2) + std::pow(num(p, "reg") - 0.3, 2) + 0.2;
  }
  return std::pow((num(p, "depth") - 6.0) / 3.0, 2) + 2.0 * std::pow(num(p, "frac") - 0.7, 2);
}

struct Function {
  std::string name;
  std::string space;  // TOML
  std::function<double(const TrialParams&)> f;
  double noise = 0.0;  // sd of Gaussian noise on observations
};

std::vector<Function> functions() {
  const std::string mixed_space =
      "[search.space.kind]\ntype = \"categorical\"\nchoices = [\"a\", \"b\", \"c\", \"d\"]\n" +
      box(2, -5.0, 5.0) + "[search.space.n]\ntype = \"int\"\nlow = 0\nhigh = 10\n";
  const std::string cond_space = R"([search.space.model]
type = "categorical"
choices = ["linear", "tree"]
[search.space.lr]
type = "float"
low = 1e-4
high = 1.0
log = true
when = {model = "linear"}
[search.space.reg]
type = "float"
low = 0.0
high = 1.0
when = {model = "linear"}
[search.space.depth]
type = "int"
low = 1
high = 12
when = {model = "tree"}
[search.space.frac]
type = "float"
low = 0.1
high = 1.0
when = {model = "tree"}
)";
  return {
      {"branin",
       "[search.space.x0]\ntype = \"float\"\nlow = -5.0\nhigh = 10.0\n"
       "[search.space.x1]\ntype = \"float\"\nlow = 0.0\nhigh = 15.0\n",
       branin},
      {"hartmann6", box(6, 0.0, 1.0), hartmann6},
      {"rosenbrock10", box(10, -5.0, 10.0), rosenbrock10},
      {"styblinski_tang8", box(8, -5.0, 5.0), styblinski8},
      {"ackley5", box(5, -32.768, 32.768), ackley5},
      {"mixed", mixed_space, mixed},
      {"conditional", cond_space, conditional},
      {"noisy_hartmann6", box(6, 0.0, 1.0), hartmann6, 0.1},
  };
}

const Function* find(const std::string& name) {
  static const std::vector<Function> all = functions();
  for (const Function& f : all) {
    if (f.name == name) return &f;
  }
  std::fprintf(stderr, "bench_search: unknown function %s\n", name.c_str());
  std::exit(2);
}

SearchSpace space_of(const Function& fn, const std::string& sampler) {
  // A name ("tpe"), an inline table ("{type = \"tpe\", n_ei_candidates = 48}") or auto@N:S.
  const std::string value = sampler.rfind("auto@", 0) == 0           ? "\"auto\""
                            : sampler.find('{') == std::string::npos ? "\"" + sampler + "\""
                                                                     : sampler;
  auto s = parse_search_space("[search]\nsampler = " + value + "\n" + fn.space, fn.name);
  if (!s) {
    std::fprintf(stderr, "bench_search: %s\n", s.message().c_str());
    std::exit(2);
  }
  return *s;
}

// The sampler `name` stands for: make_sampler's, or for auto@N:S an AutoSampler with that switch.
std::unique_ptr<Sampler> sampler_for(const SearchSpace& space, const std::string& name) {
  if (name.rfind("auto@", 0) == 0) {
    const std::size_t colon = name.find(':');
    AutoChoice choice;
    choice.gp_trials = std::atoll(name.substr(5, colon - 5).c_str());
    const std::string then = colon == std::string::npos ? "tpe" : name.substr(colon + 1);
    choice.then =
        then == "cmaes" ? shardscope::spec::SamplerKind::cmaes : shardscope::spec::SamplerKind::tpe;
    return std::make_unique<AutoSampler>(space, choice);
  }
  auto made = make_sampler(space);
  if (!made) {
    std::fprintf(stderr, "bench_search: %s\n", made.message().c_str());
    std::exit(2);
  }
  return std::move(*made);
}

// One optimisation run; returns the noise-free value of the best observed trial.
double optimise(const Function& fn, const std::string& sampler_name, std::uint64_t seed, int n) {
  const SearchSpace space = space_of(fn, sampler_name);
  auto sampler = sampler_for(space, sampler_name);
  Rng rng(seed);
  std::vector<Trial> done;
  double best_obs = INFINITY;
  double best_true = INFINITY;
  for (int i = 0; i < n; ++i) {
    Trial t;
    t.number = i;
    t.state = TrialState::Complete;
    t.params = sampler->sample(space, done, {}, rng).value();
    const double truth = fn.f(t.params);
    const double obs = truth + fn.noise * rng.normal();
    t.values = {obs};
    if (obs < best_obs) {
      best_obs = obs;
      best_true = truth;
    }
    done.push_back(std::move(t));
  }
  return best_true;
}

// Every proposal of one run, printed as it is made.
void trace(const Function& fn, const std::string& sampler_name, std::uint64_t seed, int n) {
  const SearchSpace space = space_of(fn, sampler_name);
  auto sampler = sampler_for(space, sampler_name);
  Rng rng(seed);
  std::vector<Trial> done;
  for (int i = 0; i < n; ++i) {
    Trial t;
    t.number = i;
    t.state = TrialState::Complete;
    t.params = sampler->sample(space, done, {}, rng).value();
    std::printf("%llu %d", static_cast<unsigned long long>(seed), i);
    for (const auto& [k, v] : t.params) std::printf(" %s=%s", k.c_str(), format_value(v).c_str());
    std::printf("\n");
    t.values = {fn.f(t.params) + fn.noise * rng.normal()};
    done.push_back(std::move(t));
  }
}

int cmd_run(int argc, char** argv, bool tracing) {
  std::string func;
  std::string sampler = "tpe";
  std::uint64_t s0 = 0;
  std::uint64_t s1 = 1;
  int trials = 100;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--func")
      func = argv[i + 1];
    else if (k == "--sampler")
      sampler = argv[i + 1];
    else if (k == "--trials")
      trials = std::atoi(argv[i + 1]);
    else if (k == "--seeds") {
      s0 = std::strtoull(argv[i + 1], nullptr, 10);
      s1 = std::strtoull(argv[i + 2], nullptr, 10);
      ++i;
    }
  }
  const Function& fn = *find(func);
  for (std::uint64_t seed = s0; seed < s1; ++seed) {
    if (tracing) {
      trace(fn, sampler, seed, trials);
      continue;
    }
    std::printf("%s %llu %.17g\n", fn.name.c_str(), static_cast<unsigned long long>(seed),
                optimise(fn, sampler, seed, trials));
    std::fflush(stdout);
  }
  return 0;
}

int cmd_eval(int argc, char** argv) {
  const Function& fn = *find(argv[3]);
  const SearchSpace space = space_of(fn, "random");
  TrialParams p;
  for (int i = 4; i < argc; ++i) {
    const std::string kv = argv[i];
    const std::string k = kv.substr(0, kv.find('='));
    const std::string v = kv.substr(kv.find('=') + 1);
    const Param& param = space.params[static_cast<std::size_t>(space.index_of(k))];
    if (param.type == ParamType::Int)
      p[k] = static_cast<std::int64_t>(std::stoll(v));
    else if (param.type == ParamType::Float)
      p[k] = std::stod(v);
    else
      p[k] = v;
  }
  std::printf("%.17g\n", fn.f(p));
  return 0;
}

// Ask/tell over stdio: the function lives in the driving script (COCO's bbob via cocoex), the
// proposals come from the same sampler->sample path as optimise(). Exits 3 on a malformed or
// missing value, naming the trial.
int cmd_ask(int argc, char** argv) {
  int dim = 2;
  double low = -5.0;
  double high = 5.0;
  std::string sampler_name = "tpe";
  std::uint64_t seed = 0;
  int trials = 100;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--dim")
      dim = std::atoi(argv[i + 1]);
    else if (k == "--low")
      low = std::strtod(argv[i + 1], nullptr);
    else if (k == "--high")
      high = std::strtod(argv[i + 1], nullptr);
    else if (k == "--sampler")
      sampler_name = argv[i + 1];
    else if (k == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--trials")
      trials = std::atoi(argv[i + 1]);
  }
  if (dim < 1 || dim > 1000 || !(low < high)) {
    std::fprintf(stderr, "bench_search ask: --dim must be 1-1000 and --low below --high\n");
    return 2;
  }
  const Function fn{"ask", box(dim, low, high), nullptr};
  const SearchSpace space = space_of(fn, sampler_name);
  auto sampler = sampler_for(space, sampler_name);
  Rng rng(seed);
  std::vector<Trial> done;
  for (int i = 0; i < trials; ++i) {
    Trial t;
    t.number = i;
    t.state = TrialState::Complete;
    t.params = sampler->sample(space, done, {}, rng).value();
    const auto x = xs(t.params, dim);
    for (std::size_t j = 0; j < x.size(); ++j) std::printf(j ? " %.17g" : "%.17g", x[j]);
    std::printf("\n");
    std::fflush(stdout);
    double value = 0.0;
    if (std::scanf("%lf", &value) != 1 || !std::isfinite(value)) {
      std::fprintf(stderr, "bench_search ask: trial %d: expected a finite value on stdin\n", i);
      return 3;
    }
    t.values = {value};
    done.push_back(std::move(t));
  }
  return 0;
}

// CPU time (not wall: the machine is shared) per suggestion with n finished random trials on
// Hartmann-6 (multivariate TPE). Two figures per n: "fixed", the history stays n (what Optuna's
// side measures, and where our sampler's caches see no change between calls), and "growing",
// one more finished trial before every suggestion (a study's normal course: the caches are
// updated by that trial each time).
int cmd_speed(int argc, char** argv) {
  const Function& fn = *find("hartmann6");
  int first = 2;
  std::string sampler_name = "tpe";
  int reps_wanted = 0;  // 0: 200 (20 from 10,000 trials on)
  while (first + 1 < argc && std::strncmp(argv[first], "--", 2) == 0) {
    if (std::strcmp(argv[first], "--sampler") == 0) sampler_name = argv[first + 1];
    if (std::strcmp(argv[first], "--reps") == 0) reps_wanted = std::atoi(argv[first + 1]);
    first += 2;
  }
  const SearchSpace space = space_of(fn, sampler_name);
  auto finished_trial = [&](std::vector<Trial>& done, RandomSampler& random, Rng& rng) {
    Trial t;
    t.number = static_cast<std::int64_t>(done.size());
    t.state = TrialState::Complete;
    t.params = random.sample(space, done, {}, rng).value();
    t.values = {fn.f(t.params)};
    done.push_back(std::move(t));
  };
  for (int a = first; a < argc; ++a) {
    const int n = std::atoi(argv[a]);
    const int reps = reps_wanted > 0 ? reps_wanted : n >= 10000 ? 20 : 200;
    Rng rng(1);
    RandomSampler random;
    std::vector<Trial> done;
    done.reserve(static_cast<std::size_t>(n) + static_cast<std::size_t>(reps));
    for (int i = 0; i < n; ++i) finished_trial(done, random, rng);
    auto sampler = sampler_for(space, sampler_name);
    (void)sampler->sample(space, done, {}, rng);  // first call: fills the caches
    std::clock_t c0 = std::clock();
    for (int r = 0; r < reps; ++r) (void)sampler->sample(space, done, {}, rng);
    const double fixed = 1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / reps;
    // Growing: the new trials are drawn before the clock starts, and handed over one by one.
    // 50 suggestions, so the history stays within 5% of n from 1,000 on.
    const int grow = std::min(reps, 50);
    std::vector<Trial> extra;
    for (int r = 0; r < grow; ++r) finished_trial(done, random, rng);
    extra.assign(std::make_move_iterator(done.end() - grow), std::make_move_iterator(done.end()));
    done.resize(static_cast<std::size_t>(n));
    std::clock_t spent = 0;
    for (int r = 0; r < grow; ++r) {
      done.push_back(std::move(extra[static_cast<std::size_t>(r)]));
      c0 = std::clock();
      (void)sampler->sample(space, done, {}, rng);
      spent += std::clock() - c0;
    }
    const double growing = 1000.0 * static_cast<double>(spent) / CLOCKS_PER_SEC / grow;
    std::printf("%d %.6f %.6f\n", n, fixed, growing);
  }
  return 0;
}

// ZDT1 / ZDT2 (Zitzler, Deb, Thiele 2000) with 10 variables in [0, 1]: two objectives, the
// Pareto front at x1..x9 = 0 (convex for ZDT1, concave for ZDT2).
std::vector<double> zdt(const TrialParams& p, bool concave) {
  const auto x = xs(p, 10);
  double sum = 0.0;
  for (std::size_t i = 1; i < x.size(); ++i) sum += x[i];
  const double g = 1.0 + 9.0 * sum / 9.0;
  const double r = x[0] / g;
  return {x[0], g * (1.0 - (concave ? r * r : std::sqrt(r)))};
}

int cmd_pareto(int argc, char** argv) {
  std::string func;
  std::uint64_t s0 = 0;
  std::uint64_t s1 = 1;
  int trials = 500;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--func") {
      func = argv[i + 1];
    } else if (k == "--trials") {
      trials = std::atoi(argv[i + 1]);
    } else if (k == "--seeds" && i + 2 < argc) {
      s0 = std::strtoull(argv[i + 1], nullptr, 10);
      s1 = std::strtoull(argv[i + 2], nullptr, 10);
      ++i;
    }
  }
  if (func != "zdt1" && func != "zdt2") {
    std::fprintf(stderr, "bench_search: pareto knows zdt1 and zdt2, not %s\n", func.c_str());
    return 2;
  }
  auto space = parse_search_space(
      "[search]\nsampler = \"nsga2\"\nobjectives = {f1 = \"minimize\", f2 = \"minimize\"}\n" +
          box(10, 0.0, 1.0),
      func);
  if (!space) {
    std::fprintf(stderr, "bench_search: %s\n", space.message().c_str());
    return 2;
  }
  for (std::uint64_t seed = s0; seed < s1; ++seed) {
    auto sampler = make_sampler(*space).value();
    Rng rng(seed);
    std::vector<Trial> done;
    std::printf("%llu", static_cast<unsigned long long>(seed));
    for (int i = 0; i < trials; ++i) {
      Trial t;
      t.number = i;
      t.state = TrialState::Complete;
      t.params = sampler->sample(*space, done, {}, rng).value();
      t.values = zdt(t.params, func == "zdt2");
      std::printf(" %.17g,%.17g", t.values[0], t.values[1]);
      done.push_back(std::move(t));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "run" || cmd == "trace") return cmd_run(argc, argv, cmd == "trace");
  if (cmd == "eval" && argc > 3) return cmd_eval(argc, argv);
  if (cmd == "speed") return cmd_speed(argc, argv);
  if (cmd == "pareto") return cmd_pareto(argc, argv);
  if (cmd == "ask") return cmd_ask(argc, argv);
  if (cmd == "list") {
    for (const Function& f : functions()) std::printf("%s\n", f.name.c_str());
    return 0;
  }
  std::fprintf(
      stderr,
      "usage: bench_search run|trace|eval|speed|pareto|ask|list ... (see bench_search.py)\n");
  return 2;
}
