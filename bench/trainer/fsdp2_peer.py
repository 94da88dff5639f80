"""The PyTorch peer of the shardtrain benchmark: one rank of FSDP2 (or FSDP1) training.

Same model as shardtrain's "tiny" (Hugging Face Qwen2ForCausalLM with the same dimensions,
num_kv_heads = heads, untied lm_head, q/k/v biases), same data (pre-tokenized JSONL, rank r of W
takes samples base + r + kW, no shuffling), same loss (the summed token cross-entropy divided by
the all-reduced count of loss tokens, gradients summed across ranks, no averaging), same optimizer
(AdamW, no decay on norms and biases, constant LR, global grad-norm clipping).

Started like shardtrain by bench_fsdp2.py: one process per rank with the torchrun environment
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Writes JSON lines on stdout:
  {"ev": "hello", "params": N, "wrap": "fsdp2", "rss_before_model": BYTES}
  {"ev": "step", "step": S, "loss": L, "tokens_per_s": X, "mfu": M,
   "comm_bytes": {"all_gather": A, "reduce_scatter": R}}           (rank 0)
  {"ev": "done"}
Communicated bytes are counted the way shardtrain counts them: all-gather output bytes,
reduce-scatter input bytes, and an all-reduce of N bytes as N gathered + N reduce-scattered.
"""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Byte counting: wrap torch.distributed's collectives (FSDP2 calls them through the module, so a
# patched attribute is what it calls). A guard stops double counting when one wrapper calls
# another (all_gather_single may forward to all_gather_into_tensor).
COUNTS = {"all_gather": 0, "reduce_scatter": 0}
_DEPTH = [0]


def _wrap(name, gather_of, scatter_of):
    original = getattr(dist, name)

    def counted(*args, **kwargs):
        if _DEPTH[0] == 0:
            COUNTS["all_gather"] += gather_of(args, kwargs)
            COUNTS["reduce_scatter"] += scatter_of(args, kwargs)
        _DEPTH[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1

    setattr(dist, name, counted)


def _arg(args, kwargs, index, *names):
    if len(args) > index:
        return args[index]
    for n in names:
        if n in kwargs:
            return kwargs[n]
    raise TypeError(f"collective argument {index} ({names}) missing")


def _nbytes(t):
    if isinstance(t, (list, tuple)):
        return sum(_nbytes(x) for x in t)
    return t.numel() * t.element_size()


def _zero(_a, _k):
    return 0


def install_counters():
    out0 = lambda a, k: _nbytes(_arg(a, k, 0, "output_tensor", "output", "tensor_list"))  # noqa
    in1 = lambda a, k: _nbytes(_arg(a, k, 1, "input_tensor", "input", "input_list"))  # noqa
    t0 = lambda a, k: _nbytes(_arg(a, k, 0, "tensor"))  # noqa
    for name in ("all_gather_single", "all_gather_into_tensor", "_all_gather_base", "all_gather"):
        if hasattr(dist, name):
            _wrap(name, out0, _zero)
    for name in ("reduce_scatter_single", "reduce_scatter_tensor", "_reduce_scatter_base",
                 "reduce_scatter"):
        if hasattr(dist, name):
            _wrap(name, _zero, in1)
    _wrap("all_reduce", t0, t0)


# ---------------------------------------------------------------------------------------------


def rss_bytes(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def load_samples(path, seq_len):
    """(n, T) input ids and labels; short samples padded like shardtrain (ids 0, labels -100)."""
    ids, labels = [], []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            x = rec["input_ids"][:seq_len]
            y = rec.get("labels", x)[:seq_len]
            ids.append(x + [0] * (seq_len - len(x)))
            labels.append(y + [-100] * (seq_len - len(y)))
    return torch.tensor(ids, dtype=torch.long), torch.tensor(labels, dtype=torch.long)


class CausalLMLoss(torch.nn.Module):
    """Qwen2ForCausalLM plus shardtrain's head: logits of positions 0..T-2, summed CE."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, labels, scale):
        h = self.lm.model(input_ids=input_ids, use_cache=False).last_hidden_state  # (B, T, C)
        logits = self.lm.lm_head(h[:, :-1]).float()  # (B, T-1, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),
                               reduction="sum", ignore_index=-100)
        return loss * scale


def build_model(a):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                      num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.heads, max_position_embeddings=a.max_pos,
                      rope_theta=10000.0, rms_norm_eps=1e-6, initializer_range=0.02,
                      tie_word_embeddings=False, use_cache=False, attention_dropout=0.0)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(a.seed)
    lm = Qwen2ForCausalLM(cfg).float()
    if a.init_from:
        from safetensors.torch import load_file

        missing, unexpected = lm.load_state_dict(load_file(a.init_from), strict=False)
        if unexpected or [m for m in missing if "rotary" not in m]:
            raise SystemExit(f"--init-from {a.init_from}: missing {missing}, unexpected "
                             f"{unexpected}; write it with shardtrain --dump-params")
    return CausalLMLoss(lm)


def wrap_fsdp2(model, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    units = [fully_shard(layer, mesh=mesh) for layer in model.lm.model.layers]
    units.append(fully_shard(model, mesh=mesh))
    for u in units:
        # Sum gradients across ranks (the loss already divides by the global token count), as
        # shardtrain does; Gloo has no AVG/PREMUL_SUM reduce-scatter anyway.
        u.set_gradient_divide_factor(1.0)
        u.set_force_sum_reduction_for_comms(True)
    return model


def wrap_fsdp1(model, world):
    import functools

    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import BackwardPrefetch, ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    policy = functools.partial(transformer_auto_wrap_policy,
                               transformer_layer_cls={Qwen2DecoderLayer})
    return FSDP(model, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy.FULL_SHARD,
                backward_prefetch=BackwardPrefetch.BACKWARD_PRE, device_id=None,
                use_orig_params=True)


def make_optimizer(model, a):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if (p.ndim < 2 or "norm" in name) else decay).append(p)
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)


def train(model, opt, data, a, rank, world):
    ids, labels = data
    n = ids.size(0)
    fpt = 6.0 * (a.params - a.vocab * a.hidden) + 12.0 * a.layers * a.hidden * a.seq_len
    for step in range(a.steps):
        t0 = time.perf_counter()
        base = step * a.batch
        mine = [(base + k) % n for k in range(rank, a.batch, world)]
        x, y = ids[mine], labels[mine]
        count = (y[:, 1:] != -100).sum().to(torch.float64).reshape(1)
        if world > 1:
            dist.all_reduce(count)
        loss = model(x, y, 1.0 / max(1.0, count.item()))
        local = loss.detach().to(torch.float64).reshape(1)
        loss.backward()
        if world > 1:
            dist.all_reduce(local)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        secs = time.perf_counter() - t0
        tps = a.batch * a.seq_len / secs
        if rank == 0:
            mfu = fpt * tps / (a.peak_flops * world) if a.peak_flops > 0 else 0.0
            emit({"ev": "step", "step": step + 1, "loss": local.item(),
                  "grad_norm": float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm),
                  "tokens_per_s": tps, "mfu": mfu, "secs": secs,
                  "comm_bytes": dict(COUNTS)})
        COUNTS["all_gather"] = 0
        COUNTS["reduce_scatter"] = 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="token JSONL ({\"input_ids\": [...]})")
    p.add_argument("--wrap", choices=["fsdp2", "fsdp1", "none"], default="fsdp2")
    for name, default in (("vocab", 256), ("hidden", 64), ("layers", 2), ("heads", 4),
                          ("intermediate", 0), ("max-pos", 512), ("seq-len", 128),
                          ("batch", 8), ("steps", 10), ("seed", 1234)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--peak-flops", type=float, default=0.0, help="GEMM peak FLOP/s per rank")
    p.add_argument("--init-from", default="", help="safetensors of initial params (HF names)")
    a = p.parse_args(argv)
    a.intermediate = a.intermediate or 4 * a.hidden
    return a


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    install_counters()
    if a.wrap != "none":
        dist.init_process_group("gloo", rank=rank, world_size=world)
    data = load_samples(a.data, a.seq_len)
    rss_before = rss_bytes()
    model = build_model(a)
    a.params = sum(p.numel() for p in model.parameters())
    if a.wrap == "fsdp2":
        model = wrap_fsdp2(model, world)
    elif a.wrap == "fsdp1":
        model = wrap_fsdp1(model, world)
    emit({"ev": "hello", "rank": rank, "world_size": world, "params": a.params, "wrap": a.wrap,
          "torch": torch.__version__, "rss_before_model": rss_before})
    opt = make_optimizer(model, a)
    train(model, opt, data, a, rank, world)
    emit({"ev": "mem", "rank": rank, "rss": rss_bytes(), "hwm": rss_bytes("VmHWM")})
    if a.wrap != "none":
        dist.barrier()
        dist.destroy_process_group()
    emit({"ev": "done", "rank": rank})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
