"""Importing ``fedrepro.__main__`` (as the site's API reference does) must not run the CLI; ``python -m
fedrepro`` still does (tests/test_cli_gaps.py)."""
from __future__ import annotations

import subprocess
import sys


def test_importing_dunder_main_runs_no_cli():
    # A fresh interpreter, so that the module is really executed on import (not taken from sys.modules);
    # before the guard this printed the usage and exited with the parser's status.
    code = "import importlib; importlib.import_module('fedrepro.__main__'); print('imported')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "imported\n" and "usage" not in out.stderr


def test_python_dash_m_fedrepro_help_still_answers():
    out = subprocess.run([sys.executable, "-m", "fedrepro", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "usage: fedrepro" in out.stdout
