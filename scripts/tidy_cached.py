#!/usr/bin/env python3
"""Runs clang-tidy over translation units in parallel, skipping a unit whose inputs have not changed
since it last passed, and tidying units that share compile flags together as one "group" unit.

Cache: a unit's key hashes clang-tidy's version, .clang-tidy (and the unit's own folder's, when it
has one), the unit's compile command, and the path and contents of the unit and of every header it
includes, the system's (Qt, LibTorch, libpq) included (the compiler's -M list): a Debian point
release that changes no header the unit reads changes no key, and one that does re-tidies exactly
the units that read it. clang-tidy's version enters without the "Host CPU" line of its --version,
which names the machine's processor (the key must hold on another machine). Paths inside the clone
(and in its venv, also where .venv links into the venv cache) enter the key relative to it, and the
files enter in the order of those names, so a clone in another folder (CI's /check, before /usr
where this machine's /work sorts after it) finds what this machine passed. The key of the format
before (the files in the order of their real paths) is still read: a unit whose old key passed on
this machine is taken as passed and its new key cached, so the change of format re-tidies nothing
here. A passing
unit stores its key in the cache directory (--cache, else $SHARDSCOPE_TIDY_CACHE, else
${XDG_CACHE_HOME:-~/.cache}/shardscope/tidy: outside the clone, so a machine pays once per change).
A failing unit is never cached.

Groups: parsing LibTorch, Qt or toml++ headers and running the AST matchers over them costs far
more than a unit's own code, so the units still to tidy that have the same compile command and the
same .clang-tidy are concatenated, up to --group-size of them, into one generated source (each
unit's lines verbatim, its quoted includes that resolve next to it made absolute), which
clang-tidy checks as one main file: the analyzer and every check see each unit's code as main-file
code, and .clang-tidy's HeaderFilterRegex keeps its meaning. Diagnostics are reported at the
original file:line. A clean group passes (and caches) all its units. A unit that defines main()
is never grouped. A group that does not compile as one unit (the same static helper in two units, a
leaking `using namespace` or macro) is split: the units its errors are in are set aside as a group
of their own and the rest run again as a group (halves when the errors name no unit or every unit),
down to single units, so correctness never depends on grouping and a conflict costs one more run,
not one run per unit. A group with findings fails the
units the findings are in (a finding in a header fails the group's units that include it) and
caches none of its units. --group-size 1 (or --fix) is the plain per-unit mode, the reference.
What a group can see differently: a function that another unit of the group calls is analyzed by
clang-analyzer inlined at those calls and not again on its own (the analyzer's do-not-reanalyze
heuristic, which a single unit applies to its own helpers too); a namespace-scope using-declaration
counts as used when a later unit of the group uses the name (misc-unused-using-decls); two units'
declarations of one function meet (readability-inconsistent-declaration-parameter-name).

Record: the keys of passing units can be written to a file in the repository (--write-record), and
a run reads them (--record) beside its cache. The keys name no machine (paths inside the clone are
relative; system headers enter by their contents), so a fresh machine re-tidies only the
units whose inputs changed since the record was written: the everyday path lints what a change
touched, and a change of clang-tidy, .clang-tidy, the flags or a package re-tidies all it affects.

Usage: tidy_cached.py BUILD_DIR UNIT.cpp... [--jobs N] [--fix] [--cache DIR] [--group-size N]
                      [--record FILE] [--write-record FILE]
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

DEFAULT_GROUP_SIZE = 8
TIDY_FLAGS = ["--quiet", "--extra-arg=-Wno-unknown-warning-option"]
DIAGNOSTIC = re.compile(r"^(.+?):(\d+):(\d+): (warning|error): .*\[([^\]]+)\]$", re.M)
QUOTED_INCLUDE = re.compile(r'^(\s*#\s*include\s*)"([^"]+)"')
DEFINES_MAIN = re.compile(r"^\s*int\s+main\s*\(", re.M)


def command_of(entry):
    if "arguments" in entry:
        return list(entry["arguments"])
    return shlex.split(entry["command"])


def source_index(entry, args):
    """Where the unit's own file is in its compile command (None when it is not there)."""
    want = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    for i, a in enumerate(args):
        if i > 0 and args[i - 1] != "-o" and \
           os.path.realpath(os.path.join(entry["directory"], a)) == want:
            return i
    return None


def dependency_command(args):
    """The compile command turned into a dependency listing (-M: every header, the system's too)."""
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
    return out + ["-M", "-E", "-o", os.devnull]


ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


# The clone's venv (LibTorch's headers) may be a link into scripts/setup.sh's venv cache: its files'
# real paths then lie outside the clone, and stand for @ROOT@/.venv.
VENV = os.path.join(ROOT, ".venv")
VENV_REAL = os.path.realpath(VENV)


def portable(text, venv=True):
    """`text` with the clone's own folder written as @ROOT@ (and its venv, wherever the link
    .venv points, as @ROOT@/.venv): a key must not depend on where the clone lies, or CI's fresh
    clone in another folder would find nothing its machine had passed. venv=False: the format
    before, which left a linked venv's real paths as they were."""
    if venv and VENV_REAL != VENV:
        text = text.replace(VENV_REAL + os.sep, "@ROOT@/.venv/")
    return text.replace(ROOT + os.sep, "@ROOT@/").replace(ROOT, "@ROOT@")


def portable_version(text):
    """clang-tidy's --version without its "Host CPU" line, which names this machine's processor
    (icelake-client on one machine, "(unknown)" on another with the same clang-tidy)."""
    return "".join(ln for ln in text.splitlines(True) if not ln.strip().startswith("Host CPU"))


_DIGESTS = {}


def digest(path):
    """sha256 of a file's bytes, read once per run (a system header is shared by many units)."""
    if path not in _DIGESTS:
        with open(path, "rb") as fh:
            _DIGESTS[path] = hashlib.sha256(fh.read()).digest()
    return _DIGESTS[path]


def system_dirs(args):
    """The unit's -isystem folders, as real paths."""
    return [os.path.realpath(args[i + 1]) for i, a in enumerate(args)
            if a == "-isystem" and i + 1 < len(args)]


def unit_key(entry, base_key):
    """(cache key, the unit's project files as real paths, the key in the format before); the keys
    are None when the compiler cannot list the unit's inputs (then the unit always runs). Paths
    inside the clone enter the key relative to it, so the same sources key alike in any folder."""
    args = command_of(entry)
    with tempfile.NamedTemporaryFile("r", suffix=".d") as dep:
        cmd = dependency_command(args) + ["-MF", dep.name]
        r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
        if r.returncode != 0:
            return None, set(), None
        text = dep.read().replace("\\\n", " ")
    files = sorted({os.path.realpath(os.path.join(entry["directory"], f))
                    for f in (text.split(":", 1)[1].split() if ":" in text else [])})
    # The clone's own files, not its -isystem folders': what a failing unit's findings can name.
    isystem = system_dirs(args)
    project = [f for f in files if f.startswith(ROOT + os.sep) and
               not any(f.startswith(d + os.sep) for d in isystem)]
    config = nearest_config(os.path.join(entry["directory"], entry["file"]))
    config_text = b""
    if config:  # a folder's own .clang-tidy (search/'s naming rules) changes what passes
        with open(config, "rb") as fh:
            config_text = fh.read()
    command = portable(" ".join(args)).encode()
    # The files in the order of their portable names: ordered by real path, a clone in /check or
    # /tmp (before /usr) would hash Qt's headers before its own and one in /work after them.
    new = hashlib.sha256(b"v3\n" + base_key.encode())
    new.update(config_text)
    new.update(command)
    for name, path in sorted((portable(path), path) for path in files):
        new.update(name.encode())
        new.update(digest(path))
    # The format before (v2): the same inputs ordered by real path, a linked venv's unmapped.
    old = hashlib.sha256(b"v2\n" + base_key.encode())
    old.update(config_text)
    old.update(command)
    for path in files:
        old.update(portable(path, venv=False).encode())
        old.update(digest(path))
    return new.hexdigest(), set(project), old.hexdigest()


def nearest_config(path):
    """The .clang-tidy that applies to a source file (None when there is none)."""
    d = os.path.dirname(os.path.realpath(path))
    while True:
        candidate = os.path.join(d, ".clang-tidy")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def defines_main(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return bool(DEFINES_MAIN.search(f.read()))


def group_signature(entry):
    """Units with equal signatures compile with identical flags and the same .clang-tidy (None:
    the unit is tidied alone)."""
    if defines_main(os.path.join(entry["directory"], entry["file"])):
        return None
    args = command_of(entry)
    src = source_index(entry, args)
    if src is None:
        return None
    config = nearest_config(entry["file"])
    if config is None:
        return None
    flags, skip = [], False
    for i, a in enumerate(args):
        if skip or i == src or a == "-c":
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        flags.append(a)
    return entry["directory"], tuple(flags), config


def plan_tasks(units, db, group_size):
    """Splits units into tasks: ("group", [units]) of at most group_size units with one signature
    (sizes within a class differ by at most one), and ("unit", [unit]) for the rest."""
    classes, singles = {}, []
    for unit in sorted(units):
        sig = group_signature(db[os.path.realpath(unit)]) if group_size > 1 else None
        if sig is None:
            singles.append(("unit", [unit]))
        else:
            classes.setdefault(sig, []).append(unit)
    groups = []
    for members in classes.values():
        count = -(-len(members) // group_size)
        for i in range(count):
            chunk = members[i::count]
            groups.append(("group", chunk) if len(chunk) > 1 else ("unit", chunk))
    # Biggest first, so the long runs start early and the short ones fill the gaps.
    groups.sort(key=lambda t: -len(t[1]))
    return groups + singles


def unity_source(units):
    """The group's generated source and its line table [(first line, unit, line count)]."""
    lines, table = [], []
    for unit in units:
        with open(unit, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
        src = text.split("\n")
        if src and src[-1] == "":
            src.pop()
        table.append((len(lines) + 1, os.path.abspath(unit), len(src)))
        here = os.path.dirname(os.path.abspath(unit))
        for line in src:
            m = QUOTED_INCLUDE.match(line)
            # A quoted include is looked up next to its file first: keep that meaning.
            if m and os.path.isfile(os.path.join(here, m.group(2))):
                line = f'{m.group(1)}"{os.path.join(here, m.group(2))}"' + line[m.end():]
            lines.append(line)
    return "\n".join(lines) + "\n", table


def map_lines(text, unity, table):
    """Rewrites unity.cpp:LINE:COL in clang-tidy's output to the original file:line:col."""
    def original(m):
        line = int(m.group(1))
        for first, unit, count in table:
            if first <= line < first + count:
                return f"{unit}:{line - first + 1}:"
        return m.group(0)
    text = re.sub(re.escape(unity) + r":(\d+):", original, text)
    return text.replace(unity, "<group " + " ".join(u for _, u, _ in table) + ">")


def run_tidy(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    noise = [ln for ln in r.stderr.splitlines() if not ln.endswith("warnings generated.")]
    return r.returncode, r.stdout, "\n".join(noise) + "\n" if noise else ""


class Tidy:
    """Runs the tasks of one invocation and keeps the per-unit verdicts."""

    def __init__(self, opt, db, keys):
        self.opt, self.db, self.keys = opt, db, keys
        self.failed = []
        self.tmp = tempfile.mkdtemp(prefix="shardscope-tidy-")

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stamp(self, unit):
        key = self.keys.get(unit, (None, set()))[0]
        if key and not self.opt.fix:
            open(os.path.join(self.opt.cache, key), "w").close()

    def run(self, task):
        """Runs one task in a worker thread; returns (task, clang-tidy's exit code, its output)."""
        kind, units = task
        if kind == "unit":
            cmd = ["clang-tidy", "-p", self.opt.build_dir] + TIDY_FLAGS + units + \
                (["--fix"] if self.opt.fix else [])
            rc, out, noise = run_tidy(cmd)
            return task, rc, out + (noise if rc != 0 else "")
        return self.run_group(task)

    def run_group(self, task):
        units = task[1]
        entry = self.db[os.path.realpath(units[0])]
        folder = tempfile.mkdtemp(dir=self.tmp)
        unity = os.path.join(folder, "group.cpp")
        text, table = unity_source(units)
        with open(unity, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        args = command_of(entry)
        args[source_index(entry, args)] = unity
        with open(os.path.join(folder, "compile_commands.json"), "w") as f:
            json.dump([{"directory": entry["directory"], "file": unity, "arguments": args}], f)
        cmd = ["clang-tidy", "-p", folder, "--config-file=" + nearest_config(units[0])] + \
            TIDY_FLAGS + [unity]
        rc, out, noise = run_tidy(cmd)
        return task, rc, map_lines(out + (noise if rc != 0 else ""), unity, table)

    def settle(self, task, rc, output):
        """Records a finished task's verdict; returns the tasks to run next (a fallback)."""
        kind, units = task
        if kind == "unit" or rc == 0:
            if output.strip():
                sys.stdout.write(output)
            for unit in units:
                if rc == 0:
                    self.stamp(unit)
                else:
                    self.failed.append(unit)
            return []
        crashed = rc < 0 or not DIAGNOSTIC.search(output.replace("\r", ""))
        if crashed or "[clang-diagnostic-error]" in output:
            errors = [ln for ln in output.splitlines() if "[clang-diagnostic-error]" in ln]
            why = (errors or [ln for ln in output.splitlines() if ln.strip()] or ["none"])[0]
            parts = self.split(units, errors)
            print(f"tidy: {len(units)} units do not compile (or clang-tidy failed) as one group "
                  f"({' '.join(units)}), splitting it into {' | '.join(' '.join(p) for p in parts)}\n"
                  f"  first error: {why}")
            return [("group", p) if len(p) > 1 else ("unit", p) for p in parts]
        sys.stdout.write(output)
        culprits = self.attribute(units, output)
        self.failed.extend(culprits)
        print(f"tidy: group {' '.join(units)}: findings in {' '.join(culprits)}; none of the "
              f"group is cached (--group-size 1 tidies unit by unit)")
        return []

    @staticmethod
    def split(units, errors):
        """A group that does not compile, in two smaller groups: the units its errors are in, and
        the rest; halves when the errors name none of its units or all of them."""
        real = {os.path.realpath(u): u for u in units}
        named = set()
        for line in errors:
            m = DIAGNOSTIC.match(line)
            if m and os.path.realpath(m.group(1)) in real:
                named.add(real[os.path.realpath(m.group(1))])
        if not named or len(named) == len(units):
            half = len(units) // 2
            return [units[:half], units[half:]]
        return [[u for u in units if u not in named], [u for u in units if u in named]]

    def attribute(self, units, output):
        """The units a group's findings belong to: the unit a finding is in, or for a finding in
        a header every unit of the group that includes that header."""
        culprits = set()
        real = {os.path.realpath(u): u for u in units}
        for line in output.splitlines():
            m = DIAGNOSTIC.match(line)
            if not m:
                continue
            path = os.path.realpath(m.group(1))
            if path in real:
                culprits.add(real[path])
                continue
            users = [u for u in units if path in self.keys.get(u, (None, set()))[1]]
            culprits.update(users or units)
        return sorted(culprits)


RECORD_HEADER = ("# The clang-tidy keys of the units that passed (scripts/tidy_cached.py): a unit whose key\n"
                 "# is here is skipped, on any machine. Rewritten by scripts/lint.sh --record.\n")


def read_record(path):
    """The keys a committed record says passed (none when there is no record)."""
    if not path or not os.path.isfile(path):
        return set()
    with open(path) as f:
        return {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}


def compute_keys(opt, db, base_key, units, pool):
    """(unit -> (key, project files), unit -> the key in the format before) for units in the
    compile database and without --fix."""
    def key(unit):
        entry = db.get(os.path.realpath(unit))
        if entry is None or opt.fix:
            return unit, (None, set(), None)
        return unit, unit_key(entry, base_key)
    both = dict(pool.map(key, units))
    return ({u: (k, files) for u, (k, files, _) in both.items()},
            {u: old for u, (_, _, old) in both.items()})


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("units", nargs="+")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--fix", action="store_true")
    default_cache = os.environ.get("SHARDSCOPE_TIDY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shardscope", "tidy")
    ap.add_argument("--cache", default=default_cache)
    ap.add_argument("--record", help="a committed list of keys that passed (read only)")
    ap.add_argument("--write-record", help="after a clean run, write the passing units' keys here")
    ap.add_argument("--group-size", type=int,
                    default=int(os.environ.get("SHARDSCOPE_TIDY_GROUP_SIZE", DEFAULT_GROUP_SIZE)),
                    help="most units tidied as one generated unit; 1: unit by unit "
                         "(default $SHARDSCOPE_TIDY_GROUP_SIZE or %(default)s)")
    return ap.parse_args()


def main():
    opt = parse_args()
    with open(os.path.join(opt.build_dir, "compile_commands.json")) as f:
        db = {os.path.realpath(os.path.join(e["directory"], e["file"])): e for e in json.load(f)}
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    with open(os.path.join(ROOT, ".clang-tidy")) as f:
        config = f.read()
    base_key = portable_version(version) + config
    os.makedirs(opt.cache, exist_ok=True)

    jobs = max(1, opt.jobs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        keys, old_keys = compute_keys(opt, db, base_key, opt.units, pool)
        tidy = Tidy(opt, db, keys)
        missing = [u for u in opt.units if os.path.realpath(u) not in db]
        for unit in missing:
            print(f"tidy: {unit}: not in {opt.build_dir}/compile_commands.json (re-run cmake)")
        tidy.failed.extend(missing)
        recorded = read_record(opt.record)

        def passed_as(key):
            return key and (key in recorded or os.path.exists(os.path.join(opt.cache, key)))

        cached = []
        for u in opt.units:
            if passed_as(keys[u][0]):
                cached.append(u)
            elif keys[u][0] and passed_as(old_keys[u]):
                # It passed with these very inputs under the format before: the new key is cached
                # (and so recorded), nothing is tidied again.
                open(os.path.join(opt.cache, keys[u][0]), "w").close()
                cached.append(u)
        todo = [u for u in dict.fromkeys(opt.units) if u not in cached and u not in missing]
        tasks = plan_tasks(todo, db, 1 if opt.fix else opt.group_size)
        try:
            pending = {pool.submit(tidy.run, t) for t in tasks}
            while pending:
                done, pending = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for fut in done:
                    pending |= {pool.submit(tidy.run, t) for t in tidy.settle(*fut.result())}
        finally:
            tidy.close()

    groups = sum(1 for kind, _ in tasks if kind == "group")
    print(f"tidy: {len(opt.units)} units, {len(cached)} unchanged since they last passed (cache "
          f"{opt.cache}), {len(todo)} tidied in {len(tasks)} runs ({groups} groups), "
          f"{len(tidy.failed)} failed")
    for unit in sorted(set(tidy.failed)):
        print(f"tidy: FAILED {unit}")
    if opt.write_record and not tidy.failed:
        passed = sorted({keys[u][0] for u in opt.units if keys[u][0] and
                         os.path.exists(os.path.join(opt.cache, keys[u][0]))} |
                        {keys[u][0] for u in cached if keys[u][0]})
        with open(opt.write_record, "w") as f:
            f.write(RECORD_HEADER + "".join(k + "\n" for k in passed))
        print(f"tidy: {opt.write_record}: the keys of {len(passed)} passing units")
    return 1 if tidy.failed else 0


if __name__ == "__main__":
    sys.exit(main())
