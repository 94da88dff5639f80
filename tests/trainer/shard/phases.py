"""Phase timings and system samples (`phases` and `sys` events, docs/trainer.md): 2 FULL_SHARD
ranks on the CPU.

  - every rank writes one `phases` event per optimizer step, steps 1..N in order;
  - the phases add up to the step's wall time (data + forward + backward + optimizer +
    comm_exposed + copy + other = wall);
  - the wall time is the step as seen from outside: the time between one step's event and the
    next (the `t` stamps, ms precision) agrees with the sum of the walls within 5%;
  - what must take time does: forward, backward, optimizer and data on every step, waits on
    collectives in the run (FULL_SHARD gathers every unit), and collectives are in flight at
    least while waited and never longer than the step (comm_exposed <= comm_total <= wall);
    nothing is copied on the CPU;
  - rank 0's log carries no phases lines (they are for the dashboard);
  - with SHARDSCOPE_SYS_EVERY_S = 0.2 every rank writes `sys` samples from its sampler thread
    while it trains: the process's busy cores, its RSS, the host's load, no GPU figures on the
    CPU, steps in order, the last one before `done`; a period that is not a number is a config
    error naming the variable.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

WORLD = 2
STEPS = 12
PHASES = ("data", "forward", "backward", "optimizer", "comm_exposed", "copy", "other")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    # Steps of a few hundred ms: the `t` stamps' millisecond steps are then well under 5%.
    config = ranks.setup_experiment(args.work, {
        "model": {"tiny_hidden_size": 256, "tiny_layers": 4, "tiny_heads": 4},
        "data": {"seq_len": 32},
        "train": {"max_steps": STEPS, "batch_size": 16, "grad_clip": 1.0},
    })
    os.environ["SHARDSCOPE_SYS_EVERY_S"] = "0.2"  # the ranks inherit it
    run_dir = ranks.train(args.shardtrain, config, os.path.join(args.work, "run"), world=WORLD)

    for rank in range(WORLD):
        events = ranks.events(run_dir, rank, "phases")
        check([e["step"] for e in events] == list(range(1, STEPS + 1)),
              f"rank {rank}: phases events for steps {[e['step'] for e in events]}")
        for e in events:
            total = sum(e[k] for k in PHASES)
            check(abs(total - e["wall"]) <= 1e-9 + 1e-6 * e["wall"],
                  f"rank {rank} step {e['step']}: phases sum to {total:.6f} s, wall {e['wall']:.6f} s")
            for k in ("data", "forward", "backward", "optimizer"):
                check(e[k] > 0, f"rank {rank} step {e['step']}: {k} is {e[k]}")
            check(e["copy"] == 0, f"rank {rank} step {e['step']}: copy {e['copy']} on the CPU")
            check(e["comm_exposed"] <= e["comm_total"] + 1e-6 <= e["wall"] + 2e-6,
                  f"rank {rank} step {e['step']}: collectives in flight {e['comm_total']:.6f} s, "
                  f"waited {e['comm_exposed']:.6f} s, wall {e['wall']:.6f} s (expected "
                  "exposed <= in flight <= wall)")
        exposed = sum(e["comm_exposed"] for e in events)
        check(exposed > 0, f"rank {rank}: no time waiting on collectives in {STEPS} FULL_SHARD steps")
        # From the second step's event to the last: STEPS - 1 steps seen from outside.
        outside = events[-1]["t"] - events[0]["t"]
        inside = sum(e["wall"] for e in events[1:])
        check(abs(outside - inside) <= 0.05 * outside,
              f"rank {rank}: steps 2..{STEPS} took {outside:.3f} s between their events, their "
              f"phases' walls sum to {inside:.3f} s (more than 5% apart)")
        mean = {k: sum(e[k] for e in events) / STEPS for k in PHASES + ("comm_total", "wall")}
        print(f"rank {rank}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in mean.items()) +
              f"; outside {outside:.3f} s vs inside {inside:.3f} s")

    with open(os.path.join(run_dir, "rank-0.log")) as f:
        check("phases" not in f.read(), "rank-0.log has phases lines")

    for rank in range(WORLD):
        every = ranks.events(run_dir, rank)
        sys_events = [e for e in every if e["ev"] == "sys"]
        check(len(sys_events) >= 3, f"rank {rank}: {len(sys_events)} sys events in "
              f"{every[-1]['t'] - every[0]['t']:.1f} s at a 0.2 s period")
        check(all(e["rss"] > 0 and e["load1"] >= 0 and e["cpu"] >= 0 and "gpu" not in e
                  for e in sys_events), f"rank {rank}: odd sys samples {sys_events[:2]}")
        check(max(e["cpu"] for e in sys_events) > 0.1,
              f"rank {rank}: the training process never kept a core busy: {sys_events}")
        steps = [e["step"] for e in sys_events]
        check(steps == sorted(steps) and steps[-1] <= STEPS, f"rank {rank}: sys steps {steps}")
        check(every[-1]["ev"] == "done", f"rank {rank}: {every[-1]['ev']} after done")
        print(f"rank {rank}: {len(sys_events)} sys samples, busy cores up to "
              f"{max(e['cpu'] for e in sys_events):.2f}, rss {sys_events[-1]['rss'] >> 20} MiB")

    os.environ["SHARDSCOPE_SYS_EVERY_S"] = "every second"
    bad = os.path.join(args.work, "bad")
    codes = ranks.run_ranks(args.shardtrain, ["train", config], ranks.fresh_dir(bad), 1)
    errors = ranks.events(bad, 0, "error")
    check(codes != [0] and errors and errors[0]["kind"] == "config" and
          "SHARDSCOPE_SYS_EVERY_S" in errors[0]["message"],
          f"a bad sampling period: exit {codes}, errors {errors}")


if __name__ == "__main__":
    ranks.main_guard(main)
