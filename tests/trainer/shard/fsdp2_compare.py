"""shardtrain against PyTorch FSDP2 itself (torchtitan's loss_compare idea).

transformers writes a tiny random Qwen2 checkpoint (GQA, biases, untied head; float32
safetensors) and the test writes token rows of exactly seq_len ids, so no padding. Then for 20
steps, on 2 ranks over Gloo on the CPU, in float32:
  shardtrain   FULL_SHARD (data.shuffle = false, constant LR, no warmup);
  FSDP2        transformers' Qwen2ForCausalLM, `fully_shard` on every decoder layer and on the
               root, the same batches (step s takes samples s*B .. s*B+B-1), shardtrain's loss
               (summed cross-entropy of positions 1..T-1 over the global count of label tokens,
               so gradients are summed over ranks, not FSDP2's default average),
               torch.optim.AdamW with shardtrain's groups (no decay for 1-D parameters: norms
               and biases), the same betas/eps/weight decay, clip_grad_norm_ by the global norm.
Asserted: every step's loss within 1e-4 relative, every final parameter within 1e-4
(max |diff| / max |value|), grad norms within 1e-4 relative, and clipping on some steps only.
--lora: the same with LoRA (q, k, v, o, gate, up, down; r 4, alpha 8, no dropout) against peft's
get_peft_model + FSDP2; peft starts from shardtrain's initial lora_A (a 1-step run at lr 1e-30
dumps them; lora_B is zeros in both), and the frozen base must stay bit-identical in both.
--qlora: the LoRA comparison with lora.quantize = "nf4" (blocks of 64, double
quantization) on a checkpoint whose Linears' in-features are multiples of 64. The peer's base is
bitsandbytes' own: every text Linear replaced by bitsandbytes.functional.dequantize_4bit of its
quantize_4bit (QLoRA's arithmetic; transformers cannot load 4-bit on the CPU), then peft + FSDP2.
Beyond the LoRA assertions, shardtrain's dumped base (its NF4 weights dequantized) must equal
bitsandbytes' bit for bit, and `shardtrain export` of the run's checkpoint writes the adapters
merged into the dequantized base in bf16: every tensor within bf16 rounding of the peer's
(bitsandbytes' base + its trained adapters, merged in fp32), and transformers loads the folder
with logits close to that fp32 merged model's. Then the checkpoint saved the way transformers
saves a bitsandbytes 4-bit model (the packed codes, absmax, quant_map, nested tensors and
quant_state of every text Linear) loads as it stands: the same base, bit for bit, and the same
first loss as the fp32 checkpoint; a lora.quant_block_size it was not quantized with (32) is a
config error naming the field and the checkpoint's 64.

Each FSDP2 rank is this script started again with --peer and the torchrun environment.
"""
import argparse
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

WORLD = 2
STEPS = 20
BATCH = 8
SEQ = 24
VOCAB = 97
TOL = 1e-4
TRAIN = {"lr": 3e-3, "weight_decay": 0.1, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-6}
# grad_clip by variant (full, LoRA): between the smallest and largest grad norms of the 20 steps,
# so clipping acts on some steps and not others (the adapters' norms are ~0.3-0.4).
CLIP = {False: 1.5, True: 0.35}
LORA = {"r": 4, "alpha": 8,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                           "down_proj"]}


QLORA = {"quantize": "nf4", "quant_block_size": 64, "double_quant": True}
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def make_checkpoint(out, qlora=False):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    # QLoRA: in-features (hidden, intermediate) that blocks of 64 divide.
    hidden, inter, heads = (64, 128, 8) if qlora else (48, 80, 6)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=2,
                      rms_norm_eps=1e-6,
                      rope_theta=10000.0, tie_word_embeddings=False, use_cache=False)
    torch.manual_seed(7)
    model = Qwen2ForCausalLM(cfg)
    g = torch.Generator().manual_seed(8)
    with torch.no_grad():  # biases non-zero and norms not one, so every term matters
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1.0 + 0.1 * noise if "norm" in name else 0.05 * noise)
    model.save_pretrained(out)


def write_tokens(path):
    """Rows a model can learn: arithmetic progressions modulo VOCAB, SEQ ids each."""
    with open(path, "w") as f:
        for i in range(STEPS * BATCH):
            start, stride = (i * 31 + 5) % VOCAB, (1, 2, 3, 5)[i % 4]
            f.write(json.dumps({"input_ids": [(start + stride * k) % VOCAB
                                              for k in range(SEQ)]}) + "\n")
    return path


def write_config(path, model_dir, lora, sets=None, qlora=False):
    train = dict(TRAIN, grad_clip=CLIP[lora], max_steps=STEPS, batch_size=BATCH,
                 lr_schedule="constant", lr_warmup_steps=0, seed=3, log_every=1,
                 ckpt_at_end=False)
    train.update(sets or {})
    sections = {"model": {"arch": "qwen2", "path": model_dir},
                "data": {"train_path": "train.jsonl", "seq_len": SEQ, "shuffle": False},
                "train": train, "shard": {"strategy": "FULL_SHARD"}}
    if lora:
        sections["lora"] = dict(LORA, enabled=True, **(QLORA if qlora else {}))
    with open(path, "w") as f:
        for name, values in sections.items():
            f.write(f"[{name}]\n" + "".join(f"{k} = {ranks.toml_value(v)}\n"
                                            for k, v in values.items()))
    return path


# ---------------------------------------------------------------- the FSDP2 peer (one rank)


def peer_model(a):
    import torch
    from transformers import Qwen2ForCausalLM
    lm = Qwen2ForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                          attn_implementation="sdpa")
    if a.qlora:
        import bitsandbytes.functional as bnbf
        with torch.no_grad():
            for name, module in lm.named_modules():
                if name.rsplit(".", 1)[-1] in LINEARS:
                    q, state = bnbf.quantize_4bit(module.weight.data, blocksize=QLORA[
                        "quant_block_size"], quant_type="nf4",
                        compress_statistics=QLORA["double_quant"])
                    module.weight.copy_(bnbf.dequantize_4bit(q, state).reshape(module.weight.shape))
    if a.lora:
        import peft
        from safetensors.torch import load_file
        cfg = peft.LoraConfig(r=LORA["r"], lora_alpha=LORA["alpha"], lora_dropout=0.0,
                              target_modules=LORA["target_modules"], bias="none")
        lm = peft.get_peft_model(lm, cfg)
        init = load_file(a.lora_init)
        with torch.no_grad():
            n = 0
            for name, p in lm.named_parameters():
                if ".lora_A" in name:  # lora_B: zeros in both (the probe's step left ~1e-30)
                    p.copy_(init[name.replace(".default.", ".")])
                if ".lora_" in name:
                    n += 1
        theirs = len([k for k in init if ".lora_" in k])
        if n != theirs:
            raise SystemExit(f"peft has {n} adapter tensors, shardtrain {theirs}")
    lm.train()
    return lm


def peer(a):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from safetensors.torch import save_file
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    lm = peer_model(a)
    mesh = init_device_mesh("cpu", (world,))
    layers = (lm.base_model.model if a.lora else lm).model.layers
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(lm, mesh=mesh)
    named = [(n, p) for n, p in lm.named_parameters() if p.requires_grad]
    groups = [{"params": [p for _, p in named if p.ndim >= 2],
               "weight_decay": TRAIN["weight_decay"]},
              {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=TRAIN["lr"], eps=TRAIN["adam_eps"],
                            betas=(TRAIN["adam_beta1"], TRAIN["adam_beta2"]))
    with open(a.data) as f:
        rows = torch.tensor([json.loads(line)["input_ids"] for line in f if line.strip()])
    per_rank = BATCH // world
    for step in range(STEPS):
        ids = rows[step * BATCH + rank * per_rank: step * BATCH + (rank + 1) * per_rank]
        logits = lm(input_ids=ids, use_cache=False).logits[:, :-1].float()  # (B, T-1, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1),
                               reduction="sum") / (BATCH * (SEQ - 1))
        # The loss is already over the global token count, so the gradient is the sum over ranks;
        # FSDP2 averages (divides by the world size, and Gloo has no PREMUL_SUM for
        # set_gradient_divide_factor(1)), so backward runs on world x the loss. Without it every
        # gradient was halved: grad norms 2x apart from step 1 and clipping on other steps.
        (loss * world).backward()
        total = loss.detach().double()
        dist.all_reduce(total)
        norm = torch.nn.utils.clip_grad_norm_(lm.parameters(), CLIP[a.lora])
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        opt.step()
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            print(json.dumps({"ev": "step", "step": step + 1, "loss": total.item(),
                              "grad_norm": float(norm)}), flush=True)
    full = {}
    for name, p in lm.named_parameters():
        value = p.full_tensor() if hasattr(p, "full_tensor") else p
        full[name.replace(".default.", ".")] = value.detach().contiguous()
    if rank == 0:
        save_file(full, a.out)
    dist.barrier()
    dist.destroy_process_group()


def run_peers(args, model_dir, data, out_dir, lora_init):
    os.makedirs(out_dir, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1")
        argv = [sys.executable, os.path.abspath(__file__), "--peer", "--model", model_dir,
                "--data", data, "--out", os.path.join(out_dir, "params.safetensors")]
        if lora_init:
            argv += ["--lora", "--lora-init", lora_init]
        if args.qlora:
            argv.append("--qlora")
        with open(os.path.join(out_dir, f"events-rank-{rank}.jsonl"), "wb") as out, \
                open(os.path.join(out_dir, f"rank-{rank}.log"), "wb") as err:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=err, env=env))
    codes = ranks.wait_ranks(procs)
    check(all(c == 0 for c in codes), f"FSDP2 peers: exit codes {codes}\n"
                                      f"{ranks.log_tail(out_dir, WORLD, 30)}")
    return out_dir


# ---------------------------------------------------------------- the comparison


def compare(args, lora):
    import numpy as np
    qlora = args.qlora
    work = ranks.fresh_dir(args.work)
    model_dir = os.path.join(work, "model")
    make_checkpoint(model_dir, qlora)
    data = write_tokens(os.path.join(work, "train.jsonl"))
    config = write_config(os.path.join(work, "exp.toml"), model_dir, lora,
                          {"ckpt_at_end": True} if qlora else None, qlora=qlora)
    lora_init = None
    if lora:
        probe = write_config(os.path.join(work, "probe.toml"), model_dir, lora,
                             {"max_steps": 1, "lr": 1e-30}, qlora=qlora)
        probe_dir = ranks.train(args.shardtrain, probe, os.path.join(work, "probe"), 1,
                                args=["--dump-params", "params.safetensors"])
        lora_init = os.path.join(probe_dir, "params.safetensors")
        if qlora:
            check_bnb_checkpoint(args, work, model_dir, probe_dir)
    with ranks.timed(f"shardtrain: {WORLD} ranks FULL_SHARD{' LoRA' if lora else ''}"):
        ours = ranks.train(args.shardtrain, config, os.path.join(work, "shardtrain"), WORLD,
                           args=["--dump-params", "params.safetensors"])
    with ranks.timed(f"FSDP2: {WORLD} ranks{' + peft' if lora else ''}"):
        theirs = run_peers(args, model_dir, data, os.path.join(work, "fsdp2"), lora_init)
    got, want = ranks.curve(ours), ranks.curve(theirs)
    clipped = [s for s in sorted(want) if want[s]["grad_norm"] > CLIP[lora]]
    print(f"FSDP2: loss {want[1]['loss']:.6f} -> {want[STEPS]['loss']:.6f}, clipped at {clipped}")
    check(want[STEPS]["loss"] < want[1]["loss"], "FSDP2 did not learn")
    check(0 < len(clipped) < STEPS, f"grad_clip {CLIP[lora]} clipped steps {clipped}: "
                                    "want some clipped and some not")
    label = (f"shardtrain vs FSDP2{' + peft' if lora else ''}"
             f"{' + bitsandbytes NF4' if qlora else ''}")
    ranks.compare_curves(label, got, want, TOL, fields=("loss", "grad_norm"))
    mine = ranks.load_params(os.path.join(ours, "params.safetensors"))
    peer_params = ranks.load_params(os.path.join(theirs, "params.safetensors"))
    if lora:
        start = ranks.load_params(lora_init)
        peer_base = {n.removeprefix("base_model.model.").replace(".base_layer.", "."): v
                     for n, v in peer_params.items() if ".lora_" not in n}
        base = {n: v for n, v in mine.items() if ".lora_" not in n}
        check(sorted(peer_base) == sorted(base), f"{label}: base names differ: "
                                                 f"{sorted(set(peer_base) ^ set(base))[:4]}")
        moved = [n for n in base if not (np.array_equal(base[n], start[n]) and
                                         np.array_equal(peer_base[n], start[n]))]
        check(not moved, f"{label}: frozen base parameters moved or differ: {moved[:4]}")
        print(f"{label}: {len(base)} frozen base parameters bit-identical to the "
              f"{'NF4 dequantized ' if qlora else ''}checkpoint in both runs")
        if qlora:
            nf4 = [n for n in base if n.endswith(".weight") and n.rsplit(".", 2)[-2] in LINEARS]
            check(len(nf4) == 2 * len(LINEARS), f"{label}: NF4 Linears {nf4}")
            print(f"{label}: {len(nf4)} NF4 Linears equal bitsandbytes' dequantized weights")
        peer_params = {n: v for n, v in peer_params.items() if ".lora_" in n}
        mine = {n: v for n, v in mine.items() if ".lora_" in n}
    else:
        peer_params = {n.removeprefix("base_model.model."): v for n, v in peer_params.items()}
    diffs = ranks.param_diffs(mine, peer_params)
    for name in sorted(diffs, key=diffs.get, reverse=True)[:6]:
        print(f"{label}: {name:60s} max|diff|/max|ref| {diffs[name]:.3e}")
    worst = max(diffs, key=diffs.get)
    print(f"{label}: {len(diffs)} parameters, worst {diffs[worst]:.3e} ({worst}), "
          f"tolerance {TOL:g}")
    check(diffs[worst] <= TOL, f"{label}: {worst} differs by {diffs[worst]:.3e} relative")
    if qlora:
        check_qlora_export(args, work, config, ours, model_dir,
                           ranks.load_params(os.path.join(theirs, "params.safetensors")), label)


def check_bnb_checkpoint(args, work, model_dir, probe_dir):
    """A bitsandbytes-serialized copy of the checkpoint gives the probe run's base and loss."""
    import shutil
    import numpy as np
    import bitsandbytes.functional as bnbf
    from safetensors.torch import load_file, save_file
    label = "bitsandbytes 4-bit checkpoint"
    bnb_dir = os.path.join(work, "model-bnb")
    shutil.copytree(model_dir, bnb_dir)
    tensors = load_file(os.path.join(model_dir, "model.safetensors"))
    out, quantized = {}, 0
    for name, t in tensors.items():
        if name.endswith(".weight") and name.rsplit(".", 2)[-2] in LINEARS:
            q, state = bnbf.quantize_4bit(t, blocksize=QLORA["quant_block_size"],
                                          quant_type="nf4",
                                          compress_statistics=QLORA["double_quant"])
            out[name] = q
            out.update({f"{name}.{k}": v for k, v in state.as_dict(packed=True).items()})
            quantized += 1
        else:
            out[name] = t
    save_file(out, os.path.join(bnb_dir, "model.safetensors"), metadata={"format": "pt"})
    probe = write_config(os.path.join(work, "probe-bnb.toml"), bnb_dir, True,
                         {"max_steps": 1, "lr": 1e-30}, qlora=True)
    run = ranks.train(args.shardtrain, probe, os.path.join(work, "probe-bnb"), 1,
                      args=["--dump-params", "params.safetensors"])
    got = ranks.load_params(os.path.join(run, "params.safetensors"))
    want = ranks.load_params(os.path.join(probe_dir, "params.safetensors"))
    differ = [n for n in want if not np.array_equal(got.get(n), want[n])]
    check(not differ, f"{label}: parameters differ from the fp32 checkpoint's run: {differ[:4]}")
    first, first_want = ranks.curve(run)[1]["loss"], ranks.curve(probe_dir)[1]["loss"]
    check(first == first_want, f"{label}: step-1 loss {first} vs {first_want}")
    print(f"{label}: {quantized} Linears read as stored; {len(want)} parameters and the step-1 "
          f"loss {first:.7f} equal the fp32 checkpoint's")
    bad_dir = os.path.join(work, "probe-bnb-block")
    bad = write_config(os.path.join(work, "probe-bnb-block.toml"), bnb_dir, True,
                       {"max_steps": 1}, qlora=True)
    with open(bad) as f:
        text = f.read().replace("quant_block_size = 64", "quant_block_size = 32")
    with open(bad, "w") as f:
        f.write(text)
    ranks.fresh_dir(bad_dir)
    codes = ranks.run_ranks(args.shardtrain, ["train", os.path.abspath(bad)], bad_dir, 1)
    errors = ranks.events(bad_dir, 0, "error")
    message = errors[0].get("message", "") if errors else ""
    check(codes != [0] and errors and errors[0].get("kind") == "config" and
          "lora.quant_block_size" in message and "64" in message,
          f"{label} with quant_block_size 32: exit {codes}, error events {errors}")
    print(f"{label} under quant_block_size = 32: config error: {message[:160]}")


def check_qlora_export(args, work, config, run_dir, model_dir, peer, label):
    """`shardtrain export` of the QLoRA run: the bf16 merge of shardtrain's own fp32 state, and
    transformers' logits on it against the peer's fp32 merge."""
    import torch
    from safetensors.torch import load_file
    from transformers import Qwen2ForCausalLM
    out = os.path.join(work, "export")
    proc = subprocess.run([args.shardtrain, "export", config, "--checkpoint", "auto",
                           "--run-dir", run_dir, "--out", out], capture_output=True, text=True,
                          timeout=120)
    check(proc.returncode == 0, f"shardtrain export: exit {proc.returncode}\n{proc.stderr[-800:]}")
    got = load_file(os.path.join(out, "model.safetensors"))
    dtypes = sorted({str(t.dtype) for t in got.values()})
    check(dtypes == ["torch.bfloat16"], f"{label}: QLoRA export dtypes {dtypes}, want bf16")

    def merged(params):
        """{HF name: fp32 weight} of a dumped state, adapters merged (scale alpha / r)."""
        params = {k.removeprefix("base_model.model."): torch.from_numpy(v)
                  for k, v in params.items()}
        out = {}
        for name, value in params.items():
            if ".lora_" in name:
                continue
            name = name.replace(".base_layer.", ".")
            module = name.removesuffix(".weight")
            if module + ".lora_A.weight" in params:
                value = value + (LORA["alpha"] / LORA["r"]) * (
                    params[module + ".lora_B.weight"] @ params[module + ".lora_A.weight"])
            out[name] = value
        return out

    mine = merged(ranks.load_params(os.path.join(run_dir, "params.safetensors")))
    check(sorted(got) == sorted(mine), f"{label}: export names differ from the state's: "
                                       f"{sorted(set(got) ^ set(mine))[:4]}")
    worst, where = 0.0, ""
    for name in sorted(mine):
        # bf16 keeps 8 significant bits: rounding moves a value by at most 2^-8 of it.
        excess = ((got[name].float() - mine[name]).abs()
                  - 2 ** -8 * mine[name].abs()).max().item()
        if excess >= worst or not where:
            worst, where = excess, name
    check(worst <= 1e-7, f"{label}: export vs shardtrain's fp32 merge rounded to bf16: "
                         f"{where} off by {worst:.2e} beyond bf16 rounding")
    print(f"{label}: export: {len(got)} bf16 tensors, each shardtrain's fp32 merge rounded")
    peer_merged = merged(peer)
    ids = torch.tensor([[(5 + 3 * k) % VOCAB for k in range(SEQ)]])
    with torch.no_grad():
        exported = Qwen2ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
        reference = Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        reference.load_state_dict(peer_merged)
        d = (exported(ids).logits - reference(ids).logits).abs().max().item()
    check(d <= 5e-2, f"{label}: transformers on the bf16 export vs the peer's fp32 merge: logits "
                     f"max |diff| {d:.2e} <= 5e-2")
    print(f"{label}: transformers on the export: logits within {d:.2e} of the peer's fp32 merge")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain")
    parser.add_argument("--work")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--qlora", action="store_true", help="--lora with an NF4 base")
    parser.add_argument("--peer", action="store_true", help="run one FSDP2 rank (internal)")
    parser.add_argument("--model")
    parser.add_argument("--data")
    parser.add_argument("--out")
    parser.add_argument("--lora-init")
    args = parser.parse_args()
    if args.peer:
        peer(args)
        # The rank's work is done, saved and agreed (peer() ends with a barrier and
        # destroy_process_group()). Skip the interpreter's teardown: PyTorch's background
        # threads being destroyed there aborted a finished peer now and then ("terminate called
        # without an active exception", exit -6), failing a comparison that had its results.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    args.lora = args.lora or args.qlora
    ranks.main_guard(lambda: compare(args, args.lora))


if __name__ == "__main__":
    main()
