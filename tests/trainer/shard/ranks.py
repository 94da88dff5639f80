"""Start N local ranks of shardtrain the way torchrun does, and collect their event lines.

Used by the parity, checkpoint and trace tests. Each rank writes events-rank-N.jsonl and
rank-N.log in the run directory, like every Shardscope launcher.
"""
import json
import os
import subprocess
import time


def start_ranks(shardtrain, args, run_dir, world, local_world=None, extra_env=None):
    """Start `world` ranks of `shardtrain args...`; returns the Popen objects."""
    local_world = local_world or world
    os.makedirs(run_dir, exist_ok=True)
    port_file = os.path.join(run_dir, "rdzv.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        env.update({
            "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank % local_world), "LOCAL_WORLD_SIZE": str(local_world),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0",
            "SHARDSCOPE_RDZV_FILE": port_file, "OMP_NUM_THREADS": "1",
        })
        env.update(extra_env or {})
        out = open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "ab")
        err = open(os.path.join(run_dir, f"rank-{rank}.log"), "ab")
        procs.append(subprocess.Popen([shardtrain] + args, cwd=run_dir, env=env, stdout=out,
                                      stderr=err, start_new_session=True))
    return procs


def wait_ranks(procs, timeout=600):
    deadline = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    return codes


def run_ranks(shardtrain, args, run_dir, world, local_world=None, extra_env=None, timeout=600):
    procs = start_ranks(shardtrain, args, run_dir, world, local_world, extra_env)
    return wait_ranks(procs, timeout)


def events(run_dir, rank=0, kind=None):
    path = os.path.join(run_dir, f"events-rank-{rank}.jsonl")
    out = []
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
