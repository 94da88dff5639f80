#!/usr/bin/env python3
"""The GPU check of shardtrain: a few minutes of GPU time (scripts/gpu-check.sh run).

Checks (each time-bounded; OUT/gpu-check.json is rewritten after every check, so a run cut short
still leaves the checks done so far):
  selftest              shardtrain selftest on the device
  nccl_one_gpu          selftest --no-shortcut on one rank: a real NCCL communicator made, used
                        (all-gather, reduce-scatter, all-reduce, broadcast) and torn down; on the
                        CPU (gloo_one_rank) the same through Gloo
  fp32_vs_cpu           1 rank on the device in fp32 (TF32 off) against the CPU run, per step 1e-4
  ranks2_full_shard     2 ranks (Gloo sharing one GPU; NCCL with >= 2 GPUs) against 1 rank, 1e-4
  ranks2_shard_grad_op  the same with SHARD_GRAD_OP
  bf16_vs_fp32          final loss within 2% of fp32, every step loss finite
  fp16_vs_fp32          fp16_autocast: the same
  fp16_resume           fp16_autocast resumed from its step-N/2 checkpoint: steps N/2+1..N within
                        1e-6 of the uninterrupted run (the loss scaler's state survives)
  offload               offload_params + offload_optimizer against neither: losses within 1e-5,
                        device peak lower by >= 12 bytes per trainable parameter per rank
  lora_dropout          LoRA with dropout 0.1: 2 ranks against 1 on the device to 1e-5, and the
                        device against the CPU to 1e-4 (the masks are the same integers there)
  packing               data.pack on the demo's Qwen2-VL, chat samples with 0-2 images, against one
                        sample a row: losses within TOL_PACK and step-1 gradients' cosine >= the
                        bound (bf16 on CUDA, through variable-length flash attention; fp32 on CPU)
  qwen2vl_vs_cpu        the demo's Qwen2-VL with two images of different sizes per sample and LoRA
                        (text and vision, dropout 0.1): 10 steps on the device against the CPU in
                        fp32, per step 1e-5
  generate              shardtrain generate (greedy, key/value cache) of the demo's Qwen2-VL with
                        images: fp32 ids on the device equal the CPU's; bf16 agreement and
                        tokens/s reported
  oom                   a too-large batch ends with exit 1 and an `error` of kind oom naming bytes
  oom_forensics         the same run's `error.memory`: on CUDA the caching allocator's view (the
                        request past the largest free block and what the device could give,
                        reserved >= allocated) and, with trace.memory_on_oom, a pickled snapshot
                        memory/rank-0.pickle that pickle loads with its segments; on the CPU the
                        counting allocator's figures and the log's "no allocator history" line
  hybrid_one_gpu        (CUDA) 4 Gloo ranks on the one GPU: every strategy, HYBRID_SHARD in groups
                        of 2, against 1 rank to 1e-5; their checkpoint resumed on 2 CPU ranks
  multi_gpu             (--multi) the multi-GPU proof on every GPU when there are several;
                        "1 GPU: skipped" otherwise
  peer_lost_gpu         2 Gloo ranks on the GPU; rank 1 killed, then stopped, mid-step: rank 0
                        reports peer_lost naming it within shard.timeout_s + 30 s (CPU: CI's
                        shard_error_* tests)
  benchmark             Qwen2-0.5B shape, seq 2048, bf16, 1 rank, with and without activation
                        checkpointing, against PyTorch FSDP2 (fsdp2_gpu_peer.py): figures only
With --device cpu --quick (CI): every check that means something on a CPU, a few steps each, no
benchmark; the CPU fp32 run is compared with a second CPU run (device auto against cpu).
Exit status 0 when every check that ran passed. Standard library only; torch is imported only
by the child processes that need it.
"""
import argparse
import json
import math
import os
import pickle
import platform
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_bench  # noqa: E402
from gpu_runs import Runner, rel, toml_text, write_tokens  # noqa: E402

SEED = 1234
# The tiny model every correctness check trains: 2 wrap units plus the root, so gathers,
# prefetch and reduce-scatters all happen; a learnable pattern, so the loss moves.
TINY = {
    "experiment": {"name": "gpu-check"},
    "model": {"arch": "tiny", "tiny_vocab_size": 256, "tiny_hidden_size": 64, "tiny_layers": 2,
              "tiny_heads": 4},
    "data": {"train_path": "", "seq_len": 32},
    "train": {"max_steps": 30, "batch_size": 8, "lr": 3e-3, "lr_min": 3e-4,
              "lr_warmup_steps": 3, "lr_schedule": "cosine", "weight_decay": 0.1,
              "grad_clip": 1.0, "seed": SEED, "log_every": 1, "mem_every": 1,
              "ckpt_at_end": False},
    "shard": {"strategy": "FULL_SHARD", "precision": "fp32", "allow_tf32": False},
}
TOL_FP32 = 1e-4        # per step, relative: device against CPU, 2 ranks against 1
# QLoRA: adapters on every Linear of the tiny model, its base NF4 (blocks of 32 divide the
# width 64), double quantization, bf16 storage of the records.
QLORA = {"enabled": True, "r": 4, "alpha": 8, "quantize": "nf4", "quant_block_size": 32,
         "quant_storage": "bfloat16",
         "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                            "down_proj"]}
TOL_OFFLOAD = 1e-5     # per step, relative: offload on against off
TOL_VL = 1e-5          # per step, relative: Qwen2-VL with LoRA on the device against the CPU
TOL_LORA_RANKS = 1e-5  # per step, relative: LoRA with dropout, 2 ranks against 1 (#35 item 3)
TOL_RESUME = 1e-6      # per step, relative: resumed fp16 run against the uninterrupted one (CPU)
# On CUDA the runs are not forced deterministic (the head's scatter_add_ and flash attention's
# backward may have no deterministic kernel there, and an error would lose the check), so the
# resumed run may differ by accumulation order; the scaler's state is checked exactly instead.
TOL_RESUME_CUDA = 1e-4
TOL_LOWP = 0.02        # final loss, relative: bf16 / fp16_autocast against fp32
# data.pack against one sample a row: per-step loss (relative) and the step-1 gradients' cosine.
# bf16 on CUDA (flash attention per row against variable-length flash over the packed rows, bf16
# rounding); fp32 on the CPU (shard_packing holds the CPU gradients to 1e-6 elementwise).
TOL_PACK = {"cuda": (0.02, 0.99), "cpu": (1e-5, 0.999999)}
OPT_BYTES_PER_PARAM = 12  # fp32 master + AdamW's two moments, per trainable parameter
BYTES_RE = re.compile(r"\d[\d,.]*\s*(bytes|[KMGT]i?B)\b")


class Check:
    """One check's verdict and figures, as written to the JSON."""

    def __init__(self, name):
        self.name = name
        self.status = "pass"
        self.reason = ""
        self.figures = {}
        self.runs = []
        self.start = time.time()
        self.seconds = 0.0

    def fail(self, reason):
        if self.status != "fail":
            self.status, self.reason = "fail", reason
        else:
            self.reason += "; " + reason

    def skip(self, reason):
        self.status, self.reason = "skip", reason

    def expect(self, cond, reason):
        if not cond:
            self.fail(reason)
        return cond

    def to_json(self):
        return {"name": self.name, "status": self.status, "reason": self.reason,
                "seconds": round(self.seconds, 2), "figures": self.figures, "runs": self.runs}


def compare_curves(check, label, got, want, tol, steps=None):
    """Per-step relative difference of two loss curves (lists of (step, loss)); fails the check
    past `tol`, on a missing step or on a non-finite loss. Returns the largest difference."""
    got, want = dict(got), dict(want)
    steps = steps if steps is not None else sorted(want)
    missing = [s for s in steps if s not in got or s not in want]
    if not check.expect(not missing and steps, f"{label}: steps {missing[:5]} missing"):
        return None
    bad = [s for s in steps if not finite(got[s]) or not finite(want[s])]
    if not check.expect(not bad, f"{label}: non-finite loss at steps {bad[:5]}"):
        return None
    worst = max(steps, key=lambda s: rel(got[s], want[s]))
    diff = rel(got[worst], want[worst])
    check.figures[f"{label}_max_rel_diff"] = diff
    check.expect(diff <= tol, f"{label}: step {worst} loss {got[worst]!r} against "
                              f"{want[worst]!r}, relative {diff:.3g} > {tol:g}")
    return diff


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


class GpuCheck:
    def __init__(self, args):
        self.args = args
        self.cuda = args.device == "cuda"
        self.steps = 10 if args.quick else 30
        self.out = os.path.abspath(args.out)
        self.work = os.path.join(self.out, "work")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.log_file = open(os.path.join(self.out, "gpu-check.log"), "w")
        self.log_lock = threading.Lock()
        self.deadline = time.time() + args.budget_s
        self.runner = Runner(args.shardtrain, self.work, self.log, cuda=self.cuda,
                             cpu_threads=args.cpu_threads)
        self.report = {"check": "shardtrain GPU check", "device_kind": args.device,
                       "quick": args.quick, "steps": self.steps,
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "shardtrain": os.path.abspath(args.shardtrain), "complete": False,
                       "options": {k: v for k, v in vars(args).items() if k != "verify"},
                       "device": {}, "checks": []}
        self.data = write_tokens(os.path.join(self.work, "train.jsonl"), 96, 32, 256)
        self.ref = None  # the 1-rank fp32 run on the device

    # ------------------------------------------------------------------ bookkeeping

    def log(self, text):
        line = time.strftime("%H:%M:%S ") + text
        with self.log_lock:  # runs started together log from their threads
            print(line, flush=True)
            self.log_file.write(line + "\n")
            self.log_file.flush()

    def left(self):
        return self.deadline - time.time()

    def save(self):
        self.report["summary"] = {s: sum(1 for c in self.report["checks"] if c["status"] == s)
                                  for s in ("pass", "fail", "skip")}
        path = os.path.join(self.out, "gpu-check.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.report, f, indent=1)
        os.replace(path + ".tmp", path)

    def record(self, check):
        check.seconds = time.time() - check.start
        self.report["checks"].append(check.to_json())
        self.save()
        words = f"check {check.name}: {check.status.upper()} in {check.seconds:.1f} s"
        if check.reason:
            words += f": {check.reason}"
        self.log(words)
        if check.figures:
            self.log("  " + json.dumps(check.figures, default=str))

    def config(self, **changes):
        """TINY with `changes` ({"train.max_steps": 6, ...}) and this check's step count."""
        cfg = {k: dict(v) for k, v in TINY.items()}
        cfg["data"]["train_path"] = self.data
        cfg["train"]["max_steps"] = self.steps
        cfg["shard"]["device"] = self.args.device
        for key, value in changes.items():
            section, field = key.split(".", 1)
            cfg.setdefault(section, {})[field] = value
        return cfg

    def timeout(self, wanted):
        return max(5.0, min(wanted, self.left()))

    # ------------------------------------------------------------------ device

    def describe_device(self):
        info = {"type": self.args.device, "cpu": cpu_name(), "host_memory_bytes": host_memory()}
        if self.cuda:
            code = ("import json,torch\ntry:\n import transformers;tv=transformers.__version__\n"
                    "except ImportError:\n tv=None\np=torch.cuda.get_device_properties(0)\n"
                    "print(json.dumps({'name':p.name,'memory_bytes':p.total_memory,"
                    "'capability':f'{p.major}.{p.minor}','count':torch.cuda.device_count(),"
                    "'torch':torch.__version__,'cuda':torch.version.cuda,'transformers':tv}))")
            try:
                out = subprocess.run([self.args.python, "-c", code], capture_output=True,
                                     text=True, timeout=60, check=True).stdout
                info.update(json.loads(out.strip().splitlines()[-1]))
            except (subprocess.SubprocessError, ValueError, IndexError, OSError) as e:
                info["error"] = f"torch could not describe the GPU: {e}"
        info["gpus"] = info.get("count", 0)
        self.report["device"] = info
        self.save()
        self.log("device: " + json.dumps(info))

    def note_hello(self, run):
        hello = run.first("hello")
        if hello and "shardtrain_hello" not in self.report:
            self.report["shardtrain_hello"] = {k: hello.get(k) for k in (
                "versions", "device", "params", "world_size")}

    # ------------------------------------------------------------------ checks

    def check_selftest(self):
        c = Check("selftest")
        argv = ["selftest", "--timeout-s", "60"]
        world = 2
        if self.cuda:
            world = max(1, min(2, self.report["device"].get("gpus", 1)))
            argv += ["--device", "cuda", "--world-size", str(world)]
        res = self.runner.command("selftest", argv, timeout=self.timeout(90))
        c.runs.append(res["dir"])
        done = sum(1 for e in res["events"] if e.get("ev") == "done")
        errors = [e for e in res["events"] if e.get("ev") == "error"]
        c.figures.update(world_size=world, done_events=done, exit_code=res["code"])
        c.expect(res["code"] == 0, f"exit code {res['code']}: {res['tail']}")
        c.expect(not errors, f"error events: {errors[:1]}")
        c.expect(done == world, f"{done} done events for {world} ranks")
        self.record(c)

    def check_one_rank_backend(self):
        """selftest --no-shortcut on one rank: every collective through the backend instead of
        a local copy. On a GPU that creates a real NCCL communicator, runs all-gather,
        reduce-scatter, all-reduce and broadcast through it (fp32, bf16) and tears it down; on
        the CPU the same through Gloo."""
        c = Check("nccl_one_gpu" if self.cuda else "gloo_one_rank")
        argv = ["selftest", "--timeout-s", "60", "--world-size", "1", "--no-shortcut"]
        if self.cuda:
            argv += ["--device", "cuda"]
        res = self.runner.command(c.name, argv, timeout=self.timeout(90))
        c.runs.append(res["dir"])
        want = "nccl" if self.cuda else "gloo"
        hello = next((e for e in res["events"] if e.get("ev") == "hello"), {})
        backend = (hello.get("versions") or {}).get("backend")
        logs = [e.get("message", "") for e in res["events"] if e.get("ev") == "log"]
        checked = sum(1 for m in logs if "all_reduce and broadcast" in m and " ok on " in m)
        through = next((m for m in logs if m.startswith("selftest: through ")), "")
        done = sum(1 for e in res["events"] if e.get("ev") == "done")
        c.figures.update(exit_code=res["code"], backend=backend, dtypes_checked=checked,
                         through=through)
        c.expect(res["code"] == 0, f"exit code {res['code']}: {res['tail']}")
        c.expect(backend == want, f"hello names backend {backend!r}, not {want!r}")
        c.expect(checked == 2, f"{checked} of 2 dtypes checked: {logs}")
        c.expect(through.startswith(f"selftest: through {want}: ")
                 and not through.startswith(f"selftest: through {want}: 0 bytes"),
                 f"no bytes went through {want}: {through!r}")
        c.expect(done == 1, f"{done} done events")
        self.record(c)

    def run_script(self, c, name, argv, timeout):
        """python3 tests/trainer/shard/NAME ARGV, bounded by `timeout`; records its exit code and
        seconds in c.figures (prefixed by NAME's stem when several runs share a check) and
        returns (code, output)."""
        script = os.path.join(HERE, "..", "..", "tests", "trainer", "shard", name)
        started = time.time()
        try:
            p = subprocess.run([sys.executable, script, "--shardtrain", self.runner.shardtrain]
                               + argv, capture_output=True, text=True,
                               timeout=self.timeout(timeout))
            code, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            code, out = "timeout", str(e)
        c.figures.setdefault("runs", []).append(
            {"script": name, "exit": code, "seconds": round(time.time() - started, 1)})
        return code, out

    def check_peer_lost(self):
        """Two ranks on the GPU (Gloo staged through host memory, so one GPU holds both): rank 1
        SIGKILLed, then SIGSTOPped, mid-step; rank 0 ends with one peer_lost error naming it
        within shard.timeout_s + 30 s (tests/trainer/shard/errors.py, whose CPU form CI runs as
        shard_error_peer_lost and shard_error_frozen)."""
        c = Check("peer_lost_gpu")
        if not self.cuda:
            c.skip("the CPU form is CI's ctest -R 'shard_error_(peer_lost|frozen)$'")
            self.record(c)
            return
        for case in ("frozen", "peer_lost"):
            code, out = self.run_script(
                c, "errors.py", ["--work", os.path.join(self.work, f"peer_lost_{case}"),
                                 "--case", case, "--device", "cuda"], 180)
            c.expect(code == 0, f"errors.py --case {case} --device cuda: {out[-1500:]}")
        self.record(c)

    def check_hybrid_one_gpu(self):
        """One GPU, 4 ranks sharing it through Gloo: every strategy (HYBRID_SHARD with
        LOCAL_WORLD_SIZE 2: shard groups of 2, replica groups of 2) against 1 rank within 1e-5,
        the FULL_SHARD checkpoint of the 4 GPU ranks resumed on 2 CPU ranks, a rank killed
        (tests/trainer/shard/multi_gpu.py --share-gpu)."""
        c = Check("hybrid_one_gpu")
        if not self.cuda:
            c.skip("the CPU form is CI's ctest -R shard_multi_gpu_cpu")
            self.record(c)
            return
        code, out = self.run_script(
            c, "multi_gpu.py", ["--work", os.path.join(self.work, "hybrid_one_gpu"),
                                "--device", "cuda", "--world", "4", "--share-gpu",
                                "--resume-device", "cpu", "--tol", "1e-5"], 300)
        c.figures["worst"] = [line for line in out.splitlines() if "max relative" in line]
        c.expect(code == 0, f"multi_gpu.py --share-gpu: {out[-1500:]}")
        self.record(c)

    def check_multi_gpu(self):
        """The multi-GPU proof (docs/trainer.md) on every GPU of this machine: each strategy
        against one rank, a reshard onto half the ranks, a rank killed mid-step."""
        c = Check("multi_gpu")
        gpus = self.report["device"].get("gpus", 0) if self.cuda else 0
        if gpus < 2:
            c.skip(f"{gpus} GPU: skipped (the proof needs at least 2)" if self.cuda
                   else "no GPU: the CPU form is CI's ctest -R shard_multi_gpu_cpu")
            self.record(c)
            return
        code, out = self.run_script(
            c, "multi_gpu.py", ["--work", os.path.join(self.work, "multi_gpu"),
                                "--device", "cuda", "--world", str(gpus)], 600)
        c.figures.update(gpus=gpus,
                         worst=[line for line in out.splitlines() if "max relative" in line])
        c.expect(code == 0, f"multi_gpu.py --world {gpus}: {out[-1500:]}")
        self.record(c)

    def check_fp32(self, ref, other):
        c = Check("fp32_vs_cpu")
        c.runs += [ref.dir, other.dir]
        if self.expect_complete(c, ref) and self.expect_complete(c, other):
            label = "device_vs_cpu" if self.cuda else "auto_vs_cpu"
            compare_curves(c, label, ref.curve(), other.curve(), TOL_FP32)
            c.figures["final_loss"] = ref.curve()[-1][1]
            hello = ref.first("hello") or {}
            c.figures["hello_device"] = hello.get("device")
            if self.cuda:
                dev = hello.get("device") or {}
                c.expect(dev.get("type") == "cuda",
                         f"the shard.device=cuda run's hello names device {dev!r}, not cuda")
        self.record(c)

    def check_qlora(self, run, cpu):
        c = Check("qlora_vs_cpu")
        c.runs += [run.dir, cpu.dir]
        if self.expect_complete(c, run) and self.expect_complete(c, cpu):
            compare_curves(c, "qlora_device_vs_cpu", run.curve(), cpu.curve(), TOL_FP32)
            c.figures["final_loss"] = run.curve()[-1][1]
            if self.ref_ok(c):  # the NF4 base changes the losses: the check is not vacuous
                away = rel(run.curve()[-1][1], self.ref.curve()[-1][1])
                c.figures["final_loss_vs_full_fp32"] = away
                c.expect(away > 1e-6, "QLoRA gives the full-training losses: not quantized?")
        self.record(c)

    def expect_complete(self, check, run):
        """Every rank exited 0 with a `done` event; the check fails with the reason otherwise."""
        ok = run.ok()
        check.expect(ok, f"{run.name}: {run.failure()}")
        return ok

    def check_ranks(self, runs):
        for strategy, run in runs.items():
            c = Check("ranks2_" + strategy.lower())
            c.runs.append(run.dir)
            c.figures["backend"] = run.backend
            if self.ref_ok(c) and self.expect_complete(c, run):
                compare_curves(c, "2_ranks_vs_1", run.curve(), self.ref.curve(), TOL_FP32)
            self.record(c)

    def check_lora_dropout(self):
        """LoRA with dropout 0.1 on every Linear: 2 ranks against 1 on the device (Gloo sharing
        one GPU; NCCL with >= 2 GPUs) to TOL_LORA_RANKS, and the device's 1 rank against the
        CPU's to TOL_FP32. The masks are keyed by sample, not rank, and drawn by a counter-based
        hash on the device (model/lora.cpp), the same integers as the CPU's."""
        c = Check("lora_dropout")
        lora = {f"lora.{k}": v for k, v in QLORA.items() if k not in ("quantize",
                                                                       "quant_block_size",
                                                                       "quant_storage")}
        lora["lora.dropout"] = 0.1
        backend = "nccl" if self.cuda and self.report["device"].get("gpus", 0) >= 2 else "gloo"
        runs = self.runner.train_many({
            "lora-1": (self.config(**lora), 1, {}),
            "lora-2": (self.config(**lora, **{"shard.backend": backend}), 2, {}),
            "lora-cpu": (self.config(**lora, **{"shard.device": "cpu" if self.cuda else "auto"}),
                         1, {}),
        }, self.args.jobs, self.timeout(120))
        c.runs += [r.dir for r in runs.values()]
        c.figures["backend"] = backend
        if all(self.expect_complete(c, r) for r in runs.values()):
            compare_curves(c, "2_ranks_vs_1", runs["lora-2"].curve(), runs["lora-1"].curve(),
                           TOL_LORA_RANKS)
            compare_curves(c, "device_vs_cpu", runs["lora-1"].curve(), runs["lora-cpu"].curve(),
                           TOL_FP32)
        self.record(c)

    def check_nccl_shared_gpu(self):
        """One GPU, 2 ranks, shard.backend = "nccl": NCCL cannot put two ranks on one device, so
        shardtrain must refuse before the first collective, with a config error naming both
        ranks and the counts, on every rank (exit 2), not hang or crash in NCCL."""
        c = Check("nccl_shared_gpu")
        run = self.runner.train("nccl-shared-gpu", self.config(**{"shard.backend": "nccl"}), 2,
                                timeout=self.timeout(90))
        c.runs.append(run.dir)
        errors = run.all("error")
        c.figures.update(exit_codes=run.codes,
                         messages=[e.get("message") for e in errors][:2])
        c.expect(run.codes == [2, 2], f"exit codes {run.codes}, want [2, 2]: {run.failure()}")
        c.expect(errors and all(e.get("kind") == "config" for e in errors),
                 f"want config errors, got {errors[:2]}")
        c.expect(any("both compute on GPU" in (e.get("message") or "") and
                     "visible GPUs" in (e.get("message") or "") for e in errors),
                 f"no error names the shared GPU and the counts: {errors[:2]}")
        self.record(c)

    def ref_ok(self, check):
        if self.ref is None or not self.ref.ok():
            check.fail("the 1-rank fp32 reference run failed (see fp32_vs_cpu)")
            return False
        return True

    def check_low_precision(self, name, run):
        c = Check(name)
        c.runs.append(run.dir)
        if self.ref_ok(c) and self.expect_complete(c, run):
            curve = run.curve()
            bad = [s for s, loss in curve if not finite(loss)]
            c.expect(not bad, f"non-finite step loss at steps {bad[:5]}")
            final, want = curve[-1][1], self.ref.curve()[-1][1]
            c.figures.update(final_loss=final, fp32_final_loss=want)
            if finite(final):
                c.figures["final_rel_diff"] = rel(final, want)
                c.expect(rel(final, want) <= TOL_LOWP, f"final loss {final:.6g} against fp32 "
                         f"{want:.6g}: {100 * rel(final, want):.2f}% > {100 * TOL_LOWP:g}%")
        self.record(c)

    def check_resume(self, first):
        c = Check("fp16_resume")
        half = self.steps // 2
        c.runs.append(first.dir)
        if not self.expect_complete(c, first):
            self.record(c)
            return
        ckpts = sorted(d for d in os.listdir(os.path.join(first.dir, "ckpt"))
                       if d.startswith("step-")) if os.path.isdir(
            os.path.join(first.dir, "ckpt")) else []
        c.figures["checkpoints"] = ckpts
        if not c.expect(f"step-{half:06d}" in ckpts, f"no ckpt/step-{half:06d} (train.ckpt_every"
                                                     f"={half}); found {ckpts}"):
            self.record(c)
            return
        resumed = self.runner.resume_copy(first, "fp16-resumed", keep=f"step-{half:06d}",
                                          timeout=self.timeout(90))
        c.runs.append(resumed.dir)
        if self.expect_complete(c, resumed):
            steps = [s for s, _ in resumed.curve()]
            c.figures["resumed_steps"] = [steps[0], steps[-1]] if steps else []
            c.expect(steps and steps[0] == half + 1,
                     f"the resumed run's first step is {steps[:1]}, not {half + 1}")
            compare_curves(c, "resumed_vs_uninterrupted", resumed.curve(), first.curve(),
                           TOL_RESUME_CUDA if self.cuda else TOL_RESUME,
                           steps=list(range(half + 1, self.steps + 1)))
            # The scaler's state itself: saved in the checkpoint, reported back on resume.
            meta_path = os.path.join(first.dir, "ckpt", f"step-{half:06d}", "meta.json")
            with open(meta_path) as f:
                meta = json.load(f)
            c.figures["ckpt_grad_scale"] = meta.get("grad_scale")
            c.figures["ckpt_good_steps"] = meta.get("grad_scale_good_steps")
            c.expect(meta.get("grad_scale_good_steps") is not None and meta.get("grad_scale"),
                     f"{meta_path} has no scaler state: {meta.get('grad_scale')}, "
                     f"{meta.get('grad_scale_good_steps')}")
            logs = [e.get("message", "") for e in resumed.all("log")]
            said = [m for m in logs if m.startswith("resumed from")]
            c.figures["resume_log"] = said[:1]
            want = (f"loss scale {meta.get('grad_scale'):.6f}" if meta.get("grad_scale") else "?")
            c.expect(said and want in said[0]
                     and f"{meta.get('grad_scale_good_steps')} steps since it changed" in said[0],
                     f"the resumed run does not report the checkpoint's scaler state "
                     f"({want}, {meta.get('grad_scale_good_steps')} steps): {said[:1]}")
        self.record(c)

    def check_offload(self, run):
        c = Check("offload")
        c.runs.append(run.dir)
        if self.ref_ok(c) and self.expect_complete(c, run):
            compare_curves(c, "offload_vs_not", run.curve(), self.ref.curve(), TOL_OFFLOAD)
            hello = run.first("hello") or {}
            trainable = (hello.get("params") or {}).get("trainable", 0)
            need = OPT_BYTES_PER_PARAM * trainable  # 1 rank
            field = "cuda_peak" if self.cuda else "peak"
            off, on = self.ref.peak(field), run.peak(field)
            c.figures.update(trainable_params=trainable, peak_field=field, peak_off=off,
                             peak_on=on, needed_saving=need)
            if not self.cuda:
                c.figures["peak_check"] = "not on CPU: offloading to the CPU saves no CPU memory"
            elif c.expect(off is not None and on is not None,
                          f"no `{field}` in the mem events (off {off}, on {on})"):
                c.figures["saving"] = off - on
                c.expect(off - on >= need, f"device peak {on} with offload against {off} "
                         f"without: saves {off - on} bytes, less than {need} "
                         f"({OPT_BYTES_PER_PARAM} x {trainable} trainable parameters)")
        self.record(c)

    def check_packing(self):
        c = Check("packing")
        demo = os.path.join(self.work, "pack-demo")
        made = self.runner.command("pack-demo-data",
                                   ["make-demo-data", demo, "--train", "6", "--eval", "0"],
                                   self.timeout(60))
        if not c.expect(made["code"] == 0, f"make-demo-data: exit {made['code']}: {made['tail']}"):
            self.record(c)
            return
        images = sorted(f"img/{n}" for n in os.listdir(os.path.join(demo, "img")))
        data = os.path.join(demo, "mixed.jsonl")
        with open(data, "w") as f:  # 0, 1 or 2 images and 1-40 words, in a fixed pattern
            for i in range(32):
                words = " ".join(["How many shapes are there"] * (1 + (i * 7) % 8))
                user = [{"type": "image", "image": images[(i + k) % len(images)]}
                        for k in range(i % 3)] + [{"type": "text", "text": words}]
                f.write(json.dumps({"messages": [{"role": "user", "content": user},
                                                 {"role": "assistant", "content": "circle"}]})
                        + "\n")
        device = "cuda" if self.cuda else "cpu"
        cfg = {"experiment": {"name": "gpu-check-pack"},
               "model": {"arch": "qwen2_vl", "path": os.path.join(demo, "model")},
               "data": {"train_path": data, "format": "chat", "seq_len": 512},
               "train": {"max_steps": 6, "batch_size": 8, "micro_batch_size": 2, "lr": 1e-3,
                         "seed": SEED, "log_every": 1, "ckpt_at_end": False},
               "shard": {"device": self.args.device,
                         "precision": "bf16" if self.cuda else "fp32"}}
        runs = {}
        for pack in (True, False):
            cfg["data"]["pack"] = pack
            name = "pack" if pack else "unpacked"
            runs[name] = self.runner.train(name, {k: dict(v) for k, v in cfg.items()}, 1,
                                           self.timeout(120),
                                           extra=("--dump-grads", "grads.safetensors"))
            c.runs.append(runs[name].dir)
        if all(self.expect_complete(c, r) for r in runs.values()):
            loss_tol, cosine_bound = TOL_PACK[device]
            compare_curves(c, "packed_vs_unpacked", runs["pack"].curve(),
                           runs["unpacked"].curve(), loss_tol)
            hello = runs["pack"].first("hello") or {}
            c.figures["pack_efficiency"] = hello.get("pack_efficiency")
            c.expect(hello.get("pack_efficiency") is not None, "no hello.pack_efficiency")
            got, want = (read_f32_safetensors(os.path.join(runs[n].dir, "grads.safetensors"))
                         for n in ("pack", "unpacked"))
            dot = sum(a * b for n in want for a, b in zip(got.get(n, []), want[n]))
            norm = math.sqrt(sum(a * a for n in got for a in got[n]) *
                             sum(b * b for n in want for b in want[n]))
            cosine = dot / norm if norm > 0 else 0.0
            c.figures["grad_cosine"] = cosine
            c.expect(sorted(got) == sorted(want) and cosine >= cosine_bound,
                     f"step-1 gradients packed against unpacked: cosine {cosine:.6f} < "
                     f"{cosine_bound} (or different parameters)")
        self.record(c)

    def check_qwen2vl(self):
        """The demo's Qwen2-VL (vision tower, merger, M-RoPE) on the device against the CPU in
        fp32 (TF32 off), every sample holding two images of different sizes (168 and 112 px),
        LoRA on the text stack and the vision tower (qkv, fc1) with dropout 0.1: every step's loss
        within TOL_VL of the CPU's."""
        c = Check("qwen2vl_vs_cpu")
        demo = os.path.join(self.work, "vl-demo")
        small = os.path.join(self.work, "vl-demo-small")
        made = [self.runner.command("vl-demo-data", ["make-demo-data", demo, "--train", "4",
                                                     "--eval", "0"], self.timeout(60)),
                self.runner.command("vl-demo-small", ["make-demo-data", small, "--train", "4",
                                                      "--eval", "0", "--image-size", "112"],
                                    self.timeout(60))]
        for m in made:
            if not c.expect(m["code"] == 0, f"make-demo-data: exit {m['code']}: {m['tail']}"):
                self.record(c)
                return
        shutil.copytree(os.path.join(small, "img"), os.path.join(demo, "img112"),
                        dirs_exist_ok=True)
        big = sorted(f"img/{n}" for n in os.listdir(os.path.join(demo, "img")))
        little = sorted(f"img112/{n}" for n in os.listdir(os.path.join(demo, "img112")))
        data = os.path.join(demo, "two-sizes.jsonl")
        with open(data, "w") as f:
            for i in range(16):
                user = [{"type": "image", "image": big[i % len(big)]},
                        {"type": "image", "image": little[(i * 3) % len(little)]},
                        {"type": "text", "text": "Which picture holds more shapes?"}]
                f.write(json.dumps({"messages": [
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": "the first" if i % 2 else "the second"}]})
                    + "\n")

        def cfg(device):
            return {"experiment": {"name": "gpu-check-vl"},
                    "model": {"arch": "qwen2_vl", "path": os.path.join(demo, "model")},
                    "data": {"train_path": data, "format": "chat", "seq_len": 512},
                    "train": {"max_steps": 10, "batch_size": 4, "lr": 1e-3, "seed": SEED,
                              "log_every": 1, "ckpt_at_end": False},
                    "lora": {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.1,
                             "target_modules": ["q_proj", "v_proj", "down_proj", "qkv", "fc1"]},
                    "shard": {"device": device, "precision": "fp32", "allow_tf32": False}}
        runs = self.runner.train_many({"vl-device": (cfg(self.args.device), 1, {}),
                                       "vl-cpu": (cfg("cpu"), 1, {})},
                                      self.args.jobs, self.timeout(150))
        c.runs += [r.dir for r in runs.values()]
        if all(self.expect_complete(c, r) for r in runs.values()):
            compare_curves(c, "device_vs_cpu", runs["vl-device"].curve(),
                           runs["vl-cpu"].curve(), TOL_VL)
        self.record(c)

    def generate_answers(self, name, cfg, demo):
        """`shardtrain generate` of cfg on 1 rank; returns (Run, {index: ids}, log messages)."""
        run_dir = os.path.join(self.work, name)
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(run_dir)
        with open(os.path.join(run_dir, "exp.toml"), "w") as f:
            f.write(toml_text(cfg))
        out = os.path.join(run_dir, "answers.jsonl")
        started = time.time()
        procs = self.runner.start(["generate", os.path.join(run_dir, "exp.toml"), "--out", out],
                                  run_dir, 1)
        run = self.runner.wait(name, procs, run_dir, self.timeout(120), started)
        answers = {}
        if os.path.exists(out):
            with open(out) as f:
                for line in f:
                    a = json.loads(line)
                    answers[a["index"]] = a["ids"]
        return run, answers, [e.get("message", "") for e in run.all("log")]

    def check_generate(self):
        """Greedy generation (eval by generation) on the device: the demo's Qwen2-VL on its eval
        set, images included, with the key/value cache; fp32 ids equal the CPU's exactly, bf16
        reported (how many answers match fp32 and the first divergence), tokens/s from the
        run's own `generation:` log line."""
        c = Check("generate")
        demo = os.path.join(self.work, "gen-demo")
        made = self.runner.command("gen-demo-data",
                                   ["make-demo-data", demo, "--train", "4", "--eval", "12"],
                                   self.timeout(60))
        if not c.expect(made["code"] == 0, f"make-demo-data: exit {made['code']}: {made['tail']}"):
            self.record(c)
            return

        def cfg(device, precision):
            return {"experiment": {"name": "gpu-check-generate"},
                    "model": {"arch": "qwen2_vl", "path": os.path.join(demo, "model")},
                    "data": {"train_path": os.path.join(demo, "train.jsonl"),
                             "eval_path": os.path.join(demo, "eval.jsonl"), "format": "chat",
                             "seq_len": 512},
                    "train": {"max_steps": 1, "batch_size": 4, "seed": SEED},
                    "eval": {"max_new_tokens": 12},
                    "shard": {"device": device, "precision": precision, "allow_tf32": False}}
        runs = {}
        for name, device, precision in (("gen-fp32", self.args.device, "fp32"),
                                        ("gen-cpu", "cpu", "fp32"),
                                        ("gen-bf16", self.args.device, "bf16")):
            if name == "gen-bf16" and not self.cuda:
                continue
            runs[name] = self.generate_answers(name, cfg(device, precision), demo)
            c.runs.append(runs[name][0].dir)
        if all(self.expect_complete(c, r[0]) for r in runs.values()):
            got, want = runs["gen-fp32"][1], runs["gen-cpu"][1]
            c.figures["answers"] = len(want)
            c.expect(len(want) == 12 and got == want,
                     f"fp32 greedy ids on {self.args.device} differ from the CPU's: "
                     f"{[i for i in want if got.get(i) != want[i]][:4]}")
            speed = [m for m in runs["gen-fp32"][2] if m.startswith("generation: ")]
            c.figures["generation"] = speed[0] if speed else None
            c.expect(len(speed) == 1 and "tokens/s" in speed[0],
                     f"no 'generation: ... tokens/s' log: {runs['gen-fp32'][2]}")
            if "gen-bf16" in runs:
                low = runs["gen-bf16"][1]
                agree = []
                for i, ids in want.items():
                    other = low.get(i, [])
                    n = 0
                    while n < min(len(ids), len(other)) and ids[n] == other[n]:
                        n += 1
                    agree.append(n)
                c.figures["bf16_equal_answers"] = sum(1 for i in want if low.get(i) == want[i])
                c.figures["bf16_tokens_before_first_divergence"] = agree
                c.expect(len(low) == len(want), f"bf16: {len(low)} answers for {len(want)}")
        self.record(c)

    def check_oom(self):
        c = Check("oom")
        # The head's loss in one chunk of every row (train.loss_chunk_tokens), so its logits
        # (rows x vocab) are allocated at once:
        if self.cuda:
            # 16384 x 127 x 65536 fp32: 545 GB, past any GPU.
            vocab, seq, batch, limit = 65536, 128, 16384, None
        else:
            # 2048 x 63 x 65536 fp32: 34 GB, past an 8 GiB address-space limit; what is
            # allocated before that (embeddings, attention) stays near 200 MB.
            vocab, seq, batch, limit = 65536, 64, 2048, 8 << 30
        data = write_tokens(os.path.join(self.work, "oom.jsonl"), 64, seq, vocab)
        cfg = self.config(**{"model.tiny_vocab_size": vocab, "model.tiny_hidden_size": 32,
                             "model.tiny_layers": 1, "data.seq_len": seq, "data.train_path": data,
                             "train.batch_size": batch, "train.max_steps": 2,
                             "train.lr_warmup_steps": 0,
                             "train.loss_chunk_tokens": batch * (seq - 1),
                             "trace.memory_on_oom": True})
        run = self.runner.train("oom", cfg, 1, timeout=self.timeout(90), rlimit_as=limit)
        c.runs.append(run.dir)
        c.figures.update(batch=batch, seq_len=seq, vocab=vocab, address_space_limit=limit,
                         exit_codes=run.codes)
        errors = run.all("error")
        err = errors[0] if errors else {}
        c.figures.update(error_kind=err.get("kind"), message=err.get("message"))
        c.expect(run.codes == [1], f"exit codes {run.codes}, want [1]")
        c.expect(err.get("kind") == "oom", f"error kind {err.get('kind')}, want oom: "
                                            f"{run.failure()}")
        c.expect(BYTES_RE.search(err.get("message") or ""),
                 f"the oom message names no byte count: {err.get('message')!r}")
        self.record(c)
        self.check_oom_forensics(run, err, batch * (seq - 1) * vocab * 4)

    def check_oom_forensics(self, run, err, logits_bytes):
        """The oom run's `error.memory` (issue 37, item 4) and, on CUDA, its snapshot file."""
        c = Check("oom_forensics")
        c.runs.append(run.dir)
        m = err.get("memory") or {}
        c.figures.update(memory=m)
        c.expect(m.get("device") == ("cuda" if self.cuda else "cpu"),
                 f"error.memory.device {m.get('device')!r}: the oom event carries no allocator "
                 f"view of this device ({err!r})")
        request, allocated, peak = (m.get(k, -1) for k in ("request", "allocated", "peak"))
        c.expect(request > 0 and allocated >= 0 and peak >= allocated,
                 f"request {request}, allocated {allocated}, peak {peak}")
        if self.cuda:
            reserved, largest = m.get("reserved", -1), m.get("largest_free", -1)
            free, capacity = m.get("device_free", -1), m.get("capacity", -1)
            c.expect(request >= logits_bytes, f"request {request} < the logits' {logits_bytes}")
            c.expect(reserved >= allocated >= 0, f"reserved {reserved} < allocated {allocated}")
            c.expect(0 <= largest < request, f"largest free block {largest} vs request {request}")
            c.expect(capacity > 0 and 0 <= free <= capacity and
                     request > free + reserved - allocated,
                     f"request {request} would have fit: device free {free} of {capacity}, "
                     f"reserved {reserved}, allocated {allocated}")
            c.expect(m.get("snapshot") == "memory/rank-0.pickle",
                     f"error.memory.snapshot {m.get('snapshot')!r}, want memory/rank-0.pickle")
            path = os.path.join(run.dir, "memory", "rank-0.pickle")
            try:
                with open(path, "rb") as f:
                    snap = pickle.load(f)  # what https://pytorch.org/memory_viz reads
                c.figures.update(snapshot_bytes=os.path.getsize(path),
                                 snapshot_segments=len(snap.get("segments", [])),
                                 snapshot_trace_entries=sum(len(t) for t in
                                                            snap.get("device_traces", [])))
                c.expect(isinstance(snap, dict) and "segments" in snap and
                         "device_traces" in snap, f"{path}: keys {list(snap)[:8]}")
                c.expect(c.figures["snapshot_trace_entries"] > 0,
                         f"{path}: no allocator history (device_traces empty)")
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as e:
                c.expect(False, f"{path}: {e}")
        else:
            # No SHARDSCOPE_HOST_MEMORY_LIMIT (an address-space limit refused the mapping), except
            # under AddressSanitizer, where the runner sets it instead.
            limit = m.get("limit")
            c.expect(request >= logits_bytes or (limit is not None and
                                                 request > limit - allocated),
                     f"request {request} (logits {logits_bytes}, limit {limit}, allocated "
                     f"{allocated})")
            c.expect("snapshot" not in m, f"a CPU oom names a snapshot: {m.get('snapshot')!r}")
            log = os.path.join(run.dir, "rank-0.log")
            with open(log, errors="replace") as f:
                said = "no allocator history on the CPU" in f.read()
            c.expect(said, f"{log} does not say trace.memory_on_oom has no history on the CPU")
        self.record(c)

    # ------------------------------------------------------------------ driver

    def room(self, names, need):
        """True when `need` seconds of the budget are left; else records `names` as skipped."""
        if self.left() >= need:
            return True
        for name in names:
            c = Check(name)
            c.skip(f"{TIME_SKIP}: {max(0, self.left()):.0f} s left of --budget-s "
                   f"{self.args.budget_s:g}, this needs ~{need} s")
            self.record(c)
        return False

    def single_rank_runs(self):
        """The independent 1-rank runs, started together."""
        half = self.steps // 2
        specs = {
            "fp32": self.config(),
            "fp32-cpu": self.config(**{"shard.device": "cpu" if self.cuda else "auto"}),
            "bf16": self.config(**{"shard.precision": "bf16"}),
            # Deterministic kernels on CPU, so the resumed run can match the uninterrupted one
            # to 1e-6; on CUDA see TOL_RESUME_CUDA.
            "fp16": self.config(**{"shard.precision": "fp16_autocast", "train.ckpt_every": half,
                                   "train.ckpt_keep": 0,
                                   "train.deterministic": not self.cuda}),
            "offload": self.config(**{"shard.offload_params": True,
                                      "shard.offload_optimizer": True}),
            # The NF4 base dequantized on the device (dequantize_nf4's ops) against the CPU's
            # (its one-pass loop): the same values, so the fp32 tolerance.
            "qlora": self.config(**{f"lora.{k}": v for k, v in QLORA.items()}),
            "qlora-cpu": self.config(**{f"lora.{k}": v for k, v in QLORA.items()},
                                     **{"shard.device": "cpu" if self.cuda else "auto"}),
        }
        return self.runner.train_many({k: (v, 1, {}) for k, v in specs.items()},
                                      self.args.jobs, self.timeout(120))

    def run(self):
        self.describe_device()
        if self.room(["selftest"], 15):
            self.check_selftest()
        if self.room(["nccl_one_gpu" if self.cuda else "gloo_one_rank"], 15):
            self.check_one_rank_backend()
        single = ["fp32_vs_cpu", "ranks2_full_shard", "ranks2_shard_grad_op", "bf16_vs_fp32",
                  "fp16_vs_fp32", "fp16_resume", "offload", "qlora_vs_cpu"]
        if self.room(single, 30):
            runs = self.single_rank_runs()
            self.ref = runs["fp32"]
            self.note_hello(self.ref)
            self.check_fp32(runs["fp32"], runs["fp32-cpu"])
            backend = "nccl" if self.cuda and self.report["device"].get("gpus", 0) >= 2 else "gloo"
            if self.room(single[1:3], 20):
                ranks = self.runner.train_many(
                    {s: (self.config(**{"shard.strategy": s, "shard.backend": backend}), 2, {})
                     for s in ("FULL_SHARD", "SHARD_GRAD_OP")}, self.args.jobs, self.timeout(120))
                for r in ranks.values():
                    r.backend = backend
                self.check_ranks(ranks)
            self.check_low_precision("bf16_vs_fp32", runs["bf16"])
            self.check_low_precision("fp16_vs_fp32", runs["fp16"])
            if self.room(["fp16_resume"], 15):
                self.check_resume(runs["fp16"])
            self.check_offload(runs["offload"])
            self.check_qlora(runs["qlora"], runs["qlora-cpu"])
        if self.room(["lora_dropout"], 30):
            self.check_lora_dropout()
        if self.room(["packing"], 30):
            self.check_packing()
        if self.room(["qwen2vl_vs_cpu"], 40):
            self.check_qwen2vl()
        if self.room(["generate"], 40):
            self.check_generate()
        if self.room(["oom", "oom_forensics"], 15):
            self.check_oom()
        if self.room(["peer_lost_gpu"], 120 if self.cuda else 1):
            self.check_peer_lost()
        if self.cuda and self.report["device"].get("gpus", 0) == 1 and self.room(
                ["nccl_shared_gpu"], 15):
            self.check_nccl_shared_gpu()
        if self.cuda and self.room(["hybrid_one_gpu"], 120):
            self.check_hybrid_one_gpu()
        if self.args.multi and self.room(["multi_gpu"], 120):
            self.check_multi_gpu()
        c = Check("benchmark")
        if self.args.bench or (self.cuda and not self.args.quick):
            gpu_bench.Benchmark(self).run(c)
        else:
            c.skip("--quick" if self.args.quick else "no benchmark on the CPU (--bench forces it)")
        self.record(c)
        self.report["complete"] = True
        self.report["seconds"] = round(self.args.budget_s - self.left(), 1)
        self.save()


def read_f32_safetensors(path):
    """{name: array of float} of a float32 safetensors file (standard library only)."""
    import array
    import struct
    out = {}
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        body = f.read()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {info['dtype']}, not F32")
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(body[begin:end])
        if sys.byteorder != "little":
            values.byteswap()
        out[name] = values
    return out


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# The reason a check was skipped for lack of time starts so; verify() counts it as not run.
TIME_SKIP = "time budget"


def verify(path):
    """0 when the JSON is complete, at least one check passed, and every check either passed or
    was skipped for a reason that holds on this device (a benchmark under --quick); prints why
    not. A check the time budget cut is not run, so it never counts as passed."""
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"gpu-check: cannot read {path}: {e}")
        return 1
    bad = [c for c in report.get("checks", []) if c.get("status") not in ("pass", "skip")]
    for c in bad:
        print(f"gpu-check: FAILED {c['name']}: {c.get('reason')}")
    cut = [c for c in report.get("checks", [])
           if c.get("status") == "skip" and str(c.get("reason", "")).startswith(TIME_SKIP)]
    for c in cut:
        print(f"gpu-check: NOT RUN {c['name']}: {c.get('reason')} (give --budget-s more)")
    passed = sum(1 for c in report.get("checks", []) if c.get("status") == "pass")
    skipped = [f"{c['name']} ({c.get('reason')})" for c in report.get("checks", [])
               if c.get("status") == "skip"]
    if not report.get("complete"):
        print(f"gpu-check: {path} is incomplete (the run stopped before its last check)")
    summary = report.get("summary", {})
    print(f"gpu-check: {summary.get('pass', 0)} passed, {summary.get('fail', 0)} failed, "
          f"{summary.get('skip', 0)} skipped" + (f": {', '.join(skipped)}" if skipped else ""))
    if not passed:
        print("gpu-check: no check passed")
    return 0 if report.get("complete") and not bad and not cut and passed else 1


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shardtrain", help="the shardtrain binary to check")
    p.add_argument("--out", help="folder for gpu-check.json, gpu-check.log and work/")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--quick", action="store_true", help="a few steps per check, no benchmark")
    p.add_argument("--python", default=sys.executable,
                   help="a Python with torch (CUDA) and transformers, for the device description "
                        "and the benchmark's model and FSDP2 peer")
    p.add_argument("--budget-s", type=float, default=230.0,
                   help="seconds for the whole run; checks past it are skipped, runs are cut")
    p.add_argument("--jobs", type=int, default=0,
                   help="runs at once (default: 5 on CUDA, 2 on the CPU)")
    p.add_argument("--cpu-threads", type=int, default=0,
                   help="OMP_NUM_THREADS of CPU runs (default: 4 on CUDA machines, 1 on the CPU)")
    p.add_argument("--bench-batch", type=int, default=8, help="benchmark: samples per step")
    p.add_argument("--bench-micro", type=int, default=4, help="benchmark: samples per forward")
    p.add_argument("--bench-seq", type=int, default=2048, help="benchmark: sequence length")
    p.add_argument("--bench-steps", type=int, default=15, help="benchmark: steps per run")
    p.add_argument("--bench-shape", choices=["0.5b", "tiny"], default="0.5b",
                   help="benchmark model: Qwen2-0.5B's shape, or tiny (to try this script)")
    p.add_argument("--multi", action="store_true",
                   help="with more than one GPU, also run the multi-GPU proof "
                        "(tests/trainer/shard/multi_gpu.py on every GPU); one GPU: skipped")
    p.add_argument("--bench", action="store_true",
                   help="run the benchmark even with --quick or on the CPU (to try this script)")
    p.add_argument("--bench-warmup", type=int, default=5, help="benchmark: steps left out")
    p.add_argument("--verify", metavar="JSON", help="only check an earlier run's JSON")
    a = p.parse_args(argv)
    if a.verify:
        return a
    if not a.shardtrain or not a.out:
        p.error("--shardtrain PATH and --out DIR are required (or --verify JSON)")
    if not (os.path.isfile(a.shardtrain) and os.access(a.shardtrain, os.X_OK)):
        p.error(f"--shardtrain {a.shardtrain}: not an executable file; build it "
                "(scripts/gpu-check.sh build) or pass the path of one")
    a.jobs = a.jobs or (5 if a.device == "cuda" else 2)
    a.cpu_threads = a.cpu_threads or (4 if a.device == "cuda" else 1)
    return a


def main(argv):
    args = parse_args(argv)
    if args.verify:
        return verify(args.verify)
    os.makedirs(args.out, exist_ok=True)
    check = GpuCheck(args)
    try:
        check.run()
    finally:
        check.save()
        check.log_file.close()
    return verify(os.path.join(args.out, "gpu-check.json"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
