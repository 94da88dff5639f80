#!/usr/bin/env python3
"""bench/gpu/gpu_check.py's verify on hand-written reports: a check the time budget cut is not run
and never counts as passed; a report with no passed check fails; a benchmark skipped for --quick
does not fail a run whose other checks passed.

Usage: check_gpu_verify.py SOURCE_DIR WORK_DIR
"""
import contextlib
import io
import json
import os
import sys

src, work = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "bench", "gpu"))
import gpu_check  # noqa: E402

os.makedirs(work, exist_ok=True)


def verdict(checks, complete=True):
    path = os.path.join(work, "report.json")
    summary = {s: sum(1 for c in checks if c["status"] == s) for s in ("pass", "fail", "skip")}
    with open(path, "w") as f:
        json.dump({"complete": complete, "checks": checks, "summary": summary}, f)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = gpu_check.verify(path)
    return rc, out.getvalue()


def check(name, status, reason=""):
    return {"name": name, "status": status, "reason": reason}


cut = f"{gpu_check.TIME_SKIP}: 0 s left of --budget-s 230, this needs ~60 s"
cases = [
    ("every check cut for time", [check("selftest", "skip", cut), check("train", "skip", cut)], 1,
     "NOT RUN selftest"),
    ("one check cut for time", [check("selftest", "pass"), check("train", "skip", cut)], 1,
     "NOT RUN train"),
    ("benchmark skipped for --quick", [check("selftest", "pass"), check("benchmark", "skip", "--quick")],
     0, "1 passed"),
    ("nothing passed", [check("benchmark", "skip", "--quick")], 1, "no check passed"),
    ("a failure", [check("selftest", "pass"), check("train", "fail", "loss differs")], 1,
     "FAILED train"),
]
failures = 0
for name, checks, want, says in cases:
    rc, text = verdict(checks)
    if rc != want or says not in text:
        failures += 1
        print(f"FAILED: {name}: verify returned {rc} (want {want}), said:\n{text}")
rc, text = verdict([check("selftest", "pass")], complete=False)
if rc != 1 or "incomplete" not in text:
    failures += 1
    print(f"FAILED: an incomplete report: verify returned {rc}, said:\n{text}")
if failures:
    sys.exit(1)
print(f"ok: gpu_check.py verify on {len(cases) + 1} reports")
