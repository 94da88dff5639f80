"""The multi-GPU proof (docs/trainer.md, "Multi-GPU proof"): what a user with several GPUs runs
to check the sharding on them, and what CI runs on CPU ranks as its CPU form.

  --device cuda --world N   N ranks, one GPU each (CUDA_VISIBLE_DEVICES per rank), NCCL
  --device cuda --world N --share-gpu
                            N ranks on the one visible GPU through Gloo staged in host memory
                            (the check of a machine with one GPU: gpu_check.py hybrid_one_gpu)
  --device cpu --world N    N CPU ranks over Gloo (CI: shard_multi_gpu_cpu, N = 4)
  --resume-device cpu       the reshard check resumes on the CPU (a checkpoint written on GPUs
                            goes on on a laptop)

Checks, each against one rank of the same device on the same global batch (fp32; TF32 off):
  strategies   FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and HYBRID_SHARD (LOCAL_WORLD_SIZE = N/2: two
               shard groups of N/2, as two nodes would be) on N ranks: every step's loss within
               TOL (1e-5 on CPU, 1e-4 on CUDA).
  reshard      the FULL_SHARD run's middle checkpoint resumed on N/2 ranks (on --resume-device):
               the remaining steps within TOL of the uninterrupted run.
  peer_lost    a fresh FULL_SHARD run on N ranks whose rank 1 is SIGKILLed after step 3: rank 0
               ends with one `error` of kind peer_lost naming rank 1 within shard.timeout_s +
               30 s, and no rank is left running shard.timeout_s after that.
Prints one line per check; exits 1 on the first failure.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

STEPS = 8
TIMEOUT_S = 20
STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD")


def device_env(args, world):
    """Per-rank environment: one GPU each on CUDA (so HYBRID_SHARD's LOCAL_RANK, which repeats
    across the two groups, never puts two NCCL ranks on one GPU)."""
    if args.device != "cuda" or args.share_gpu:
        return [None] * world
    return [{"CUDA_VISIBLE_DEVICES": str(rank)} for rank in range(world)]


def start(args, argv, run_dir, world, local_world=None):
    """Starts every rank in its own session; returns {rank: Popen} (ranks.start_ranks, with a
    per-rank environment)."""
    local_world = local_world or world
    port_file = os.path.join(os.path.abspath(run_dir), "rdzv.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    procs = {}
    for rank, extra in enumerate(device_env(args, world)):
        env = ranks.rank_env(rank, world, local_world, port_file, extra)
        with open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "ab") as out, \
                open(os.path.join(run_dir, f"rank-{rank}.log"), "ab") as err:
            procs[rank] = subprocess.Popen([args.shardtrain] + argv, cwd=run_dir, env=env,
                                           stdout=out, stderr=err, start_new_session=True)
    return procs


def run(args, config, run_dir, world, local_world=None, sets=(), extra=()):
    ranks.fresh_dir(run_dir)
    argv = ["train", os.path.abspath(config)]
    for s in sets:
        argv += ["--set", s]
    argv += list(extra)
    codes = ranks.wait_ranks(start(args, argv, run_dir, world, local_world), timeout=600)
    check(all(c == 0 for c in codes), f"{run_dir}: exit codes {codes}\n"
                                      f"{ranks.log_tail(run_dir, world)}")
    return ranks.curve(run_dir)


def strategies(args, config, tol, want):
    for strategy in STRATEGIES:
        local = args.world // 2 if strategy == "HYBRID_SHARD" else args.world
        if strategy == "HYBRID_SHARD" and (args.world < 4 or args.world % 2):
            print(f"strategies: HYBRID_SHARD needs an even world of at least 4 ranks; "
                  f"{args.world} given: not run")
            continue
        run_dir = os.path.join(args.work, strategy.lower())
        with ranks.timed(f"{strategy} on {args.world} ranks (local world {local})"):
            got = run(args, config, run_dir, args.world, local,
                      sets=[f"shard.strategy={strategy}"] + ckpt_sets(strategy))
        ranks.compare_curves(f"{strategy} x{args.world} vs 1 rank", got, want, tol)


def ckpt_sets(strategy):
    if strategy != "FULL_SHARD":
        return []
    return [f"train.ckpt_every={STEPS // 2}", "train.ckpt_keep=0"]


def reshard(args, config, tol):
    source = os.path.join(args.work, "full_shard")
    want = ranks.curve(source)
    ckpt = os.path.join(source, "ckpt", f"step-{STEPS // 2:06d}")
    check(os.path.isfile(os.path.join(ckpt, "meta.json")), f"{ckpt}: no complete checkpoint")
    world = max(1, args.world // 2)
    run_dir = os.path.join(args.work, "reshard")
    sets = [f"shard.device={args.resume_device}"] if args.resume_device else []
    with ranks.timed(f"resume step {STEPS // 2} of {args.world} ranks on {world}"
                     f"{' on ' + args.resume_device if args.resume_device else ''}"):
        got = run(args, config, run_dir, world, sets=sets, extra=("--resume", ckpt))
    check(sorted(got) == list(range(STEPS // 2 + 1, STEPS + 1)),
          f"reshard: steps {sorted(got)}, want {STEPS // 2 + 1}..{STEPS}")
    ranks.compare_curves(f"saved on {args.world}, resumed on {world}", got, want, tol,
                         steps=sorted(got))


def peer_lost(args, config):
    run_dir = ranks.fresh_dir(os.path.join(args.work, "peer_lost"))
    argv = ["train", os.path.abspath(config), "--set", "train.max_steps=100000"]
    procs = start(args, argv, run_dir, args.world)
    try:
        deadline = time.time() + 180
        while not any(e["step"] >= 3 for e in ranks.events(run_dir, 0, "step")):
            ended = {r: p.poll() for r, p in procs.items() if p.poll() is not None}
            check(not ended and time.time() < deadline,
                  f"ranks ended {ended} or no step 3 within 180 s\n"
                  f"{ranks.log_tail(run_dir, args.world)}")
            time.sleep(0.01)
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()
        killed = time.time()
        code0 = ranks.wait_ranks({0: procs[0]}, timeout=TIMEOUT_S + 30)[0]
        waited = time.time() - killed
    finally:
        # The other survivors fail on their own, each within its shard.timeout_s; then nothing
        # may stay. (Polled: a loaded CI machine can take seconds to schedule their exits.)
        settle = time.time() + TIMEOUT_S
        while any(p.poll() is None for p in procs.values()) and time.time() < settle:
            time.sleep(0.1)
        left = [r for r, p in procs.items() if p.poll() is None]
        for r in left:
            procs[r].kill()
            procs[r].wait()
    errors = ranks.events(run_dir, 0, "error")
    print(f"peer_lost: rank 1 killed after step 3; rank 0 exited {code0} after {waited:.1f} s: "
          f"{errors}")
    check(code0 not in (0, -signal.SIGKILL), f"rank 0 exit {code0}: it must fail on its own")
    check(waited < TIMEOUT_S + 30, f"rank 0 took {waited:.1f} s (shard.timeout_s {TIMEOUT_S})")
    check(len(errors) == 1 and errors[0]["kind"] == "peer_lost",
          f"rank 0: want one peer_lost error, got {errors}")
    check("rank 1" in errors[0]["message"], f"the error does not name rank 1: {errors[0]}")
    check(not left, f"ranks {left} were still running {TIMEOUT_S} s after rank 0 ended\n"
                    f"{ranks.log_tail(run_dir, args.world)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--world", type=int, default=4, help="ranks (GPUs on CUDA)")
    parser.add_argument("--share-gpu", action="store_true",
                        help="cuda: every rank on the one visible GPU, through Gloo")
    parser.add_argument("--resume-device", choices=["cpu", "cuda"],
                        help="where the reshard check resumes (default: --device)")
    parser.add_argument("--tol", type=float,
                        help="per-step relative tolerance (default 1e-5 on CPU, 1e-4 on CUDA)")
    args = parser.parse_args()
    args.shardtrain = os.path.abspath(args.shardtrain)

    def body():
        check(args.world >= 2, "--world must be at least 2")
        tol = args.tol or (1e-4 if args.device == "cuda" else 1e-5)
        batch = 24 if 24 % args.world == 0 else 3 * args.world
        shard = {"timeout_s": TIMEOUT_S, "device": args.device}
        if args.share_gpu:
            shard["backend"] = "gloo"
        if args.device == "cuda":
            shard["allow_tf32"] = False
        config = ranks.setup_experiment(args.work, {
            "train": {"max_steps": STEPS, "batch_size": batch, "lr_warmup_steps": 2},
            "shard": shard})
        with ranks.timed(f"1 rank on {args.device} (the reference)"):
            want = run(args, config, os.path.join(args.work, "one"), 1)
        check(sorted(want) == list(range(1, STEPS + 1)), f"reference steps {sorted(want)}")
        strategies(args, config, tol, want)
        reshard(args, config, tol)
        peer_lost(args, config)
        print(f"multi-GPU proof: every check passed on {args.world} {args.device} ranks")

    ranks.main_guard(body)


if __name__ == "__main__":
    main()
