"""data.pack on real ranks: packed rows train exactly as one sample a row.

Chat data of long-tailed lengths, 2 FULL_SHARD ranks, fp32, 3 steps. Each packed run is held
against the same experiment with data.pack = false, whose samples are one a row:
  - the first step's reduced gradients (--dump-grads), every parameter, within TOL
    (max |diff| / max |value|): the same samples, the same positions, attention inside each sample;
  - every step's loss within TOL, and the final parameters within PARAM_TOL (AdamW divides by
    sqrt(v) + eps, so it amplifies rounding by up to lr / eps = 100, ranks.BASE_CONFIG; and
    lora_B starts at 0, so its differences are relative to a small value);
  - with a micro-batch smaller than a rank's share, the trace shows the packed run took fewer
    forward passes (its rows hold several samples);
  - `hello.pack_efficiency` is there (in (0, 1)) when packed and absent when not.
Cells:
  text: a Qwen2 text model (transformers, random weights, the demo tokenizer) on text-only
      conversations of 5 to 150 tokens, seq_len 256, micro-batch = the whole share, and
      micro_batch_size = 1 (rows one at a time; every rank runs as many micro-steps as the rank
      that packs into the most rows);
  vl: the demo's Qwen2-VL (make-demo-data) on conversations with 0, 1 or 2 images (M-RoPE
      positions per sample, the vision tower's per-image attention), micro-batches of 2;
  vl_lora_dropout: the same with LoRA adapters on the text stack and the vision tower and
      lora.dropout = 0.2: each packed sample draws the masks it draws unpacked.
"""
import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

TOL = 1e-6
PARAM_TOL = 3e-5
WORDS = ["What", "colour", "are", "the", "shapes", "circle", "square", "triangle", "diamond",
         "red", "blue", "orange", "left", "right", "top", "bottom", "How", "many", "there"]


def text_of(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def long_tailed(rng, low, high):
    """Mostly short, a few long: low + (high - low) * u^3."""
    return low + int((high - low) * rng.random() ** 3)


def write_chat(path, rng, count, images=()):
    """`count` conversations of long-tailed lengths; with `images` (paths relative to `path`),
    each has 0, 1 or 2 of them."""
    with open(path, "w") as f:
        for _ in range(count):
            user = [{"type": "text", "text": text_of(rng, long_tailed(rng, 1, 40))}]
            if images:
                user = [{"type": "image", "image": rng.choice(images)}
                        for _ in range(rng.choice((0, 1, 2)))] + user
            answer = text_of(rng, long_tailed(rng, 1, 12))
            f.write(json.dumps({"messages": [{"role": "user", "content": user},
                                             {"role": "assistant", "content": answer}]}) + "\n")


def make_text_model(model_dir, demo_model):
    """A random Qwen2 (text only) saved by transformers, with the demo set's tokenizer."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    with open(os.path.join(demo_model, "config.json")) as f:
        demo = json.load(f)
    cfg = Qwen2Config(vocab_size=demo["vocab_size"], hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                      bos_token_id=demo["bos_token_id"], eos_token_id=demo["eos_token_id"])
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(model_dir)
    shutil.copy(os.path.join(demo_model, "tokenizer.json"), model_dir)


def write_config(path, arch, model, data, extra=""):
    with open(path, "w") as f:
        f.write("\n".join([
            "[model]", f'arch = "{arch}"', f'path = "{model}"',
            "[data]", f'train_path = "{data}"', 'format = "chat"', "seq_len = 256",
            "[train]", "max_steps = 3", "batch_size = 8", "lr = 1e-2", "adam_eps = 1e-4",
            "log_every = 1", "ckpt_at_end = false", "seed = 5", "threads = 1",
            "[shard]", 'strategy = "FULL_SHARD"']) + "\n" + extra)
    return path


def forward_passes(run_dir):
    """Forward all-gathers issued by rank 0 (one per unit per micro-step)."""
    counts = collections.Counter()
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec["op"] not in ("placement", "load", "loaded"):  # state, not collectives
                counts[(rec["op"], rec["stage"], rec["phase"])] += 1
    return counts[("all_gather", "issue", "forward")]


def worst(label, got, want, tol):
    diffs = ranks.param_diffs(got, want)
    name = max(diffs, key=diffs.get)
    print(f"{label}: {len(diffs)} tensors, worst {diffs[name]:.3e} ({name})")
    check(diffs[name] <= tol, f"{label}: {name} differs by {diffs[name]:.3e} (> {tol:g})")


def run(args, config, name, sets):
    run_dir = os.path.join(args.work, name)
    with ranks.timed(f"{name}: 2 ranks {' '.join(sets)}"):
        ranks.train(args.shardtrain, config, run_dir, 2, sets=sets,
                    args=["--dump-grads", "grads.safetensors", "--dump-params",
                          "params.safetensors", "--trace", "trace.jsonl"])
    return run_dir


def cell(args, label, config, sets=(), control=None):
    unpacked = run(args, config, f"{label}_unpacked", ["data.pack=false", *sets])
    packed = run(args, config, f"{label}_packed", ["data.pack=true", *sets])
    hello = {name: ranks.events(d, 0, "hello")[0] for name, d in (("packed", packed),
                                                                  ("unpacked", unpacked))}
    efficiency = hello["packed"].get("pack_efficiency")
    print(f"{label}: hello.pack_efficiency {efficiency}")
    check(efficiency is not None and 0 < efficiency < 1,
          f"{label}: the packed run's hello has pack_efficiency {efficiency}, want (0, 1)")
    check("pack_efficiency" not in hello["unpacked"],
          f"{label}: the unpacked run's hello reports pack_efficiency")
    passes = {name: forward_passes(d) for name, d in (("packed", packed), ("unpacked", unpacked))}
    print(f"{label}: forward all-gathers {passes}")
    check(passes["packed"] < passes["unpacked"] or not any("micro_batch" in s for s in sets),
          f"{label}: the packed run made {passes['packed']} forward all-gathers, the unpacked "
          f"{passes['unpacked']}: its rows do not hold several samples")
    load = lambda d, f: ranks.load_params(os.path.join(d, f))  # noqa: E731
    worst(f"{label}: step-1 gradients packed vs unpacked", load(packed, "grads.safetensors"),
          load(unpacked, "grads.safetensors"), TOL)
    ranks.compare_curves(f"{label}: packed vs unpacked", ranks.curve(packed),
                         ranks.curve(unpacked), TOL)
    worst(f"{label}: final parameters packed vs unpacked", load(packed, "params.safetensors"),
          load(unpacked, "params.safetensors"), PARAM_TOL)
    if control:  # the setting under test must move the gradients, else the cell proves nothing
        plain = run(args, config, f"{label}_control", ["data.pack=true", *sets, control])
        effect = max(ranks.param_diffs(load(plain, "grads.safetensors"),
                                       load(packed, "grads.safetensors")).values())
        print(f"{label}: {control} moves the step-1 gradients by up to {effect:.3e}")
        check(effect > 1000 * TOL, f"{label}: {control} moved the gradients by only {effect:.3e}")


def main_body(args):
    ranks.fresh_dir(args.work)
    demo = os.path.join(args.work, "demo")
    made = subprocess.run([args.shardtrain, "make-demo-data", demo, "--train", "6", "--eval", "0"],
                          capture_output=True, text=True)
    check(made.returncode == 0, f"make-demo-data failed:\n{made.stdout}\n{made.stderr}")
    rng = random.Random(7)
    text_model = os.path.join(args.work, "qwen2")
    make_text_model(text_model, os.path.join(demo, "model"))
    write_chat(os.path.join(args.work, "text.jsonl"), rng, 24)
    images = sorted(f"img/{n}" for n in os.listdir(os.path.join(demo, "img")))
    write_chat(os.path.join(demo, "mixed.jsonl"), rng, 24, images)

    text = write_config(os.path.join(args.work, "text.toml"), "qwen2", text_model,
                        os.path.join(args.work, "text.jsonl"))
    cell(args, "text", text)
    cell(args, "text_micro1", text, ["train.micro_batch_size=1"])
    vl = write_config(os.path.join(args.work, "vl.toml"), "qwen2_vl",
                      os.path.join(demo, "model"), os.path.join(demo, "mixed.jsonl"))
    cell(args, "vl", vl, ["train.micro_batch_size=2"])
    lora = write_config(os.path.join(args.work, "vl_lora.toml"), "qwen2_vl",
                        os.path.join(demo, "model"), os.path.join(demo, "mixed.jsonl"),
                        "[lora]\nenabled = true\nr = 4\nalpha = 8\ndropout = 0.2\n"
                        'target_modules = ["q_proj", "v_proj", "down_proj", "qkv", "fc1"]\n')
    cell(args, "vl_lora_dropout", lora, ["train.micro_batch_size=2"], control="lora.dropout=0.0")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    ranks.main_guard(lambda: main_body(args))


if __name__ == "__main__":
    main()
