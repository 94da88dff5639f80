#!/usr/bin/env python3
"""Checks scripts/tidy_cached.py's grouped mode on a small generated project with real clang-tidy
and a real compile database: findings in a grouped unit (an AST matcher's and the static
analyzer's) are reported at the original file:line exactly as in per-unit mode; a group that does
not compile as one unit (two units with the same static helper, grouped with a third) is split
into the unit the error is in and a group of the rest, and passes; units that define main() are
never grouped; a dirty group caches none of its units; a clean re-run caches every unit and the
next run skips them all. Keys name no folder: the same sources in another folder (on the other side
of /usr, with its .venv a link elsewhere) hit the cache, and a written record alone skips them,
except a unit changed since. System headers enter the key
by their contents: changing one re-tidies only the units that include it, and a change to their
folder that no unit reads re-tidies none; clang-tidy's "Host CPU" (the machine's processor) is
not in the key. A record of keys in the format before (files in the order of their real paths)
still skips the units it covers, and their new keys are cached.

Usage: check_tidy_groups.py SOURCE_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

CONFIG = """---
Checks: '-*,performance-move-const-arg,clang-analyzer-core.NullDereference'
WarningsAsErrors: '*'
HeaderFilterRegex: '.*/inc/.*\\.h$'
...
"""
# Two classes of compile flags: X = {a, b, e, m, n} and Y = {c, d, f}; m and n define main().
SOURCES = {
    "inc/shared.h": "#pragma once\n#include <string>\nstd::string shared_name();\n",
    "src/a.cpp": '#include "inc/shared.h"\nstd::string shared_name() { return "a"; }\n',
    "src/e.cpp": '#include "local.h"\nint e_value() { return local_value(); }\n',
    "src/local.h": "#pragma once\ninline int local_value() { return 4; }\n",
    "src/c.cpp": "static int helper() { return 1; }\nint c_value() { return helper(); }\n",
    "src/d.cpp": "static int helper() { return 2; }\nint d_value() { return helper(); }\n",
    "src/f.cpp": "int f_value() { return 6; }\n",
    "src/m.cpp": "int main() { return 0; }\n",
    "src/n.cpp": "int main(int argc, char** argv) { return argc > 1 && argv[1] ? 1 : 0; }\n",
}
CLEAN_B = '#include <string>\n#include <utility>\nstd::string b_copy(std::string s) {\n' \
    '  return std::string(std::move(s));\n}\nint b_read(const int* p) { return p ? *p : 0; }\n'
DIRTY_B = '#include <string>\n#include <utility>\nstd::string b_copy(const std::string& s) {\n' \
    '  return std::string(std::move(s));\n}\nint b_read() {\n  int* p = nullptr;\n' \
    '  return *p;\n}\n'
# Where DIRTY_B's findings are: the const move (line 4) and the null dereference (line 8).
WANT = {("src/b.cpp", 4, "performance-move-const-arg"),
        ("src/b.cpp", 8, "clang-analyzer-core.NullDereference")}


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make_project(root):
    write(root, ".clang-tidy", CONFIG)
    for rel, text in SOURCES.items():
        write(root, rel, text)
    write(root, "src/b.cpp", DIRTY_B)
    build = os.path.join(root, "build")
    os.makedirs(build)
    db = []
    for name, flag in [("a", "X"), ("b", "X"), ("e", "X"), ("m", "X"), ("n", "X"),
                       ("c", "Y"), ("d", "Y"), ("f", "Y")]:
        src = os.path.join(root, "src", name + ".cpp")
        db.append({"directory": build, "file": src,
                   "command": f"c++ -D{flag}=1 -I{root} -std=c++17 -o {name}.o -c {src}"})
    with open(os.path.join(build, "compile_commands.json"), "w") as f:
        json.dump(db, f)
    return build


def tidy(source_dir, root, build, cache, group_size, extra=()):
    units = [os.path.join("src", n + ".cpp") for n in "abcdefmn"]
    cmd = [sys.executable, os.path.join(source_dir, "scripts", "tidy_cached.py"), build] + \
        units + ["--jobs", "2", "--cache", cache, "--group-size", str(group_size)] + list(extra)
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def findings(output, root):
    found = set()
    for m in re.finditer(r"^(\S+?):(\d+):\d+: (?:warning|error): .*\[([\w.-]+)", output, re.M):
        found.add((os.path.relpath(m.group(1), root), int(m.group(2)), m.group(3)))
    return found


def expect(cond, what, output):
    if not cond:
        print(f"FAIL: {what}\n--- output ---\n{output}")
        sys.exit(1)
    print(f"ok: {what}")


def main():
    source_dir = sys.argv[1]
    with tempfile.TemporaryDirectory() as root:
        build = make_project(root)
        cache = os.path.join(root, "cache")
        rc, out = tidy(source_dir, root, build, cache, 1)
        expect(rc == 1 and findings(out, root) == WANT, "per-unit mode finds both findings", out)
        os.makedirs(os.path.join(root, "cache2"))
        cache = os.path.join(root, "cache2")
        rc, out = tidy(source_dir, root, build, cache, 8)
        expect(rc == 1 and findings(out, root) == WANT,
               "grouped mode reports the same findings at the original file:line", out)
        expect("group.cpp" not in out, "no generated file name leaks into the report", out)
        expect("FAILED " in out and "src/b.cpp" in out.split("FAILED ", 1)[1]
               and out.count("tidy: FAILED") == 1, "only b.cpp fails", out)
        expect("do not compile" in out and "splitting it into src/c.cpp src/f.cpp | src/d.cpp" in out,
               "the c+d+f group (same static helper in c and d) splits into c+f and d", out)
        expect("src/m.cpp src/n.cpp" not in out and "in 4 runs (2 groups)" in out,
               "m and n (each defines main) are not grouped", out)
        fallbacks = [ln for ln in out.splitlines() if "do not compile" in ln]
        expect(len(fallbacks) == 1 and "src/a.cpp" not in fallbacks[0],
               "the a+b+e group (a quoted include next to e.cpp) compiles as one unit", out)
        expect(len(os.listdir(cache)) == 5, "only c, d, f, m and n are cached", out)
        write(root, "src/b.cpp", CLEAN_B)
        rc, out = tidy(source_dir, root, build, cache, 8)
        expect(rc == 0 and "5 unchanged" in out and "(1 groups)" in out,
               "the fixed a+b+e group is clean, c, d, f, m and n are skipped", out)
        expect(len(os.listdir(cache)) == 8, "a clean group caches each of its units", out)
        rc, out = tidy(source_dir, root, build, cache, 8)
        expect(rc == 0 and "8 unchanged" in out and "0 tidied" in out,
               "the next run skips every unit", out)
    relocated(source_dir)
    system_headers(source_dir)
    return 0


def clean_project(root, source_dir):
    """The project with a clean b.cpp and its own copy of tidy_cached.py (as a clone has it), so
    the script's clone folder is `root`."""
    build = make_project(root)
    write(root, "src/b.cpp", CLEAN_B)
    with open(os.path.join(source_dir, "scripts", "tidy_cached.py")) as f:
        write(root, "scripts/tidy_cached.py", f.read())
    return build


def with_venv(root, build, venv_dir):
    """f.cpp includes <venvdep.h> from `venv_dir` (the folder the clone's .venv is, or links to)
    through -isystem ROOT/.venv/include, as the trainer's units include LibTorch's headers."""
    write(venv_dir, "include/venvdep.h", "#pragma once\ninline int venvdep() { return 3; }\n")
    if os.path.realpath(venv_dir) != os.path.join(root, ".venv"):
        os.symlink(venv_dir, os.path.join(root, ".venv"))
    write(root, "src/f.cpp", "#include <venvdep.h>\nint f_value() { return venvdep(); }\n")
    db_path = os.path.join(build, "compile_commands.json")
    with open(db_path) as f:
        db = json.load(f)
    for entry in db:
        entry["command"] = entry["command"].replace(
            " -std=", f" -isystem {os.path.join(root, '.venv', 'include')} -std=")
    with open(db_path, "w") as f:
        json.dump(db, f)


def relocated(source_dir):
    """Keys name no folder: the same project in another folder (CI's fresh clone) finds what the
    first one passed, in the shared cache and in a record written by the first. The two clones lie
    on either side of /usr (where <string> is): /tmp and /var/tmp, as CI's /check and this
    machine's /work do; the second's .venv links into a venv cache elsewhere, as scripts/setup.sh
    makes it."""
    with tempfile.TemporaryDirectory() as top, \
            tempfile.TemporaryDirectory(dir="/var/tmp") as after:
        one, two = os.path.join(top, "one"), os.path.join(after, "elsewhere", "two")
        expect(one < "/usr" < two, f"the clones lie on either side of /usr: {one}, {two}", "")
        cache, record = os.path.join(top, "cache"), os.path.join(top, "tidy-passed.txt")
        build = clean_project(one, source_dir)
        with_venv(one, build, os.path.join(one, ".venv"))
        rc, out = tidy(one, one, build, cache, 8, ["--write-record", record])
        expect(rc == 0 and "0 unchanged" in out and "8 passing units" in out,
               "a clean run writes the record of its 8 units", out)
        build = clean_project(two, source_dir)
        with_venv(two, build, os.path.join(top, "venv-cache", "3f2a"))
        rc, out = tidy(two, two, build, cache, 8)
        expect(rc == 0 and "8 unchanged" in out,
               "the same sources in another folder hit the first folder's cache", out)
        rc, out = tidy(two, two, build, os.path.join(top, "empty"), 8, ["--record", record])
        expect(rc == 0 and "8 unchanged" in out,
               "with an empty cache, the committed record alone skips them", out)
        write(two, "src/c.cpp",
              "static int helper() { return 7; }\nint c_value() { return helper(); }\n")
        rc, out = tidy(two, two, build, os.path.join(top, "empty2"), 8, ["--record", record])
        expect(rc == 0 and "7 unchanged" in out and "1 tidied" in out,
               "a changed unit is tidied again: the record does not cover it", out)


def system_headers(source_dir):
    """System headers (an -isystem folder outside the clone) key by content, and the format
    before still counts."""
    with tempfile.TemporaryDirectory() as top:
        root, sysdir = os.path.join(top, "clone"), os.path.join(top, "sys", "include")
        cache, record = os.path.join(top, "cache"), os.path.join(top, "tidy-passed.txt")
        build = clean_project(root, source_dir)
        write(sysdir, "sysdep.h", "#pragma once\ninline int sysdep() { return 1; }\n")
        write(root, "src/f.cpp", "#include <sysdep.h>\nint f_value() { return sysdep(); }\n")
        db_path = os.path.join(build, "compile_commands.json")
        with open(db_path) as f:
            db = json.load(f)
        for entry in db:
            entry["command"] = entry["command"].replace(" -std=", f" -isystem {sysdir} -std=")
        with open(db_path, "w") as f:
            json.dump(db, f)
        rc, out = tidy(root, root, build, cache, 8, ["--write-record", record])
        expect(rc == 0 and "8 passing units" in out, "a clean run with a system header", out)
        write(sysdir, "unrelated.h", "#pragma once\n")
        rc, out = tidy(root, root, build, os.path.join(top, "e1"), 8, ["--record", record])
        expect(rc == 0 and "8 unchanged" in out,
               "a new file in a system folder that no unit includes re-tidies nothing", out)
        write(sysdir, "sysdep.h", "#pragma once\n// 2\ninline int sysdep() { return 2; }\n")
        rc, out = tidy(root, root, build, os.path.join(top, "e2"), 8, ["--record", record])
        expect(rc == 0 and "7 unchanged" in out and "1 tidied" in out,
               "a changed system header re-tidies only the unit that includes it", out)
        # The format before: the keys tidy_cached.py computes for it, alone in a record.
        sys.path.insert(0, os.path.join(root, "scripts"))
        import tidy_cached  # noqa: E402 (the clone's copy: its ROOT is `root`)
        version = subprocess.run(["clang-tidy", "--version"], capture_output=True,
                                 text=True).stdout
        with open(os.path.join(root, ".clang-tidy")) as f:
            config = f.read()
        one = "Debian LLVM version 14.0.6\n  Optimized build.\n  Host CPU: icelake-client\n"
        other = one.replace("icelake-client", "(unknown)")
        expect(tidy_cached.portable_version(one) == tidy_cached.portable_version(other) ==
               "Debian LLVM version 14.0.6\n  Optimized build.\n" and
               "Host CPU" not in tidy_cached.portable_version(version),
               "the key's clang-tidy version names no processor", version)
        old_record = os.path.join(top, "old-format.txt")
        new_keys = set()
        with open(old_record, "w") as f:
            for entry in db:
                new, _, old = tidy_cached.unit_key(
                    entry, tidy_cached.portable_version(version) + config)
                new_keys.add(new)
                f.write(old + "\n")
        migrated = os.path.join(top, "e3")
        rc, out = tidy(root, root, build, migrated, 8, ["--record", old_record])
        expect(rc == 0 and "8 unchanged" in out and "0 tidied" in out,
               "a record in the format before still skips every unit it covers", out)
        expect(set(os.listdir(migrated)) == new_keys,
               "and the units' keys in the new format are cached", out)


if __name__ == "__main__":
    sys.exit(main())
