"""Each rank loads only its own slice of a Hugging Face checkpoint (no rank-0
broadcast): each rank reads only the part of each tensor its flat units hold.

The checkpoint is the tiny Qwen2-VL folder `shardtrain make-demo-data` writes (safetensors and
config.json in Hugging Face's layout, seeded weights, no download). Runs of 2 steps on 1, 2 and 3
FULL_SHARD ranks (3 pads the flat units), with --trace:

  - every flat unit's `load` record: rank r read exactly the checkpoint elements inside its
    shard, min(N, max(0, numel - r N)), where numel is the flat's element count and N the shard
    size; the ranks' reads sum to numel, and over all flats to the model's parameter count of the
    `hello` event (nothing read twice, nothing read whole);
  - with LoRA on, the adapters come from the seeded init (0 elements read) and the frozen base
    is read in slices the same way, summing to the base's parameter count;
  - the loss of both steps on 2 and 3 ranks equals the 1-rank run's within 1e-5 relative, so the
    slices landed where the parameters live.
"""
import argparse
import json
import os
import subprocess
import sys
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "shapes-vqa.toml")
STEPS = 2


def write_config(path, data_dir, lora):
    with open(EXAMPLE, "rb") as f:
        seq_len = tomllib.load(f)["data"]["seq_len"]
    lines = [
        "[model]", 'arch = "qwen2_vl"', f'path = "{data_dir}/model"',
        "[data]", f'train_path = "{data_dir}/train.jsonl"', 'format = "chat"',
        f"seq_len = {seq_len}",
        "[train]", f"max_steps = {STEPS}", "batch_size = 6", "lr = 1e-3", "log_every = 1",
        "ckpt_at_end = false", "seed = 3", "threads = 1",
        "[shard]", 'strategy = "FULL_SHARD"',
    ]
    if lora:
        lines += ["[lora]", "enabled = true", "r = 4", "alpha = 8",
                  'target_modules = ["q_proj", "v_proj", "down_proj"]']
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def trace(run_dir, rank):
    path = os.path.join(run_dir, "trace.jsonl" + (f".rank-{rank}" if rank else ""))
    with open(path) as f:
        return [json.loads(line) for line in f]


def check_reads(run_dir, world, label, lora):
    """Checks the load records of every rank; returns (elements read, elements initialised)."""
    loads = [{r["flat"]: r for r in trace(run_dir, rank) if r.get("op") == "load"}
             for rank in range(world)]
    flats = sorted(loads[0])
    check(flats, f"{label}: no load records in the trace")
    for rank in range(1, world):
        check(sorted(loads[rank]) == flats, f"{label}: rank {rank} has other flats than rank 0")
    read_total = 0
    seeded = 0
    for flat in flats:
        shard = loads[0][flat]["shard"]
        reads = [loads[rank][flat]["read"] for rank in range(world)]
        numel = sum(reads)
        if lora and flat.endswith("/trainable"):
            check(numel == 0, f"{label}: {flat} holds adapters but read {reads} from the file")
            seeded += shard * world
            continue
        check(numel > 0, f"{label}: {flat} read nothing from the checkpoint")
        for rank in range(world):
            want = min(shard, max(0, numel - rank * shard))
            check(reads[rank] == want,
                  f"{label}: {flat} rank {rank} read {reads[rank]} elements, its shard holds "
                  f"{want} (shard {shard}, flat {numel})")
        read_total += numel
    hello = ranks.events(run_dir, 0, "hello")[0]
    base = hello["params"]["total"] - (hello["params"]["trainable"] if lora else 0)
    check(read_total == base,
          f"{label}: the ranks read {read_total} elements, the checkpoint's parameters are {base}")
    print(f"{label}: {len(flats)} flats, {read_total} checkpoint elements read once in "
          f"{world} slices" + (f"; adapters seeded ({seeded} elements with padding)" if lora
                               else ""))
    return read_total


def losses(run_dir):
    return [ranks.curve(run_dir)[s]["loss"] for s in range(1, STEPS + 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardtrain", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    ranks.fresh_dir(args.work)
    data_dir = os.path.join(args.work, "data")
    made = subprocess.run([args.shardtrain, "make-demo-data", data_dir, "--train", "24",
                           "--eval", "6"], capture_output=True, text=True)
    check(made.returncode == 0, f"make-demo-data failed:\n{made.stdout}\n{made.stderr}")
    for lora in (False, True):
        kind = "lora" if lora else "full"
        config = os.path.join(args.work, f"{kind}.toml")
        write_config(config, data_dir, lora)
        curves = {}
        for world in (1, 2, 3):
            run_dir = ranks.train(args.shardtrain, config,
                                  os.path.join(args.work, f"{kind}-{world}"), world=world,
                                  args=["--trace", "trace.jsonl"])
            check_reads(run_dir, world, f"{kind} {world} rank(s)", lora)
            curves[world] = losses(run_dir)
        for world in (2, 3):
            for step, (a, b) in enumerate(zip(curves[1], curves[world]), start=1):
                check(abs(a - b) <= 1e-5 * abs(a),
                      f"{kind}: step {step} loss {b!r} on {world} ranks, {a!r} on 1 rank")
        print(f"{kind}: losses on 1, 2, 3 ranks agree: {curves}")


if __name__ == "__main__":
    ranks.main_guard(main)
