"""Sharded checkpoints on real ranks: exact resume after kill -9, and resharding.

Both cases first run 2 FULL_SHARD ranks for 30 steps uninterrupted, with train.ckpt_every = 5,
train.ckpt_keep = 0 and train.deterministic = true.
  --case resume: the same run again, every rank killed with SIGKILL right after rank 0's `ckpt`
      event for step 10, then restarted with --resume auto in the same run directory: the
      concatenated loss curve (steps written before the kill included) equals the uninterrupted
      run's bit for bit (loss and grad_norm).
  --case reshard: resume the uninterrupted run's step-10 checkpoint on 1 and on 3 ranks: steps
      11..30 within 1e-5 relative of the uninterrupted run.
  --case fallback: --resume auto in copies of the uninterrupted run: with its newest checkpoint
      (step 25) damaged (a rank file lost), it resumes from step 20 with a warning naming step 25,
      and steps 21..30 equal the uninterrupted run; with folders step-999999 (step 10's) and
      step-1000000 (step 20's) beside them, it takes step-1000000 (numbers, not text, order them).
      `--resume auto --resume FOLDER` starts from FOLDER in a run without checkpoints, and from
      the run's own newest once it has one.
  --case disk_full: the disk fills up during a checkpoint (RLIMIT_FSIZE below a rank file's size,
      so a write fails with EFBIG as on a full disk, after the run resumed from step 10): every
      rank stops with a `disk_full` error naming the file and the bytes, no step-15 checkpoint is
      left looking complete, and --resume auto without the limit goes on from step 10 to the
      uninterrupted run's curve, bit for bit.
  --case disk_full_meta: the checkpoint folder is a tmpfs sized so that step 15's rank files fit
      and its meta.json does not (one page short), with train.ckpt_keep = 1: rank 0 stops with a
      `disk_full` error naming meta.json and the bytes, the other rank with a `disk_full` error
      naming rank 0, no `.step-000015.tmp` or step-000015 is left, step-000010 is kept intact
      (pruning waits for a complete checkpoint), and once the tmpfs is grown --resume auto goes
      on from step 10 to the uninterrupted run's curve, bit for bit. Needs `mount` (root).
"""
import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ranks  # noqa: E402
from ranks import check  # noqa: E402

WORLD = 2
KILL_AFTER = 10
TOL = 1e-5
SETS = ["train.ckpt_every=5", "train.ckpt_keep=0", "train.deterministic=true"]


def uninterrupted(args, config):
    run_dir = os.path.join(args.work, "uninterrupted")
    with ranks.timed(f"uninterrupted: {WORLD} ranks {' '.join(SETS)}"):
        ranks.train(args.shardtrain, config, run_dir, WORLD, sets=SETS)
    ckpts = sorted(e["step"] for e in ranks.events(run_dir, 0, "ckpt"))
    print(f"uninterrupted: checkpoints at steps {ckpts}")
    check(KILL_AFTER in ckpts, f"no checkpoint at step {KILL_AFTER} (got {ckpts})")
    return run_dir, ranks.curve(run_dir)


def wait_for_ckpt(run_dir, step, procs, deadline_s=180):
    """Polls rank 0's events until the `ckpt` event of `step`; fails if the ranks end first."""
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        if any(e["step"] == step for e in ranks.events(run_dir, 0, "ckpt")):
            return
        ended = {r: p.poll() for r, p in procs.items() if p.poll() is not None}
        check(not ended, f"ranks ended {ended} before the step-{step} checkpoint\n"
                         f"{ranks.log_tail(run_dir, WORLD)}")
        time.sleep(0.005)
    raise ranks.CheckFailed(f"no step-{step} ckpt event within {deadline_s} s")


def argv(config, *extra):
    out = ["train", os.path.abspath(config)]
    for s in SETS:
        out += ["--set", s]
    return out + list(extra)


def resume(args, config):
    _, want = uninterrupted(args, config)
    run_dir = ranks.fresh_dir(os.path.join(args.work, "killed"))
    procs = ranks.start_ranks(args.shardtrain, argv(config), run_dir, WORLD)
    wait_for_ckpt(run_dir, KILL_AFTER, procs)
    for p in procs.values():
        p.send_signal(signal.SIGKILL)
    codes = ranks.wait_ranks(procs)
    before = [e["step"] for e in ranks.events(run_dir, 0, "step")]
    print(f"killed every rank after the step-{KILL_AFTER} ckpt event: exit codes {codes}, "
          f"steps written before the kill {before[0]}..{before[-1]}")
    check(all(c == -signal.SIGKILL for c in codes), f"ranks were not killed: exit codes {codes}")
    check(not ranks.events(run_dir, 0, "done"), "the run completed before it could be killed")
    codes = ranks.run_ranks(args.shardtrain, argv(config, "--resume", "auto"), run_dir, WORLD)
    check(all(c == 0 for c in codes), f"resume: exit codes {codes}\n"
                                      f"{ranks.log_tail(run_dir, WORLD)}")
    resumed = [e["message"] for e in ranks.events(run_dir, 0, "log")
               if e["message"].startswith("resumed from")]
    print(f"resume: {resumed}")
    check(len(resumed) == 1, f"want one 'resumed from' log event, got {resumed}")
    events = ranks.events(run_dir, 0, "step")
    got_steps = sorted({e["step"] for e in events})
    check(got_steps == sorted(want), f"concatenated curve has steps {got_steps}, want "
                                     f"{sorted(want)}")
    mismatches = []
    for e in events:  # steps written twice (before the kill and after the resume) are checked twice
        w = want[e["step"]]
        if (e["loss"], e["grad_norm"]) != (w["loss"], w["grad_norm"]):
            mismatches.append(f"step {e['step']}: loss {e['loss']!r} grad_norm "
                              f"{e['grad_norm']!r}, uninterrupted {w['loss']!r} "
                              f"{w['grad_norm']!r}")
    print(f"resume: {len(events)} step events compared bit for bit with the uninterrupted run "
          f"({len(events) - len(got_steps)} written twice), {len(mismatches)} differ")
    for e in events[-3:]:
        print(f"resume: step {e['step']} loss {e['loss']!r} == {want[e['step']]['loss']!r}")
    check(not mismatches, "curves differ:\n" + "\n".join(mismatches[:10]))


def reshard(args, config):
    source, want = uninterrupted(args, config)
    ckpt = os.path.join(source, "ckpt", f"step-{KILL_AFTER:06d}")
    check(os.path.isfile(os.path.join(ckpt, "meta.json")), f"{ckpt}: no meta.json")
    for world in (1, 3):
        run_dir = ranks.fresh_dir(os.path.join(args.work, f"resume_on_{world}"))
        with ranks.timed(f"resume {ckpt} on {world} rank(s)"):
            codes = ranks.run_ranks(args.shardtrain, argv(config, "--resume", ckpt), run_dir,
                                    world)
        check(all(c == 0 for c in codes), f"resume on {world}: exit codes {codes}\n"
                                          f"{ranks.log_tail(run_dir, world)}")
        got = ranks.curve(run_dir)
        check(sorted(got) == list(range(KILL_AFTER + 1, max(want) + 1)),
              f"resume on {world}: steps {sorted(got)}, want {KILL_AFTER + 1}..{max(want)}")
        ranks.compare_curves(f"saved on {WORLD}, resumed on {world}", got, want, TOL,
                             steps=sorted(got))


def resume_auto(args, config, run_dir, name):
    codes = ranks.run_ranks(args.shardtrain, argv(config, "--resume", "auto"), run_dir, WORLD)
    check(all(c == 0 for c in codes), f"{name}: exit codes {codes}\n"
                                      f"{ranks.log_tail(run_dir, WORLD)}")
    logs = [e for e in ranks.events(run_dir, 0, "log")]
    resumed = [e["message"] for e in logs if e["message"].startswith("resumed from")]
    warnings = [e["message"] for e in logs if e["level"] == "warn"]
    print(f"{name}: {resumed} {warnings}")
    return resumed, warnings


def fallback(args, config):
    source, want = uninterrupted(args, config)
    ckpts = sorted(d for d in os.listdir(os.path.join(source, "ckpt")) if d.startswith("step-"))
    check(ckpts[-1] == "step-000025", f"uninterrupted checkpoints {ckpts}, want ... step-000025")

    damaged = os.path.join(args.work, "damaged")
    shutil.rmtree(damaged, ignore_errors=True)
    shutil.copytree(source, damaged)
    for f in os.listdir(damaged):
        if f.startswith("events-rank-"):
            os.remove(os.path.join(damaged, f))  # this run's events only
    os.remove(os.path.join(damaged, "ckpt", "step-000025", "rank-1.safetensors"))
    resumed, warnings = resume_auto(args, config, damaged, "newest damaged")
    check(len(resumed) == 1 and resumed[0].endswith("step-000020 at step 20"),
          f"want a resume from step-000020, got {resumed}")
    check(any("step-000025" in w and "rank-1.safetensors is missing" in w for w in warnings),
          f"no warning names the damaged step-000025: {warnings}")
    got = ranks.curve(damaged)
    check(sorted(got) == list(range(21, max(want) + 1)), f"steps {sorted(got)}, want 21..30")
    ranks.compare_curves("resumed from step 20", got, want, 0.0, steps=sorted(got))

    ordered = os.path.join(args.work, "ordered")
    shutil.rmtree(ordered, ignore_errors=True)
    shutil.copytree(source, ordered)
    for f in os.listdir(ordered):
        if f.startswith("events-rank-"):
            os.remove(os.path.join(ordered, f))
    root = os.path.join(ordered, "ckpt")
    shutil.copytree(os.path.join(root, "step-000010"), os.path.join(root, "step-999999"))
    shutil.copytree(os.path.join(root, "step-000020"), os.path.join(root, "step-1000000"))
    resumed, _ = resume_auto(args, config, ordered, "step-999999 beside step-1000000")
    check(len(resumed) == 1 and resumed[0].endswith("step-1000000 at step 20"),
          f"want a resume from step-1000000 (step 20), got {resumed}")

    # `--resume auto --resume FOLDER` (a requeued Slurm job of a retry that resumed from the failed
    # attempt's checkpoint): the run's own newest checkpoint when it has one, else FOLDER.
    step10 = os.path.join(source, "ckpt", "step-000010")
    fresh = ranks.fresh_dir(os.path.join(args.work, "fallback_folder"))
    codes = ranks.run_ranks(args.shardtrain, argv(config, "--resume", "auto", "--resume", step10),
                            fresh, WORLD)
    check(all(c == 0 for c in codes), f"auto + folder: exit codes {codes}\n"
                                      f"{ranks.log_tail(fresh, WORLD)}")
    logs = [e["message"] for e in ranks.events(fresh, 0, "log")
            if e["message"].startswith("resumed from")]
    check(logs == [f"resumed from {step10} at step 10"],
          f"no checkpoint of its own: want a resume from {step10}, got {logs}")
    codes = ranks.run_ranks(args.shardtrain, argv(config, "--resume", "auto", "--resume", step10),
                            fresh, WORLD)
    logs = [e["message"] for e in ranks.events(fresh, 0, "log")
            if e["message"].startswith("resumed from")]
    check(all(c == 0 for c in codes) and len(logs) == 2 and "step-000025 at step 25" in logs[1],
          f"with its own checkpoints: want its newest (step 25), got {logs}")


def disk_full(args, config):
    source, want = uninterrupted(args, config)
    run_dir = os.path.join(args.work, "disk_full")
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.copytree(source, run_dir)
    for f in os.listdir(run_dir):
        if f.startswith("events-rank-") or f.startswith("rank-"):
            os.remove(os.path.join(run_dir, f))  # this run's events and logs only
    root = os.path.join(run_dir, "ckpt")
    for d in os.listdir(root):
        if d != f"step-{KILL_AFTER:06d}":
            shutil.rmtree(os.path.join(root, d))
    limit = os.path.getsize(os.path.join(root, f"step-{KILL_AFTER:06d}", "rank-0.safetensors")) // 2

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    codes = ranks.run_ranks(args.shardtrain, argv(config, "--resume", "auto"), run_dir, WORLD,
                            preexec=small_disk)
    print(f"files limited to {limit} bytes: exit codes {codes}")
    check(all(c == 1 for c in codes), f"want every rank to exit 1 (io), got {codes}\n"
                                      f"{ranks.log_tail(run_dir, WORLD)}")
    errors = [e for r in range(WORLD) for e in ranks.events(run_dir, r, "error")]
    print(f"errors: {errors}")
    full = [e for e in errors if e["kind"] == "disk_full"]
    check(len(full) == WORLD and all("rank-" in e["message"] and "File too large" in e["message"]
                                     and "bytes" in e["message"] for e in full),
          f"want a disk_full error on every rank naming the rank file, the bytes and the cause, "
          f"got {errors}")
    steps = [e["step"] for e in ranks.events(run_dir, 0, "step")]
    check(steps and steps[-1] == 15, f"the limited run's steps {steps}: want 11..15")
    check(sorted(d for d in os.listdir(root) if d.startswith("step-")) ==
          [f"step-{KILL_AFTER:06d}"], f"a step-15 checkpoint looks complete: {os.listdir(root)}")

    resumed, _ = resume_auto(args, config, run_dir, "after the disk filled up")
    want_resume = f"step-{KILL_AFTER:06d} at step {KILL_AFTER}"
    check(len(resumed) == 2 and all(r.endswith(want_resume) for r in resumed),
          f"want both runs (limited, then not) to resume from step-{KILL_AFTER:06d}, got {resumed}")
    got = {}
    for e in ranks.events(run_dir, 0, "step"):
        got[e["step"]] = e  # the resumed run's steps 11..15 replace the limited run's
    ranks.compare_curves("resumed after the disk filled up", got, want, 0.0,
                         steps=list(range(KILL_AFTER + 1, max(want) + 1)))


PAGE = 4096  # tmpfs counts whole pages; folders take none


def pages(path):
    return (os.path.getsize(path) + PAGE - 1) // PAGE * PAGE


def disk_full_meta(args, config):
    source, want = uninterrupted(args, config)
    step10 = os.path.join(source, "ckpt", f"step-{KILL_AFTER:06d}")
    step15 = os.path.join(source, "ckpt", "step-000015")
    kept = sum(pages(os.path.join(step10, f)) for f in os.listdir(step10))
    shards = sum(pages(os.path.join(step15, f"rank-{r}.safetensors")) for r in range(WORLD))
    meta = pages(os.path.join(step15, "meta.json"))
    size = kept + shards + meta - PAGE  # step 15's rank files fit, its meta.json does not
    run_dir = ranks.fresh_dir(os.path.join(args.work, "disk_full_meta"))
    root = os.path.join(run_dir, "ckpt")
    os.makedirs(root)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", root],
                           capture_output=True, text=True)
    check(mount.returncode == 0,
          f"cannot mount a {size}-byte tmpfs on {root} ({mount.stderr.strip()}): this case fills "
          f"a real disk and needs root (or CAP_SYS_ADMIN)")
    try:
        shutil.copytree(step10, os.path.join(root, f"step-{KILL_AFTER:06d}"))
        fs = os.statvfs(root)
        print(f"tmpfs of {size} bytes: step-10 takes {kept}, step 15 needs {shards} for its rank "
              f"files and {meta} for meta.json; {fs.f_bavail * fs.f_frsize} bytes free")
        check(fs.f_bavail * fs.f_frsize == shards + meta - PAGE,
              f"the tmpfs has {fs.f_bavail * fs.f_frsize} bytes free, want {shards + meta - PAGE}")
        codes = ranks.run_ranks(args.shardtrain,
                                argv(config, "--set", "train.ckpt_keep=1", "--resume", "auto"),
                                run_dir, WORLD)
        print(f"meta.json one page short: exit codes {codes}")
        check(all(c == 1 for c in codes), f"want every rank to exit 1, got {codes}\n"
                                          f"{ranks.log_tail(run_dir, WORLD)}")
        errors = {r: ranks.events(run_dir, r, "error") for r in range(WORLD)}
        print(f"errors: {errors}")
        first = errors[0][0] if errors[0] else {}
        check(len(errors[0]) == 1 and first["kind"] == "disk_full"
              and os.path.join(root, ".step-000015.tmp", "meta.json") in first["message"]
              and "bytes" in first["message"] and "No space left" in first["message"],
              f"rank 0: want one disk_full error naming meta.json, the bytes and the cause, got "
              f"{errors[0]}\n{ranks.log_tail(run_dir, WORLD)}")
        for r in range(1, WORLD):
            check(len(errors[r]) == 1 and errors[r][0]["kind"] == "disk_full"
                  and "rank 0" in errors[r][0]["message"],
                  f"rank {r}: want one disk_full error naming rank 0, got {errors[r]}")
        steps = [e["step"] for e in ranks.events(run_dir, 0, "step")]
        check(steps and steps[-1] == 15, f"the run's steps {steps}: want 11..15")
        left = sorted(os.listdir(root))
        check(left == [f"step-{KILL_AFTER:06d}"],
              f"{root} holds {left}: want step-{KILL_AFTER:06d} alone (no step 15, no .tmp)")
        for f in sorted(os.listdir(step10)):
            with open(os.path.join(step10, f), "rb") as a, \
                    open(os.path.join(root, f"step-{KILL_AFTER:06d}", f), "rb") as b:
                check(a.read() == b.read(), f"step-{KILL_AFTER:06d}/{f} changed")
        check(not ranks.events(run_dir, 0, "ckpt"), "a ckpt event for a failed checkpoint")

        grow = subprocess.run(["mount", "-o", "remount,size=512m", root], capture_output=True,
                              text=True)
        check(grow.returncode == 0, f"cannot grow the tmpfs: {grow.stderr.strip()}")
        resumed, _ = resume_auto(args, config, run_dir, "after space was freed")
        want_resume = f"step-{KILL_AFTER:06d} at step {KILL_AFTER}"
        check(len(resumed) == 2 and all(r.endswith(want_resume) for r in resumed),
              f"want both runs to resume from step-{KILL_AFTER:06d}, got {resumed}")
        got = {}
        for e in ranks.events(run_dir, 0, "step"):
            got[e["step"]] = e  # the resumed run's steps 11..15 replace the failed run's
        ranks.compare_curves("resumed after the disk filled up", got, want, 0.0,
                             steps=list(range(KILL_AFTER + 1, max(want) + 1)))
    finally:
        subprocess.run(["umount", "-l", root])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--case", required=True, choices=["resume", "reshard", "fallback", "disk_full",
                                                           "disk_full_meta"])
    args = parser.parse_args()
    config = ranks.setup_experiment(args.work)
    cases = {"resume": resume, "reshard": reshard, "fallback": fallback, "disk_full": disk_full,
             "disk_full_meta": disk_full_meta}
    ranks.main_guard(lambda: cases[args.case](args, config))


if __name__ == "__main__":
    main()
