"""The ``fluid`` command itself: its subcommands, ``python -m fluid``, errors without a
traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fluid.cli import SUBCOMMANDS

from .running import write_file


def test_subcommands_register_one_line_each() -> None:
    assert SUBCOMMANDS[:2] == ("fluid.cli.plan", "fluid.cli.bench")


def test_python_dash_m_fluid_runs_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fluid", "plan", "--example", "figure5", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    span = json.loads(proc.stdout)["makespan"]
    assert (span["fifo"], span["static"], span["lower_bound"]) == (30, 12, 7.5)
    assert span["dynamic"] <= 10 and span["best_found"] <= 12


def test_python_dash_m_fluid_bad_input_has_no_traceback(tmp_path: Path) -> None:
    path = write_file(tmp_path, {"gpus": 2, "trials": [{"id": "a", "runtime": 0}]})
    proc = subprocess.run(
        [sys.executable, "-m", "fluid", "plan", path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"fluid: error: {path}: trials[0].runtime must be > 0 seconds, got 0\n"
