"""The PyTorch peer of gpu_check.py's benchmark: one rank of FSDP2 training a Qwen2 model on a GPU.

Same model (the Hugging Face folder gpu_check.py had this script write with --make-model), same
data (token JSONL, samples taken in file order: step s reads samples s*B .. s*B+B-1), same loss
as shardtrain (lm_head on positions 0..T-2, summed cross-entropy divided by the count of label
tokens), same optimizer (AdamW, no decay on norms and biases, constant LR, grad-norm clipping),
same micro-batching (gradients reduced on the last micro-batch only). FSDP2 as its users run it:
`fully_shard` on every decoder layer and on the root, MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32), optionally Hugging Face's gradient checkpointing (--ac).

Started with the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).
Writes JSON lines on stdout:
  {"ev": "hello", "params": N, "torch": V, "transformers": V, "device": NAME}
  {"ev": "step", "step": S, "loss": L, "tokens_per_s": X, "secs": T}              (rank 0)
  {"ev": "mem", "max_allocated": BYTES, "max_reserved": BYTES}
  {"ev": "done"}
--make-model DIR writes a random Qwen2-0.5B-shaped model (bf16 safetensors) and exits.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

# Qwen2-0.5B's config.json, with its tied embeddings; "tiny" is for trying the script on a CPU.
SHAPES = {
    "0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                 num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2),
    "tiny": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2),
}


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def make_model(out, shape, seed, device):
    """A randomly initialised Qwen2ForCausalLM of `shape`, saved as bf16 safetensors."""
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(**SHAPES[shape], max_position_embeddings=32768, rope_theta=1000000.0,
                      rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu",
                      initializer_range=0.02, use_sliding_window=False, use_cache=False)
    torch.manual_seed(seed)
    start = time.perf_counter()
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out)
    emit({"ev": "model", "params": sum(p.numel() for p in model.parameters()),
          "embedding": cfg.vocab_size * cfg.hidden_size, "layers": cfg.num_hidden_layers,
          "hidden": cfg.hidden_size, "heads": cfg.num_attention_heads,
          "transformers": transformers.__version__, "torch": torch.__version__,
          "files": sorted(os.listdir(out)), "seconds": time.perf_counter() - start})


def load_samples(path, seq_len):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                ids = json.loads(line)["input_ids"][:seq_len]
                rows.append(ids + [0] * (seq_len - len(ids)))
    return torch.tensor(rows, dtype=torch.long)


class CausalLMLoss(torch.nn.Module):
    """Qwen2ForCausalLM plus shardtrain's head: logits of positions 0..T-2, summed CE."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, scale):
        h = self.lm.model(input_ids=input_ids, use_cache=False).last_hidden_state  # (B, T, C)
        logits = self.lm.lm_head(h[:, :-1]).float()  # (B, T-1, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                               input_ids[:, 1:].reshape(-1), reduction="sum")
        return loss * scale


def build(a, device):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import Qwen2ForCausalLM

    lm = Qwen2ForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                          attn_implementation="sdpa").to(device)
    lm.train()  # from_pretrained returns eval mode, where checkpointing is off
    if a.ac:
        if hasattr(lm, "activation_checkpointing_enable"):  # transformers >= 5's name
            lm.activation_checkpointing_enable({"use_reentrant": False})
        else:
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = CausalLMLoss(lm)
    params = sum(p.numel() for p in model.parameters())
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in lm.model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    return model, params


def make_optimizer(model, a):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if (p.ndim < 2 or "norm" in name) else decay).append(p)
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)


def train(model, opt, ids, a, device, rank, world):
    per_rank = a.batch // world
    micro = a.micro_batch or per_rank
    for step in range(a.steps):
        start = time.perf_counter()
        base = step * a.batch + rank * per_rank
        mine = ids[[(base + k) % ids.size(0) for k in range(per_rank)]].to(device)
        count = torch.tensor([float(a.batch * (a.seq_len - 1))], device=device)
        scale = 1.0 / count.item()
        total = torch.zeros((), device=device, dtype=torch.float64)
        chunks = list(torch.split(mine, micro))
        for i, x in enumerate(chunks):
            model.set_requires_gradient_sync(i == len(chunks) - 1)
            loss = model(x, scale)
            loss.backward()
            total += loss.detach().double()
        if world > 1:
            dist.all_reduce(total)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        secs = time.perf_counter() - start
        if rank == 0:
            emit({"ev": "step", "step": step + 1, "loss": total.item(),
                  "grad_norm": float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm),
                  "tokens_per_s": a.batch * a.seq_len / secs, "secs": secs})


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--make-model", metavar="DIR", help="write a random model folder and exit")
    p.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    p.add_argument("--model", help="Hugging Face folder (from --make-model)")
    p.add_argument("--data", help="token JSONL ({\"input_ids\": [...]})")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    for name, default in (("seq-len", 2048), ("batch", 4), ("micro-batch", 0), ("steps", 15),
                          ("seed", 1234)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--ac", action="store_true", help="activation checkpointing per layer")
    a = p.parse_args(argv)
    if not a.make_model and not (a.model and a.data):
        p.error("give --make-model DIR, or --model DIR and --data FILE")
    return a


def main(argv):
    a = parse_args(argv)
    if a.make_model:
        make_model(a.make_model, a.shape, a.seed, a.device)
        return 0
    import transformers

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if a.device == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    ids = load_samples(a.data, a.seq_len)
    model, params = build(a, device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    emit({"ev": "hello", "rank": rank, "world_size": world, "params": params, "ac": a.ac,
          "torch": torch.__version__, "transformers": transformers.__version__, "device": name})
    opt = make_optimizer(model, a)
    train(model, opt, ids, a, device, rank, world)
    if device.type == "cuda":
        emit({"ev": "mem", "rank": rank, "max_allocated": torch.cuda.max_memory_allocated(device),
              "max_reserved": torch.cuda.max_memory_reserved(device)})
    dist.barrier()
    dist.destroy_process_group()
    emit({"ev": "done", "rank": rank})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
