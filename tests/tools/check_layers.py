#!/usr/bin/env python3
"""Fails when a file of a lower layer includes a header of a higher one, or a CMake target links one.

Layers go one way (docs/ARCHITECTURE.md):
    app -> ui -> backend -> search -> spec        ui -> data
    trainer (LibTorch) -> spec, data
and inside the trainer, the backend and the ui the folders go one way too (INNER below). Project
headers are included by their path from the repository root ("backend/store/x.h"), so the first
folders of an include name its layer and folder. Third-party headers are checked too: no Qt below
the backend (the search library included), no Qt Widgets/Gui or QCustomPlot in the backend, no LibTorch outside the trainer,
no toml++ outside spec/ (an experiment is parsed once, by spec/).
target_link_libraries() in the layers' CMake files obey the same table.

Usage: check_layers.py ROOT [--qt-include-dir DIR]    checks the tree, exit 1 on a violation
       check_layers.py --self-test [--qt-include-dir DIR]   proves every rule fires
       check_layers.py --table                             prints the allowed dependencies
       check_layers.py --check-doc DOC                     fails when DOC's copy of the table differs
"""
import difflib
import argparse
import os
import re
import sys
import tempfile

ORDER = ("app -> ui -> backend -> search -> spec "
         "(backend -> data; trainer -> spec, data)")
# Layer -> the layers its files may include (its own included).
ALLOWED = {
    "spec": {"spec"},
    "data": {"data", "spec"},
    "trainer": {"trainer", "spec", "data"},
    # search/: the Qt-free search algorithms (space transforms, samplers, pruners, importance)
    # that the backend's orchestration drives; a plain C++ program can link them alone.
    "search": {"search", "spec"},
    # data/ (torch-free, Qt-free): the sweep's memory check bounds chat rows by the samples.
    "backend": {"backend", "search", "spec", "data"},
    "ui": {"ui", "backend", "search", "spec", "data"},
    "app": {"app", "ui", "backend", "search", "spec", "data"},
}


def _below(*chain):
    """{folder: the folders before it in `chain`}: each folder may use every one listed before it.
    An entry that is a tuple holds folders of one level: they may not use each other."""
    table, seen = {}, set()
    for level in chain:
        level = level if isinstance(level, tuple) else (level,)
        for folder in level:
            table[folder] = set(seen)
        seen |= set(level)
    return table


def _except(table, **kept_out):
    """`table` with the folders named for each folder taken out of what it may use."""
    for folder, out in kept_out.items():
        table[folder] -= set(out)
    return table


# Inside a layer: folder -> the folders of the same layer its files may include (besides its own).
# "" is the layer's own top folder (trainer/shardtrain.cpp, backend/guithread.h, ui/mainwindow.cpp).
INNER = {
    # Errors, checks and the safetensors format; the process group and the models; the sharding
    # engine; the optimizer; checkpoints; one training run; the verbs; main().
    "trainer": _below("base", ("dist", "model"), "shard", "optim", "ckpt", "run", "cli", ""),
    # The GUI-thread guard; the run store and SSH; launchers; the monitor; the run lifecycle
    # (start, attach, follow, stop, adopt; the supervisor); sweeps (studies, trials, the loop); exports of runs
    # and studies to other tools' formats, and imports of other tools' training configs (neither
    # uses the other).
    # A sweep starts and follows its trials through the lifecycle only, never a launcher or a
    # monitor of its own.
    "backend": _except(_below("", ("store", "ssh"), "launch", "monitor", "lifecycle", "sweep",
                              ("export", "import")),
                       sweep=("launch", "monitor")),
    # The run-log worker; shared widgets; the panels, none of which includes another's files; the
    # main window.
    "ui": _below("data", "widgets",
                 ("runs", "plots", "compare", "hosts", "builder", "timeline", "samples"), ""),
}
QT_FREE = {"spec", "data", "trainer", "search"}
TORCH_LAYERS = {"trainer"}
BACKEND_QT_MODULES = {"QtCore", "QtNetwork", "QtConcurrent"}
TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/")
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cxx", ".hxx", ".in")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

# The project's library targets: name -> repository folder. A target named here and linked from
# a CMake file is held to the include table; `shardscope_trainer_<folder>` names trainer/<folder>.
TARGETS = {
    "shardscope_spec": "spec",
    "shardscope_data": "data",
    "shardscope_trainer": "trainer",  # every trainer folder together: what main() and tests link
    "shardscope_rendezvous": "trainer/dist",  # torch-free: the fake trainer links it too
    "shardscope_search": "search",
    "shardscope_backend": "backend",
    "shardscope_import": "backend/import",
    "shardscope_ui": "ui",
}
TARGET_PREFIXES = {"shardscope_trainer_": "trainer/"}
LINK = re.compile(r"target_link_libraries\s*\(([^)]*)\)", re.S)
ADD_TARGET = re.compile(r"(?:add_library|add_executable|shardscope_trainer_folder)\s*\(\s*([\w${}-]+)")


# The repository's top folders that are layers.
LAYER_TOPS = ("app", "ui", "backend", "search", "trainer", "spec", "data")


def layer_of(relpath):
    """The layer a repository path belongs to, or None when it is not in a layer."""
    parts = relpath.replace(os.sep, "/").split("/")
    if parts[0] in LAYER_TOPS:
        return parts[0]
    return None


def folder_of(relpath):
    """The folder inside its layer ("dist" for trainer/dist/x.h, "" for trainer/shardtrain.cpp)."""
    parts = relpath.replace(os.sep, "/").split("/")
    return parts[1] if len(parts) > 2 else ""


def rule_for(layer, folder, target_layer, target_folder, what):
    """A message when `what` (an include or a link) from layer/folder to the target breaks a rule."""
    if target_layer not in ALLOWED[layer]:
        return f"{layer} {what} (layer {target_layer} is above or beside {layer}; {ORDER})"
    if target_layer != layer or layer not in INNER or folder == target_folder:
        return None
    inner = INNER[layer]
    if folder not in inner:
        return f"{layer}/{folder} is not in check_layers.py's INNER table: add it where it belongs"
    if target_folder not in inner:
        return f"{layer}/{target_folder} is not in check_layers.py's INNER table: add it where it belongs"
    if target_folder not in inner[folder]:
        name = lambda f: f"{layer}/{f}" if f else f"{layer}/ (top)"  # noqa: E731
        allowed = ", ".join(sorted(name(f) for f in inner[folder])) or "none"
        return f"{name(folder)} {what} ({name(target_folder)} is above or beside it; it may use: {allowed})"
    return None


def qt_module_of(header, qt_dir):
    """Which Qt module ships `header` (QtCore for <QString>), or None if it is not Qt's."""
    if "/" in header:
        module = header.split("/", 1)[0]
        return module if module.startswith("Qt") else None
    if not qt_dir or not re.match(r"^Q[A-Za-z]", header):
        return None
    for module in sorted(os.listdir(qt_dir)):
        if os.path.exists(os.path.join(qt_dir, module, header)):
            return module
    return None


def check_include(rel, delim, name, root, qt_dir):
    """A message when this include of file `rel` breaks a rule, else None."""
    layer = layer_of(rel)
    if delim == '"':
        target = layer_of(name)
        if target and os.path.exists(os.path.join(root, name)):
            return rule_for(layer, folder_of(rel), target, folder_of(name), f"includes {name}")
        return None
    if name.startswith(TORCH_PREFIXES) and layer not in TORCH_LAYERS:
        return f"{layer} includes LibTorch header <{name}> (only trainer/ links LibTorch)"
    if name.startswith("toml++/") and layer != "spec":
        return (f"{layer} includes <{name}> (only spec/ reads TOML: an experiment is parsed once into "
                "spec::Experiment; spec/experiment_query.h answers what else the layers ask of it)")
    if name == "qcustomplot.h" and layer not in ("ui", "app"):
        return f"{layer} includes <qcustomplot.h> (plots belong to ui/)"
    module = qt_module_of(name, qt_dir)
    if module and layer in QT_FREE:
        return f"{layer} includes Qt header <{name}> ({layer} never links Qt: GPU nodes have none)"
    if module and layer == "backend" and module not in BACKEND_QT_MODULES:
        return f"backend includes <{name}> from {module} (the backend is Qt Core only: no widgets)"
    return None


def target_path(name):
    """The repository folder of a project target, or None for a third-party or unknown one."""
    if name in TARGETS:
        return TARGETS[name]
    for prefix, folder in TARGET_PREFIXES.items():
        if name.startswith(prefix):
            return folder + name[len(prefix):]
    return None


def check_link(rel, target, dep):
    """A message when `target` (declared in CMake file `rel`) may not link `dep`, else None."""
    home = target_path(target) or os.path.dirname(rel.replace(os.sep, "/"))
    home_file = home + "/CMakeLists.txt"  # a path inside the target's folder
    layer = layer_of(home_file)
    what = f"target {target} links {dep}"
    if dep.startswith("Qt6::") and layer in QT_FREE:
        return f"{layer}: {what} ({layer} never links Qt: GPU nodes have none)"
    if dep.startswith("Qt6::") and layer == "backend" and "Qt" + dep[5:] not in BACKEND_QT_MODULES:
        return f"backend: {what} (the backend is Qt Core only: no widgets)"
    if dep in ("torch", "torch_cpu", "Torch::Torch") and layer not in TORCH_LAYERS:
        return f"{layer}: {what} (only trainer/ links LibTorch)"
    if dep.startswith("tomlplusplus") and layer != "spec":
        return f"{layer}: {what} (only spec/ reads TOML)"
    if dep.startswith("QCustomPlot") and layer not in ("ui", "app"):
        return f"{layer}: {what} (plots belong to ui/)"
    dep_path = target_path(dep)
    if dep_path is None:
        return None
    dep_file = dep_path + "/CMakeLists.txt"
    if dep == "shardscope_trainer" and layer == "trainer":
        return rule_for(layer, folder_of(home_file), "trainer", "", what)  # all of it: main()'s
    return rule_for(layer, folder_of(home_file), layer_of(dep_file), folder_of(dep_file), what)


def cmake_links(text):
    """(target, dependency) for every target_link_libraries() call in a CMake file's text."""
    text = re.sub(r"#[^\n]*", "", text)
    for m in LINK.finditer(text):
        words = m.group(1).split()
        if not words:
            continue
        for dep in words[1:]:
            if dep in ("PUBLIC", "PRIVATE", "INTERFACE") or "$" in dep:
                continue
            yield words[0], dep


def check_tree(root, qt_dir):
    violations = []
    for top in LAYER_TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for file in sorted(files):
                path = os.path.join(dirpath, file)
                rel = os.path.relpath(path, root)
                if file == "CMakeLists.txt" or file.endswith(".cmake"):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    for target, dep in cmake_links(text):
                        if "$" in target:
                            continue
                        problem = check_link(rel, target, dep)
                        if problem:
                            violations.append(f"{rel}: {problem}")
                    continue
                if not file.endswith(SOURCE_EXT):
                    continue
                layer, folder = layer_of(rel), folder_of(rel)
                if layer in INNER and folder not in INNER[layer]:
                    violations.append(f"{rel}: {layer}/{folder} is not in check_layers.py's INNER table: "
                                      "add it where it belongs")
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        problem = check_include(rel, m.group(1), m.group(2), root, qt_dir)
                        if problem:
                            violations.append(f"{rel}:{number}: {problem}")
    return violations


def inner_cases():
    """One include and one link case for each folder of INNER: a folder above or beside it."""
    cases = {}
    for layer, table in INNER.items():
        for folder, allowed in table.items():
            forbidden = sorted(f for f in table if f != folder and f not in allowed)
            if not forbidden:
                continue
            other = forbidden[0]
            src = f"{layer}/{folder}/a.cpp" if folder else f"{layer}/a.cpp"
            hdr = f"{layer}/{other}/x.h" if other else f"{layer}/x.h"
            cases[f"{layer}/{folder} includes {layer}/{other}"] = (src, f'#include "{hdr}"', hdr)
            if layer == "trainer" and folder and other:
                cmake = f"trainer/{folder}/CMakeLists.txt"
                line = f"target_link_libraries(shardscope_trainer_{folder} PUBLIC shardscope_trainer_{other})"
                cases[f"target trainer/{folder} links trainer/{other}"] = (cmake, line, None)
    return cases


def clean_tree(root):
    """A tree that uses every allowed edge of INNER and of the layers, which must pass."""
    for layer, table in INNER.items():
        for folder, allowed in table.items():
            src = f"{layer}/{folder}/a.cpp" if folder else f"{layer}/a.cpp"
            lines = [f'#include "{layer}/{f}/x.h"' if f else f'#include "{layer}/x.h"' for f in sorted(allowed)]
            write(root, src, "\n".join(lines) + "\n")
            write(root, f"{layer}/{folder}/x.h" if folder else f"{layer}/x.h", "#pragma once\n")
    links = []
    for folder, allowed in INNER["trainer"].items():
        if folder:
            deps = " ".join(f"shardscope_trainer_{f}" for f in sorted(allowed) if f)
            links.append(f"target_link_libraries(shardscope_trainer_{folder} PUBLIC shardscope_spec {deps} torch)")
    links.append("target_link_libraries(shardtrain PRIVATE shardscope_trainer CLI11::CLI11)")
    write(root, "trainer/CMakeLists.txt", "\n".join(links) + "\n")
    write(root, "backend/CMakeLists.txt",
          "target_link_libraries(shardscope_backend PUBLIC Qt6::Core shardscope_search shardscope_spec)\n")
    write(root, "search/CMakeLists.txt", "target_link_libraries(shardscope_search PUBLIC shardscope_spec)\n")
    write(root, "ui/CMakeLists.txt",
          "target_link_libraries(shardscope_ui PUBLIC Qt6::Widgets QCustomPlotQt6::QCustomPlotQt6\n"
          "  shardscope_backend shardscope_data)\n")
    write(root, "ui/b.cpp", '#include "backend/b.h"\n#include "data/d.h"\n#include <QWidget>\n')
    write(root, "backend/b.h", '#include "search/s.h"\n#include "spec/s.h"\n#include <QtCore/QObject>\n')
    write(root, "search/s.h", '#include "spec/s.h"\n#include <vector>\n')
    write(root, "data/d.h", '#include "spec/s.h"\n')
    write(root, "spec/s.h", "#include <vector>\n#include <toml++/toml.h>\n")
    write(root, "trainer/t.cpp", '#include "data/d.h"\n#include <ATen/ATen.h>\n')


def self_test(qt_dir):
    """Builds small trees that each break one rule; every one must be caught, and a clean one not."""
    cases = {
        "spec includes backend": ("spec/a.h", '#include "backend/b.h"', "backend/b.h"),
        "data includes trainer": ("data/a.h", '#include "trainer/run/x.h"', "trainer/run/x.h"),
        "backend includes ui": ("backend/a.cpp", '#include "ui/w.h"', "ui/w.h"),
        "ui includes app": ("ui/a.cpp", '#include "app/m.h"', "app/m.h"),
        "trainer includes backend": ("trainer/a.cpp", '#include "backend/b.h"', "backend/b.h"),
        "backend includes trainer engine": ("backend/a.cpp", '#include "trainer/dist/p.h"', "trainer/dist/p.h"),
        "search includes backend": ("search/a.cpp", '#include "backend/sweep/study.h"', "backend/sweep/study.h"),
        "a sweep includes a launcher": ("backend/sweep/a.cpp", '#include "backend/launch/x.h"', "backend/launch/x.h"),
        "a sweep includes the monitor": ("backend/sweep/a.cpp", '#include "backend/monitor/x.h"',
                                         "backend/monitor/x.h"),
        "spec includes search": ("spec/a.h", '#include "search/tpe.h"', "search/tpe.h"),
        "trainer includes search": ("trainer/run/a.cpp", '#include "search/tpe.h"', "search/tpe.h"),
        "search includes Qt": ("search/a.h", "#include <QtCore/QString>", None),
        "search includes torch": ("search/a.cpp", "#include <torch/torch.h>", None),
        "backend includes torch": ("backend/a.cpp", "#include <ATen/ATen.h>", None),
        "spec includes Qt": ("spec/a.cpp", "#include <QtCore/QString>", None),
        "trainer includes Qt": ("trainer/a.cpp", "#include <QtCore/QObject>", None),
        "backend includes QCustomPlot": ("backend/a.cpp", "#include <qcustomplot.h>", None),
        "backend includes toml++": ("backend/sweep/a.cpp", "#include <toml++/toml.h>", None),
        "ui includes toml++": ("ui/a.cpp", "#include <toml++/toml.hpp>", None),
        "backend links toml++": ("backend/CMakeLists.txt",
                                 "target_link_libraries(shardscope_backend PRIVATE tomlplusplus::tomlplusplus)", None),
        "a folder missing from INNER": ("trainer/newfolder/a.cpp", '#include "trainer/base/x.h"', "trainer/base/x.h"),
        "spec links backend": ("spec/CMakeLists.txt",
                               "target_link_libraries(shardscope_spec PUBLIC shardscope_backend)", None),
        "backend links ui": ("backend/CMakeLists.txt", "target_link_libraries(shardscope_backend PRIVATE shardscope_ui)", None),
        "backend links trainer": ("backend/CMakeLists.txt",
                                  "target_link_libraries(shardscope_backend PUBLIC shardscope_trainer_dist)", None),
        "trainer links Qt": ("trainer/base/CMakeLists.txt",
                             "target_link_libraries(shardscope_trainer_base PUBLIC Qt6::Core)", None),
        "backend links Widgets": ("backend/CMakeLists.txt", "target_link_libraries(shardscope_backend PUBLIC Qt6::Widgets)", None),
        "backend links torch": ("backend/CMakeLists.txt", "target_link_libraries(shardscope_backend PUBLIC torch)", None),
        "search links Qt": ("search/CMakeLists.txt", "target_link_libraries(shardscope_search PUBLIC Qt6::Core)", None),
        "search links backend": ("search/CMakeLists.txt",
                                 "target_link_libraries(shardscope_search PRIVATE shardscope_backend)", None),
        "spec links search": ("spec/CMakeLists.txt",
                              "target_link_libraries(shardscope_spec PUBLIC shardscope_search)", None),
        "a folder links all of the trainer": ("trainer/run/CMakeLists.txt",
                                              "target_link_libraries(shardscope_trainer_run PUBLIC shardscope_trainer)", None),
    }
    cases.update(inner_cases())
    if qt_dir and os.path.exists(os.path.join(qt_dir, "QtWidgets", "QWidget")):
        cases["backend includes QWidget"] = ("backend/a.cpp", "#include <QWidget>", None)
        cases["spec includes QString"] = ("spec/a.cpp", "#include <QString>", None)
        cases["search includes QString"] = ("search/a.cpp", "#include <QString>", None)
    failures = []
    for name, (path, line, target) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            write(root, path, line + "\n")
            if target:
                write(root, target, "#pragma once\n")
            if not check_tree(root, qt_dir):
                failures.append(f"not caught: {name}")
    with tempfile.TemporaryDirectory() as root:
        clean_tree(root)
        clean = check_tree(root, qt_dir)
        if clean:
            failures.append("a clean tree was flagged: " + "; ".join(clean))
    for f in failures:
        print("check_layers self-test:", f)
    print(f"check_layers self-test: {len(cases) - len(failures)} of {len(cases)} rules caught")
    return 1 if failures else 0


def table_lines():
    """The allowed dependencies as Markdown lines (docs/ARCHITECTURE.md holds a copy)."""
    lines = ["| layer | may include |", "|---|---|"]
    for layer, allowed in ALLOWED.items():
        lines.append(f"| {layer} | {', '.join(sorted(allowed - {layer})) or '-'} |")
    for layer, table in INNER.items():
        lines += ["", f"| {layer}/ folder | may include ({layer}/) |", "|---|---|"]
        for folder, allowed in table.items():
            lines.append(f"| {folder or '(top)'} | {', '.join(sorted(f or '(top)' for f in allowed)) or '-'} |")
    return lines


def print_table():
    print("\n".join(table_lines()))
    return 0


DOC_BEGIN = "<!-- layers-table:begin -->"
DOC_END = "<!-- layers-table:end -->"


def check_doc(path):
    """Fails when the table between DOC_BEGIN and DOC_END in `path` is not the one this file holds,
    so a change of the rules cannot leave the map behind."""
    fix = (f"run `python3 tests/tools/check_layers.py --table` and paste its output between "
           f"{DOC_BEGIN} and {DOC_END} in {path}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().splitlines()
    except OSError as e:
        print(f"check_layers: cannot read {path}: {e.strerror}")
        return 1
    if text.count(DOC_BEGIN) != 1 or text.count(DOC_END) != 1 or text.index(DOC_BEGIN) > text.index(DOC_END):
        print(f"{path}: expected one {DOC_BEGIN} line, then one {DOC_END} line; {fix}")
        return 1
    first = text.index(DOC_BEGIN)
    doc = [line.rstrip() for line in text[first + 1:text.index(DOC_END)]]
    while doc and not doc[0]:
        doc.pop(0)
    while doc and not doc[-1]:
        doc.pop()
    want = table_lines()
    if doc == want:
        print(f"check_layers: {path}'s table matches")
        return 0
    print(f"{path}:{first + 2}: the allowed-dependency table differs from check_layers.py's; {fix}")
    sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(
        doc, want, f"{path} (table)", "check_layers.py --table", lineterm=""))
    return 1


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?")
    parser.add_argument("--qt-include-dir", default="")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--table", action="store_true")
    parser.add_argument("--check-doc", metavar="DOC")
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.qt_include_dir)
    if args.table:
        return print_table()
    if args.check_doc:
        return check_doc(args.check_doc)
    if not args.root:
        parser.error("give ROOT, --self-test, --table or --check-doc DOC")
    violations = check_tree(args.root, args.qt_include_dir)
    for v in violations:
        print(v)
    print(f"check_layers: {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
