#!/usr/bin/env python3
"""A search-trial program honouring Shardscope's program contract, for tst_trialrunner.

Its own options come first (--mode MODE, --meet DIR); the trial's values follow as
--<dotted.name>=<value>. It records what it received in received.json (in its working
directory, which must be the run directory) and then behaves as MODE says:
  normal       plain log lines, eval events without the envelope, two done events (last wins)
  exit3        a done event, then exit code 3 (a non-zero exit fails the trial)
  abort        dies by SIGABRT without a done event
  nan          a done event whose objective is NaN (Python's json writes a bare NaN)
  ignore_term  eval events every 0.1 s forever; SIGTERM is logged and ignored (SIGKILL must come)
  fail_once    the first time a trial runs (no DIR/failed-<trial> yet): writes that file, 20 eval
               events and log lines, exits 4 without done; the next time (the retry): normal
  stall        one eval event, then silence (the process lives) until DIR/release exists (600 s
               at most), then completes
  meet         writes DIR/start-<trial>, waits (30 s at most) until another trial's start file
               is there, then completes (so it completes only when two trials overlap)
"""
import json
import os
import signal
import sys
import time


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    argv = sys.argv[1:]
    mode, meet, values = "normal", None, {}
    i = 0
    while i < len(argv):
        if argv[i] == "--mode":
            mode, i = argv[i + 1], i + 2
        elif argv[i] == "--meet":
            meet, i = argv[i + 1], i + 2
        else:
            name, _, value = argv[i][2:].partition("=")
            values[name] = value
            i += 1
    trial = os.environ.get("SHARDSCOPE_TRIAL", "")
    with open("received.json", "w") as f:
        json.dump({"argv": argv, "trial": trial, "run_dir": os.environ.get("SHARDSCOPE_RUN_DIR", ""),
                   "cwd": os.getcwd(), "pid": os.getpid()}, f)
    x = float(values.get("x", "0"))
    objective = (x - 2.0) ** 2 + float(values.get("n", "0"))

    if mode == "fail_once":
        marker = os.path.join(meet, "failed-" + trial)
        if not os.path.exists(marker):
            open(marker, "w").close()
            print("first attempt of trial", trial, "fails", file=sys.stderr, flush=True)
            for step in range(1, 21):
                emit({"ev": "eval", "step": step, "metrics": {"objective": 100.0 + step}})
            sys.exit(4)
        mode = "normal"
    if mode == "normal":
        print("starting trial", trial, flush=True)
        print("a line on stderr", file=sys.stderr, flush=True)
        for step in (1, 2, 3):
            emit({"ev": "eval", "step": step, "metrics": {"objective": objective + 1.0 / step}})
        emit({"ev": "done", "status": "complete", "objective": 1e9})
        emit({"ev": "done", "status": "complete", "objective": objective})
        print("bye", flush=True)
    elif mode == "exit3":
        emit({"ev": "done", "status": "complete", "objective": objective})
        sys.exit(3)
    elif mode == "abort":
        print("about to abort", file=sys.stderr, flush=True)
        os.abort()
    elif mode == "nan":
        emit({"ev": "done", "status": "complete", "objective": float("nan")})  # a bare NaN
    elif mode == "ignore_term":
        signal.signal(signal.SIGTERM,
                      lambda *_: print("got SIGTERM, ignoring it", file=sys.stderr, flush=True))
        step = 0
        deadline = time.time() + 600
        while time.time() < deadline:
            step += 1
            emit({"ev": "eval", "step": step, "metrics": {"objective": 10.0 - step}})
            time.sleep(0.1)
        sys.exit(5)
    elif mode == "stall":
        emit({"ev": "eval", "step": 1, "metrics": {"objective": objective}})
        deadline = time.time() + 600
        while time.time() < deadline and not os.path.exists(os.path.join(meet, "release")):
            time.sleep(0.05)
        emit({"ev": "done", "status": "complete", "objective": objective})
    elif mode == "meet":
        with open(os.path.join(meet, "start-" + trial), "w") as f:
            f.write("%d %f\n" % (os.getpid(), time.time()))
        deadline = time.time() + 30
        while time.time() < deadline:
            others = [n for n in os.listdir(meet) if n.startswith("start-") and n != "start-" + trial]
            if others:
                emit({"ev": "done", "status": "complete", "objective": objective})
                return
            time.sleep(0.05)
        print("no other trial ran at the same time", file=sys.stderr, flush=True)
        sys.exit(4)


if __name__ == "__main__":
    main()
