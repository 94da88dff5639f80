"""Failures on real ranks.

  --case peer_lost: 3 FULL_SHARD ranks training; rank 1 is killed with SIGKILL mid-run. Ranks 0
      and 2 must exit non-zero within the collective timeout, each with one `error` event of
      kind peer_lost whose message names rank 1.
  --case oom: 2 FULL_SHARD ranks of a model whose first step needs more host memory than rank 1
      may hold (SHARDSCOPE_HOST_MEMORY_LIMIT between its memory after a step and its peak, both
      measured by a calibration run): rank 1 exits 1 with one `error` of kind oom naming the
      bytes asked, and rank 0 exits non-zero within 30 s with peer_lost.
  --case frozen: 2 ranks with shard.timeout_s = 5; rank 1 is stopped with SIGSTOP mid-run (alive
      but silent, as a hung host is). Rank 0 must exit non-zero within the timeout plus slack,
      with one `error` of kind peer_lost that names the stopped rank and whose message or hint
      names shard.timeout_s.
  --case frozen_remote: the same, with every rank publishing the host name "node-b"
      (SHARDSCOPE_PEER_HOST), as ranks on other machines (or in containers that share one name)
      appear: rank 0 cannot look the peer up in /proc, and must name it from the heartbeats
      every rank writes to the store ("no heartbeat ... from rank 1 (node-b, pid N)").
  --case events_unwritable: one rank whose stdout is /dev/full (a full disk) must stop with exit
      1 and an io error on stderr naming the events, not train to the end unrecorded. The same
      with stdout a pipe whose reader has gone (a launcher that died): an io error, not death by
      SIGPIPE (Python's subprocess restores SIGPIPE's default in the child, as launchers do).
  --case invalid_config: configurations that are invalid for the launch shape (batch_size 13 on
      2 ranks; HYBRID_SHARD on one node of 2 ranks; shard.device "cuda" or backend "nccl" with
      this CPU build's LibTorch) make every rank exit 2 with a
      `config` error event naming the field, and no rank writes `hello`. A lone rank 1 of 2
      (no rank 0 to meet) fails the same way at once: validation precedes the rendezvous.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

COLLECTIVE_TIMEOUT_S = 60  # trainer/run/train.cpp make_groups()
VICTIM = 1


def on_device(args, changes):
    """`changes` with the ranks on --device: on CUDA through Gloo staged in host memory
    (shard.backend "gloo"), so several ranks share one GPU (bench/gpu/gpu_check.py)."""
    if args.device != "cpu":
        changes.setdefault("shard", {}).update({"device": args.device, "backend": "gloo"})
    return changes


def peer_lost(args):
    config = ranks.setup_experiment(args.work, on_device(args, {"train": {"max_steps": 100000}}))
    run_dir = ranks.fresh_dir(os.path.join(args.work, "run"))
    procs = ranks.start_ranks(args.shardtrain, ["train", config], run_dir, 3)
    deadline = time.time() + 120
    while not any(e["step"] >= 3 for e in ranks.events(run_dir, 0, "step")):
        ended = {r: p.poll() for r, p in procs.items() if p.poll() is not None}
        check(not ended and time.time() < deadline,
              f"ranks ended {ended} or no step 3 within 120 s\n{ranks.log_tail(run_dir, 3)}")
        time.sleep(0.01)
    procs[VICTIM].send_signal(signal.SIGKILL)
    procs[VICTIM].wait()  # reaped at once, as a launcher does: a zombie still answers kill(pid, 0)
    killed_at = time.time()
    survivors = {r: p for r, p in procs.items() if r != VICTIM}
    codes = ranks.wait_ranks(survivors, timeout=COLLECTIVE_TIMEOUT_S + 60)
    print(f"rank {VICTIM} killed after step 3; ranks {sorted(survivors)} exited {codes} after "
          f"{time.time() - killed_at:.1f} s (collective timeout {COLLECTIVE_TIMEOUT_S} s)")
    check(all(c not in (0, -signal.SIGKILL) for c in codes),
          f"survivors must fail on their own: exit codes {codes}\n{ranks.log_tail(run_dir, 3)}")
    for rank in survivors:
        errors = ranks.events(run_dir, rank, "error")
        print(f"rank {rank}: {errors}")
        check(len(errors) == 1, f"rank {rank}: want one error event, got {errors}")
        err = errors[0]
        check(err["kind"] == "peer_lost", f"rank {rank}: error kind {err['kind']}, want peer_lost")
        check(re.search(rf"lost rank {VICTIM}\b", err["message"]),
              f"rank {rank}: the message does not name the lost rank {VICTIM}: "
              f"{err['message']!r}")
        check(err.get("hint"), f"rank {rank}: the error has no hint")
        check(not ranks.events(run_dir, rank, "done"), f"rank {rank} wrote a done event")


def frozen(args, remote=False):
    timeout_s = 5
    config = ranks.setup_experiment(args.work, on_device(args, {"train": {"max_steps": 100000},
                                                                "shard": {"timeout_s": timeout_s}}))
    run_dir = ranks.fresh_dir(os.path.join(args.work, "run"))
    extra = {"SHARDSCOPE_PEER_HOST": "node-b"} if remote else None
    procs = ranks.start_ranks(args.shardtrain, ["train", config], run_dir, 2, extra_env=extra)
    try:
        deadline = time.time() + 120
        while not any(e["step"] >= 3 for e in ranks.events(run_dir, 0, "step")):
            check(time.time() < deadline and all(p.poll() is None for p in procs.values()),
                  f"no step 3 within 120 s\n{ranks.log_tail(run_dir, 2)}")
            time.sleep(0.01)
        procs[VICTIM].send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        code0 = ranks.wait_ranks({0: procs[0]}, timeout=timeout_s + 60)[0]
        waited = time.time() - stopped_at
    finally:
        procs[VICTIM].send_signal(signal.SIGKILL)
        procs[VICTIM].wait()
    print(f"rank 1 stopped after step 3; rank 0 exited {code0} after {waited:.1f} s "
          f"(shard.timeout_s {timeout_s})")
    check(code0 not in (0, -signal.SIGKILL), f"rank 0 exit {code0}: it must fail on its own\n"
                                              f"{ranks.log_tail(run_dir, 2)}")
    check(waited < timeout_s + 30, f"rank 0 took {waited:.1f} s (shard.timeout_s {timeout_s})")
    errors = ranks.events(run_dir, 0, "error")
    print(f"rank 0: {errors}")
    check(len(errors) == 1 and errors[0]["kind"] == "peer_lost",
          f"rank 0: want one peer_lost error, got {errors}")
    check("shard.timeout_s" in errors[0]["message"] + errors[0].get("hint", ""),
          f"rank 0: neither the message nor the hint names shard.timeout_s: {errors[0]}")
    if remote:
        check(f"no heartbeat for 2.5 s from rank {VICTIM} (node-b, pid {procs[VICTIM].pid})"
              in errors[0]["message"],
              f"rank 0: the message does not name the silent rank {VICTIM} on node-b: {errors[0]}")
    else:
        check(f"lost rank {VICTIM} (pid {procs[VICTIM].pid} stopped)" in errors[0]["message"],
              f"rank 0: the message does not name the stopped rank {VICTIM}: {errors[0]}")


def frozen_remote(args):
    frozen(args, remote=True)


def events_unwritable(args):
    config = ranks.setup_experiment(args.work, {"train": {"max_steps": 50}})
    run_dir = ranks.fresh_dir(os.path.join(args.work, "run"))
    env = ranks.rank_env(0, 1, 1, os.path.join(run_dir, "rdzv.port"))
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(key)  # a single process
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([args.shardtrain, "train", config], cwd=run_dir, env=env,
                              stdout=full, stderr=subprocess.PIPE, timeout=300, check=False)
    err = proc.stderr.decode(errors="replace")
    print(f"exit {proc.returncode}; stderr: {err.strip()[-300:]}")
    check(proc.returncode == 1, f"exit {proc.returncode}, want 1 (io error)")
    check("error (io)" in err and "cannot write events" in err,
          f"stderr does not name the events as an io error: {err[-500:]!r}")
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: every write gets EPIPE (and SIGPIPE, unless ignored)
    try:
        proc = subprocess.run([args.shardtrain, "train", config], cwd=run_dir, env=env,
                              stdout=write_end, stderr=subprocess.PIPE, timeout=300, check=False)
    finally:
        os.close(write_end)
    err = proc.stderr.decode(errors="replace")
    print(f"stdout a pipe with no reader: exit {proc.returncode}; stderr: {err.strip()[-300:]}")
    check(proc.returncode == 1,
          f"exit {proc.returncode}, want 1 (io error; -{signal.SIGPIPE} is death by SIGPIPE)")
    check("error (io)" in err and "cannot write events" in err,
          f"stderr does not name the events as an io error: {err[-500:]!r}")


def oom(args):
    # Activations of 8 samples x 128 tokens x width 256 dwarf the 2-layer model's state.
    os.makedirs(args.work, exist_ok=True)
    ranks.fresh_dir(args.work)
    ranks.write_tokens(os.path.join(args.work, "train.jsonl"), count=64, seq_len=128)
    config = ranks.write_config(os.path.join(args.work, "exp.toml"), {
        "model": {"tiny_hidden_size": 256, "tiny_layers": 2, "tiny_max_seq_len": 128},
        "data": {"seq_len": 128}, "train": {"batch_size": 16, "mem_every": 1}})
    calib_dir = ranks.fresh_dir(os.path.join(args.work, "calibrate"))
    codes = ranks.run_ranks(args.shardtrain, ["train", config, "--set", "train.max_steps=3"],
                            calib_dir, 2, timeout=300)
    check(codes == [0, 0], f"calibration run: exit {codes}\n{ranks.log_tail(calib_dir, 2)}")
    mem = ranks.events(calib_dir, 1, "mem")[0]
    limit = (mem["allocated"] + mem["peak"]) // 2
    print(f"calibration, rank 1 after step 1: {mem['allocated']} bytes held, peak {mem['peak']}; "
          f"limit {limit}")
    check(mem["peak"] > 2 * mem["allocated"], f"the step does not dominate the memory: {mem}")

    run_dir = ranks.fresh_dir(os.path.join(args.work, "run"))
    argv = [args.shardtrain, "train", config, "--set", "train.max_steps=20"]
    procs = ranks.start_ranks(args.shardtrain, argv[1:], run_dir, 2, only=[0])
    env = ranks.rank_env(1, 2, 2, os.path.join(run_dir, "rdzv.port"),
                         {"SHARDSCOPE_HOST_MEMORY_LIMIT": str(limit)})
    with open(os.path.join(run_dir, "events-rank-1.jsonl"), "ab") as out, \
            open(os.path.join(run_dir, "rank-1.log"), "ab") as err:
        procs[1] = subprocess.Popen(argv, cwd=run_dir, env=env, stdout=out, stderr=err,
                                    start_new_session=True)
    code1 = procs[1].wait(timeout=300)
    failed_at = time.time()
    code0 = ranks.wait_ranks({0: procs[0]}, timeout=120)[0]
    waited = time.time() - failed_at
    print(f"rank 1 exit {code1}; rank 0 exit {code0} {waited:.1f} s later")
    errors = ranks.events(run_dir, 1, "error")
    print(f"rank 1: {errors}")
    check(code1 == 1, f"rank 1 exit {code1}, want 1\n{ranks.log_tail(run_dir, 2)}")
    check(len(errors) == 1 and errors[0]["kind"] == "oom",
          f"rank 1: want one error of kind oom, got {errors}")
    check(re.search(r"tried to allocate \d+ bytes", errors[0]["message"]),
          f"rank 1: the message does not name the bytes asked: {errors[0]['message']!r}")
    check(ranks.events(run_dir, 1, "hello"), "rank 1 failed before hello: the limit is too low")
    check(code0 not in (0, None), f"rank 0 exit {code0}: it must fail on its own")
    check(waited < 30, f"rank 0 took {waited:.1f} s to exit after rank 1's oom (want < 30 s)")
    lost = ranks.events(run_dir, 0, "error")
    check(len(lost) == 1 and lost[0]["kind"] == "peer_lost",
          f"rank 0: want one peer_lost error, got {lost}")


def expect_config_error(run_dir, world, codes, field):
    check(all(c == 2 for c in codes), f"want exit code 2 on every rank, got {codes}\n"
                                      f"{ranks.log_tail(run_dir, world)}")
    for rank in range(world):
        evs = ranks.events(run_dir, rank)
        kinds = [e["ev"] for e in evs]
        print(f"rank {rank}: events {kinds}: {evs[-1] if evs else None}")
        check("hello" not in kinds, f"rank {rank} wrote hello before failing: {kinds}")
        errors = [e for e in evs if e["ev"] == "error"]
        check(len(errors) == 1 and errors[0]["kind"] == "config",
              f"rank {rank}: want one config error event, got {errors}")
        check(field in errors[0]["message"],
              f"rank {rank}: the message does not name {field}: {errors[0]['message']!r}")


def invalid_config(args):
    config = ranks.setup_experiment(args.work)
    cases = [("batch_13_on_2", 2, 2, ["train.batch_size=13"], "train.batch_size"),
             ("hybrid_one_node", 2, 2, ["shard.strategy=HYBRID_SHARD"], "shard.strategy"),
             # This build's LibTorch is the CPU one: CUDA asked of it is a config error, never a
             # silent CPU run, and so is NCCL on ranks that compute on the CPU.
             ("cuda_on_cpu_libtorch", 2, 2, ["shard.device=cuda"], "shard.device"),
             ("nccl_on_cpu", 2, 2, ["shard.backend=nccl"], "shard.backend")]
    for name, world, local, sets, field in cases:
        run_dir = ranks.fresh_dir(os.path.join(args.work, name))
        argv = ["train", config] + [a for s in sets for a in ("--set", s)]
        codes = ranks.run_ranks(args.shardtrain, argv, run_dir, world, local, timeout=120)
        print(f"{name}: {world} ranks (LOCAL_WORLD_SIZE {local}) {' '.join(sets)}: exit {codes}")
        expect_config_error(run_dir, world, codes, field)
    # Rank 1 alone: a rank that reached the rendezvous would wait for rank 0's port and fail
    # with peer_lost after the timeout; a config error proves nothing was attempted.
    run_dir = ranks.fresh_dir(os.path.join(args.work, "lone_rank_1"))
    procs = ranks.start_ranks(args.shardtrain, ["train", config, "--set", "train.batch_size=13"],
                              run_dir, 2, only=[1])
    codes = ranks.wait_ranks(procs, timeout=COLLECTIVE_TIMEOUT_S + 60)
    print(f"lone rank 1 of 2, batch_size 13: exit {codes}")
    check(codes == [2], f"lone rank 1: exit {codes}, want 2\n{ranks.log_tail(run_dir, 2)}")
    errors = ranks.events(run_dir, 1, "error")
    check(len(errors) == 1 and errors[0]["kind"] == "config",
          f"lone rank 1: want one config error before any rendezvous, got {errors}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--case", required=True, choices=["peer_lost", "frozen", "frozen_remote",
                                                              "oom", "events_unwritable",
                                                              "invalid_config"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="peer_lost and frozen: where the ranks compute (cuda: the GPU check)")
    args = parser.parse_args()
    ranks.main_guard(lambda: {"peer_lost": peer_lost, "frozen": frozen,
                              "frozen_remote": frozen_remote, "oom": oom,
                              "events_unwritable": events_unwritable,
                              "invalid_config": invalid_config}[args.case](args))


if __name__ == "__main__":
    main()
