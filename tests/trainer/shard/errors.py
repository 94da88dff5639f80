"""Failures on real ranks (issue #3).

  --case peer_lost: 3 FULL_SHARD ranks training; rank 1 is killed with SIGKILL mid-run. Ranks 0
      and 2 must exit non-zero within the collective timeout, each with one `error` event of
      kind peer_lost whose message names rank 1.
  --case invalid_config: configurations that are invalid for the launch shape (batch_size 13 on
      2 ranks; HYBRID_SHARD on one node of 2 ranks) make every rank exit 2 with a
      `config` error event naming the field, and no rank writes `hello`. A lone rank 1 of 2
      (no rank 0 to meet) fails the same way at once: validation precedes the rendezvous.
"""
import argparse
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

COLLECTIVE_TIMEOUT_S = 60  # trainer/run/train.cpp make_groups()
VICTIM = 1


def peer_lost(args):
    config = ranks.setup_experiment(args.work, {"train": {"max_steps": 100000}})
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
             ("hybrid_one_node", 2, 2, ["shard.strategy=HYBRID_SHARD"], "shard.strategy")]
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
    parser.add_argument("--case", required=True, choices=["peer_lost", "invalid_config"])
    args = parser.parse_args()
    ranks.main_guard(lambda: {"peer_lost": peer_lost, "invalid_config": invalid_config}[
        args.case](args))


if __name__ == "__main__":
    main()
