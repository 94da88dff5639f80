"""Host memory while a QLoRA run loads a Hugging Face checkpoint.

transformers saves a Qwen2 of 54.0M parameters (vocabulary 8192, hidden 512, MLP 2048, 12
blocks, 2 key/value heads) in bf16 safetensors. `shardtrain train` runs 1 step on 2 FULL_SHARD ranks with --trace,
once with lora.quantize = "nf4" (block 64, double quantization) and once as plain LoRA. The
trace's `loaded` record gives the counting allocator's peak once every rank initialised its
shards (the checkpoint read through the mapped file, which the allocator does not count, and
each NF4 weight quantized), and its `placement` records the bytes each flat keeps. Asserted, on
every rank:
  - QLoRA's loading peak stays under the packed model (every rank's kept bytes: the NF4
    records plus the unquantized embeddings, norms, biases and head as fp32 masters) plus one
    unit's weights unpacked in fp32;
  - it is below plain LoRA's loading peak, whose base is kept as fp32 masters.
The figures are printed, for a reader to compare across changes.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

VOCAB, HIDDEN, MLP, BLOCKS, HEADS, KV = 8192, 512, 2048, 12, 8, 2
WORLD = 2
MIB = 1024.0 * 1024.0
LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_checkpoint(out):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=MLP,
                      num_hidden_layers=BLOCKS, num_attention_heads=HEADS,
                      num_key_value_heads=KV, tie_word_embeddings=False, use_cache=False)
    torch.manual_seed(3)
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def block_linear_elements():
    """Elements of one block's Linear weights (the NF4 weights of one unit)."""
    kv = HIDDEN // HEADS * KV
    return HIDDEN * HIDDEN * 2 + 2 * HIDDEN * kv + 3 * HIDDEN * MLP


def trace_records(run_dir, rank):
    path = os.path.join(run_dir, "trace.jsonl" + (f".rank-{rank}" if rank else ""))
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run(args, work, model_dir, quantize):
    name = quantize
    config = os.path.join(work, f"{name}.toml")
    with open(config, "w") as f:
        f.write(f'[model]\narch = "qwen2"\npath = "{model_dir}"\n'
                f'[data]\ntrain_path = "{work}/train.jsonl"\nseq_len = 32\nformat = "tokens"\n'
                '[train]\nmax_steps = 1\nbatch_size = 2\nlog_every = 1\nckpt_at_end = false\n'
                '[shard]\nstrategy = "FULL_SHARD"\n'
                '[lora]\nenabled = true\nr = 8\nalpha = 16\n'
                f'target_modules = {json.dumps(LINEARS)}\nquantize = "{quantize}"\n')
    run_dir = os.path.join(work, name)
    with ranks.timed(f"{name}: {WORLD} ranks, 1 step"):
        ranks.train(args.shardtrain, config, run_dir, WORLD, args=["--trace", "trace.jsonl"])
    out = []
    for rank in range(WORLD):
        records = trace_records(run_dir, rank)
        loaded = [r for r in records if r["op"] == "loaded"]
        check(len(loaded) == 1, f"{name} rank {rank}: {len(loaded)} loaded records")
        kept = sum(r["bytes"] for r in records
                   if r["op"] == "placement" and r["what"] == "master")
        out.append({"peak": loaded[0]["peak"], "allocated": loaded[0]["allocated"],
                    "kept": kept})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()

    def body():
        work = ranks.fresh_dir(args.work)
        model_dir = os.path.join(work, "model")
        total = make_checkpoint(model_dir)
        ranks.write_tokens(os.path.join(work, "train.jsonl"), count=8, seq_len=32, vocab=VOCAB)
        qlora = run(args, work, model_dir, "nf4")
        lora = run(args, work, model_dir, "none")
        packed = sum(r["kept"] for r in qlora)  # the whole model as the QLoRA ranks keep it
        unit = 4 * block_linear_elements()
        bound = packed + unit
        print(f"model: {total / 1e6:.1f}M parameters; packed model {packed / MIB:.1f} MiB "
              f"(NF4 base + fp32 embeddings, norms, biases, head, adapters), one unit unpacked "
              f"{unit / MIB:.1f} MiB, bound {bound / MIB:.1f} MiB")
        print(f"{'rank':>4} {'QLoRA kept':>11} {'QLoRA peak':>11} {'LoRA kept':>10} "
              f"{'LoRA peak':>10}  (MiB, counting allocator, once loaded)")
        for rank in range(WORLD):
            q, p = qlora[rank], lora[rank]
            print(f"{rank:>4} {q['kept'] / MIB:11.1f} {q['peak'] / MIB:11.1f} "
                  f"{p['kept'] / MIB:10.1f} {p['peak'] / MIB:10.1f}")
            check(q["peak"] <= bound, f"rank {rank}: QLoRA's loading peak {q['peak']} bytes is "
                                      f"over the packed model plus one unit ({bound})")
            check(q["peak"] < p["peak"], f"rank {rank}: QLoRA's loading peak {q['peak']} is not "
                                         f"below plain LoRA's {p['peak']}")
        check(total >= 50e6, f"the model has {total} parameters, fewer than 50M")

    ranks.main_guard(body)


if __name__ == "__main__":
    main()
