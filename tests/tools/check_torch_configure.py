#!/usr/bin/env python3
"""Proves the configure step's LibTorch check: a missing LibTorch, one below 2.6 and one without
c10d/Gloo each stop `cmake` with one line that names the problem and the fix.

Usage: check_torch_configure.py SOURCE_DIR
Each case makes a fake LibTorch folder (just share/cmake/Torch) and configures a trainer-only
build against it in a temporary folder.
"""
import os
import subprocess
import sys
import tempfile

CONFIG = """set(Torch_FOUND TRUE)
add_library(torch_cpu INTERFACE IMPORTED)
{defs}
add_library(torch INTERFACE IMPORTED)
"""
VERSION = 'set(PACKAGE_VERSION "{v}")\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n'


def fake_libtorch(root, version, gloo):
    cmake_dir = os.path.join(root, "share", "cmake", "Torch")
    os.makedirs(cmake_dir)
    defs = 'set_target_properties(torch_cpu PROPERTIES INTERFACE_COMPILE_DEFINITIONS "USE_DISTRIBUTED;USE_C10D_GLOO")' if gloo else ""
    with open(os.path.join(cmake_dir, "TorchConfig.cmake"), "w") as f:
        f.write(CONFIG.format(defs=defs))
    with open(os.path.join(cmake_dir, "TorchConfigVersion.cmake"), "w") as f:
        f.write(VERSION.format(v=version))
    if gloo:
        c10d = os.path.join(root, "include", "torch", "csrc", "distributed", "c10d")
        os.makedirs(c10d)
        open(os.path.join(c10d, "ProcessGroupGloo.hpp"), "w").close()


def configure(source, libtorch):
    with tempfile.TemporaryDirectory() as build:
        proc = subprocess.run(
            ["cmake", "-S", source, "-B", build, "-DSHARDSCOPE_BUILD_BACKEND=OFF",
             "-DSHARDSCOPE_BUILD_GUI=OFF", "-DBUILD_TESTING=OFF", f"-DSHARDSCOPE_LIBTORCH_DIR={libtorch}"],
            capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def main():
    source = sys.argv[1]
    cases = [
        ("missing", None, None, "LibTorch not found"),
        ("1.13.1", "1.13.1", True, "LibTorch 1.13.1 at"),
        ("no gloo", "2.13.0", False, "has no c10d Gloo backend"),
    ]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, version, gloo, expected in cases:
            root = os.path.join(tmp, name.replace(" ", "_"))
            if version:
                fake_libtorch(root, version, gloo)
            code, out = configure(source, root)
            line = next((l for l in out.splitlines() if "Shardscope:" in l and expected in l), None)
            fix = line and ("scripts/setup.sh" in line or "pip install" in line)
            ok = code != 0 and line is not None and fix
            failures += 0 if ok else 1
            print(f"{'ok' if ok else 'FAILED'}: {name}: exit {code}: {line or out[-400:]}")
            if version == "1.13.1" and ok and "need >= 2.6" not in line:
                print("FAILED: the version message does not say what is needed")
                failures += 1
    print(f"check_torch_configure: {len(cases) - failures} of {len(cases)} cases stopped with the right message")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
