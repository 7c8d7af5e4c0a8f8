"""experiments/gpu_check.sh and its MPS evidence sampler (experiments/mps_evidence.py): one
round against a stand-in daemon's directory and a dead one records both as they are, the summary
counts only what daemons and NVML saw (never Fluid's own ``fluid_mps``), and without nvidia-smi
the check stops at its first step, before anything is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import types
from pathlib import Path
from typing import Any

import pytest

from experiments import mps_evidence
from tests.gpu.standins import write_fake

ROOT = Path(__file__).resolve().parents[2]
CONTROL = "nvidia-cuda-mps-control"


def _rows(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _fake_nvml(mps_pids: list[int]) -> types.SimpleNamespace:
    """NVML with one GPU listing ``mps_pids`` as MPS clients (1 GiB each)."""
    procs = [types.SimpleNamespace(pid=p, usedGpuMemory=2**30) for p in mps_pids]
    return types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMPSComputeRunningProcesses=lambda h: procs,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [])


@pytest.fixture
def daemon(tmp_path: Path) -> Any:
    """A stand-in MPS daemon answering in ``tmp/fluid-mps/sess/node1/pipe``; quit after."""
    write_fake(tmp_path, tmp_path / "calls.log")
    node = tmp_path / "tmp" / "fluid-mps" / "sess" / "node1"
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(node / "pipe"),
           "CUDA_MPS_LOG_DIRECTORY": str(node / "log")}
    subprocess.run([str(tmp_path / CONTROL), "-d"], env=env, check=True, timeout=10)
    yield node
    subprocess.run([str(tmp_path / CONTROL)], input="quit\n", text=True, env=env, timeout=10)


def test_one_round_records_a_live_and_a_dead_daemon(tmp_path: Path, daemon: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    dead = tmp_path / "tmp" / "mps-dead"
    (dead / "pipe").mkdir(parents=True)
    (dead / "log").mkdir()
    storage = tmp_path / "storage" / "fluid-bench-gpu-x" / "exp"
    _rows(storage / "a" / "result.json", [
        {"trial_id": "a", "training_iteration": 1, "pid": 111, "fluid_gpus": 0.5,
         "fluid_mps": True},
        {"trial_id": "b", "training_iteration": 1, "pid": 333, "fluid_gpus": 1.0},
        {"trial_id": "c", "training_iteration": 1, "pid": 444}])  # plain Tune's row
    artifacts = tmp_path / "ray" / "session_1" / "artifacts" / "t" / "exp" / "driver_artifacts"
    _rows(artifacts / "d" / "result.json", [
        {"trial_id": "d", "training_iteration": 1, "pid": 222, "fluid_gpus": 0.5,
         "fluid_mps": True}])
    _rows(artifacts / "old" / "result.json", [  # another run's, from before the sampler
        {"trial_id": "old", "training_iteration": 1, "pid": 555, "fluid_gpus": 0.5}])
    os.utime(artifacts / "old" / "result.json", (0, 0))
    _rows(artifacts.parents[1] / "other" / "driver_artifacts" / "e" / "result.json", [
        {"trial_id": "e", "training_iteration": 1, "pid": 666,  # not the bench's experiment
         "fluid_gpus": 0.5}])
    soon = time.time() + 60  # as if written by the bench, after the sampler started
    os.utime(artifacts / "d" / "result.json", (soon, soon))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.setattr(mps_evidence, "load_nvml", lambda: _fake_nvml([111, 999]))
    out = tmp_path / "out"

    assert mps_evidence.main([
        "sample", "--out", str(out), "--once", "--tmp", str(tmp_path / "tmp"),
        "--system-pipe", str(tmp_path / "no-system-daemon"), "--storage",
        str(tmp_path / "storage"), "--ray-tmp", str(tmp_path / "ray"),
        "--control", str(tmp_path / CONTROL)]) == 0

    asked = {r["pipe"]: r for r in _jsonl(out / "mps" / "control.jsonl")}
    assert set(asked) == {str(daemon / "pipe"), str(dead / "pipe")}  # no system directory
    live = asked[str(daemon / "pipe")]
    assert (live["command"], live["answered"], live["rc"]) == ("get_server_list", True, 0)
    gone = asked[str(dead / "pipe")]
    assert not gone["answered"] and gone["rc"] != 0
    assert "Cannot find MPS control daemon" in gone["stderr"]
    slug = str(daemon / "log").strip("/").replace("/", "_")
    assert "Starting control daemon" in (out / "mps" / "logs" / slug / "control.log").read_text()
    (nvml,) = _jsonl(out / "mps" / "nvml.jsonl")
    assert nvml["gpus"][0]["mps"] == [{"pid": 111, "usedGpuMemory": 2**30},
                                      {"pid": 999, "usedGpuMemory": 2**30}]
    assert sorted(r["pid"] for r in _jsonl(out / "mps" / "trial-rows.jsonl")) == [111, 222, 333,
                                                                                 444]

    summary = mps_evidence.summarize(out)
    assert (summary["packed_processes"], summary["packed_pids"]) == (2, [111, 222])
    assert (summary["clients_by_evidence"], summary["clients_by_evidence_pids"]) == (1, [111])
    assert summary["by_source"] == {"get_client_list": 0, "nvml_mps": 1}
    assert summary["evidence_files"] == {name: True for name in mps_evidence.FILES}
    assert json.loads((out / "mps-summary.json").read_text()) == summary


def test_the_summary_counts_client_lists_not_self_reports(tmp_path: Path) -> None:
    mps = tmp_path / "mps"
    pipe = "/tmp/fluid-mps/s/n/pipe"
    _rows(mps / "control.jsonl", [
        {"pipe": pipe, "command": "get_server_list", "answered": True, "stdout": "900\n"},
        {"pipe": pipe, "command": "get_client_list 900", "answered": True,
         "stdout": "111\n222\n"},
        {"pipe": "/tmp/mps-x/pipe", "command": "get_server_list", "answered": False,
         "stdout": "333\n"}])
    _rows(mps / "trial-rows.jsonl", [
        {"pid": 111, "fluid_gpus": 0.5, "fluid_mps": True},
        {"pid": 333, "fluid_gpus": 0.25, "fluid_mps": True}])  # claims MPS, seen by no one
    (mps / "logs" / "x").mkdir(parents=True)
    (mps / "logs" / "x" / "control.log").write_text("NEW CLIENT 333 from user 0: Server ready\n")
    (tmp_path / "summary.json").write_text(json.dumps(
        {"tuning": {"fluid": {"packed_results_under_mps": 6, "packed_results": 6}}}))

    summary = mps_evidence.summarize(tmp_path)

    assert (summary["packed_processes"], summary["clients_by_evidence"]) == (2, 1)
    assert summary["by_source"] == {"get_client_list": 1, "nvml_mps": 0}
    assert summary["control_log_new_clients"] == 1  # supporting, not in clients_by_evidence
    assert summary["self_reported_not_evidence"] == {"packed_results_under_mps": 6,
                                                     "packed_results": 6}
    assert [d["servers"] for d in summary["daemons"]] == [[900], []]
    assert summary["evidence_files"] == {"control.jsonl": True, "nvml.jsonl": False,
                                         "trial-rows.jsonl": True}
    assert summary["missing"] == []  # a daemon answered, rows and packed pids found


def test_gpu_check_stops_at_the_gpu_step_without_nvidia_smi(tmp_path: Path) -> None:
    # Every tool on PATH but nvidia-smi, so the script runs as on a machine without a GPU.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = bin_dir / entry.name
            if entry.name != "nvidia-smi" and not os.path.lexists(link):
                link.symlink_to(entry.path)
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(PATH=str(bin_dir), BUNDLE=str(tmp_path / "no-bundle.tar.xz"))
    out = tmp_path / "out"

    proc = subprocess.run([shutil.which("sh") or "/bin/sh", str(ROOT / "experiments" /
                                                                "gpu_check.sh"), "--quick",
                           str(out)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=30)

    assert proc.returncode != 0
    assert "step: gpu:" in proc.stderr
    assert "gpu_check: FAILED at gpu: no NVIDIA GPU: nvidia-smi not found" in proc.stderr
    assert "step: install" not in proc.stderr and list(out.iterdir()) == []
