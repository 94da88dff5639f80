#!/usr/bin/env python3
"""Pruning benchmark: our median and ASHA pruners against no pruning on replayed learning
curves, and Optuna 5.0.0's MedianPruner / SuccessiveHalvingPruner on the very same curves, in one
script. The curves are a generated family, deterministic from the seed (bench_prune.cpp documents
the model: lr and weight decay drawn at random, crossing power-law curves, divergence at large lr,
noise). 100 trials run one after another, each reporting 100 evaluation steps unless pruned.

Prints, per pruner setting, medians over the seeds of: total steps trained, the reduction factor
against no pruning (target >= 3x), the noise-free final loss of the best trial found, its ratio to
no pruning's (1.000 = equal), and how many seeds found the same best trial as no pruning; then the
same for Optuna. A benchmark, not a test: it prints figures.

  .venv/bin/python bench/search/bench_prune.py --tool build/bin/bench_prune [--seeds 20]
"""
import argparse
import math
import statistics
import subprocess

import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)

# name: (our TOML line, Optuna pruner factory)
CONFIGS = {
    "none": ('pruner = "none"', optuna.pruners.NopPruner),
    "median": ('pruner = "median"', optuna.pruners.MedianPruner),
    "median warmup=10": ('pruner = {type = "median", n_warmup_steps = 10}',
                         lambda: optuna.pruners.MedianPruner(n_warmup_steps=10)),
    "asha": ('pruner = "asha"', optuna.pruners.SuccessiveHalvingPruner),
    "asha min_resource=5": ('pruner = {type = "asha", min_resource = 5}',
                            lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=5)),
}


def ours(tool, toml, seeds, trials, steps):
    out = subprocess.run([tool, "run", "--pruner", toml, "--seeds", "0", str(seeds), "--trials",
                          str(trials), "--steps", str(steps)], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    rows = [line.split() for line in out]
    return [(int(r[1]), float(r[2])) for r in rows]


def curves(tool, seed, trials, steps):
    out = subprocess.run([tool, "curves", "--seed", str(seed), "--trials", str(trials), "--steps",
                          str(steps)], check=True, capture_output=True, text=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return [(float(r[1]), [float(v) for v in r[2:]]) for r in rows]


def optuna_replay(factory, family):
    """The same sequential replay as bench_prune.cpp, through an Optuna study."""
    study = optuna.create_study(pruner=factory())
    total, best_obs, best_true = 0, math.inf, math.inf
    for true_final, observed in family:
        trial = study.ask()
        pruned = False
        for step, value in enumerate(observed, start=1):
            trial.report(value, step)
            total += 1
            if trial.should_prune():
                pruned = True
                break
        if pruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        study.tell(trial, observed[-1])
        if observed[-1] < best_obs:
            best_obs, best_true = observed[-1], true_final
    return total, best_true


def row(name, results, baseline):
    steps = statistics.median(r[0] for r in results)
    best = statistics.median(r[1] for r in results)
    base_steps = statistics.median(r[0] for r in baseline)
    base_best = statistics.median(r[1] for r in baseline)
    same = sum(abs(a[1] - b[1]) < 1e-12 for a, b in zip(results, baseline))
    return (f"{name:22} {steps:9.0f} {base_steps / steps:7.2f}x {best:9.4f} "
            f"{best / base_best:8.3f} {same:5d}/{len(results)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--skip-optuna", action="store_true")
    args = ap.parse_args()
    print(f"== Pruning: {args.trials} trials x {args.steps} steps, sequential, "
          f"{args.seeds} seeds, medians ==")
    header = (f"{'pruner':22} {'steps':>9} {'saving':>8} {'best':>9} {'vs none':>8} "
              f"{'same best':>9}")
    ours_all = {name: ours(args.tool, toml, args.seeds, args.trials, args.steps)
                for name, (toml, _) in CONFIGS.items()}
    print("-- ours --")
    print(header)
    for name, res in ours_all.items():
        print(row(name, res, ours_all["none"]), flush=True)
    if args.skip_optuna:
        return
    families = [curves(args.tool, s, args.trials, args.steps) for s in range(args.seeds)]
    print("-- Optuna 5.0.0 on the same curves --")
    print(header)
    theirs_all = {}
    for name, (_, factory) in CONFIGS.items():
        theirs_all[name] = [optuna_replay(factory, fam) for fam in families]
        print(row(name, theirs_all[name], theirs_all["none"]), flush=True)
    print("-- ours / Optuna, per setting (median steps ratio; seeds with identical outcome) --")
    for name in CONFIGS:
        a, b = ours_all[name], theirs_all[name]
        same = sum(x == y or (x[0] == y[0] and abs(x[1] - y[1]) < 1e-12) for x, y in zip(a, b))
        ratio = statistics.median(r[0] for r in a) / statistics.median(r[0] for r in b)
        print(f"{name:22} steps ratio {ratio:6.3f}   identical seeds {same}/{len(a)}")


if __name__ == "__main__":
    main()
