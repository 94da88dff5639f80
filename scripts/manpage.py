#!/usr/bin/env python3
"""A roff man page for one of Shardscope's programs, generated from its --help and --version.

  scripts/manpage.py PROGRAM NAME [--output FILE] [--section N]
      writes the man page of PROGRAM (installed as NAME) to FILE, or to stdout

Reads `PROGRAM --help`, then `PROGRAM VERB --help` for every verb (sub-verbs too) a help page
lists under "Subcommands:" (CLI11's layout: shardscope-cli and shardtrain), and `PROGRAM
--version`. A help page without sections (shardscope's hand-written usage) gives its usage
lines, description and options all the same. The page has NAME, SYNOPSIS, DESCRIPTION, OPTIONS,
COMMANDS (one subsection per verb with its arguments and options) and SEE ALSO.

The output is deterministic: the date is SOURCE_DATE_EPOCH's when it is set, else the date of
the source tree's last git commit, else a fixed one; never the day of the build.
"""
import datetime
import os
import re
import subprocess
import sys

PROGRAMS = ("shardscope", "shardscope-cli", "shardtrain")
FALLBACK_EPOCH = 1735689600  # 2025-01-01, when neither SOURCE_DATE_EPOCH nor git answers
SECTION = re.compile(r"^([A-Z][A-Za-z ]*):$")  # "Options:", "Subcommands:", "Positionals:"
# An entry: its head (names and value) two spaces in, then two spaces or more and the
# description; a head too long for the column has its description on the next line(s).
ENTRY = re.compile(r"^  (\S(?:.*?\S)?)(?: {2,}(\S.*))?$")
CONTINUATION = re.compile(r"^ {4,}(\S.*)$")


def fail(message):
    sys.exit(f"manpage.py: {message}")


def run(program, *args):
    try:
        r = subprocess.run([program, *args], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    except OSError as e:
        fail(f"cannot run {program}: {e}")
    if r.returncode != 0 or not r.stdout.strip():
        fail(f"{program} {' '.join(args)} exited with {r.returncode} and printed "
             f"{len(r.stdout)} characters: {r.stderr.strip()}")
    return r.stdout


def parse_help(text):
    """{'about': [...], 'usage': [...], 'options': [...], 'positionals': [...], 'subs': [...]}
    from one help page; entries are [head, description]."""
    page = {"about": [], "usage": [], "options": [], "positionals": [], "subs": []}
    lists = {"Options": "options", "Positionals": "positionals", "Subcommands": "subs"}
    section = None  # None: before any section, where usage, text and bare options mix
    entry = None
    for line in text.splitlines():
        if not line.strip():
            entry = None
            continue
        header = SECTION.match(line)
        if header:
            section = lists.get(header.group(1), "other")
            entry = None
            continue
        if line.startswith("Usage: "):
            page["usage"].append(line[len("Usage: "):].strip())
            section, entry = "usage", None
            continue
        more = CONTINUATION.match(line)
        if section == "usage" and more and not line.lstrip().startswith("-"):
            page["usage"].append(more.group(1))  # a second usage line, aligned under the first
            continue
        if more and entry is not None:
            entry[1] = f"{entry[1]} {more.group(1)}".strip()
            continue
        if not line.startswith(" "):
            page["about"].append(line.strip())
            section, entry = None, None
            continue
        m = ENTRY.match(line)
        if not m:
            continue
        if section in lists.values():
            kind = section
        elif section in (None, "usage") and line.lstrip().startswith("-"):
            kind = "options"  # a help page without sections: its indented options
        else:
            continue
        entry = [m.group(1), m.group(2) or ""]
        page[kind].append(entry)
    for sub in page["subs"]:
        sub[0] = sub[0].split()[0]
    return page


def walk(program, path=()):
    """[(verb path, parsed help)] for the program and every verb under it, in help order."""
    page = parse_help(run(program, *path, "--help"))
    out = [(path, page)]
    for sub, _ in page["subs"]:
        out += walk(program, path + (sub,))
    return out


def version_of(program):
    text = run(program, "--version").strip()
    m = re.search(r"(\d+(?:\.\d+)+\S*)$", text)
    if not m:
        fail(f"{program} --version printed no version: {text!r}")
    return m.group(1)


def page_date():
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        try:
            r = subprocess.run(["git", "log", "-1", "--format=%ct"], capture_output=True,
                               text=True, timeout=30,
                               cwd=os.path.dirname(os.path.abspath(__file__)))
            epoch = r.stdout.strip() if r.returncode == 0 else None
        except OSError:
            epoch = None
    try:
        seconds = int(epoch) if epoch else FALLBACK_EPOCH
    except ValueError:
        fail(f"SOURCE_DATE_EPOCH is not a number of seconds: {epoch!r}")
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d")


# --- roff -----------------------------------------------------------------------------------------
# Hyphens that a reader types (options, program names, verbs) are minus signs (\-), so a copied
# command works; the hyphens of ordinary words stay hyphens.
TYPED = re.compile(r"(?<![\w.-])(?:--?[A-Za-z0-9][\w.=-]*|(?:%s)\b)" %
                   "|".join(re.escape(p) for p in sorted(PROGRAMS, key=len, reverse=True)))


def text(s):
    """Running text: backslashes escaped, typed hyphens as \\-."""
    out, last = [], 0
    for m in TYPED.finditer(s):
        out.append(s[last:m.start()].replace("\\", "\\e"))
        out.append(m.group(0).replace("\\", "\\e").replace("-", "\\-"))
        last = m.end()
    out.append(s[last:].replace("\\", "\\e"))
    return "".join(out)


def typed(s):
    """A literal a reader types (a verb, an option name): every hyphen is a minus."""
    return s.replace("\\", "\\e").replace("-", "\\-")


def line(s):
    """One line of input: a leading '.' or "'" would make it a request; \\& keeps it text."""
    s = s.strip()
    return "\\&" + s if s[:1] in (".", "'") else s


def quoted(s):
    return '"' + s.replace('"', '\\(dq') + '"'


OPTION_NAMES = re.compile(r"^(-[^\s,/]+(?:(?:,\s*|/)-[^\s,/]+)*)\s*(.*)$")


def option_head(head):
    """'-h,--help' and '--version, -h/--help' -> bold names; '--to TEXT:{a,b} REQUIRED' -> bold
    name, italic value."""
    m = OPTION_NAMES.match(head)
    names, value = (m.group(1), m.group(2)) if m else (head, "")
    out = ", ".join(f"\\fB{typed(n)}\\fR" for n in re.split(r",\s*|/", names) if n)
    if value:
        out += f" \\fI{text(value)}\\fR"
    return out


def positional_head(head):
    """'EXP TEXT REQUIRED' -> italic name, then its type."""
    name, _, kind = head.partition(" ")
    return f"\\fI{text(name)}\\fR {text(kind)}".rstrip()


def entries(items, head):
    out = []
    for name, description in items:
        out += [".TP", line(head(name))]
        if description:
            out.append(line(text(description)))
    return out


def synopsis(usage, path=()):
    """Usage lines, the program and the verb path in bold."""
    out = []
    for u in usage:
        words = u.split(" ")
        n = 1 + len(path) if words[1:1 + len(path)] == list(path) else 1
        if out:
            out.append(".br")
        command = typed(" ".join(words[:n]))
        out.append(line(f"\\fB{command}\\fR {text(' '.join(words[n:]))}".rstrip()))
    return out


def own_options(page):
    return [o for o in page["options"] if not re.match(r"^-h,\s*--help\b", o[0])]


def roff(name, tree, version, section, date):
    top = tree[0][1]
    about = list(top["about"])
    summary = about[0] if about else name
    # "shardtrain: the Shardscope trainer (...)" -> "the Shardscope trainer (...)"
    summary = re.sub(r"^[\w-]+:\s+", "", summary).rstrip(".")
    if re.match(r"^[A-Z][a-z]", summary):
        summary = summary[0].lower() + summary[1:]  # "The dashboard ..." -> "the dashboard ..."
    others = [p for p in PROGRAMS if p != name]
    out = [
        f'.\\" Generated by scripts/manpage.py from {name} --help; do not edit.',
        f".TH {quoted(name.upper())} {section} {quoted(date)} {quoted('Shardscope ' + version)} "
        f"{quoted('User Commands')}",
        ".SH NAME",
        f"{typed(name)} \\- {text(summary)}",
        ".SH SYNOPSIS",
    ]
    out += synopsis(top["usage"] or [f"{name} [OPTIONS]"])
    out += [".SH DESCRIPTION"]
    out += [line(text(a)) for a in about] or [line(text(summary))]
    verbs = tree[1:]
    if verbs:
        out += [".PP", line(f"Every command takes {text('-h')}, {text('--help')}; "
                            f"{typed(name)} \\fICOMMAND\\fR {text('--help')} prints its help.")]
    out += [".SH OPTIONS"]
    out += entries(top["options"], option_head)
    if top["positionals"]:
        out += [".SH ARGUMENTS"] + entries(top["positionals"], positional_head)
    if verbs:
        out += [".SH COMMANDS"]
        for path, page in verbs:
            out += [f".SS {quoted(typed(' '.join(path)))}"]
            out += [line(text(a)) for a in page["about"]]
            out += [".PP"] + synopsis(page["usage"] or [f"{name} {' '.join(path)}"], path)
            if page["positionals"]:
                out += [".PP", "Arguments:", ".RS"]
                out += entries(page["positionals"], positional_head)
                out += [".RE"]
            if own_options(page):
                out += [".PP", "Options:", ".RS"]
                out += entries(own_options(page), option_head)
                out += [".RE"]
            if page["subs"]:
                out += [".PP", "Commands:", ".RS"]
                out += entries(page["subs"], lambda h: f"\\fB{typed(h)}\\fR")
                out += [".RE"]
    out += [".SH SEE ALSO"]
    out += [",\n".join(f".BR {typed(p)} ({section})" for p in others)]
    out += [".PP", "The full reference of the command line is docs/cli.md in the Shardscope "
            "sources; docs/ARCHITECTURE.md describes how the parts fit together."]
    return "\n".join(out) + "\n"


def main():
    args = sys.argv[1:]
    opts = {"--output": None, "--section": "1"}
    for flag in opts:
        if flag in args:
            at = args.index(flag)
            if at + 1 >= len(args):
                fail(f"{flag} needs a value")
            opts[flag] = args[at + 1]
            del args[at:at + 2]
    if len(args) != 2 or not opts["--section"].isdigit():
        sys.exit(__doc__)
    program, name = args
    page = roff(name, walk(program), version_of(program), opts["--section"], page_date())
    output = opts["--output"]
    if output is None:
        sys.stdout.write(page)
        return
    with open(output + ".tmp", "w") as f:
        f.write(page)
    os.replace(output + ".tmp", output)  # a build stopped midway leaves no half page


if __name__ == "__main__":
    main()
