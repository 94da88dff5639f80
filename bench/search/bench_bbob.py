#!/usr/bin/env python3
"""COCO's bbob suite, side by side: our samplers (through bench_search's ask/tell path) and
Optuna's on the same problems, budgets and seeds, in one script. A benchmark, not a test: it
prints figures (with --check it also checks them, for the CTest smoke test).

  .venv/bin/python bench/search/bench_bbob.py --tool build/bin/bench_search
      [--functions 1-24] [--dims 2 5 10] [--instances 1-5] [--budgets 20 50 100] [--seeds 3]
      [--first-seed 0] [--samplers tpe gp cmaes random auto optuna-tpe optuna-gp ...]
      [--optuna-gp-trials 50] [--optuna-cache F] [--json F] [-j 2] [--check]
      [--peer-tool OTHER/bench_search --samplers auto old:auto ...]

The problems come from cocoex (`coco-experiment`, requirements-test.txt): 24 functions on
[-5, 5]^d, instances as COCO numbers them. f_opt is read through cocoex: the problem's optimum
x_opt (`Problem._best_parameter("print")`, which writes it to a file, on a separate problem
object: it taints the problem) evaluated by the problem itself; bbob's f_opt is a multiple of
0.01, which the script checks.

Normalised regret of a run at budget b = max(best of the first b trials - f_opt, 1e-8) /
(median over 101 uniform random points of f - f_opt): 1 is a random guess's regret, whatever
the function's scale; 1e-8 is COCO's final target. Aggregates are geometric means (regrets at 100
trials span 1e-8 to 1 across functions: an arithmetic mean would be one function's).

Our samplers: tpe, gp, cmaes, random, auto (bench_search ask --sampler NAME; any name or TOML
table bench_search run takes). Optuna's: optuna-tpe (TPESampler(multivariate=True)), optuna-gp
(GPSampler; it fits with scipy, in requirements-test.txt), optuna-cmaes
(CmaEsSampler), optuna-random (RandomSampler); each with seed=SEED. Optuna's results are kept in
--optuna-cache (deterministic for a seed: a rerun of ours alone costs only ours).
"""
import argparse
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_search import geo_mean  # noqa: E402  (one definition of the aggregate)

try:
    import cocoex
except ImportError:
    cocoex = None

OURS = ["tpe", "gp", "cmaes", "random", "auto"]
THEIRS = ["optuna-tpe", "optuna-gp", "optuna-cmaes", "optuna-random"]
# bbob's five function groups (Hansen et al., "Real-parameter black-box optimization
# benchmarking 2009: noiseless functions definitions")
GROUPS = [("separable", range(1, 6)), ("moderate", range(6, 10)),
          ("ill-conditioned", range(10, 15)), ("multimodal", range(15, 20)),
          ("weakly structured", range(20, 25))]
FLOOR = 1e-8
LOW, HIGH = -5.0, 5.0


def group_of(fid):
    return next(name for name, ids in GROUPS if fid in ids)


def ranges(text):
    """'1-5,7' or ['1-5', '7'] -> [1, 2, 3, 4, 5, 7]."""
    out = []
    for part in (",".join(text) if isinstance(text, list) else text).split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            out.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise SystemExit(f"bench_bbob: cannot read the range '{part}' (write e.g. 1-24 or 1,3)")
    return out


def problem(fid, dim, inst):
    """A fresh cocoex problem (one per run: a problem object counts its evaluations)."""
    suite = cocoex.Suite("bbob", f"instances: {inst}", f"dimensions: {dim} function_indices: {fid}")
    return suite.get_problem_by_function_dimension_instance(fid, dim, inst)


def f_opt(fid, dim, inst):
    p = problem(fid, dim, inst)
    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)
        try:
            p._best_parameter("print")
            with open("._bbob_problem_best_parameter.txt") as f:
                x_opt = [float(v) for v in f.read().split()]
        finally:
            os.chdir(cwd)
    value = float(p(np.array(x_opt)))
    if abs(value - round(value, 2)) > 1e-9:
        raise SystemExit(f"bench_bbob: f{fid} i{inst} d{dim}: f(x_opt) = {value!r} is not a "
                         "multiple of 0.01 as bbob's f_opt is; cocoex changed?")
    return round(value, 2)


def random_scale(fid, dim, inst, fopt):
    """Median regret of 101 uniform points (fixed generator): a random guess's regret."""
    p = problem(fid, dim, inst)
    pts = np.random.default_rng(12345).uniform(LOW, HIGH, size=(101, dim))
    return statistics.median(float(p(x)) - fopt for x in pts)


def run_ours(tool, sampler, fid, dim, inst, seed, n, peer_tool=None):
    if sampler.startswith("old:"):
        tool, sampler = peer_tool, sampler[4:]
    p = problem(fid, dim, inst)
    proc = subprocess.Popen([tool, "ask", "--dim", str(dim), "--low", str(LOW), "--high", str(HIGH),
                             "--sampler", sampler, "--seed", str(seed), "--trials", str(n)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    best, out = math.inf, []
    for _ in range(n):
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"bench_bbob: bench_search ask --sampler {sampler} stopped early "
                             f"(exit {proc.wait()})")
        y = float(p(np.array([float(v) for v in line.split()])))
        proc.stdin.write(f"{y!r}\n")
        proc.stdin.flush()
        best = min(best, y)
        out.append(best)
    proc.stdin.close()
    if proc.wait() != 0:
        raise SystemExit(f"bench_bbob: bench_search ask --sampler {sampler} exited "
                         f"{proc.returncode}")
    return out


def run_optuna(kind, fid, dim, inst, seed, n):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if kind == "optuna-gp":
        import torch  # Optuna's GP runs on torch: one thread a run, as ours (and -j runs) use
        torch.set_num_threads(1)
    sampler = {"optuna-tpe": lambda: optuna.samplers.TPESampler(seed=seed, multivariate=True),
               "optuna-gp": lambda: optuna.samplers.GPSampler(seed=seed),
               "optuna-cmaes": lambda: optuna.samplers.CmaEsSampler(seed=seed),
               "optuna-random": lambda: optuna.samplers.RandomSampler(seed=seed)}[kind]()
    p = problem(fid, dim, inst)
    study = optuna.create_study(sampler=sampler)
    best, out = math.inf, []
    for _ in range(n):
        trial = study.ask()
        x = np.array([trial.suggest_float(f"x{i}", LOW, HIGH) for i in range(dim)])
        y = float(p(x))
        study.tell(trial, y)
        best = min(best, y)
        out.append(best)
    return out


def one_run(task):
    """Worker: (sampler, fid, dim, inst, seed, n, tool, peer) -> (task, best-so-far, seconds)."""
    sampler, fid, dim, inst, seed, n, tool, peer = task
    t0 = time.perf_counter()
    if sampler in THEIRS:
        out = run_optuna(sampler, fid, dim, inst, seed, n)
    else:
        out = run_ours(tool, sampler, fid, dim, inst, seed, n, peer)
    return task, out, time.perf_counter() - t0


def machine():
    model, cores = "?", os.cpu_count()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {cores} cores, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True, help="build/bin/bench_search")
    ap.add_argument("--peer-tool", help="another bench_search (e.g. built at an earlier commit): "
                                        "a sampler named old:S runs S with it, beside this tool's")
    ap.add_argument("--functions", nargs="*", default=["1-24"])
    ap.add_argument("--dims", nargs="*", type=int, default=[2, 5, 10])
    ap.add_argument("--instances", nargs="*", default=["1-5"])
    ap.add_argument("--budgets", nargs="*", type=int, default=[20, 50, 100])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--samplers", nargs="*", default=OURS + THEIRS,
                    help="ours (a name or TOML table bench_search takes) and optuna-*")
    ap.add_argument("--optuna-gp-trials", type=int, default=0, metavar="N",
                    help="run Optuna's GPSampler to N trials only (minutes a run at 100 here); "
                         "its cells past N print '-' and it is left out of those ranks")
    ap.add_argument("--optuna-cache", help="JSON file keeping Optuna's runs between invocations")
    ap.add_argument("--json", help="write every run's best-so-far values here")
    ap.add_argument("-j", type=int, default=1, help="parallel runs (1 or 2)")
    ap.add_argument("--check", action="store_true",
                    help="parse the printed tables back and fail unless every cell is a finite "
                         "number and no regret is below zero (the CTest smoke test)")
    args = ap.parse_args()
    if cocoex is None:
        raise SystemExit("bench_bbob: cocoex is missing: pip install -r requirements-test.txt "
                         "(coco-experiment)")
    if not 1 <= args.j <= 2:
        raise SystemExit("bench_bbob: -j must be 1 or 2 (the machine is shared)")
    if "optuna-gp" in args.samplers:
        try:
            import scipy  # noqa: F401
        except ImportError:
            raise SystemExit("bench_bbob: optuna-gp needs scipy (Optuna's GP fits with it): "
                             "pip install -r requirements-test.txt; or leave "
                             "optuna-gp out of --samplers")
    if any(s.startswith("old:") for s in args.samplers) and not args.peer_tool:
        raise SystemExit("bench_bbob: a sampler old:S needs --peer-tool, the bench_search to run "
                         "it with")
    bad = [s for s in args.samplers if s.startswith("optuna") and s not in THEIRS]
    if bad:
        raise SystemExit(f"bench_bbob: unknown Optuna sampler {bad[0]} (know {' '.join(THEIRS)})")
    funcs = ranges(args.functions)
    if not funcs or min(funcs) < 1 or max(funcs) > 24:
        raise SystemExit("bench_bbob: --functions must lie in 1-24")
    insts = ranges(args.instances)
    budgets = sorted(set(args.budgets))
    n = max(budgets)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    probs = [(f, d, i) for d in args.dims for f in funcs for i in insts]
    load0 = machine()

    ref = {}
    for pr in probs:
        fo = f_opt(*pr)
        ref[pr] = (fo, random_scale(*pr, fo))

    cache = {}
    if args.optuna_cache and os.path.exists(args.optuna_cache):
        with open(args.optuna_cache) as f:
            cache = json.load(f)

    def key(smp, pr, seed):
        return f"{smp}/f{pr[0]}_d{pr[1]}_i{pr[2]}/{seed}"

    def trials_of(smp):
        return min(n, args.optuna_gp_trials) if smp == "optuna-gp" and args.optuna_gp_trials else n

    runs, secs, tasks = {}, {}, []
    for smp in args.samplers:
        m = trials_of(smp)
        for pr in probs:
            for seed in seeds:
                got = cache.get(key(smp, pr, seed)) if smp in THEIRS else None
                if got and len(got["best"]) >= m:
                    runs[(smp, pr, seed)] = got["best"][:m]
                    secs.setdefault(smp, []).append(got["s"] * m / len(got["best"]))
                else:
                    tasks.append((smp, pr[0], pr[1], pr[2], seed, m, args.tool, args.peer_tool))
    # Slow ones first, so the two workers end together.
    tasks.sort(key=lambda t: (t[0] != "optuna-gp", t[0].removeprefix("old:") not in ("gp", "auto"),
                              -t[2]))
    print(f"bbob: {len(funcs)} functions x dims {args.dims} x instances {insts} x seeds "
          f"{seeds[0]}-{seeds[-1]}; budgets {budgets}; {len(tasks)} runs to do, "
          f"{len(runs)} from the cache", file=sys.stderr, flush=True)
    t_start = time.time()

    def done(result, k):
        (smp, fid, dim, inst, seed, _, _, _), out, s = result
        pr = (fid, dim, inst)
        runs[(smp, pr, seed)] = out
        secs.setdefault(smp, []).append(s)
        if smp in THEIRS and args.optuna_cache:
            cache[key(smp, pr, seed)] = {"best": out, "s": s}
            if k % 10 == 0 or k == len(tasks):
                with open(args.optuna_cache + ".tmp", "w") as f:
                    json.dump(cache, f)
                os.replace(args.optuna_cache + ".tmp", args.optuna_cache)
        if k % 50 == 0:
            print(f"  {k}/{len(tasks)} runs, {time.time() - t_start:.0f} s", file=sys.stderr,
                  flush=True)

    if args.j == 1:
        for k, t in enumerate(tasks, 1):
            done(one_run(t), k)
    else:
        with multiprocessing.Pool(args.j) as pool:
            for k, r in enumerate(pool.imap_unordered(one_run, tasks), 1):
                done(r, k)
    if args.optuna_cache:
        with open(args.optuna_cache + ".tmp", "w") as f:
            json.dump(cache, f)
        os.replace(args.optuna_cache + ".tmp", args.optuna_cache)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": load0, "f_opt": {f"f{p[0]}_d{p[1]}_i{p[2]}": v for p, v in
                                                    ref.items()},
                       "runs": {key(s, p, seed): v for (s, p, seed), v in runs.items()}}, f)

    def norm(smp, pr, seed, b):
        if b > len(runs[(smp, pr, seed)]):
            return math.nan  # optuna-gp past --optuna-gp-trials
        fo, scale = ref[pr]
        return max(runs[(smp, pr, seed)][b - 1] - fo, FLOOR) / scale

    def raw(smp, pr, seed, b):
        if b > len(runs[(smp, pr, seed)]):
            return 0.0
        return runs[(smp, pr, seed)][b - 1] - ref[pr][0]

    samplers = args.samplers
    lines = []

    def out(text=""):
        lines.append(text)
        print(text, flush=True)

    width = max(9, *(len(s) for s in samplers))

    def cell(v, fmt):
        return f" {'-':>{width}}" if math.isnan(v) else f" {v:{width}{fmt}}"

    head = "".join(f" {s:>{width}}" for s in samplers)
    out(f"machine: {load0} (start); {machine()} (end); {time.time() - t_start:.0f} s wall")
    out(f"grid: functions {args.functions}, dims {args.dims}, instances {insts}, seeds "
        f"{seeds[0]}-{seeds[-1]}, budgets {budgets}")
    out("\n== Normalised regret, geometric mean over functions x dims x instances x seeds ==")
    out("(best - f_opt, floored at 1e-8) / median regret of a uniform random point; lower is "
        "better")
    out(f"{'group':18} {'budget':>6}{head}")
    present = [(g, ids) for g, ids in GROUPS if any(f in ids for f in funcs)]
    for g, ids in present + [("all", range(1, 25))]:
        for b in budgets:
            cells = [geo_mean([norm(s, pr, seed, b) for pr in probs if pr[0] in ids
                               for seed in seeds]) for s in samplers]
            out(f"{g:18} {b:6}" + "".join(cell(v, ".3g") for v in cells))

    full = [s for s in samplers if trials_of(s) == n]
    base = "optuna-tpe" if "optuna-tpe" in full else full[-1] if full else samplers[-1]
    out(f"\n== Geometric mean over problems of (regret / {base}'s regret) ==")
    out("per problem (function, dim, instance): the geometric mean over seeds of the normalised "
        "regret; < 1 is better than " + base)
    out(f"{'group':18} {'budget':>6}{head}")

    def per_problem(s, pr, b):
        return geo_mean([norm(s, pr, seed, b) for seed in seeds])

    for g, ids in present + [("all", range(1, 25))]:
        for b in budgets:
            cells = [geo_mean([per_problem(s, pr, b) / per_problem(base, pr, b)
                               for pr in probs if pr[0] in ids]) for s in samplers]
            out(f"{g:18} {b:6}" + "".join(cell(v, ".3f") for v in cells))

    out("\n== Mean rank per problem (1 = best; ties share the mean rank) ==")
    out("rank of each sampler's per-problem geometric-mean regret among the samplers run")
    out(f"{'group':18} {'budget':>6}{head}")
    for g, ids in present + [("all", range(1, 25))]:
        for b in budgets:
            total = {s: [] for s in samplers}
            for pr in probs:
                if pr[0] not in ids:
                    continue
                vals = {s: per_problem(s, pr, b) for s in samplers}
                ranked = [s for s in samplers if not math.isnan(vals[s])]
                for s in ranked:
                    below = sum(1 for t in ranked if vals[t] < vals[s])
                    same = sum(1 for t in ranked if vals[t] == vals[s])
                    total[s].append(below + (same + 1) / 2)
            out(f"{g:18} {b:6}" + "".join(cell(statistics.mean(total[s]) if total[s] else
                                               math.nan, ".2f") for s in samplers))

    capped = f"; optuna-gp: {trials_of('optuna-gp')} trials" if trials_of("optuna-gp") < n else ""
    out(f"\n== Seconds per run of {n} trials (median, wall{capped}; Optuna's as measured when "
        "it was cached) ==")
    out(f"{'':25}" + "".join(f" {s:>{width}}" for s in samplers))
    out(f"{'':25}" + "".join(f" {statistics.median(secs[s]):{width}.2f}" for s in samplers))

    if args.check:
        check(lines, samplers, budgets, raw, probs, seeds)


def check(lines, samplers, budgets, raw, probs, seeds):
    """The smoke test's assertions: every table row parses into finite numbers, one per sampler,
    and no run is below f_opt (f_opt read wrongly would show here)."""
    rows = 0
    for line in lines:
        parts = line.split()
        if len(parts) == len(samplers) + 2 and parts[1].isdigit() and int(parts[1]) in budgets:
            vals = [float(v) for v in parts[2:] if v != "-"]
            if not all(math.isfinite(v) and v >= 0 for v in vals):
                raise SystemExit(f"bench_bbob --check: a table cell is not a finite number: {line}")
            rows += 1
    if rows < 3 * len(budgets):
        raise SystemExit(f"bench_bbob --check: {rows} table rows parsed, expected at least "
                         f"{3 * len(budgets)}")
    for s in samplers:
        for pr in probs:
            for seed in seeds:
                for b in budgets:
                    if raw(s, pr, seed, b) < -1e-9:
                        raise SystemExit(f"bench_bbob --check: {s} on f{pr[0]} d{pr[1]} i{pr[2]} "
                                         f"seed {seed} is below f_opt: f_opt is wrong")
    print(f"check: {rows} table rows parse, no run below f_opt")


if __name__ == "__main__":
    main()
