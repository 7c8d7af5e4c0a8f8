"""``fluid bench gpu``: the whole pipeline on the CPU (``--smoke``), the error without a GPU, bad
options refused, and the packing overhead the simulator is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fluid.cli.bench_gpu import _print_table, packing_alpha
from fluid.cli.bench_gpu_tuning import LRS, SMOKE_JOB
from fluid.gpu.workloads import WORKLOADS
from fluid.sim.packing_refs import check_point

from .running import run_cli, temp_folder_env

ROOT = Path(__file__).resolve().parents[2]
RUN_FIELDS = {"wall_s", "time_to_target_s", "best_config", "best_metric", "peak_gpu_memory"}


@pytest.fixture(scope="session")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """One ``fluid bench gpu --smoke --json --out DIR`` run, as a user runs it (once: a module
    fixture is set up again where pytest runs a test of another module in between)."""
    out, scratch = tmp_path_factory.mktemp("bench-gpu"), tmp_path_factory.mktemp("tmp")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **temp_folder_env(scratch)}
    # About 70 s on an idle 2-core machine; the limit only stops a hang, with room for load.
    done = subprocess.run([sys.executable, "-m", "fluid", "bench", "gpu", "--smoke", "--json",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[" in done.stderr and "tuning: 4 trials of tiny under fluid" in done.stderr
    assert not list(scratch.glob("fluid-bench-gpu-*"))  # Tune's results of its runs: removed
    return json.loads(done.stdout), out


@pytest.mark.slow
def test_smoke_packing_points_follow_the_reference_schema(smoke: tuple[dict, Path]) -> None:
    summary, out = smoke
    [point] = summary["packing"]["points"]  # k = 2 time-sliced; no MPS here
    check_point(point)
    assert (point["workload"], point["k"], point["mode_inferred"]) == (
        WORKLOADS["resnet18"], 2, "time-slicing")
    assert point["source"].startswith("fluid bench gpu --smoke on CPU")
    assert point["gpu"] == summary["gpu"] and point["gpu_fp32_peak_tflops"] > 0
    assert point["repeats"] == 3 and "solo_utilization" in point and point["batch"] == 2
    lo, hi = point["throughput_ratio_spread"]
    assert 0 < lo <= point["throughput_ratio"] <= hi
    assert summary["packing"]["context"]["skipped"][0]["mode"] == "mps"
    assert json.loads((out / "packing.json").read_text()) == summary["packing"]
    assert json.loads((out / "summary.json").read_text())["gpu"] == summary["gpu"]


@pytest.mark.slow
def test_smoke_tuning_runs_both_executors_to_the_same_answer(smoke: tuple[dict, Path]) -> None:
    summary, _ = smoke
    tuning = summary["tuning"]
    plain, fluid = tuning["plain"], tuning["fluid"]
    for run in (plain, fluid):
        assert set(run) >= RUN_FIELDS and run["trials"] == SMOKE_JOB.trials
        assert run["errors"] == 0 and run["peak_gpu_memory"] is None  # no CUDA here
        assert run["best_metric"] >= SMOKE_JOB.target  # the synthetic task is learnt
        assert 0 < run["time_to_target_s"] < run["wall_s"]
        assert run["best_config"]["lr"] in LRS
    assert plain["best_config"] == fluid["best_config"]  # same seeds, same answer
    assert len(fluid["shapes"]) == SMOKE_JOB.trials
    assert all(s.endswith("GPU") for shapes in fluid["shapes"].values() for s in shapes)
    assert fluid["restarts"] >= 0 and "eps" in fluid
    assert fluid["packed_results_under_mps"] == 0  # no MPS here
    assert tuning["speedup"] == pytest.approx(plain["wall_s"] / fluid["wall_s"])
    ratio = summary["packing"]["points"][0]["throughput_ratio"]
    assert tuning["alpha"] == pytest.approx(max(1.0, 2 / ratio))  # a CPU pair may beat 2x
    assert tuning["simulated_speedup"] > 0
    assert summary["mps_processes_left"] == 0


@pytest.mark.slow
def test_the_table_shows_every_point_and_both_runs(smoke: tuple[dict, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    summary, _ = smoke
    _print_table(summary)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"fluid bench gpu on {summary['gpu']}")
    assert "x2 time-slicing ratio" in lines[1]
    speedup = summary["tuning"]["speedup"]
    assert f"speedup {speedup:.2f}x" in lines[2]
    fluid = summary["tuning"]["fluid"]
    assert lines[3] == (f"  packed results under MPS: {fluid['packed_results_under_mps']} of "
                        f"{fluid['packed_results']}")
    assert lines[4].endswith(": 0")  # MPS processes left


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_stops_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "bench", "gpu", "--json")
    assert code == 2 and out == ""
    assert "needs a CUDA GPU" in err and "--smoke" in err


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--parts", "packing,train", "--parts must be among ['packing', 'tuning']"),
    ("--repeats", "2", "--repeats must be in [3, 20], got 2"),
    ("--seconds", "0", "--seconds must be > 0, got 0.0"),
])
def test_bad_options_are_refused_naming_them(capsys: pytest.CaptureFixture[str], option: str,
                                             value: str, message: str) -> None:
    code, _, err = run_cli(capsys, "bench", "gpu", "--smoke", option, value)
    assert code == 2 and message in err


def test_the_simulator_gets_alpha_of_the_pair_fluid_would_run() -> None:
    def point(batch: int, mode: str, ratio: float, k: int = 2) -> dict:
        return {"workload": WORKLOADS["resnet18"], "batch": batch, "k": k,
                "mode_inferred": mode, "throughput_ratio": ratio}

    points = [point(128, "time-slicing", 1.25), point(128, "mps", 1.6), point(64, "mps", 1.9),
              point(128, "mps", 1.7, k=3)]
    assert packing_alpha(points, 128) == pytest.approx(2 / 1.6)  # MPS, the tuning batch
    assert packing_alpha(points[:1], 64) == pytest.approx(2 / 1.25)  # what there is
    assert packing_alpha([point(128, "mps", 1.7, k=3)], 128) is None  # no pair measured
    # A pair measured faster than two alone (2.048x on a loaded CPU) is noise: alpha 1, which
    # the simulator accepts, not 0.977, which it refuses.
    assert packing_alpha([point(128, "time-slicing", 2.048)], 128) == 1.0


@pytest.mark.parametrize("name", ["nvidia-cuda-mps-control", "nvidia-cuda-mps-server"])
def test_a_daemon_left_is_counted_by_its_name_as_linux_keeps_it(tmp_path: Path, name: str) -> None:
    from fluid.cli.bench_gpu import mps_processes_left

    before = mps_processes_left()
    standin = tmp_path / name  # a process of the daemon's name: Linux keeps 15 characters
    standin.write_bytes(Path("/bin/sleep").read_bytes())
    standin.chmod(0o755)
    proc = subprocess.Popen([str(standin), "60"])
    comm = Path(f"/proc/{proc.pid}/comm")
    try:
        for _ in range(200):  # Popen may return before the exec has renamed the process
            if comm.read_text().strip() == name[:15]:
                break
            time.sleep(0.05)
        assert mps_processes_left() == before + 1
    finally:
        proc.kill()
        proc.wait()
    assert mps_processes_left() == before
