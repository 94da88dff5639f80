"""What the --trace of 2 FULL_SHARD ranks proves about prefetching and placement.

  --policy pre|post|none: shard.backward_prefetch = POLICY with forward_prefetch off/on and
      max_inflight_gathers 1 and 2 (4 runs). Per micro-step of every rank's trace:
        forward: all-gathers issued in unit order (root, layers.0, ...); with forward_prefetch
          unit i+1's gather is issued after unit i's and before unit i is freed (i.e. before
          its compute ends), without it only after unit i is freed (when it is needed);
        backward: units gathered again in reverse order; pre issues unit i-1's gather after unit
          i's gather and before unit i's reduce-scatter; post issues it after unit i's
          reduce-scatter, before it is needed; none issues it only when needed (its wait is the
          next record);
        in flight: replaying issue/wait never exceeds max_inflight_gathers and matches the
          `inflight` field of every record; every gather is waited before its unit is freed.
          With a prefetch policy and max_inflight_gathers = 1 the limit binds: the replay must
          show waits the trace labels `reason = limit`, each at a full pipe right before the
          issue it made room for; with limit 2 and pre + forward prefetch, 2 gathers travel
          together.
  --policy placement: offload_params and offload_optimizer on, then both off; every flat
      parameter's master shard holds 1/W of the gathered bytes and lives on "cpu" (on: the
      offload target; off: the compute device, which is the CPU on this machine); optimizer state
      likewise; the records say whether the state was offloaded.
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
            if rec["op"] in ("load", "loaded"):  # how shards were initialised: no collective
                continue
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
    """Replays issue/wait; returns (peak gathers in flight, waits forced by the limit)."""
    inflight = []
    peak = 0
    forced = 0
    gathers = [r for r in records if r["op"] == "all_gather"]
    for k, rec in enumerate(gathers):
        if rec["stage"] == "issue":
            check(rec["unit"] not in inflight, f"{where}: {rec['unit']} gathered twice at once")
            inflight.append(rec["unit"])
        else:
            check(rec["unit"] in inflight, f"{where}: wait of {rec['unit']} without an issue")
            if rec.get("reason") == "limit":
                # The pipe was full; the oldest gather is waited and an issue follows at once.
                check(len(inflight) == limit and inflight[0] == rec["unit"],
                      f"{where}: a limit wait of {rec['unit']} with {inflight} in flight "
                      f"(limit {limit}); want the oldest of a full pipe")
                check(k + 1 < len(gathers) and gathers[k + 1]["stage"] == "issue",
                      f"{where}: the limit wait of {rec['unit']} is not followed by an issue")
                forced += 1
            inflight.remove(rec["unit"])
        check(rec["inflight"] == len(inflight),
              f"{where}: record says {rec['inflight']} in flight, replay counts {len(inflight)}")
        check(len(inflight) <= limit, f"{where}: {inflight} in flight, more than "
                                      f"max_inflight_gathers = {limit}")
        peak = max(peak, len(inflight))
    return peak, forced


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
            issue = find(seg, "all_gather", "issue", unit, "forward")
            check(issue < nxt < free, f"{where}: forward_prefetch must issue {blocks[i + 1]} "
                                      f"after {unit}'s gather and before {unit} is freed")
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
            own = find(seg, "all_gather", "issue", unit, "backward")
            check(own <= issue < rs, f"{where}: backward_prefetch=pre must issue {prev} after "
                                     f"{unit}'s gather and before {unit}'s reduce-scatter")
        elif policy == "post":
            check(rs < issue < prev_wait, f"{where}: backward_prefetch=post must issue {prev} "
                                          f"after {unit}'s reduce-scatter, before it is waited")
        else:
            check(rs < issue and prev_wait == issue + 1,
                  f"{where}: backward_prefetch=none must gather {prev} only when needed")
        check_prefetch_flag(seg[issue], policy != "none", f"{where}: {prev} backward")


def check_run(run_dir, blocks, policy, forward_prefetch, limit):
    peaks = []
    forced = 0
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
        peak, waits = check_inflight(records, limit, f"rank {rank}")
        peaks.append(peak)
        forced += waits
    # post prefetches after a unit's gather was consumed, so only forward prefetch or pre can
    # find the pipe full.
    if (forward_prefetch or policy == "pre") and limit == 1:
        check(forced > 0, f"{run_dir}: max_inflight_gathers = 1 with prefetching never made the "
                          "engine wait for room: the limit did not bind")
    if forward_prefetch and policy == "pre" and limit == 2:
        check(max(peaks) == 2, f"{run_dir}: with limit 2 at most {max(peaks)} gather(s) in "
                               "flight: prefetch did not overlap")
    return max(peaks), forced


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
            peak, forced = check_run(run_dir, blocks, args.policy, forward_prefetch, limit)
            print(f"{name}: {STEPS} micro-steps x {WORLD} ranks: forward unit order, "
                  f"{'prefetched' if forward_prefetch else 'on-demand'} forward gathers, "
                  f"backward {args.policy} order hold; at most {peak} gather(s) in flight "
                  f"(limit {limit}); {forced} wait(s) forced by the limit")


def placement_run(args, config):
    for offload in (True, False):
        flag = str(offload).lower()
        run_dir = os.path.join(args.work, f"offload_{flag}")
        ranks.train(args.shardtrain, config, run_dir, WORLD,
                    sets=[f"shard.offload_params={flag}", f"shard.offload_optimizer={flag}"],
                    args=["--trace", "trace.jsonl"])
        for rank in range(WORLD):
            check_placement(run_dir, rank, offload)


def check_placement(run_dir, rank, offload):
    # The compute device of this build is the CPU, so "off" keeps state on "cpu" too; the
    # records' `offloaded` field tells the two apart.
    want = "cpu"
    where = f"offload={offload} rank {rank}"
    _, placements = read_trace(os.path.join(run_dir, "trace.jsonl" +
                                            (f".rank-{rank}" if rank else "")))
    by = {}
    for p in placements:
        by.setdefault(p["what"], {})[p["flat"]] = p
    check("master" in by and "param" in by, f"{where}: placement kinds {sorted(by)}, "
                                            "want master and param")
    check(sorted(by["master"]) == sorted(by["param"]),
          f"{where}: master flats {sorted(by['master'])} vs param {sorted(by['param'])}")
    for flat, p in sorted(by["master"].items()):
        gathered = by["param"][flat]["bytes"]
        print(f"{where}: {flat}: master on {p['device']} {p['dtype']} {p['bytes']} bytes "
              f"(offloaded={p.get('offloaded')}), gathered {gathered} bytes")
        check(p["device"] == want, f"{where}: {flat} master on {p['device']}, want {want}")
        check(p.get("offloaded") == offload,
              f"{where}: {flat} master offloaded={p.get('offloaded')}, want {offload} "
              "(shard.offload_params)")
        check(p["bytes"] * WORLD == gathered, f"{where}: {flat} master holds "
                                              f"{p['bytes']} bytes, want 1/{WORLD} of {gathered}")
    optim = {w: v for w, v in by.items() if w not in ("master", "param", "grad")}
    check(sorted(by.get("grad", {})) == sorted(by["master"]),
          f"{where}: gradients recorded for {sorted(by.get('grad', {}))}, want every trainable "
          f"flat {sorted(by['master'])}")
    check(sorted(optim) == ["exp_avg", "exp_avg_sq"],
          f"{where}: optimizer-state placement kinds {sorted(optim)}, want exp_avg, exp_avg_sq")
    for what, flats in sorted(optim.items()):
        check(sorted(flats) == sorted(by["master"]),
              f"{where}: {what} for {sorted(flats)}, want every trainable flat "
              f"{sorted(by['master'])}")
        for flat, p in sorted(flats.items()):
            print(f"{where}: {flat}: {what} on {p['device']} (offloaded={p.get('offloaded')})")
            check(p["device"] == want, f"{where}: {flat} {what} on {p['device']}, want {want}")
            check(p.get("offloaded") == offload,
                  f"{where}: {flat} {what} offloaded={p.get('offloaded')}, want {offload} "
                  "(shard.offload_optimizer)")
            check(p["bytes"] == by["master"][flat]["bytes"],
                  f"{where}: {flat} {what} holds {p['bytes']} bytes, want the master's "
                  f"{by['master'][flat]['bytes']}")


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
