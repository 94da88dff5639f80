"""gpu_check.py's benchmark: a random Qwen2-0.5B-shaped model, sequence 2048, bf16, 1 rank, with
and without activation checkpointing, shardtrain against PyTorch FSDP2 (fsdp2_gpu_peer.py) on
the same GPU; then QLoRA (lora.quantize = "nf4") against LoRA in bf16 with checkpointing,
r 16 on every Linear: tokens/s and peak memory side by side. Figures, not assertions: the check
fails only when a run fails."""
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

from gpu_runs import read_events, tail

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "fsdp2_gpu_peer.py")
# Dense bf16 peaks (FLOP/s) by device name, for an MFU computed here beside shardtrain's own.
PEAKS = (("H200", 989.4e12), ("H100 PCIe", 756.0e12), ("H100", 989.4e12), ("A100", 312e12),
         ("L40S", 362.05e12), ("RTX 4090", 165.2e12))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def hidden_fraction(trace_path, warmup):
    """1 - (exposed all-gather time) / (all-gather time) over the steps after `warmup`, from a
    --trace file: all_gather start/end records carry gpu_ms, wait records exposed_ms."""
    starts, total, exposed, gathers = {}, 0.0, 0.0, 0
    for r in read_events(trace_path):
        if r.get("op") != "all_gather" or r.get("step", warmup + 1) <= warmup:
            continue
        key = (r.get("step"), r.get("micro"), r.get("unit"), r.get("phase"))
        stage = r.get("stage")
        if stage == "start" and "gpu_ms" in r:
            starts.setdefault(key, []).append(r["gpu_ms"])
        elif stage == "end" and "gpu_ms" in r and starts.get(key):
            total += r["gpu_ms"] - starts[key].pop(0)
            gathers += 1
        elif stage == "wait" and "exposed_ms" in r:
            exposed += r["exposed_ms"]
    if not gathers or total <= 0:
        return None, {"gathers_timed": gathers}
    return 1.0 - exposed / total, {"gathers_timed": gathers, "gather_ms": round(total, 3),
                                   "exposed_ms": round(exposed, 3)}


def device_peak(name):
    for key, peak in PEAKS:
        if key in (name or ""):
            return peak
    return None


class Benchmark:
    def __init__(self, gc):
        self.gc, self.a = gc, gc.args
        self.dir = os.path.join(gc.work, "bench")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        # The model (1 GB at 0.5B) stays out of OUT, which travels back from the GPU machine.
        self.tmp = tempfile.mkdtemp(prefix="gpu-check-model-")
        self.model_dir = os.path.join(self.tmp, "model")
        self.model = {}
        self.figures = {}

    def save_partial(self, check):
        check.figures = dict(self.figures)
        self.gc.report["benchmark_partial"] = self.figures
        self.gc.save()

    def make_model(self, check):
        cmd = [self.a.python, PEER, "--make-model", self.model_dir, "--shape", self.a.bench_shape,
               "--device", self.a.device]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=self.gc.timeout(150))
        events = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        if res.returncode or not events:
            last = " | ".join(res.stderr.strip().splitlines()[-4:])
            check.fail(f"{self.a.python} fsdp2_gpu_peer.py --make-model failed "
                       f"(exit {res.returncode}): {last}")
            return False
        self.model = events[-1]
        self.gc.log(f"  model: {self.model['params'] / 1e6:.1f}M parameters in "
                    f"{self.model['seconds']:.1f} s ({self.model['transformers']})")
        return True

    def write_data(self):
        """Random token rows: batch x steps samples of seq_len, seeded."""
        rng = random.Random(1234)
        vocab = json.load(open(os.path.join(self.model_dir, "config.json")))["vocab_size"]
        path = os.path.join(self.dir, "tokens.jsonl")
        with open(path, "w") as f:
            for _ in range(self.a.bench_batch * self.a.bench_steps):
                f.write(json.dumps({"input_ids": [rng.randrange(vocab)
                                                  for _ in range(self.a.bench_seq)]}) + "\n")
        return path

    def config(self, data, ac, quantize=None):
        cfg = {
            "experiment": {"name": "gpu-bench"},
            "model": {"arch": "qwen2", "path": self.model_dir},
            "data": {"train_path": data, "format": "tokens", "seq_len": self.a.bench_seq,
                     "shuffle": False},
            "train": {"max_steps": self.a.bench_steps, "batch_size": self.a.bench_batch,
                      "micro_batch_size": self.a.bench_micro, "lr": 1e-4,
                      "lr_schedule": "constant", "weight_decay": 0.1, "grad_clip": 1.0,
                      "log_every": 1, "mem_every": 1, "ckpt_at_end": False},
            "shard": {"strategy": "FULL_SHARD", "precision": "bf16", "device": self.a.device,
                      "activation_checkpointing": ac},
        }
        if quantize is not None:
            cfg["lora"] = {"enabled": True, "r": 16, "alpha": 32, "quantize": quantize,
                           "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj",
                                              "gate_proj", "up_proj", "down_proj"]}
        return cfg

    def shardtrain(self, data, ac, quantize=None):
        name = "bench-shardtrain-" + ("ac" if ac else "noac")
        if quantize is not None:
            name += "-lora-" + quantize
        trace = os.path.join(self.dir, name + ".trace.jsonl")
        limit = self.gc.timeout(100)
        run = self.gc.runner.train(name, self.config(data, ac, quantize), 1, limit,
                                   extra=("--trace", trace))
        if run.timed_out and limit < 100:
            return {"skipped": f"cut at the time budget after {run.seconds:.0f} s"}
        if not run.ok():
            return {"error": run.failure()}
        timed = [e for e in run.all("step") if e["step"] > self.a.bench_warmup]
        hello = next((e for e in run.all("hello") if e.get("flops_per_token")), None)
        if hello:  # the bench JSON carries it, so a reader can recompute every MFU
            self.figures["flops_per_token"] = hello["flops_per_token"]
        hidden, detail = hidden_fraction(trace, self.a.bench_warmup)
        return {"tokens_per_s": statistics.median(e["tokens_per_s"] for e in timed),
                "mfu": statistics.median(e.get("mfu", 0.0) for e in timed),
                "peak_bytes": run.peak("cuda_peak" if self.gc.cuda else "peak"),
                "reserved_bytes": run.peak("cuda_reserved" if self.gc.cuda else "reserved"),
                "gather_hidden_fraction": hidden, "trace": detail,
                "first_loss": run.curve()[0][1], "last_loss": run.curve()[-1][1],
                "seconds": round(run.seconds, 1)}

    def peer(self, data, ac):
        name = "bench-fsdp2-" + ("ac" if ac else "noac")
        run_dir = os.path.join(self.dir, name)
        os.makedirs(run_dir, exist_ok=True)
        env = self.gc.runner.base_env()
        env.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
        cmd = [self.a.python, PEER, "--model", self.model_dir, "--data", data, "--device",
               self.a.device, "--seq-len", str(self.a.bench_seq), "--batch",
               str(self.a.bench_batch), "--micro-batch", str(self.a.bench_micro), "--steps",
               str(self.a.bench_steps)] + (["--ac"] if ac else [])
        out_path = os.path.join(run_dir, "events.jsonl")
        start, limit = time.time(), self.gc.timeout(100)
        with open(out_path, "w") as out, open(os.path.join(run_dir, "peer.log"), "w") as err:
            try:
                code = subprocess.run(cmd, stdout=out, stderr=err, env=env,
                                      timeout=limit).returncode
            except subprocess.TimeoutExpired:
                if limit < 100:
                    return {"skipped": f"cut at the time budget after {limit:.0f} s"}
                code = "timeout"
        events = read_events(out_path)
        steps = [e for e in events if e.get("ev") == "step"]
        if code != 0 or not steps:
            return {"error": f"exit {code}: {tail(os.path.join(run_dir, 'peer.log'), 8)}"}
        timed = [e for e in steps if e["step"] > self.a.bench_warmup] or steps[-1:]
        mem = next((e for e in events if e.get("ev") == "mem"), {})
        return {"tokens_per_s": statistics.median(e["tokens_per_s"] for e in timed),
                "peak_bytes": mem.get("max_allocated"), "reserved_bytes": mem.get("max_reserved"),
                "first_loss": steps[0]["loss"], "last_loss": steps[-1]["loss"],
                "seconds": round(time.time() - start, 1)}

    def ratios(self, mode):
        st, peer = self.figures.get("shardtrain_" + mode), self.figures.get("fsdp2_" + mode)
        if not (st and "tokens_per_s" in st and peer and "tokens_per_s" in peer):
            return
        r = {"tokens_per_s": st["tokens_per_s"] / peer["tokens_per_s"]}
        if st.get("peak_bytes") and peer.get("peak_bytes"):
            r["peak_memory"] = st["peak_bytes"] / peer["peak_bytes"]
        peer["mfu"] = st["mfu"] * peer["tokens_per_s"] / st["tokens_per_s"]  # same formula
        self.figures["ratio_" + mode] = r
        self.gc.log(f"  {mode}: shardtrain/FSDP2 tokens/s {r['tokens_per_s']:.3f}, "
                    f"peak memory {r.get('peak_memory', float('nan')):.3f}")

    def table_mfu(self, result):
        """MFU from the device's dense bf16 peak (PEAKS) and the FLOPs per token of shardtrain's
        hello (the one formula, docs/trainer.md), for shardtrain and the peer alike."""
        peak = device_peak(self.gc.report["device"].get("name"))
        fpt = self.figures.get("flops_per_token")
        if not peak or not fpt or "tokens_per_s" not in result:
            return
        result["mfu_table"] = fpt * result["tokens_per_s"] / peak

    def run(self, check):
        try:
            self.run_all(check)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def run_all(self, check):
        if self.gc.left() < 60:
            check.skip(f"{self.gc.left():.0f} s of the budget left, the benchmark needs ~60")
            return
        self.gc.runner.pin_cublas = False
        if not self.make_model(check):
            return
        data = self.write_data()
        self.figures.update(model_params=self.model["params"], seq_len=self.a.bench_seq,
                            batch=self.a.bench_batch, micro_batch=self.a.bench_micro,
                            steps=self.a.bench_steps, warmup=self.a.bench_warmup)
        for ac in (False, True):
            mode = "ac" if ac else "noac"
            for who, fn in (("shardtrain", self.shardtrain), ("fsdp2", self.peer)):
                if self.gc.left() < 25:
                    self.figures[f"{who}_{mode}"] = {"skipped": "time budget"}
                    continue
                result = fn(data, ac)
                self.table_mfu(result)
                self.figures[f"{who}_{mode}"] = result
                self.gc.log(f"  {who} {mode}: {json.dumps(result)}")
                if "error" in result and who == "shardtrain":
                    check.fail(f"shardtrain {mode}: {result['error']}")
                self.save_partial(check)
            self.ratios(mode)
            self.save_partial(check)
        for quantize in ("none", "nf4"):  # LoRA, then QLoRA, both with checkpointing
            key = f"shardtrain_ac_lora_{quantize}"
            if self.gc.left() < 25:
                self.figures[key] = {"skipped": "time budget"}
                continue
            result = self.shardtrain(data, True, quantize)
            self.figures[key] = result
            self.gc.log(f"  shardtrain ac lora {quantize}: {json.dumps(result)}")
            if "error" in result:
                check.fail(f"shardtrain lora {quantize}: {result['error']}")
            self.save_partial(check)
        lora, qlora = (self.figures.get(f"shardtrain_ac_lora_{q}", {}) for q in ("none", "nf4"))
        if "tokens_per_s" in lora and "tokens_per_s" in qlora:
            self.figures["qlora_vs_lora"] = {
                "tokens_per_s": qlora["tokens_per_s"] / lora["tokens_per_s"],
                "peak_bytes": qlora["peak_bytes"] / lora["peak_bytes"]}
            self.gc.log(f"  QLoRA/LoRA: {json.dumps(self.figures['qlora_vs_lora'])}")
            self.save_partial(check)
