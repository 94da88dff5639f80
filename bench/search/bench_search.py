#!/usr/bin/env python3
"""Search benchmark: our TPE (bench_search) against Optuna's TPE on the same functions, in one
script. Prints, per function, the mean normalised regret of both (regret of the best observed
trial divided by random search's mean regret with the same budget), their ratio and a two-sided
Mann-Whitney U p-value; then CPU time per suggestion at 100/1,000/10,000 finished trials against
Optuna at 1,000. A benchmark, not a test: it prints figures.

  .venv/bin/python bench/search/bench_search.py --tool build/bin/bench_search [--seeds 20]
      [--first-seed 0] [--optuna-cache FILE] [--sampler '{type = "tpe", n_ei_candidates = 48}']
      [--only NAME...]
  .venv/bin/python bench/search/bench_search.py --tool build/bin/bench_search --tune-seeds 100
      [--seeds 20] [--sampler ...]   (a tuning probe: our side only, seeds 100-119)
  .venv/bin/python bench/search/bench_search.py --tool build/bin/bench_search --gp-speed
      [--seeds 5] [--only NAME...]
      (the GP sampler: CPU ms per suggestion at 100 finished trials, then regret at 20 and 50
      trials, beside Optuna's GPSampler (it fits with scipy, requirements-test.txt) and TPE)
  .venv/bin/python bench/search/bench_search.py --tool build/bin/bench_search --auto
      [--seeds 5] [--first-seed 0] [--optuna-cache FILE] [--ours auto gp old:auto old:gp]
      [--peer-tool OTHER/bench_search] [--no-optuna]
      (sampler = "auto" and --ours at 20/50/100 trials beside Optuna's TPE and GPSampler; an
      "old:S" runs S with --peer-tool, e.g. bench_search built at an earlier commit)
"""
import argparse
import json
import math
import os
import resource
import random
import statistics
import subprocess
import time

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

optuna.logging.set_verbosity(optuna.logging.ERROR)

# -- the functions, as bench_search.cpp defines them -----------------------------------------

HART_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8],
          [17, 8, 0.05, 10, 0.1, 14]]
HART_P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
          [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
HART_ALPHA = [1.0, 1.2, 3.0, 3.2]


def branin(p):
    x1, x2 = p["x0"], p["x1"]
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def hartmann6(p):
    x = [p[f"x{i}"] for i in range(6)]
    return -sum(HART_ALPHA[i] * math.exp(-sum(HART_A[i][j] * (x[j] - 1e-4 * HART_P[i][j]) ** 2
                                               for j in range(6))) for i in range(4))


def rosenbrock10(p):
    x = [p[f"x{i}"] for i in range(10)]
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(9))


def styblinski8(p):
    return sum(0.5 * (v ** 4 - 16 * v ** 2 + 5 * v) for v in (p[f"x{i}"] for i in range(8)))


def ackley5(p):
    x = [p[f"x{i}"] for i in range(5)]
    n = len(x)
    return (-20 * math.exp(-0.2 * math.sqrt(sum(v * v for v in x) / n))
            - math.exp(sum(math.cos(2 * math.pi * v) for v in x) / n) + 20 + math.e)


def mixed(p):
    shift = {"a": 1.0, "b": -2.0, "c": 3.0, "d": 0.0}[p["kind"]]
    offset = {"a": 0.5, "b": 0.0, "c": 1.0, "d": 2.0}[p["kind"]]
    return (p["x0"] - shift) ** 2 + (p["x1"] + shift) ** 2 + offset + 0.1 * (p["n"] - 7) ** 2


def conditional(p):
    if p["model"] == "linear":
        return (math.log10(p["lr"]) + 2) ** 2 + (p["reg"] - 0.3) ** 2 + 0.2
    return ((p["depth"] - 6) / 3) ** 2 + 2 * (p["frac"] - 0.7) ** 2


def box(trial, d, lo, hi):
    return {f"x{i}": trial.suggest_float(f"x{i}", lo, hi) for i in range(d)}


def space_mixed(trial):
    p = {"kind": trial.suggest_categorical("kind", ["a", "b", "c", "d"])}
    p.update(box(trial, 2, -5, 5))
    p["n"] = trial.suggest_int("n", 0, 10)
    return p


def space_conditional(trial):
    p = {"model": trial.suggest_categorical("model", ["linear", "tree"])}
    if p["model"] == "linear":
        p["lr"] = trial.suggest_float("lr", 1e-4, 1.0, log=True)
        p["reg"] = trial.suggest_float("reg", 0.0, 1.0)
    else:
        p["depth"] = trial.suggest_int("depth", 1, 12)
        p["frac"] = trial.suggest_float("frac", 0.1, 1.0)
    return p


# name: (space, function, optimum, noise sd)
FUNCS = {
    "branin": (lambda t: {"x0": t.suggest_float("x0", -5, 10), "x1": t.suggest_float("x1", 0, 15)},
               branin, 0.397887357729738, 0.0),
    "hartmann6": (lambda t: box(t, 6, 0, 1), hartmann6, -3.32236801141551, 0.0),
    "rosenbrock10": (lambda t: box(t, 10, -5, 10), rosenbrock10, 0.0, 0.0),
    "styblinski_tang8": (lambda t: box(t, 8, -5, 5), styblinski8, -39.16616570377142 * 8, 0.0),
    "ackley5": (lambda t: box(t, 5, -32.768, 32.768), ackley5, 0.0, 0.0),
    "mixed": (space_mixed, mixed, 0.0, 0.0),
    "conditional": (space_conditional, conditional, 0.0, 0.0),
    "noisy_hartmann6": (lambda t: box(t, 6, 0, 1), hartmann6, -3.32236801141551, 0.1),
}


def optuna_run(name, seed, n_trials):
    space, f, _, noise = FUNCS[name]
    rng = random.Random(seed)
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                         n_startup_trials=10, n_ei_candidates=24)
    study = optuna.create_study(sampler=sampler)
    best_obs, best_true = math.inf, math.inf
    for _ in range(n_trials):
        trial = study.ask()
        p = space(trial)
        truth = f(p)
        obs = truth + noise * rng.gauss(0, 1)
        study.tell(trial, obs)
        if obs < best_obs:
            best_obs, best_true = obs, truth
    return best_true


# --peer-tool: another bench_search (e.g. built at an earlier commit in a second build dir);
# with --auto, a name "old:S" in --ours runs sampler S with it, beside this tree's.
PEER_TOOL = None


def ours(tool, name, sampler, seeds, n_trials, first=0):
    if sampler.startswith("old:"):
        if PEER_TOOL is None:
            raise SystemExit(f"{sampler}: give --peer-tool, the bench_search to run it with")
        tool, sampler = PEER_TOOL, sampler[4:]
    out = subprocess.run([tool, "run", "--func", name, "--sampler", sampler, "--seeds", str(first),
                          str(first + seeds), "--trials", str(n_trials)], check=True,
                         capture_output=True, text=True).stdout.split()
    return [float(v) for v in out[2::3]]


def tune(tool, first, seeds, n_trials, names, sampler):
    """A tuning probe, our side only: mean normalised regret per function on seeds first..first +
    seeds - 1 (keep 0-19, the quality table's, held out), one row in the order of `names`."""
    row = []
    for name in names:
        opt = FUNCS[name][2]
        rand_v = ours(tool, name, "random", seeds, n_trials, first)
        norm = statistics.mean(v - opt for v in rand_v) or 1.0
        ours_v = ours(tool, name, sampler, seeds, n_trials, first)
        row.append(statistics.mean((v - opt) / norm for v in ours_v))
    print(f"seeds {first}-{first + seeds - 1}, {sampler}:")
    print(" ".join(f"{v:.3f}" for v in row))


def check_same_functions(tool):
    """Both sides must optimise the same functions: compare values at random points."""
    for name, (space, f, _, _) in FUNCS.items():
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
        for _ in range(3):
            trial = study.ask()
            p = space(trial)
            study.tell(trial, 0.0)
            args = [f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}" for k, v in p.items()]
            theirs = float(subprocess.run([tool, "eval", "--func", name, *args], check=True,
                                          capture_output=True, text=True).stdout)
            if abs(theirs - f(p)) > 1e-9 * max(1.0, abs(f(p))):
                raise SystemExit(f"{name}: bench_search says {theirs}, Python {f(p)} at {p}")


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U p-value (normal approximation, tie-corrected)."""
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    i, ties = 0, 0.0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    n1, n2 = len(a), len(b)
    r1 = sum(r for r, (_, g) in zip(ranks, pooled) if g == 0)
    u = r1 - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    n = n1 + n2
    sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sd == 0:
        return 1.0
    z = (abs(u - mu) - 0.5) / sd
    return math.erfc(max(z, 0) / math.sqrt(2))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def optuna_runs(name, seeds, n_trials, cache, first=0):
    """Optuna's results on seeds first..first + seeds - 1, from the JSON cache file when it has
    them (Optuna is deterministic for a seed, and its runs dominate the script's time; the cache
    holds seeds 0.. in order)."""
    key = f"{name}/{n_trials}"
    stored = {}
    if cache and os.path.exists(cache):
        with open(cache) as f:
            stored = json.load(f)
    have = stored.get(key, [])
    if len(have) < first + seeds:
        have = have + [optuna_run(name, s, n_trials) for s in range(len(have), first + seeds)]
        stored[key] = have
        if cache:
            with open(cache, "w") as f:
                json.dump(stored, f)
    return have[first:first + seeds]


def quality(tool, seeds, n_trials, names, sampler="tpe", cache=None, first=0):
    print(f"\n== Quality: {n_trials} trials, seeds {first}-{first + seeds - 1}, TPE "
          "multivariate+group, 10 startup ==")
    print("normalised regret = (best - optimum) / mean random-search regret at the same budget")
    print(f"{'function':18} {'ours':>9} {'optuna':>9} {'ratio':>7} {'MWU p':>7}  verdict"
          f"   (ours s, optuna s)")
    ratios = []
    for name in names:
        opt = FUNCS[name][2]
        t0 = child_cpu()
        ours_v = ours(tool, name, sampler, seeds, n_trials, first)
        t_ours = child_cpu() - t0
        rand_v = ours(tool, name, "random", seeds, n_trials, first)
        t0 = time.process_time()
        theirs_v = optuna_runs(name, seeds, n_trials, cache, first)
        t_theirs = time.process_time() - t0
        norm = statistics.mean(v - opt for v in rand_v) or 1.0
        a = [(v - opt) / norm for v in ours_v]
        b = [(v - opt) / norm for v in theirs_v]
        ratio = statistics.mean(a) / statistics.mean(b) if statistics.mean(b) > 0 else float("nan")
        ratios.append(ratio)
        p = mann_whitney_p(a, b)
        verdict = "same" if p >= 0.05 else ("BETTER" if statistics.median(a) < statistics.median(b)
                                            else "WORSE")
        print(f"{name:18} {statistics.mean(a):9.4f} {statistics.mean(b):9.4f} {ratio:7.3f} "
              f"{p:7.3f}  {verdict:7}  ({t_ours:.1f}, {t_theirs:.1f})", flush=True)
    print(f"mean ratio over the suite: {statistics.mean(ratios):.3f} (target <= 0.9)")


def optuna_speed(n_finished, reps):
    rng = random.Random(1)
    dists = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(6)}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1, multivariate=True))
    trials = []
    for _ in range(n_finished):
        p = {k: rng.random() for k in dists}
        trials.append(create_trial(params=p, distributions=dists, value=hartmann6(p),
                                   state=TrialState.COMPLETE))
    study.add_trials(trials)
    t0 = time.process_time()
    for _ in range(reps):
        trial = study.ask(fixed_distributions=dists)
        study.tell(trial, state=TrialState.FAIL)  # not counted by TPE: the history stays n
    return (time.process_time() - t0) / reps * 1000


def speed(tool, sampler="tpe"):
    print("\n== Speed: CPU ms per suggestion, Hartmann-6, multivariate TPE, n finished trials ==")
    if sampler != "tpe":
        print(f"ours: {sampler}")
    print("fixed: the history stays n (as Optuna's side is timed); growing: one more finished trial")
    print("before every suggestion (a study's normal course)")
    out = subprocess.run([tool, "speed", "--sampler", sampler, "100", "1000", "10000"], check=True,
                         capture_output=True, text=True).stdout.split()
    ours_ms = {int(out[i]): (float(out[i + 1]), float(out[i + 2])) for i in range(0, len(out), 3)}
    theirs = optuna_speed(1000, 10)
    for n, (fixed, growing) in ours_ms.items():
        print(f"ours at {n:6}: {fixed:9.4f} ms fixed {growing:9.4f} ms growing")
    worst = max(ours_ms[1000])
    print(f"optuna at  1000: {theirs:9.4f} ms  -> ours is {theirs / worst:.0f}x faster "
          f"at 1,000, slower of our two figures (target >= 100x)")


def optuna_gp_speed(n_finished, reps):
    """Optuna's GPSampler, CPU ms per suggestion with n finished random trials on Hartmann-6
    (Optuna keeps a fit cache between suggestions, as ours does). None without scipy."""
    try:
        import scipy  # noqa: F401  (Optuna's GP fits and optimises with scipy.optimize)
    except ImportError:
        return None
    rng = random.Random(1)
    dists = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(6)}
    study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=1))
    trials = []
    for _ in range(n_finished):
        p = {k: rng.random() for k in dists}
        trials.append(create_trial(params=p, distributions=dists, value=hartmann6(p),
                                   state=TrialState.COMPLETE))
    study.add_trials(trials)
    trial = study.ask(fixed_distributions=dists)  # the first fit, from all-ones hyperparameters
    study.tell(trial, state=TrialState.FAIL)
    t0 = time.process_time()
    for _ in range(reps):
        trial = study.ask(fixed_distributions=dists)
        study.tell(trial, state=TrialState.FAIL)  # not modelled by the GP: the history stays n
    return (time.process_time() - t0) / reps * 1000


def optuna_checkpoints(name, seed, sampler, budgets):
    """One Optuna run of max(budgets) trials: the true value of the best observed trial after
    each budget."""
    space, f, _, noise = FUNCS[name]
    rng = random.Random(seed)
    study = optuna.create_study(sampler=sampler)
    best_obs, best_true, out = math.inf, math.inf, {}
    for i in range(max(budgets)):
        trial = study.ask()
        p = space(trial)
        truth = f(p)
        obs = truth + noise * rng.gauss(0, 1)
        study.tell(trial, obs)
        if obs < best_obs:
            best_obs, best_true = obs, truth
        if i + 1 in budgets:
            out[i + 1] = best_true
    return out


def gp_quality(tool, seeds, names, budgets=(20, 50)):
    """Small budgets, side by side: our gp and tpe, Optuna's GPSampler (with scipy) and TPE
    (multivariate); mean normalised regret (by our random search's mean regret)."""
    try:
        import scipy  # noqa: F401
        have_scipy = True
    except ImportError:
        have_scipy = False
    print(f"\n== GP at small budgets: mean normalised regret, seeds 0-{seeds - 1} ==")
    print(f"{'function':18} {'budget':>6} {'ours gp':>8} {'ours tpe':>8} {'opt gp':>8} "
          f"{'opt tpe':>8}")
    for name in names:
        opt = FUNCS[name][2]
        theirs = {"gp": [], "tpe": []}
        for s in range(seeds):
            if have_scipy:
                theirs["gp"].append(optuna_checkpoints(
                    name, s, optuna.samplers.GPSampler(seed=s), budgets))
            theirs["tpe"].append(optuna_checkpoints(
                name, s, optuna.samplers.TPESampler(seed=s, multivariate=True, group=True),
                budgets))
        for b in budgets:
            norm = statistics.mean(v - opt for v in ours(tool, name, "random", seeds, b)) or 1.0
            row = [statistics.mean((v - opt) / norm for v in ours(tool, name, smp, seeds, b))
                   for smp in ("gp", "tpe")]
            for key in ("gp", "tpe"):
                row.append(statistics.mean((r[b] - opt) / norm for r in theirs[key])
                           if theirs[key] else math.nan)
            print(f"{name:18} {b:6} " + " ".join(f"{v:8.3f}" for v in row), flush=True)
    if not have_scipy:
        print("opt gp: not run (Optuna's GPSampler needs scipy, which .venv lacks)")


def optuna_auto_side(names, first, seeds, budgets, cache, gp_trials=50):
    """Optuna's TPE (multivariate, group) and GPSampler (with scipy) on seeds first..: per
    function, sampler and seed the true value of the best observed trial at each budget, kept in
    the JSON file `cache` (both are deterministic for a seed). Optuna's GP runs `gp_trials`
    trials only (its budgets above are not run: at 100 trials it takes minutes a run on a loaded
    machine; a longer run in the cache is read up to `gp_trials` too, so every function has the
    same budgets)."""
    try:
        import scipy  # noqa: F401
        kinds = ("tpe", "gp")
    except ImportError:
        kinds = ("tpe",)
    stored = {}
    if cache and os.path.exists(cache):
        with open(cache) as f:
            stored = json.load(f)
    out = {}
    for name in names:
        for kind in kinds:
            upto = [b for b in budgets if kind != "gp" or b <= gp_trials]
            for s in range(first, first + seeds):
                key = f"{kind}/{name}/{s}/{max(budgets)}"
                if key not in stored:
                    key = f"{kind}/{name}/{s}/{max(upto)}"
                if key not in stored:
                    sampler = (optuna.samplers.GPSampler(seed=s) if kind == "gp" else
                               optuna.samplers.TPESampler(seed=s, multivariate=True, group=True))
                    got = optuna_checkpoints(name, s, sampler, upto)
                    stored[key] = {str(b): v for b, v in got.items()}
                    if cache:
                        with open(cache, "w") as f:
                            json.dump(stored, f)
                out.setdefault((name, kind), []).append(
                    {int(b): v for b, v in stored[key].items() if int(b) in upto})
    return out


def ours_or_none(tool, name, sampler, seeds, n_trials, first):
    """ours(), or None when our sampler refuses the space (cmaes without a numeric parameter)."""
    try:
        return ours(tool, name, sampler, seeds, n_trials, first)
    except subprocess.CalledProcessError:
        return None


def geo_mean(values):
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(statistics.mean(math.log(v) for v in values)) if values else math.nan


def auto_table(tool, names, first, seeds, cache, ours_samplers, budgets=(20, 50, 100),
               with_optuna=True):
    """`sampler = "auto"` (and our other samplers) beside Optuna's TPE and GPSampler at 20, 50
    and 100 trials: mean normalised regret (by our random search's mean regret at that budget),
    then per budget the geometric mean over the functions of auto's ratio to each of Optuna's."""
    theirs = optuna_auto_side(names, first, seeds, budgets, cache) if with_optuna else {}
    opt_kinds = sorted({k for (_, k) in theirs}, reverse=True)  # tpe, gp
    print(f"\n== auto at 20/50/100 trials: mean normalised regret, seeds {first}-"
          f"{first + seeds - 1} ==")
    head = " ".join(f"{s[:12]:>12}" for s in ours_samplers)
    head += "".join(f" {'opt ' + k:>8}" for k in opt_kinds)
    head += "".join(f" {'/opt ' + k:>9}" for k in opt_kinds)
    print(f"{'function':18} {'budget':>6} {head}")
    ratios = {(b, k): [] for b in budgets for k in opt_kinds}
    for name in names:
        opt = FUNCS[name][2]
        for b in budgets:
            norm = statistics.mean(v - opt for v in ours(tool, name, "random", seeds, b, first))
            norm = norm or 1.0
            row = []
            for smp in ours_samplers:
                vals = ours_or_none(tool, name, smp, seeds, b, first)
                row.append(statistics.mean((v - opt) / norm for v in vals) if vals else math.nan)
            cells = " ".join(f"{v:12.4f}" for v in row)
            for k in opt_kinds:
                runs = theirs[(name, k)]
                their = (statistics.mean((r[b] - opt) / norm for r in runs)
                         if all(b in r for r in runs) else math.nan)  # opt gp: to 50 trials
                cells += f" {their:8.4f}"
                theirs[(name, k, b)] = their
            for k in opt_kinds:
                their = theirs[(name, k, b)]
                ratio = row[0] / their if their > 0 else math.nan
                if not math.isnan(ratio):
                    ratios[(b, k)].append(ratio)
                cells += f" {ratio:9.3f}"
            print(f"{name:18} {b:6} {cells}", flush=True)
    for b in budgets:
        for k in opt_kinds:
            if ratios[(b, k)]:
                print(f"geometric mean of {ours_samplers[0]} / optuna {k} at {b:3} trials: "
                      f"{geo_mean(ratios[(b, k)]):.3f} over {len(ratios[(b, k)])} functions")


def gp_speed(tool):
    print("\n== GP sampler: CPU ms per suggestion, Hartmann-6, 100 finished trials ==")
    out = subprocess.run([tool, "speed", "--sampler", "gp", "--reps", "10", "100"], check=True,
                         capture_output=True, text=True).stdout.split()
    print(f"ours at   100: {float(out[1]):9.1f} ms fixed {float(out[2]):9.1f} ms growing")
    if PEER_TOOL is not None:
        out = subprocess.run([PEER_TOOL, "speed", "--sampler", "gp", "--reps", "10", "100"],
                             check=True, capture_output=True, text=True).stdout.split()
        print(f"peer at  100: {float(out[1]):9.1f} ms fixed {float(out[2]):9.1f} ms growing "
              f"(--peer-tool)")
    theirs = optuna_gp_speed(100, 10)
    if theirs is None:
        print("optuna GPSampler: not run (needs scipy, which .venv lacks)")
    else:
        print(f"optuna GPSampler at 100: {theirs:9.1f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="quality table on seeds FIRST.. (e.g. 20 for a second held-out range)")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--only", nargs="*", default=list(FUNCS))
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--sampler", default="tpe",
                    help="our sampler: a name or a TOML inline table of [search.sampler] settings")
    ap.add_argument("--optuna-cache", help="JSON file keeping Optuna's results between runs")
    ap.add_argument("--gp-speed", action="store_true",
                    help="only the GP sampler: its time per suggestion at 100 trials and its "
                         "regret at 20 and 50 trials, beside Optuna's GPSampler and TPE")
    ap.add_argument("--tune-seeds", type=int, metavar="FIRST",
                    help="tuning probe: our side only, --seeds seeds from FIRST, no Optuna")
    ap.add_argument("--auto", action="store_true",
                    help="sampler = \"auto\" (and --ours) at 20/50/100 trials beside Optuna's "
                         "TPE and GPSampler")
    ap.add_argument("--ours", nargs="*", default=["auto", "gp", "tpe", "cmaes"],
                    help="with --auto: our samplers, the first compared (names or TOML tables)")
    ap.add_argument("--no-optuna", action="store_true", help="with --auto: our side only")
    ap.add_argument("--peer-tool", help="another bench_search binary (e.g. an earlier commit's): "
                    "with --auto, --ours names \"old:S\" run S with it; with --gp-speed, its "
                    "time per suggestion is printed too")
    args = ap.parse_args()
    global PEER_TOOL
    PEER_TOOL = args.peer_tool
    if args.auto:
        auto_table(args.tool, args.only, args.first_seed, args.seeds, args.optuna_cache,
                   args.ours, with_optuna=not args.no_optuna)
        return
    if args.gp_speed:
        gp_speed(args.tool)
        gp_quality(args.tool, args.seeds, args.only)
        return
    if args.tune_seeds is not None:
        tune(args.tool, args.tune_seeds, args.seeds, args.trials, args.only, args.sampler)
        return
    check_same_functions(args.tool)
    print("functions agree between bench_search and this script")
    if not args.skip_speed:
        speed(args.tool, args.sampler)
    if not args.skip_quality:
        quality(args.tool, args.seeds, args.trials, args.only, args.sampler, args.optuna_cache,
                args.first_seed)


if __name__ == "__main__":
    main()
