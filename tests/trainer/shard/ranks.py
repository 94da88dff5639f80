"""Start N local ranks of shardtrain the way torchrun does, and read what they wrote.

Shared by the engine's tests (parity, accumulation, trace, checkpoint, errors). Each rank writes
events-rank-N.jsonl and rank-N.log in the run directory, like every Shardscope launcher. The
helpers here also write the tiny test experiment and its data, keep a cache of runs that several
tests compare against (the unsharded reference), and compare loss curves and parameters.
"""
import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time

# The tiny decoder-only model and schedule every engine test starts from: 30 steps
# take about 2 s per run on this machine. grad_clip = 0.8 clips about a third of the steps.
# adam_eps = 1e-4, not 1e-8: AdamW moves an element by lr * m / (sqrt(v) + eps), so with eps
# 1e-8 an element whose first gradient is ~0 by chance (layers.2.mlp.gate_proj[124, 15] here,
# |g| < 1e-8) steps by up to +-lr in a direction set by rounding noise; summing over 2 ranks
# instead of 1 then moves final parameters by 2e-4 relative while losses agree to 3e-7. With eps
# 1e-4 rounding noise is amplified at most lr / eps = 100-fold and parameters agree to ~3e-6.
BASE_CONFIG = {
    "experiment": {"name": "shard-tests"},
    "model": {"arch": "tiny", "tiny_hidden_size": 32, "tiny_layers": 3, "tiny_heads": 4},
    "data": {"train_path": "train.jsonl", "seq_len": 32},
    "train": {
        "max_steps": 30, "batch_size": 12, "lr": 1e-2, "lr_min": 1e-3, "lr_warmup_steps": 3,
        "lr_schedule": "cosine", "weight_decay": 0.1, "grad_clip": 0.8, "adam_eps": 1e-4,
        "seed": 1234,
        "ckpt_at_end": False, "log_every": 1,
    },
    "shard": {"strategy": "FULL_SHARD"},
}


class CheckFailed(Exception):
    """A test assertion that failed; the message carries the numbers."""


def check(cond, message):
    if not cond:
        raise CheckFailed(message)


def main_guard(body):
    """Runs body(); prints FAIL and exits 1 on a CheckFailed, so CTest shows the numbers."""
    try:
        body()
    except CheckFailed as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)
    print("PASS", flush=True)


# ---------------------------------------------------------------- experiment files and data


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML spelling for {v!r}")


def write_config(path, changes=None):
    """Writes BASE_CONFIG with `changes` ({"train": {"max_steps": 20}, ...}) merged in."""
    sections = {k: dict(v) for k, v in BASE_CONFIG.items()}
    for section, values in (changes or {}).items():
        sections.setdefault(section, {}).update(values)
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def write_tokens(path, count=96, seq_len=32, vocab=256):
    """Arithmetic progressions modulo vocab (start and stride vary): a pattern the tiny model
    learns, so the loss moves and every token id occurs. Deterministic."""
    strides = [1, 2, 3, 5, 7]
    with open(path, "w") as f:
        for i in range(count):
            start = (i * 37 + 11) % vocab
            stride = strides[i % len(strides)]
            ids = [(start + stride * k) % vocab for k in range(seq_len)]
            f.write(json.dumps({"input_ids": ids}) + "\n")
    return path


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def setup_experiment(work, changes=None):
    """A clean work folder with train.jsonl and exp.toml; returns the config path."""
    fresh_dir(work)
    write_tokens(os.path.join(work, "train.jsonl"))
    return write_config(os.path.join(work, "exp.toml"), changes)


# ---------------------------------------------------------------- ranks


def rank_env(rank, world, local_world, port_file, extra_env=None):
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank % local_world), "LOCAL_WORLD_SIZE": str(local_world),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0",
        "SHARDSCOPE_RDZV_FILE": port_file, "OMP_NUM_THREADS": "1",
    })
    env.update(extra_env or {})
    return env


def start_ranks(shardtrain, args, run_dir, world, local_world=None, extra_env=None, only=None,
                preexec=None):
    """Starts ranks `only` (default all) of `world` running `shardtrain args...` in run_dir,
    each in its own session; returns {rank: Popen}. Output files are appended to, so a resumed
    run continues the same events-rank-N.jsonl. `preexec` runs in each child before exec (a
    resource limit)."""
    local_world = local_world or world
    run_dir = os.path.abspath(run_dir)
    os.makedirs(run_dir, exist_ok=True)
    port_file = os.path.join(run_dir, "rdzv.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    procs = {}
    for rank in (range(world) if only is None else only):
        env = rank_env(rank, world, local_world, port_file, extra_env)
        with open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "ab") as out, \
                open(os.path.join(run_dir, f"rank-{rank}.log"), "ab") as err:
            procs[rank] = subprocess.Popen([shardtrain] + args, cwd=run_dir, env=env, stdout=out,
                                           stderr=err, start_new_session=True,
                                           preexec_fn=preexec)
    return procs


def wait_ranks(procs, timeout=600):
    """Waits for every rank (a generous deadline, then SIGKILL); returns the exit codes in rank
    order."""
    procs = procs if isinstance(procs, dict) else dict(enumerate(procs))
    deadline = time.time() + timeout
    codes = []
    for rank in sorted(procs):
        p = procs[rank]
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    return codes


def run_ranks(shardtrain, args, run_dir, world, local_world=None, extra_env=None, timeout=600,
              preexec=None):
    procs = start_ranks(shardtrain, args, run_dir, world, local_world, extra_env, preexec=preexec)
    return wait_ranks(procs, timeout)


def events(run_dir, rank=0, kind=None):
    path = os.path.join(run_dir, f"events-rank-{rank}.jsonl")
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            ev = json.loads(line)
            if kind is None or ev["ev"] == kind:
                out.append(ev)
    return out


def log_tail(run_dir, world, lines=15):
    text = []
    for rank in range(world):
        path = os.path.join(run_dir, f"rank-{rank}.log")
        if os.path.exists(path):
            with open(path) as f:
                text.append(f"--- rank-{rank}.log\n" + "".join(f.readlines()[-lines:]))
    return "\n".join(text)


def train(shardtrain, config, run_dir, world=1, local_world=None, sets=(), args=(),
          reference=False, fresh=True):
    """One complete `shardtrain train` run; fails the test unless every rank exits 0 with a
    `done` event. Returns the run directory."""
    if fresh:
        fresh_dir(run_dir)
    argv = ["train", os.path.abspath(config)]
    for s in sets:
        argv += ["--set", s]
    argv += list(args)
    if reference:
        argv.append("--reference")
    codes = run_ranks(shardtrain, argv, run_dir, world, local_world)
    check(all(c == 0 for c in codes),
          f"{run_dir}: exit codes {codes}\n{log_tail(run_dir, world)}")
    check(events(run_dir, 0, "done"), f"{run_dir}: no done event\n{log_tail(run_dir, world)}")
    check_human_log(run_dir, world)
    return run_dir


def check_human_log(run_dir, world):
    """Each rank's log reads like a trainer's: the banner, the plan naming the rank, rank 0's
    line for each step event, and the end (trainer/run/human_log.h)."""
    for rank in range(world):
        with open(os.path.join(run_dir, f"rank-{rank}.log")) as f:
            lines = f.read().splitlines()
        where = f"{run_dir}/rank-{rank}.log"
        check(any(line.startswith("shardtrain ") and "parameters" in line for line in lines),
              f"{where}: no start banner in {lines[:3]}")
        check(any(line.startswith(f"plan: rank {rank} of {world};") for line in lines),
              f"{where}: no plan line naming rank {rank} of {world}")
        check(any(line.startswith("done: ") for line in lines), f"{where}: no done line")
        if rank == 0:
            steps = [line for line in lines if line.startswith("step ") and " | loss " in line]
            check(len(steps) == len(events(run_dir, 0, "step")),
                  f"{where}: {len(steps)} step lines for {len(events(run_dir, 0, 'step'))} "
                  f"step events")


def curve(run_dir):
    """{step: step event} of rank 0 (the last event of a step wins when a resume repeated it)."""
    return {e["step"]: e for e in events(run_dir, 0, "step")}


# ---------------------------------------------------------------- cached runs


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def prune_cache(cache_root, binary):
    """Removes cached runs of other shardtrain binaries that no test holds."""
    for name in os.listdir(cache_root):
        done = os.path.join(cache_root, name, "complete")
        if not os.path.isfile(done):
            continue
        with open(done) as f:
            if f.read() == binary:
                continue
        with open(os.path.join(cache_root, name + ".lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            for path in (os.path.join(cache_root, name), os.path.join(cache_root, name + ".src")):
                shutil.rmtree(path, ignore_errors=True)


def cached_run(shardtrain, cache_root, config, sets=(), reference=True, world=1):
    """A run several tests compare against, done once per (experiment file, data, overrides,
    shardtrain binary) under cache_root and shared across concurrent tests with a lock file.
    Returns its run directory (events-rank-0.jsonl and params.safetensors)."""
    work = os.path.dirname(os.path.abspath(config))
    binary = file_digest(shardtrain)
    key = hashlib.sha256()
    with open(config) as f:
        text = f.read()
    for part in (text, file_digest(os.path.join(work, "train.jsonl")), "\n".join(sets),
                 str(reference), str(world), binary):
        key.update(part.encode() + b"\0")
    key = key.hexdigest()[:20]
    os.makedirs(cache_root, exist_ok=True)
    run_dir = os.path.join(cache_root, key)
    with open(run_dir + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(run_dir, "complete")):
            prune_cache(cache_root, binary)
            src = fresh_dir(run_dir + ".src")
            shutil.copy(config, os.path.join(src, "exp.toml"))
            shutil.copy(os.path.join(work, "train.jsonl"), os.path.join(src, "train.jsonl"))
            train(shardtrain, os.path.join(src, "exp.toml"), run_dir, world, sets=sets,
                  args=["--dump-params", "params.safetensors"], reference=reference)
            with open(os.path.join(run_dir, "complete"), "w") as f:
                f.write(binary)
            print(f"cached run {key}: {'reference' if reference else f'{world} rank(s)'} "
                  f"{' '.join(sets)}", flush=True)
        else:
            print(f"cached run {key}: reused", flush=True)
    return run_dir


# ---------------------------------------------------------------- comparisons


def rel(a, b):
    """|a - b| / max(|b|, tiny)."""
    return abs(a - b) / max(abs(b), 1e-30)


def compare_curves(label, got, want, rtol, fields=("loss",), steps=None):
    """Prints got vs want per step and checks each field within rtol relative. `got`/`want`
    are curve() dicts; every step of `steps` (default: want's) must be in both."""
    steps = sorted(want) if steps is None else list(steps)
    missing = [s for s in steps if s not in got or s not in want]
    check(not missing, f"{label}: steps {missing} missing (got {sorted(got)})")
    worst = {f: (0.0, None) for f in fields}
    print(f"{label}: step  " + "  ".join(f"{f:>12} got {f:>12} want  rel" for f in fields))
    for s in steps:
        row = []
        for f in fields:
            g, w = got[s][f], want[s][f]
            r = rel(g, w)
            if not math.isfinite(g) or r > worst[f][0] or worst[f][1] is None:
                worst[f] = (r if math.isfinite(g) else math.inf, s)
            row.append(f"{g:17.9g} {w:17.9g} {r:8.1e}")
        print(f"{label}: {s:4d}  " + "  ".join(row))
    for f, (r, s) in worst.items():
        print(f"{label}: max relative {f} difference {r:.3e} at step {s} (tolerance {rtol:g})")
        check(r <= rtol, f"{label}: {f} at step {s}: got {got[s][f]!r}, want {want[s][f]!r} "
                         f"(relative {r:.3e} > {rtol:g})")
    return max(r for r, _ in worst.values())


def load_params(path):
    """{name: numpy array} of a --dump-params file (the test venv's safetensors + numpy)."""
    try:
        from safetensors.numpy import load_file
    except ImportError as e:
        raise CheckFailed(f"cannot read {path}: {e}; run scripts/setup.sh --tests (safetensors "
                          "and numpy in .venv) and reconfigure") from e
    return load_file(path)


def param_diffs(got, want):
    """{name: max|got - want| / max|want|}; names must agree."""
    check(sorted(got) == sorted(want),
          f"parameter names differ: only got {sorted(set(got) - set(want))}, "
          f"only want {sorted(set(want) - set(got))}")
    import numpy as np
    out = {}
    for name, w in want.items():
        g = got[name].astype(np.float64)
        w = w.astype(np.float64)
        check(g.shape == w.shape, f"{name}: shape {g.shape} vs {w.shape}")
        out[name] = float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30))
    return out


@contextlib.contextmanager
def timed(label):
    t0 = time.time()
    yield
    print(f"{label}: {time.time() - t0:.1f} s", flush=True)
