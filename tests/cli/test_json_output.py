"""Every ``--json`` of the ``fluid`` command prints exactly one JSON document on stdout.

Each subcommand runs as a user runs it (``python -m fluid ...`` in a subprocess) in its
smallest setting; the whole stdout must parse as one JSON document, whatever Ray Tune, Ray or
Fluid printed meanwhile (that goes to stderr).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.running import temp_folder_env
from tests.report.test_report import _record, _write

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests.* import from it


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def fluid_json(tmp_path: Path, *argv: str, timeout: float = 300,
               env: dict[str, str] | None = None) -> Any:
    """Run ``python -m fluid ARGV`` in ``tmp_path`` (``env``: variables set besides);
    its whole stdout parsed as JSON."""
    proc = subprocess.run([sys.executable, "-m", "fluid", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env={**_env(), **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_noise_on_stdout_goes_to_stderr_json_alone_to_stdout(tmp_path: Path) -> None:
    """Python prints, raw writes to descriptor 1 and child processes all land on stderr."""
    code = (
        "import os, subprocess, sys\n"
        "from fluid.cli import json_stdout, print_json\n"
        "with json_stdout():\n"
        "    print('banner')\n"
        "    os.write(1, b'from C++\\n')\n"
        "    subprocess.run([sys.executable, '-c', 'print(\"child\")'], check=True)\n"
        "    print_json({'ok': 1})\n"
        "print('after')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == '{"ok": 1}\nafter\n'
    assert proc.stderr.split() == ["banner", "from", "C++", "child"]


def test_plan(tmp_path: Path) -> None:
    assert fluid_json(tmp_path, "plan", "--example", "figure5", "--json")["makespan"]["static"] == 12


def test_bench_policy(tmp_path: Path) -> None:
    rows = fluid_json(tmp_path, "bench", "policy", "--repeat", "1", "--json")
    assert [(r["trials"], r["gpus"]) for r in rows][-1] == (10000, 512)


def test_simulate(tmp_path: Path) -> None:
    out = fluid_json(tmp_path, "simulate", "--algorithm", "grid", "--workload", "synthetic",
                     "--trials", "4", "--max-t", "3", "--gpus", "2", "--seeds", "1", "--json")
    assert {r["executor"] for r in out["results"]} >= {"tune", "fluid"}


def test_simulate_validate(tmp_path: Path) -> None:
    assert "scaling" in fluid_json(tmp_path, "simulate", "--validate", "--json")


def test_bench_sim(tmp_path: Path) -> None:
    rows = fluid_json(tmp_path, "bench", "sim", "--trials", "4", "--gpus", "2", "--executors",
                      "tune,fluid", "--json")
    tune, fluid = rows
    assert (tune["executor"], fluid["executor"]) == ("tune", "fluid")
    assert tune["vs_tune"] == 1.0 and tune["hook_seconds"] is None
    assert fluid["hook_seconds"] > 0 and fluid["hook_ms_per_trial"] > 0
    assert fluid["restarts_per_trial"] == fluid["restarts"] / 4
    assert fluid["target_s"] == 60.0


def test_report(tmp_path: Path) -> None:
    run = _write(tmp_path, "run", _record("fluid"))
    plots = fluid_json(tmp_path, "report", str(run), "--out", str(tmp_path / "out"), "--json")
    assert plots and all(Path(p["path"]).is_file() for p in plots)


@pytest.mark.slow
def test_profile(tmp_path: Path) -> None:
    prof = fluid_json(tmp_path, "profile", "tests.tune.profile_trainables:busy", "--iterations",
                      "2", "--max-pack", "2", "--max-workers", "1", "--gpus", "1", "--cache",
                      str(tmp_path / "cache.json"), "--json")
    assert prof["alpha"] > 0


@pytest.mark.slow
def test_bench_load(tmp_path: Path) -> None:
    out = fluid_json(tmp_path, "bench", "load", "--trials", "4", "--gpus", "2", "--cpus", "2",
                     "--json")
    assert out["tune"]["completed"] == out["fluid"]["completed"] == 4
    assert out["fluid"]["hook_ms_per_trial"] > 0 and out["fluid"]["resizes_per_trial"] >= 0
    assert set(out["driver_rss_mb"]) == {"start", "after_tune", "after_fluid"}
    assert out["nodes"] == 1 and out["node_gpus"] == [2]


@pytest.mark.slow
def test_bench_load_on_a_cluster_of_nodes(tmp_path: Path) -> None:
    out = fluid_json(tmp_path, "bench", "load", "--trials", "6", "--gpus", "3", "--cpus", "2",
                     "--nodes", "2", "--json")
    assert out["nodes"] == 2 and out["node_gpus"] == [2, 1]
    for executor in ("tune", "fluid"):
        # one CPU on each node: six trials cannot all run on one
        assert out[executor]["completed"] == 6 and out[executor]["nodes_used"] == 2, out


@pytest.mark.slow
def test_bench_e2e(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = fluid_json(tmp_path, "bench", "e2e", "--quick", "--trials", "1", "--json",
                     env=temp_folder_env(scratch))
    assert out["trials"] == 1 and set(out["jobs"]) == {"grid", "hyperband"}
    assert not list(scratch.glob("fluid-bench-e2e-*"))  # Tune's results of its runs: removed
