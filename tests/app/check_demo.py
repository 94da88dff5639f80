#!/usr/bin/env python3
"""The README's main job in its quick headless form: scripts/demo.sh on a copy of
examples/demo-sweep.toml cut to 2 trials of 30 steps, with its own run log. It must run the
sweep through shardtrain, write every panel's PNG and index.json naming the sweep's trials, and
run again safely (the study is continued, not duplicated).

  check_demo.py SOURCE_DIR BIN_DIR
"""
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

PANELS = {"builder", "runs", "plots", "compare", "hosts"}


def main():
    source, bin_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(source, "examples", "demo-sweep.toml")) as f:
        text = f.read()
    text = re.sub(r"(?m)^max_steps = \d+", "max_steps = 30", text)
    text = re.sub(r"(?m)^n_trials = \d+", "n_trials = 2", text)
    with tempfile.TemporaryDirectory() as tmp:
        exp = os.path.join(tmp, "demo-sweep.toml")
        with open(exp, "w") as f:
            f.write(text)
        db = os.path.join(tmp, "runs.db")
        shots = os.path.join(tmp, "shots")
        env = dict(os.environ, SHARDSCOPE_BIN=bin_dir, SHARDSCOPE_DEMO=exp, SHARDSCOPE_DEMO_DB=db,
                   SHARDSCOPE_DEMO_SHOTS=shots, SHARDSCOPE_DEMO_HEADLESS="1")
        demo = os.path.join(source, "scripts", "demo.sh")
        first = subprocess.run([demo], env=env, capture_output=True, text=True, timeout=600)
        print(first.stdout, first.stderr, sep="\n")
        assert first.returncode == 0, "demo.sh failed"
        assert "study demo-sweep finished: 2 complete" in first.stdout, first.stdout
        assert re.search(r"best trial \d: [0-9.]+", first.stdout), first.stdout
        assert os.path.exists(os.path.join(tmp, "demo-data", "train.jsonl")), "no demo data"
        index = json.load(open(os.path.join(shots, "index.json")))
        names = {p["name"] for p in index["panels"]}
        assert PANELS <= names, names
        for p in index["panels"]:
            size = os.path.getsize(os.path.join(shots, p["file"]))
            assert size > 10000, (p, size)  # a rendered panel, not an empty image
        assert index["trials"] == 2, index
        assert index["db"] == db, index

        second = subprocess.run([demo], env=env, capture_output=True, text=True, timeout=600)
        print(second.stdout, second.stderr, sep="\n")
        assert second.returncode == 0, "demo.sh failed the second time"
        assert "continuing study demo-sweep" in second.stdout, second.stdout
        with sqlite3.connect(db) as con:
            (runs,) = con.execute("SELECT count(*) FROM runs").fetchone()
            (studies,) = con.execute("SELECT count(*) FROM studies").fetchone()
            losses = con.execute("SELECT count(*) FROM metrics JOIN metric_keys k ON k.id = key_id "
                                 "WHERE k.name = 'loss'").fetchone()[0]
        assert (runs, studies) == (2, 1), (runs, studies)
        assert losses >= 2 * 30, losses  # rank 0 logged every step of both trials
    print("demo: ok")


if __name__ == "__main__":
    main()
