"""``fluid bench policy``: StaticFluid and DynamicFluid timed on the issue's grid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fluid.cli import bench as bench_cli

from .running import run_cli


@pytest.fixture()
def small_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench grid cut to two sizes (keeping the 1,000 x 512 target cell) for speed."""
    monkeypatch.setattr(bench_cli, "TRIAL_COUNTS", (10, 1000))
    monkeypatch.setattr(bench_cli, "GPU_COUNTS", (8, 512))


def test_bench_policy_json(small_bench: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "bench", "policy", "--json", "--repeat", "2")
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert [(r["trials"], r["gpus"]) for r in rows] == [(10, 8), (10, 512), (1000, 8), (1000, 512)]
    for r in rows:
        assert r["static_ms"] > 0 and r["dynamic_ms"] > 0 and 1 <= r["started"] <= r["trials"]


def test_bench_policy_table(small_bench: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "bench", "policy", "--repeat", "1")
    assert code == 0
    assert "StaticFluid" in out and "DynamicFluid" in out
    assert "1,000 trials on 512 GPUs < 10 ms" in out
    assert len([line for line in out.splitlines() if line.strip()[:1].isdigit()]) == 4


def test_bench_full_grid_is_the_issue_grid() -> None:
    assert bench_cli.TRIAL_COUNTS == (10, 100, 1000, 10000)
    assert bench_cli.GPU_COUNTS == (8, 64, 512)


def test_bench_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "bench")
    assert code == 2 and "TARGET" in err
    code, _, err = run_cli(capsys, "bench", "policy", "--repeat", "0")
    assert code == 2 and err == "fluid: error: --repeat must be >= 1, got 0\n"


def test_busy_processes_load_the_machine_only_while_the_bench_runs() -> None:
    from fluid.cli.bench_e2e import busy_processes

    with busy_processes(2) as procs:
        assert len(procs) == 2
        time.sleep(0.5)
        assert all(p.poll() is None for p in procs)  # still spinning
        cpu = [_cpu_seconds(p.pid) for p in procs]
        assert all(c > 0.05 for c in cpu), cpu  # they do burn CPU
    assert all(p.poll() is not None for p in procs)


def test_a_busy_process_stops_when_its_parent_is_gone() -> None:
    """A bench killed without clean-up leaves nothing spinning: a parent that starts a busy
    process and dies at once (``os._exit``, no clean-up) leaves it to stop by itself."""
    parent = (
        "import os, subprocess, sys\n"
        "from fluid.cli.bench_e2e import BUSY\n"
        "p = subprocess.Popen([sys.executable, '-c', BUSY.format(parent=os.getpid())])\n"
        "print(p.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True,
                          timeout=60, check=True)
    pid = int(done.stdout)
    deadline = time.monotonic() + 20
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(pid), "the busy process outlived its parent"


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit is reaped by whatever adopted it, maybe never)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
