#!/usr/bin/env python3
"""CMA-ES and NSGA-II benchmark: our samplers (bench_search) against Optuna 5.0.0's
CmaEsSampler and NSGAIISampler with their defaults, on the same functions, in one script.

CMA-ES: the continuous functions of bench_search.py (Branin, Hartmann-6, Rosenbrock-10,
Styblinski-Tang-8, Ackley-5); per function the mean normalised regret of both (as bench_search.py
defines it), their ratio and a Mann-Whitney U p-value.
NSGA-II: ZDT1 and ZDT2 with 10 variables, population 50; per function the mean hypervolume of all
evaluated trials' objective vectors up to the reference point (1.1, 6.0) (larger is better), the
ratio ours / Optuna's and the p-value. A benchmark, not a test: it prints figures.

  .venv/bin/python bench/search/bench_evo.py --tool build/bin/bench_search [--seeds 10]
"""
import argparse
import math
import statistics
import subprocess

import optuna

from bench_search import FUNCS, check_same_functions, mann_whitney_p, ours

optuna.logging.set_verbosity(optuna.logging.ERROR)

CMA_FUNCS = ["branin", "hartmann6", "rosenbrock10", "styblinski_tang8", "ackley5"]
REFERENCE = (1.1, 6.0)


def optuna_cma(name, seed, n_trials):
    space, f, _, _ = FUNCS[name]
    study = optuna.create_study(sampler=optuna.samplers.CmaEsSampler(seed=seed))
    best = math.inf
    for _ in range(n_trials):
        trial = study.ask()
        value = f(space(trial))
        study.tell(trial, value)
        best = min(best, value)
    return best


def verdict(p, ours_better):
    return "same" if p >= 0.05 else ("BETTER" if ours_better else "WORSE")


def cmaes(tool, seeds, n_trials):
    print(f"\n== CMA-ES: {n_trials} trials, {seeds} seeds, defaults on both sides ==")
    print(f"{'function':18} {'ours':>9} {'optuna':>9} {'ratio':>7} {'MWU p':>7}  verdict")
    ratios = []
    for name in CMA_FUNCS:
        opt = FUNCS[name][2]
        a_raw = ours(tool, name, "cmaes", seeds, n_trials)
        rand = ours(tool, name, "random", seeds, n_trials)
        b_raw = [optuna_cma(name, s, n_trials) for s in range(seeds)]
        norm = statistics.mean(v - opt for v in rand) or 1.0
        a = [(v - opt) / norm for v in a_raw]
        b = [(v - opt) / norm for v in b_raw]
        ratio = statistics.mean(a) / statistics.mean(b)
        ratios.append(ratio)
        p = mann_whitney_p(a, b)
        print(f"{name:18} {statistics.mean(a):9.3g} {statistics.mean(b):9.3g} {ratio:7.3f} "
              f"{p:7.3f}  {verdict(p, statistics.median(a) < statistics.median(b))}", flush=True)
    print(f"mean ratio (regret, lower is better): {statistics.mean(ratios):.3f}")


def zdt(x, concave):
    g = 1 + sum(x[1:])
    r = x[0] / g
    return x[0], g * (1 - (r * r if concave else math.sqrt(r)))


def hypervolume(points, ref):
    """2-D hypervolume of minimisation points up to ref (a sweep over the sorted front)."""
    pts = sorted((p for p in points if p[0] < ref[0] and p[1] < ref[1]))
    hv, best_f2 = 0.0, ref[1]
    for f1, f2 in pts:
        if f2 < best_f2:
            hv += (ref[0] - f1) * (best_f2 - f2)
            best_f2 = f2
    return hv


def optuna_nsga2(name, seed, n_trials):
    study = optuna.create_study(directions=["minimize", "minimize"],
                                sampler=optuna.samplers.NSGAIISampler(seed=seed))
    points = []
    for _ in range(n_trials):
        trial = study.ask()
        x = [trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(10)]
        v = zdt(x, name == "zdt2")
        study.tell(trial, v)
        points.append(v)
    return hypervolume(points, REFERENCE)


def nsga2(tool, seeds, n_trials):
    print(f"\n== NSGA-II: {n_trials} trials, population 50, {seeds} seeds; hypervolume to "
          f"{REFERENCE} (higher is better) ==")
    print(f"{'function':18} {'ours':>9} {'optuna':>9} {'ratio':>7} {'MWU p':>7}  verdict")
    for name in ["zdt1", "zdt2"]:
        out = subprocess.run([tool, "pareto", "--func", name, "--seeds", "0", str(seeds),
                              "--trials", str(n_trials)], check=True, capture_output=True,
                             text=True).stdout.splitlines()
        a = [hypervolume([tuple(map(float, p.split(","))) for p in line.split()[1:]], REFERENCE)
             for line in out]
        b = [optuna_nsga2(name, s, n_trials) for s in range(seeds)]
        p = mann_whitney_p(a, b)
        ratio = statistics.mean(a) / statistics.mean(b)
        print(f"{name:18} {statistics.mean(a):9.3g} {statistics.mean(b):9.3g} {ratio:7.3f} "
              f"{p:7.3f}  {verdict(p, statistics.median(a) > statistics.median(b))}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--cma-trials", type=int, default=300)
    ap.add_argument("--nsga-trials", type=int, default=500)
    args = ap.parse_args()
    check_same_functions(args.tool)
    cmaes(args.tool, args.seeds, args.cma_trials)
    nsga2(args.tool, args.seeds, args.nsga_trials)


if __name__ == "__main__":
    main()
