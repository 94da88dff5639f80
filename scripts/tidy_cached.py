#!/usr/bin/env python3
"""Runs clang-tidy over translation units in parallel, skipping a unit whose inputs have not changed
since it last passed.

A unit's key hashes: clang-tidy's version, .clang-tidy, the unit's compile command, the contents of
the unit and of every project header it includes (the compiler's -MM list), and the modification
times of its system include directories (a new LibTorch or Qt invalidates). A passing unit stores
its key in the cache directory (default ${XDG_CACHE_HOME:-~/.cache}/shardscope/tidy, outside the
clone, so a machine pays once per change). A failing unit is never cached.

Usage: tidy_cached.py BUILD_DIR UNIT.cpp... [--jobs N] [--fix] [--cache DIR]
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile


def command_of(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def dependency_command(args):
    """The compile command turned into a dependency listing (-MM: project headers only)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    return out + ["-MM", "-E", "-o", os.devnull]


def system_dirs_stamp(args):
    stamps = []
    for i, a in enumerate(args):
        d = args[i + 1] if a == "-isystem" and i + 1 < len(args) else None
        if d and os.path.isdir(d):
            stamps.append(f"{d}:{os.stat(d).st_mtime_ns}")
    return "\n".join(stamps)


def unit_key(entry, base_key):
    args = command_of(entry)
    with tempfile.NamedTemporaryFile("r", suffix=".d") as dep:
        cmd = dependency_command(args) + ["-MF", dep.name]
        r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
        if r.returncode != 0:
            return None  # cannot list the inputs: always run clang-tidy
        text = dep.read().replace("\\\n", " ")
    files = sorted(set(text.split(":", 1)[1].split())) if ":" in text else []
    h = hashlib.sha256(base_key.encode())
    h.update(" ".join(args).encode())
    h.update(system_dirs_stamp(args).encode())
    for f in files:
        path = os.path.join(entry["directory"], f)
        h.update(path.encode())
        with open(path, "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("units", nargs="+")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--fix", action="store_true")
    default_cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                 os.path.expanduser("~/.cache"), "shardscope", "tidy")
    ap.add_argument("--cache", default=default_cache)
    opt = ap.parse_args()

    with open(os.path.join(opt.build_dir, "compile_commands.json")) as f:
        db = {os.path.realpath(e["file"]): e for e in json.load(f)}
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, ".clang-tidy")) as f:
        base_key = version + f.read()
    os.makedirs(opt.cache, exist_ok=True)

    def run(unit):
        entry = db.get(os.path.realpath(unit))
        if entry is None:
            return unit, False, f"{unit}: not in {opt.build_dir}/compile_commands.json\n", False
        key = None if opt.fix else unit_key(entry, base_key)
        stamp = os.path.join(opt.cache, key) if key else None
        if stamp and os.path.exists(stamp):
            return unit, True, "", True
        cmd = ["clang-tidy", "-p", opt.build_dir, "--quiet",
               "--extra-arg=-Wno-unknown-warning-option", unit] + (["--fix"] if opt.fix else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        ok = r.returncode == 0
        if ok and stamp:
            open(stamp, "w").close()
        noise = [ln for ln in r.stderr.splitlines() if not ln.endswith("warnings generated.")]
        return unit, ok, r.stdout + ("\n".join(noise) + "\n" if noise and not ok else ""), False

    failed, cached = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opt.jobs)) as pool:
        for unit, ok, output, hit in pool.map(run, opt.units):
            cached += hit
            if output.strip():
                sys.stdout.write(output)
            if not ok:
                failed.append(unit)
    print(f"tidy: {len(opt.units)} units, {cached} unchanged since they last passed (cache "
          f"{opt.cache}), {len(failed)} failed")
    for unit in failed:
        print(f"tidy: FAILED {unit}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
