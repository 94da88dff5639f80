#!/usr/bin/env python3
"""Fails when a file of a lower layer includes a header of a higher one.

Layers go one way (docs/ARCHITECTURE.md):
    app -> ui -> backend -> trainer/spec        ui -> trainer/data
    trainer (LibTorch) -> trainer/spec, trainer/data
Project headers are included by their path from the repository root ("backend/store/x.h"), so the
first folders of an include name its layer. Third-party headers are checked too: no Qt below the
backend, no Qt Widgets/Gui or QCustomPlot in the backend, no LibTorch outside the trainer.

Usage: check_layers.py ROOT [--qt-include-dir DIR]    checks the tree, exit 1 on a violation
       check_layers.py --self-test [--qt-include-dir DIR]   proves every rule fires
"""
import argparse
import os
import re
import sys
import tempfile

ORDER = "app -> ui -> backend -> trainer/spec (ui -> trainer/data; trainer -> trainer/spec, trainer/data)"
ALLOWED = {
    "spec": {"spec"},
    "data": {"data", "spec"},
    "trainer": {"trainer", "spec", "data"},
    "backend": {"backend", "spec"},
    "ui": {"ui", "backend", "spec", "data"},
    "app": {"app", "ui", "backend", "spec", "data"},
}
QT_FREE = {"spec", "data", "trainer"}
TORCH_LAYERS = {"trainer"}
BACKEND_QT_MODULES = {"QtCore", "QtSql", "QtNetwork", "QtConcurrent"}
TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/")
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cxx", ".hxx", ".in")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(relpath):
    """The layer a repository path belongs to, or None when it is not in a layer."""
    parts = relpath.replace(os.sep, "/").split("/")
    if parts[0] == "trainer" and len(parts) > 1 and parts[1] in ("spec", "data"):
        return parts[1]
    if parts[0] in ("app", "ui", "backend", "trainer"):
        return parts[0]
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


def check_include(layer, delim, name, root, qt_dir):
    """A message when this include breaks a rule for `layer`, else None."""
    if delim == '"':
        target = layer_of(name)
        if target and os.path.exists(os.path.join(root, name)) and target not in ALLOWED[layer]:
            return f"{layer} includes {name} (layer {target} is above or beside {layer}; {ORDER})"
        return None
    if name.startswith(TORCH_PREFIXES) and layer not in TORCH_LAYERS:
        return f"{layer} includes LibTorch header <{name}> (only trainer/ links LibTorch)"
    if name == "qcustomplot.h" and layer not in ("ui", "app"):
        return f"{layer} includes <qcustomplot.h> (plots belong to ui/)"
    module = qt_module_of(name, qt_dir)
    if module and layer in QT_FREE:
        return f"{layer} includes Qt header <{name}> ({layer} never links Qt: GPU nodes have none)"
    if module and layer == "backend" and module not in BACKEND_QT_MODULES:
        return f"backend includes <{name}> from {module} (the backend is Qt Core only: no widgets)"
    return None


def check_tree(root, qt_dir):
    violations = []
    for top in ("app", "ui", "backend", "trainer"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for file in sorted(files):
                if not file.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, file)
                rel = os.path.relpath(path, root)
                layer = layer_of(rel)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        problem = check_include(layer, m.group(1), m.group(2), root, qt_dir)
                        if problem:
                            violations.append(f"{rel}:{number}: {problem}")
    return violations


def self_test(qt_dir):
    """Builds small trees that each break one rule; every one must be caught, and a clean one not."""
    cases = {
        "spec includes backend": ("trainer/spec/a.h", '#include "backend/b.h"', "backend/b.h"),
        "data includes trainer": ("trainer/data/a.h", '#include "trainer/x.h"', "trainer/x.h"),
        "backend includes ui": ("backend/a.cpp", '#include "ui/w.h"', "ui/w.h"),
        "ui includes app": ("ui/a.cpp", '#include "app/m.h"', "app/m.h"),
        "trainer includes backend": ("trainer/a.cpp", '#include "backend/b.h"', "backend/b.h"),
        "backend includes trainer engine": ("backend/a.cpp", '#include "trainer/dist/p.h"', "trainer/dist/p.h"),
        "backend includes torch": ("backend/a.cpp", "#include <ATen/ATen.h>", None),
        "spec includes Qt": ("trainer/spec/a.cpp", "#include <QtCore/QString>", None),
        "trainer includes Qt": ("trainer/a.cpp", "#include <QtCore/QObject>", None),
        "backend includes QCustomPlot": ("backend/a.cpp", "#include <qcustomplot.h>", None),
    }
    if qt_dir and os.path.exists(os.path.join(qt_dir, "QtWidgets", "QWidget")):
        cases["backend includes QWidget"] = ("backend/a.cpp", "#include <QWidget>", None)
        cases["spec includes QString"] = ("trainer/spec/a.cpp", "#include <QString>", None)
    failures = []
    for name, (path, line, target) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            write(root, path, line + "\n")
            if target:
                write(root, target, "#pragma once\n")
            if not check_tree(root, qt_dir):
                failures.append(f"not caught: {name}")
    with tempfile.TemporaryDirectory() as root:
        write(root, "ui/a.cpp", '#include "backend/b.h"\n#include "trainer/data/d.h"\n#include <QWidget>\n')
        write(root, "backend/b.h", '#include "trainer/spec/s.h"\n#include <QtCore/QObject>\n')
        write(root, "trainer/data/d.h", '#include "trainer/spec/s.h"\n')
        write(root, "trainer/spec/s.h", "#include <vector>\n")
        write(root, "trainer/t.cpp", '#include "trainer/data/d.h"\n#include <ATen/ATen.h>\n')
        clean = check_tree(root, qt_dir)
        if clean:
            failures.append("a clean tree was flagged: " + "; ".join(clean))
    for f in failures:
        print("check_layers self-test:", f)
    print(f"check_layers self-test: {len(cases) - len(failures)} of {len(cases)} rules caught")
    return 1 if failures else 0


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
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.qt_include_dir)
    if not args.root:
        parser.error("give ROOT or --self-test")
    violations = check_tree(args.root, args.qt_include_dir)
    for v in violations:
        print(v)
    print(f"check_layers: {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
