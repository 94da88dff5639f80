#!/usr/bin/env python3
"""Our GP's building blocks (search/gp.h) equal Optuna's GP sampler's (optuna/_gp/gp.py, torch)
on the same data and hyperparameters: the Matern-5/2 ARD kernel matrix (categorical dimensions
by Optuna's Hamming distance), the log marginal likelihood (Optuna's, which drops the constant,
plus -N/2 log(2 pi)), the default log prior, the posterior mean and variance, and log EI
(optuna._gp.acqf.logei), each within 1e-8 relative (values under 1e-3 in size: 1e-11 absolute),
and the gradient of log EI with respect to the query point (what the acquisition's local search
climbs; Optuna's by central differences) within 1e-5 relative (under 1e-3 in size: 1e-8
absolute).
Our fitted hyperparameters are a stationary point of Optuna's own fitting loss (-(mll + log
prior) in its log parametrisation, gradient by torch autograd below Optuna's gtol 1e-2), and no
worse than torch's L-BFGS on that loss from the same start. Optuna's own fit runs scipy's L-BFGS-B,
whose end point depends on its tolerances, so the fit is compared through the loss it minimises.
The output warping (gp::yeo_johnson, yeo_johnson_llf, yeo_johnson_lambda) equals scipy.stats'
Yeo-Johnson (yeojohnson, yeojohnson_llf within 1e-8 relative; the fitted lambda within 1e-3 of
the maximum of yeojohnson_llf over [-2, 2] by scipy's bounded
minimize_scalar, its log-likelihood no lower) on skewed, symmetric and tied values.
Runs gp_reference on each case; exits non-zero on any difference."""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import torch
from scipy import optimize, stats

from optuna._gp import acqf, gp, prior

torch.set_default_dtype(torch.float64)
REL = 1e-8
FLOOR = 1e-3


def close(a, b):
    return abs(a - b) <= REL * max(abs(b), FLOOR)


def make_case(seed, n, dims, categorical, choices, steps):
    rng = np.random.RandomState(seed)
    x = rng.uniform(size=(n, dims))
    q = rng.uniform(size=(20, dims))
    for k, c in enumerate(categorical):
        if c:
            x[:, k] = rng.randint(choices, size=n)
            q[:, k] = rng.randint(choices, size=20)
        elif steps[k]:
            # An int-like grid: values at (i + 0.5) / steps[k], as the unit cube holds them.
            x[:, k] = (rng.randint(steps[k], size=n) + 0.5) / steps[k]
    y = np.sin(5 * x[:, 0]) + 0.3 * x[:, -1] ** 2 + 0.05 * rng.normal(size=n)
    y = (y - y.mean()) / y.std()
    hyper = np.concatenate([rng.uniform(0.2, 8.0, size=dims), [rng.uniform(0.5, 2.0)],
                            [10 ** rng.uniform(-5, -1)]])
    return x, y, q, np.array(categorical, dtype=bool), hyper


def write_case(path, x, y, q, cat, hyper):
    d = x.shape[1]
    with open(path, "w") as f:
        f.write(f"dims {d}\ncategorical {' '.join(str(int(c)) for c in cat)}\n")
        f.write("hyper " + " ".join(repr(float(v)) for v in hyper) + "\n")
        f.write(f"train {len(x)}\n")
        for row, v in zip(x, y):
            f.write(" ".join(repr(float(a)) for a in row) + f" {float(v)!r}\n")
        f.write(f"query {len(q)}\n")
        for row in q:
            f.write(" ".join(repr(float(a)) for a in row) + "\n")


def read_output(text):
    lines = text.splitlines()
    out = {}
    i = 0
    while i < len(lines):
        head = lines[i].split()
        if head[0] == "kernel":
            n = int(head[1])
            out["kernel"] = np.array([[float(v) for v in lines[i + 1 + r].split()] for r in range(n)])
            i += 1 + n
        elif head[0] in ("post", "grad"):
            m = int(head[1])
            out[head[0]] = np.array([[float(v) for v in lines[i + 1 + r].split()] for r in range(m)])
            i += 1 + m
        else:
            out[head[0]] = [float(v) for v in head[1:]]
            i += 1
    return out


def regressor(x, y, cat, hyper):
    d = x.shape[1]
    return gp.GPRegressor(
        is_categorical=torch.from_numpy(cat), X_train=torch.from_numpy(x),
        y_train=torch.from_numpy(y),
        inverse_squared_lengthscales=torch.tensor(hyper[:d]),
        kernel_scale=torch.tensor(hyper[d]), noise_var=torch.tensor(hyper[d + 1]))


def optuna_loss(x, y, cat, raw, min_noise=prior.DEFAULT_MINIMUM_NOISE_VAR):
    """Optuna's _fit_kernel_params loss at raw = (log r, log scale, log(noise - min_noise))."""
    d = x.shape[1]
    g = regressor(x, y, cat, np.ones(d + 2))
    g.inverse_squared_lengthscales = torch.exp(raw[:d])
    g.kernel_scale = torch.exp(raw[d])
    g.noise_var = torch.exp(raw[d + 1]) + min_noise
    return -g.marginal_log_likelihood() - prior.default_log_prior(g)


def check_case(tool, work, name, case):
    x, y, q, cat, hyper = case
    path = os.path.join(work, name + ".txt")
    write_case(path, x, y, q, cat, hyper)
    run = subprocess.run([tool, path], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{name}: gp_reference failed: {run.stderr.strip()}")
        return 1
    ours = read_output(run.stdout)
    ref = regressor(x, y, cat, hyper)
    fails = []
    with torch.no_grad():
        k_ref = ref.kernel().numpy()
        ref._cache_matrix()
        mll_ref = ref.marginal_log_likelihood().item() - 0.5 * len(x) * math.log(2 * math.pi)
        prior_ref = prior.default_log_prior(ref).item()
        mean_ref, var_ref = ref.posterior(torch.from_numpy(q))
        logei_ref = acqf.logei(mean_ref.clone(), var_ref.clone(), float(y.max()))
    worst = 0.0
    for a, b in zip(ours["kernel"].ravel(), k_ref.ravel()):
        worst = max(worst, abs(a - b) / max(abs(b), FLOOR))
        if not close(a, b):
            fails.append(f"kernel {a!r} vs {b!r}")
    for label, a, b in (("mll", ours["mll"][0], mll_ref), ("prior", ours["prior"][0], prior_ref)):
        worst = max(worst, abs(a - b) / max(abs(b), FLOOR))
        if not close(a, b):
            fails.append(f"{label} {a!r} vs {b!r}")
    post = ours["post"]
    for i in range(len(q)):
        for label, a, b in (("mean", post[i, 0], mean_ref[i].item()),
                            ("var", post[i, 1], var_ref[i].item()),
                            ("logei", post[i, 2], logei_ref[i].item())):
            worst = max(worst, abs(a - b) / max(abs(b), FLOOR))
            if not close(a, b):
                fails.append(f"{label}[{i}] {a!r} vs {b!r}")
    # d log EI / d x: central differences (step 1e-6) of Optuna's posterior and logei in each
    # non-categorical dimension (torch's autograd gives nan through the categorical distance);
    # ours is 0 in the categorical ones.
    def optuna_logei(points):
        with torch.no_grad():
            m_t, v_t = ref.posterior(torch.from_numpy(points))
            return acqf.logei(m_t, v_t, float(y.max())).numpy()

    grad_ref = np.zeros_like(q)
    for k in range(q.shape[1]):
        if not cat[k]:
            up, down = q.copy(), q.copy()
            up[:, k] += 1e-6
            down[:, k] -= 1e-6
            grad_ref[:, k] = (optuna_logei(up) - optuna_logei(down)) / 2e-6
    worst_grad = 0.0
    for i in range(len(q)):
        for k in range(q.shape[1]):
            a, b = ours["grad"][i, k], grad_ref[i, k]
            rel = abs(a - b) / max(abs(b), FLOOR)
            worst_grad = max(worst_grad, rel)
            if not rel <= 1e-5:
                fails.append(f"grad[{i}][{k}] {a!r} vs {b!r}")
    # The fit: a stationary point of Optuna's loss, no worse than torch's L-BFGS from all ones.
    d = x.shape[1]
    fit = np.array(ours["fit"])
    raw = torch.tensor(np.concatenate([np.log(fit[:d]), [math.log(fit[d])],
                                       [math.log(fit[d + 1] - prior.DEFAULT_MINIMUM_NOISE_VAR)]]),
                       requires_grad=True)
    loss = optuna_loss(x, y, cat, raw)
    loss.backward()
    grad = raw.grad.abs().max().item()
    if grad > 1e-2:
        fails.append(f"fit: Optuna's loss has gradient {grad:.3g} at our fit (gtol 1e-2)")
    start = torch.tensor(np.concatenate([np.zeros(d + 1),
                                         [math.log(1.0 - 0.99 * prior.DEFAULT_MINIMUM_NOISE_VAR)]]),
                         requires_grad=True)
    opt = torch.optim.LBFGS([start], max_iter=500, tolerance_grad=1e-6,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        v = optuna_loss(x, y, cat, start)
        v.backward()
        return v

    opt.step(closure)
    torch_loss = optuna_loss(x, y, cat, start.detach()).item()
    if loss.item() > torch_loss + 1e-2:
        fails.append(f"fit: our loss {loss.item():.6f} > torch L-BFGS's {torch_loss:.6f}")
    print(f"{name}: n={len(x)} dims={d} categorical={int(cat.sum())}: worst relative difference "
          f"{worst:.2e} (log EI's gradient {worst_grad:.2e} of max |{np.abs(grad_ref).max():.3g}|); "
          f"fit loss {loss.item():.6f} (torch L-BFGS {torch_loss:.6f}), "
          f"gradient {grad:.2e}")
    for f in fails[:10]:
        print(f"  DIFFERS {f}")
    return 1 if fails else 0


def check_warp(tool, work, name, values):
    """Our Yeo-Johnson pieces on `values` against scipy.stats' (values standardised, as the
    sampler warps them)."""
    path = os.path.join(work, name + ".txt")
    with open(path, "w") as f:
        f.write(f"values {len(values)} " + " ".join(repr(float(v)) for v in values) + "\n")
    run = subprocess.run([tool, "--warp", path], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{name}: gp_reference --warp failed: {run.stderr.strip()}")
        return 1
    lines = run.stdout.splitlines()
    lam = float(lines[0].split()[1])
    fails = []
    worst = 0.0
    for line in lines[2:2 + int(lines[1].split()[1])]:
        row = [float(v) for v in line.split()]
        lmb, llf, t = row[0], row[1], row[2:]
        for label, a, b in [("llf", llf, float(stats.yeojohnson_llf(lmb, values)))] + \
                [(f"t[{i}]", a, float(b)) for i, (a, b) in
                 enumerate(zip(t, stats.yeojohnson(values, lmbda=lmb)))]:
            worst = max(worst, abs(a - b) / max(abs(b), FLOOR))
            if not close(a, b):
                fails.append(f"lambda {lmb}: {label} {a!r} vs {b!r}")
    # The sampler keeps lambda in [-2, 2] (gp.h); scipy's yeojohnson_normmax is unbounded, so the
    # reference maximises scipy's yeojohnson_llf over the same interval.
    ref = float(optimize.minimize_scalar(lambda lmb: -stats.yeojohnson_llf(lmb, values),
                                         bounds=(-2.0, 2.0), method="bounded",
                                         options={"xatol": 1e-9}).x)
    if abs(lam - ref) > 1e-3:
        fails.append(f"lambda {lam!r} vs scipy's {ref!r}")
    if stats.yeojohnson_llf(lam, values) < stats.yeojohnson_llf(ref, values) - 1e-8:
        fails.append(f"lambda {lam!r}: log-likelihood below scipy's lambda {ref!r}'s")
    print(f"{name}: n={len(values)} lambda {lam:.5f} (scipy {ref:.5f}); worst relative "
          f"difference {worst:.2e}")
    for f in fails[:10]:
        print(f"  DIFFERS {f}")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cases = {
        "continuous_2d": make_case(1, 12, 2, [False, False], 0, [0, 0]),
        "mixed_4d": make_case(2, 30, 4, [False, True, False, False], 3, [0, 0, 8, 0]),
        "continuous_6d_n100": make_case(3, 100, 6, [False] * 6, 0, [0] * 6),
        "categorical_heavy": make_case(4, 40, 3, [False, True, True], 4, [0, 0, 0]),
    }
    failures = sum(check_case(args.tool, args.work, k, v) for k, v in cases.items())
    rng = np.random.RandomState(7)
    warps = {
        "warp_symmetric": rng.normal(size=40),
        "warp_right_skewed": np.exp(2.0 * rng.normal(size=60)),  # losses with a long bad tail
        "warp_left_skewed": -np.exp(1.5 * rng.normal(size=30)),
        "warp_ties": np.repeat(rng.normal(size=8), 3),
        "warp_mild_tail": np.exp(0.6 * rng.normal(size=50)),  # lambda inside (-2, 2)
    }
    for k, v in warps.items():
        failures += check_warp(args.tool, args.work, k, (v - v.mean()) / v.std())
    print("FAILED" if failures else "all GP building blocks agree with Optuna's and scipy's")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
