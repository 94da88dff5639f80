#!/usr/bin/env python3
"""scripts/completion.py on the built programs: the generated script, sourced in bash, completes
verbs, sub-verbs, options (with the global ones after a verb), an option's choices and files.

  check_completion.py COMPLETION_PY SHARDSCOPE_CLI [SHARDTRAIN]
"""
import os
import subprocess
import sys
import tempfile


def complete(script, func, words):
    """COMPREPLY for the command line `words` (the last one is the word being completed)."""
    line = " ".join(f"'{w}'" for w in words)
    bash = (f"source '{script}'; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; {func}; "
            'printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["bash", "-c", bash], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr, (words, r.stderr)
    return sorted(w for w in r.stdout.splitlines() if w)


def generate(completion_py, program, tmp):
    name = os.path.basename(program)
    out = subprocess.run([sys.executable, completion_py, program], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(out)
    return path


def main():
    completion_py, cli = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        open("exp.toml", "w").close()
        script = generate(completion_py, cli, tmp)
        f = "_shardscope_cli"
        cases = {
            ("shardscope-cli", "exp"): ["export", "export-checkpoint", "export-run", "export-study"],
            ("shardscope-cli", "study", "c"): ["create"],
            ("shardscope-cli", "export-study", "quad", "--to", ""): ["optuna", "tensorboard"],
            ("shardscope-cli", "export", "r", "--format", "j"): ["json"],
            ("shardscope-cli", "study", "create", "--m"): ["--max-retries"],
            # --db is global, accepted after a verb, and takes a file
            ("shardscope-cli", "sweep", "--d"): ["--db"],
            ("shardscope-cli", "--db", "e"): ["exp.toml"],
            ("shardscope-cli", "--db", "x.db", "st"): ["stop", "study"],
            ("shardscope-cli", "run", "ex"): ["exp.toml"],
        }
        for words, expected in cases.items():
            got = complete(script, f, list(words))
            assert got == expected, (words, got, expected)
        if len(sys.argv) > 3:
            script = generate(completion_py, os.path.abspath(sys.argv[3]), tmp)
            got = complete(script, "_shardtrain", ["shardtrain", ""])
            for verb in ("train", "estimate", "export", "selftest"):
                assert verb in got, (verb, got)
            got = complete(script, "_shardtrain", ["shardtrain", "train", "--res"])
            assert got == ["--resume"], got
    print("completion: every case completed as expected")


if __name__ == "__main__":
    main()
