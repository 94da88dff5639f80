"""What the --trace of 2 FULL_SHARD ranks proves about prefetching and placement (issue #3).

  --policy pre|post|none: shard.backward_prefetch = POLICY with forward_prefetch off/on and
      max_inflight_gathers 1 and 2 (4 runs). Per micro-step of every rank's trace:
        forward: all-gathers issued in unit order (root, layers.0, ...); with forward_prefetch
          unit i+1's gather is issued before unit i is freed (i.e. before its compute ends),
          without it only after unit i is freed (when it is needed);
        backward: units gathered again in reverse order; pre issues unit i-1's gather after unit
          i's gather completed and before unit i's reduce-scatter; post issues it after unit i's
          reduce-scatter, before it is needed; none issues it only when needed (its wait is the
          next record);
        in flight: replaying issue/wait never exceeds max_inflight_gathers and matches the
          `inflight` field of every record; every gather is waited before its unit is freed.
  --policy placement: offload_params and offload_optimizer on; every flat parameter's master
      shard lives on "cpu" and holds 1/W of the gathered bytes; optimizer state on "cpu".
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

WORLD = 2
STEPS = 2  # optimizer steps per run (one micro-step each)
NOTES = set()


def read_trace(path):
    records, placements = [], []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            (placements if rec["op"] == "placement" else records).append(rec)
    return records, placements


def micro_steps(records):
    """Splits a trace at each micro-step's first record (the root unit's forward all-gather)."""
    out = []
    for rec in records:
        if (rec["op"], rec["stage"], rec["unit"], rec["phase"]) == \
                ("all_gather", "issue", "root", "forward"):
            out.append([])
        check(out, f"the trace does not start with the root unit's forward all-gather: {rec}")
        out[-1].append(rec)
    return out


def find(seg, op, stage, unit, phase):
    """Index of the first matching record of a micro-step; fails when there is none."""
    for i, rec in enumerate(seg):
        if (rec["op"], rec["stage"], rec["unit"], rec["phase"]) == (op, stage, unit, phase):
            return i
    raise ranks.CheckFailed(f"no {op} {stage} of {unit} in {phase} in this micro-step:\n" +
                            "\n".join(describe(r) for r in seg))


def describe(rec):
    return f"  {rec['op']} {rec['stage']} {rec['unit']} {rec['phase']} inflight={rec['inflight']}"


def check_inflight(records, limit, where):
    inflight = []
    peak = 0
    for rec in records:
        if rec["op"] != "all_gather":
            continue
        if rec["stage"] == "issue":
            check(rec["unit"] not in inflight, f"{where}: {rec['unit']} gathered twice at once")
            inflight.append(rec["unit"])
        else:
            check(rec["unit"] in inflight, f"{where}: wait of {rec['unit']} without an issue")
            inflight.remove(rec["unit"])
        check(rec["inflight"] == len(inflight),
              f"{where}: record says {rec['inflight']} in flight, replay counts {len(inflight)}")
        check(len(inflight) <= limit, f"{where}: {inflight} in flight, more than "
                                      f"max_inflight_gathers = {limit}")
        peak = max(peak, len(inflight))
    return peak


def check_prefetch_flag(rec, want, what):
    """Tightens the order checks when the trace says why a gather was issued."""
    if "prefetch" not in rec:
        NOTES.add("all_gather issue records carry no `prefetch` field: backward_prefetch=post "
                  "and none are told apart by order only")
        return
    check(bool(rec["prefetch"]) == want, f"{what}: prefetch={rec['prefetch']}, want {want}")


def check_forward(seg, blocks, forward_prefetch, where):
    issues = [r["unit"] for r in seg
              if (r["op"], r["stage"], r["phase"]) == ("all_gather", "issue", "forward")]
    check(issues == ["root"] + blocks, f"{where}: forward gathers issued {issues}, want unit "
                                       f"order {['root'] + blocks}")
    for i, unit in enumerate(blocks):
        wait = find(seg, "all_gather", "wait", unit, "forward")
        free = find(seg, "free", "done", unit, "forward")
        check(find(seg, "all_gather", "issue", unit, "forward") < wait < free,
              f"{where}: {unit} must be issued, waited and then freed in forward")
        if i + 1 == len(blocks):
            continue
        nxt = find(seg, "all_gather", "issue", blocks[i + 1], "forward")
        if forward_prefetch:
            check(wait < nxt < free, f"{where}: forward_prefetch must issue {blocks[i + 1]} "
                                     f"after {unit} is gathered and before {unit} is freed")
        else:
            check(free < nxt, f"{where}: without forward_prefetch {blocks[i + 1]} is gathered "
                              f"only when needed, after {unit} is freed")
            check(seg[nxt + 1]["unit"] == blocks[i + 1] and seg[nxt + 1]["stage"] == "wait",
                  f"{where}: {blocks[i + 1]}'s on-demand gather must be waited at once")
        check_prefetch_flag(seg[nxt], forward_prefetch, f"{where}: {blocks[i + 1]} forward")


def check_backward(seg, blocks, policy, where):
    order = list(reversed(blocks))
    issues = [r["unit"] for r in seg
              if (r["op"], r["stage"], r["phase"]) == ("all_gather", "issue", "backward")]
    check(issues == order, f"{where}: backward gathers issued {issues}, want {order}")
    for i, unit in enumerate(order):
        wait = find(seg, "all_gather", "wait", unit, "backward")
        rs = find(seg, "reduce_scatter", "issue", unit, "backward")
        free = find(seg, "free", "done", unit, "backward")
        check(wait < rs < free, f"{where}: {unit} must be gathered before its reduce-scatter "
                                "and freed after it in backward")
        find(seg, "reduce_scatter", "wait", unit, "backward")
        if i + 1 == len(order):
            continue
        prev = order[i + 1]
        issue = find(seg, "all_gather", "issue", prev, "backward")
        prev_wait = find(seg, "all_gather", "wait", prev, "backward")
        if policy == "pre":
            check(wait < issue < rs, f"{where}: backward_prefetch=pre must issue {prev} after "
                                     f"{unit}'s gather completes and before {unit}'s "
                                     "reduce-scatter")
        elif policy == "post":
            check(rs < issue < prev_wait, f"{where}: backward_prefetch=post must issue {prev} "
                                          f"after {unit}'s reduce-scatter, before it is waited")
        else:
            check(rs < issue and prev_wait == issue + 1,
                  f"{where}: backward_prefetch=none must gather {prev} only when needed")
        check_prefetch_flag(seg[issue], policy != "none", f"{where}: {prev} backward")


def check_run(run_dir, blocks, policy, forward_prefetch, limit):
    peaks = []
    for rank in range(WORLD):
        path = os.path.join(run_dir, "trace.jsonl" + (f".rank-{rank}" if rank else ""))
        records, _ = read_trace(path)
        segs = micro_steps(records)
        check(len(segs) == STEPS, f"rank {rank}: {len(segs)} micro-steps in the trace, want "
                                  f"{STEPS}")
        for k, seg in enumerate(segs):
            where = f"rank {rank} micro-step {k}"
            check_forward(seg, blocks, forward_prefetch, where)
            check_backward(seg, blocks, policy, where)
        peaks.append(check_inflight(records, limit, f"rank {rank}"))
    return max(peaks)


def prefetch_runs(args, config):
    blocks = [f"layers.{i}" for i in range(ranks.BASE_CONFIG["model"]["tiny_layers"])]
    for forward_prefetch in (False, True):
        for limit in (1, 2):
            name = f"bwd_{args.policy}_fwd_{str(forward_prefetch).lower()}_inflight_{limit}"
            run_dir = os.path.join(args.work, name)
            ranks.train(args.shardtrain, config, run_dir, WORLD,
                        sets=[f"shard.backward_prefetch={args.policy}",
                              f"shard.forward_prefetch={str(forward_prefetch).lower()}",
                              f"shard.max_inflight_gathers={limit}"],
                        args=["--trace", "trace.jsonl"])
            peak = check_run(run_dir, blocks, args.policy, forward_prefetch, limit)
            print(f"{name}: {STEPS} micro-steps x {WORLD} ranks: forward unit order, "
                  f"{'prefetched' if forward_prefetch else 'on-demand'} forward gathers, "
                  f"backward {args.policy} order hold; at most {peak} gather(s) in flight "
                  f"(limit {limit})")


def placement_run(args, config):
    run_dir = os.path.join(args.work, "offload")
    ranks.train(args.shardtrain, config, run_dir, WORLD,
                sets=["shard.offload_params=true", "shard.offload_optimizer=true"],
                args=["--trace", "trace.jsonl"])
    for rank in range(WORLD):
        _, placements = read_trace(os.path.join(run_dir, "trace.jsonl" +
                                                (f".rank-{rank}" if rank else "")))
        by = {}
        for p in placements:
            by.setdefault(p["what"], {})[p["flat"]] = p
        check("master" in by and "param" in by, f"rank {rank}: placement kinds {sorted(by)}, "
                                                "want master and param")
        check(sorted(by["master"]) == sorted(by["param"]),
              f"rank {rank}: master flats {sorted(by['master'])} vs param {sorted(by['param'])}")
        for flat, p in sorted(by["master"].items()):
            gathered = by["param"][flat]["bytes"]
            print(f"rank {rank}: {flat}: master on {p['device']} {p['dtype']} {p['bytes']} bytes,"
                  f" gathered {gathered} bytes")
            check(p["device"] == "cpu", f"rank {rank}: {flat} master on {p['device']}, want cpu "
                                        "(shard.offload_params = true)")
            check(p["bytes"] * WORLD == gathered, f"rank {rank}: {flat} master holds "
                                                  f"{p['bytes']} bytes, want 1/{WORLD} of "
                                                  f"{gathered}")
        optim = {w: v for w, v in by.items() if w not in ("master", "param")}
        if not optim:
            NOTES.add("no optimizer-state placement records in the trace: offload_optimizer "
                      "cannot be checked")
        for what, flats in sorted(optim.items()):
            for flat, p in sorted(flats.items()):
                print(f"rank {rank}: {flat}: {what} on {p['device']}")
                check(p["device"] == "cpu", f"rank {rank}: {flat} {what} on {p['device']}, want "
                                            "cpu (shard.offload_optimizer = true)")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--policy", required=True, choices=["pre", "post", "none", "placement"])
    args = parser.parse_args()
    config = ranks.setup_experiment(args.work, {"train": {"max_steps": STEPS,
                                                          "lr_warmup_steps": 1}})

    def body():
        (placement_run if args.policy == "placement" else prefetch_runs)(args, config)
        for note in sorted(NOTES):
            print(f"NOTE: {note}")

    ranks.main_guard(body)


if __name__ == "__main__":
    main()
