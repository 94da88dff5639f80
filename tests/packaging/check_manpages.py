#!/usr/bin/env python3
"""The man pages the build made (build/man/NAME.1.gz, packaging/CMakeLists.txt) from the built
programs: each has its sections and the version --version prints; shardscope-cli's names every
verb its --help lists and every option of a verb; shardtrain's names its verbs; the page is the
one scripts/manpage.py makes now (so not stale), stored by gzip -n, made the same twice from one
SOURCE_DATE_EPOCH, and groff renders it without a warning.

  check_manpages.py MANPAGE_PY MAN_DIR NAME=PROGRAM...

groff (Debian's groff-base; scripts/setup.sh --tests installs it) is required: without it the
test fails.
"""
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SEE ALSO")


def fail(message):
    sys.exit(f"check_manpages: FAIL: {message}")


def run(*cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "QT_QPA_PLATFORM": "offscreen", **(env or {})})
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()}")
    return r


def help_entries(program, *path, section):
    """The first words of the entries under `section:` in `program path... --help`."""
    text = run(program, *path, "--help").stdout
    out, inside = [], False
    for line in text.splitlines():
        if line and not line.startswith(" "):
            inside = line == f"{section}:"
        elif inside and re.match(r"^  \S", line):
            out.append(line.split()[0])
    return out


def option_names(program, *path):
    """Option names of a help page but -h/--help; shardscope's hand-written help has no
    "Options:" header, so there every indented line that starts with a dash counts."""
    heads = help_entries(program, *path, section="Options")
    if not heads:
        heads = re.findall(r"^  (-\S+)", run(program, *path, "--help").stdout, re.M)
    names = []
    for head in heads:
        names += [n for n in re.split(r"[,/]", head) if n and n not in ("-h", "--help")]
    return names


def roff(s):
    return s.replace("-", "\\-")


def read_gzip(path):
    with open(path, "rb") as f:
        raw = f.read()
    # RFC 1952: byte 3 holds the flags (0x08: a file name follows), bytes 4-7 the time.
    if raw[:2] != b"\x1f\x8b":
        fail(f"{path} is not gzip data")
    if raw[3] & 0x08 or raw[4:8] != b"\0\0\0\0":
        fail(f"{path} stores a file name or time (made without gzip -n): builds would differ")
    return gzip.decompress(raw).decode("utf-8")


def check_page(manpage_py, man_dir, name, program, tmp):
    gz = os.path.join(man_dir, f"{name}.1.gz")
    if not os.path.isfile(gz):
        fail(f"{gz} is missing: the build's {name}-manpage target makes it")
    page = read_gzip(gz)

    # Not stale: what manpage.py makes now, but for the date (the build's comes from git).
    fresh = os.path.join(tmp, f"{name}.1")
    run(sys.executable, manpage_py, program, name, "--output", fresh,
        env={"SOURCE_DATE_EPOCH": "1700000000"})
    with open(fresh) as f:
        made = f.read()
    undated = re.compile(r'^(\.TH "[^"]*" 1) "[^"]*"', re.M)
    if undated.sub(r"\1", made) != undated.sub(r"\1", page):
        fail(f"{gz} differs from what scripts/manpage.py makes from {program} now (stale?)")
    again = run(sys.executable, manpage_py, program, name,
                env={"SOURCE_DATE_EPOCH": "1700000000"}).stdout
    if again != made:
        fail(f"two runs of manpage.py for {name} with one SOURCE_DATE_EPOCH differ")
    if '"2023-11-14"' not in made.splitlines()[1]:
        fail(f"the page's date ignores SOURCE_DATE_EPOCH: {made.splitlines()[1]}")

    version = run(program, "--version").stdout.split()[-1]
    th = [line for line in page.splitlines() if line.startswith(".TH ")]
    if len(th) != 1 or not th[0].startswith(f'.TH "{name.upper()}" 1 ') \
            or f'"Shardscope {version}" "User Commands"' not in th[0]:
        fail(f"{name}: .TH line {th} lacks the name, section 1 or version {version}")
    headers = re.findall(r"^\.SH (.*)$", page, re.M)
    for section in SECTIONS:
        if section not in headers:
            fail(f"{name}: no .SH {section} (has {headers})")
    if not re.search(r"^" + re.escape(roff(name)) + r" \\- \S", page, re.M):
        fail(f"{name}: the NAME line is not 'NAME \\- summary'")
    for other in {"shardscope", "shardscope-cli", "shardtrain"} - {name}:
        if f".BR {roff(other)} (1)" not in page:
            fail(f"{name}: SEE ALSO does not name {other}(1)")
    if "docs/cli.md" not in page:
        fail(f"{name}: SEE ALSO does not name docs/cli.md as the full reference")
    for line in page.splitlines():
        if line.startswith(("'", ".")) and not re.match(r"^\.(\\\"|[A-Z]{2}\b|br$)", line):
            fail(f"{name}: a text line would be read as a request: {line!r}")

    # Every top-level option and every verb; for shardscope-cli, all options of some verbs.
    for option in option_names(program):
        if f"\\fB{roff(option)}\\fR" not in page:
            fail(f"{name}: option {option} of --help is not in the page")
    verbs = help_entries(program, section="Subcommands")
    if verbs and "COMMANDS" not in headers:
        fail(f"{name}: has verbs {verbs} but no .SH COMMANDS")
    for verb in verbs:
        if f'.SS "{roff(verb)}"' not in page:
            fail(f"{name}: verb {verb} of --help has no .SS in the page")
    if name == "shardscope-cli":
        for path in (("run",), ("export-study",), ("study", "create")):
            if f'.SS "{roff(" ".join(path))}"' not in page:
                fail(f"{name}: no .SS for {' '.join(path)}")
            options = option_names(program, *path)
            if not options:
                fail(f"{name} {' '.join(path)} --help lists no options to look for")
            section = page.split(f'.SS "{roff(" ".join(path))}"', 1)[1].split(".SS ", 1)[0]
            for option in options:
                if f"\\fB{roff(option)}\\fR" not in section:
                    fail(f"{name}: option {option} of {' '.join(path)} is not in its .SS")

    # groff reads it without a warning (-ww: all of them), and the text is what a reader sees.
    r = subprocess.run(["groff", "-man", "-ww", "-Tutf8", "-P-cbou", fresh], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "LC_ALL": "C.UTF-8"})
    if r.returncode != 0 or r.stderr.strip():
        fail(f"groff warns on {name}.1: {r.stderr.strip()}")
    shown = re.sub(r"\s+", " ", r.stdout.replace("\u2010", "-").replace("\u2212", "-"))
    if f"{name} - " not in shown or version not in shown:
        fail(f"{name}: the rendered page lacks 'NAME - ' or the version:\n{shown[:800]}")
    print(f"check_manpages: {name}.1.gz: {len(headers)} sections, {len(verbs)} verbs, "
          f"version {version}, groff renders it without a warning")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    if not shutil.which("groff"):
        fail("groff is not installed (Debian: groff-base; scripts/setup.sh --tests installs it)")
    manpage_py, man_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        for pair in sys.argv[3:]:
            name, _, program = pair.partition("=")
            check_page(manpage_py, man_dir, name, os.path.abspath(program), tmp)
    print("check_manpages: OK")


if __name__ == "__main__":
    main()
