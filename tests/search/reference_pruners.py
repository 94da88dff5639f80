#!/usr/bin/env python3
"""Our pruners decide as Optuna's MedianPruner, PercentilePruner and SuccessiveHalvingPruner on
the same recorded learning curves. Builds curves and an interleaved schedule (several trials
running at once), asks Optuna for every decision, runs prune_replay on the same file and
compares decision by decision. Exits non-zero on any difference."""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import warnings

import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)
warnings.filterwarnings("ignore", category=RuntimeWarning)  # numpy: all-NaN slices


def make_curves(rng, n_trials, nan_rate):
    curves = []
    for _ in range(n_trials):
        steps = rng.choice([20, 40, 60, 60, 60])
        a, b, c = rng.uniform(0.5, 3), rng.uniform(0.02, 0.2), rng.uniform(0, 1)
        curve = []
        for s in range(steps):
            v = a * math.exp(-b * s) + c + rng.gauss(0, 0.05)
            curve.append(float("nan") if rng.random() < nan_rate else v)
        curves.append(curve)
    return curves


def make_events(rng, curves, concurrency, stride):
    """Trials start in number order; up to `concurrency` run at once, advancing in random order.
    `stride` > 1 reports only every stride-th step (exercises interval/warm-up edges)."""
    events, running, nxt, pos = [], [], 0, {}
    while running or nxt < len(curves):
        while len(running) < concurrency and nxt < len(curves):
            running.append(nxt)
            pos[nxt] = 0
            nxt += 1
        t = rng.choice(running)
        curve = curves[t]
        s = pos[t]
        v = curve[s]
        events.append(["report", t, s, None if math.isnan(v) else v])
        pos[t] += stride
        if pos[t] >= len(curve):
            events.append(["finish", t])
            running.remove(t)
    return events


def optuna_pruner(cfg):
    kind = cfg.pop("type")
    if kind == "median":
        return optuna.pruners.MedianPruner(**cfg)
    if kind == "percentile":
        return optuna.pruners.PercentilePruner(**cfg)
    if kind == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(**cfg)
    raise ValueError(kind)


def toml_of(cfg):
    parts = []
    for k, v in cfg.items():
        if isinstance(v, str):
            parts.append(f'{k} = "{v}"')
        else:
            parts.append(f"{k} = {v}")
    return "pruner = {" + ", ".join(parts) + "}"


def optuna_decisions(cfg, direction, events):
    study = optuna.create_study(direction=direction, pruner=optuna_pruner(dict(cfg)))
    trials, done, out = {}, set(), []
    for e in events:
        t = e[1]
        while t not in trials:  # running trials without reports change no decision
            trial = study.ask()
            trials[trial.number] = trial
        if t in done:
            continue
        if e[0] == "finish":
            last = max(trials[t].storage.get_trial(trials[t]._trial_id).intermediate_values.items())
            study.tell(trials[t], last[1] if not math.isnan(last[1]) else 0.0)
            done.add(t)
            continue
        _, _, step, value = e
        trials[t].report(float("nan") if value is None else value, step)
        prune = trials[t].should_prune()
        out.append(f"{t} {step} {int(prune)}")
        if prune:
            study.tell(trials[t], state=optuna.trial.TrialState.PRUNED)
            done.add(t)
    return out


CASES = [
    ({"type": "median"}, "minimize", 1, 0.0),
    ({"type": "median"}, "maximize", 1, 0.0),
    ({"type": "median", "n_startup_trials": 3, "n_warmup_steps": 5, "interval_steps": 3}, "minimize", 1, 0.02),
    ({"type": "median", "n_warmup_steps": 4, "interval_steps": 5, "n_min_trials": 3}, "minimize", 2, 0.0),
    ({"type": "percentile", "percentile": 25.0, "n_startup_trials": 2}, "maximize", 1, 0.0),
    ({"type": "percentile", "percentile": 75.0}, "minimize", 1, 0.02),
    ({"type": "asha"}, "minimize", 1, 0.0),
    ({"type": "asha", "min_resource": 2, "reduction_factor": 3}, "minimize", 1, 0.02),
    ({"type": "asha", "min_resource": 1, "reduction_factor": 2, "min_early_stopping_rate": 1}, "maximize", 1, 0.0),
    ({"type": "asha", "min_resource": 3, "reduction_factor": 4, "bootstrap_count": 2}, "minimize", 1, 0.0),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    for i, (cfg, direction, stride, nan_rate) in enumerate(CASES):
        for seed in range(args.seeds):
            rng = random.Random(1000 * i + seed)
            curves = make_curves(rng, 30, nan_rate)
            events = make_events(rng, curves, rng.choice([1, 3, 6]), stride)
            ref = optuna_decisions(cfg, direction, events)
            path = os.path.join(args.work, f"case{i}_seed{seed}.json")
            with open(path, "w") as f:
                json.dump({"direction": direction, "pruner": toml_of(cfg), "events": events}, f)
            ours = subprocess.run([args.tool, path], check=True, capture_output=True,
                                  text=True).stdout.split("\n")[:-1]
            pruned = sum(line.endswith(" 1") for line in ref)
            label = f"{cfg} {direction} stride={stride} seed={seed}"
            if ours != ref:
                first = next((k for k, (a, b) in enumerate(zip(ours, ref)) if a != b),
                             min(len(ours), len(ref)))
                print(f"MISMATCH {label}: decision {first}: ours "
                      f"{ours[first] if first < len(ours) else '-'} optuna "
                      f"{ref[first] if first < len(ref) else '-'}")
                failures += 1
            elif pruned == 0:
                print(f"VACUOUS {label}: Optuna pruned nothing; the case tests nothing")
                failures += 1
            else:
                print(f"ok {label}: {len(ref)} decisions, {pruned} prunes agree")
    print("FAILED" if failures else "all decisions agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
