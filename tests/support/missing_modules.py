#!/usr/bin/env python3
"""Stands in for a reference test whose Python modules the project's .venv lacks: it fails, naming
them and the fix, so the test is reported failed instead of silently not existing.

Usage: missing_modules.py MODULE[,MODULE...] [the test's own arguments, ignored]
"""
import sys

modules = sys.argv[1] if len(sys.argv) > 1 else "?"
print(f"FAILED: this reference test needs the Python module(s) {modules.replace(',', ', ')}, "
      "which the project's .venv lacks (or .venv is missing): run scripts/setup.sh --tests, "
      "then configure again (cmake --preset release)")
sys.exit(1)
