"""The ``fluid`` command line: ``fluid plan`` and ``fluid bench policy``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fluid.cli import SUBCOMMANDS, main
from fluid.cli import bench as bench_cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _write(tmp_path: Path, obj: Any, name: str = "inst.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return str(path)


def test_plan_figure5_json_meets_the_acceptance(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "plan", "--example", "figure5", "--json")
    assert code == 0 and err == ""
    result = json.loads(out)  # exactly one JSON object
    span = result["makespan"]
    assert set(span) == {"fifo", "static", "dynamic", "lower_bound", "best_found"}
    assert span["fifo"] == 30 and span["static"] == 12 and span["lower_bound"] == 7.5
    assert span["dynamic"] <= 10
    assert span["best_found"] is not None and span["best_found"] <= 12
    assert result["widths"] == {"a4": 3.0, "a3": 1.0, "a1": 0.5, "a2": 0.5}
    assert result["placement"] == {
        "0": [["a4", 1.0]],
        "1": [["a4", 1.0]],
        "2": [["a4", 1.0]],
        "3": [["a3", 1.0]],
        "4": [["a1", 0.5], ["a2", 0.5]],
    }


def test_plan_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "plan", "--example", "figure5")
    assert code == 0 and err == ""
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("trial"))
    for column in ("h_i1", "alpha", "beta", "c_i", "d_i", "width", "GPUs", "start", "finish"):
        assert column in header
    a4 = next(line.split() for line in lines if line.startswith("a4 "))
    assert a4 == ["a4", "30", "1", "1", "2", "4", "3", "0-2", "0", "9.5"]
    a1 = next(line.split() for line in lines if line.startswith("a1 "))
    assert a1[6:8] == ["1/2", "4"]
    assert any(line.startswith("fifo (one trial per GPU)") and "30" in line for line in lines)
    assert "fifo / dynamic = 3.16x" in out
    assert "idle GPUs at t = 0: none" in out


def test_plan_instance_file_and_idle_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path,
        {
            "gpus": 4,
            "c": 2,
            "d": 1,
            "trials": [{"id": "x", "runtime": 10}, {"id": "y", "runtime": 3}],
        },
    )
    code, out, _ = _run(capsys, "plan", path, "--json")
    result = json.loads(out)
    assert code == 0
    # d = 1 and packing is free (alpha = 1): no trial would end sooner on the spare GPUs.
    assert result["widths"] == {"x": 1.0, "y": 0.5}
    assert result["placement"]["2"] == [] and result["idle_gpus"] == [2, 3]
    assert result["makespan"]["fifo"] == 10.0
    code, out, _ = _run(capsys, "plan", path)
    assert code == 0 and "idle GPUs at t = 0: 2, 3 (2 of 4)" in out


def test_plan_large_group_has_no_best_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trials = [{"id": f"t{i}", "runtime": 10 + i, "alpha": 1.2, "beta": 1.05} for i in range(20)]
    path = _write(tmp_path, {"gpus": 16, "eps": 2.0, "trials": trials})
    code, out, _ = _run(capsys, "plan", path, "--json")
    span = json.loads(out)["makespan"]
    assert code == 0 and span["best_found"] is None
    for policy in ("fifo", "static", "dynamic"):
        assert span[policy] >= span["lower_bound"]
    code, out, _ = _run(capsys, "plan", path)
    assert "not computed" in out


BAD_INSTANCES = [
    ({"gpus": 0, "trials": [{"id": "a", "runtime": 1}]}, "gpus must be >= 1, got 0"),
    ({"gpus": 2, "trials": [{"id": "a", "runtime": -1}]}, "trials[0].runtime must be > 0 seconds"),
    ({"gpus": 2, "trials": [{"id": "a", "runtime": "1"}]}, "trials[0].runtime must be a number"),
    ({"gpus": 2, "c": 0, "trials": [{"id": "a", "runtime": 1}]}, "c must be >= 1, got 0"),
    ({"gpus": 2, "d": 0, "trials": [{"id": "a", "runtime": 1}]}, "d must be >= 1, got 0"),
    (
        {"gpus": 2, "trials": [{"id": "a", "runtime": 1, "alpha": 0.5}]},
        "trials[0].alpha must be >= 1, got 0.5",
    ),
    (
        {"gpus": 2, "trials": [{"id": "a", "runtime": 1, "beta": 0}]},
        "trials[0].beta must be >= 1, got 0",
    ),
    (
        {"gpus": 2, "trials": [{"id": "a", "runtime": 1}, {"id": "a", "runtime": 2}]},
        "trials[1].id 'a' duplicates trials[0].id",
    ),
    ({"gpus": 2}, "trials is missing (required)"),
    ({"gpus": 2, "trials": [{"id": "a", "runtime": 1}], "foo": 1}, "unknown field 'foo'"),
    ("{not json", "not valid JSON"),
    ("[]", "an instance must be a JSON object"),
]


@pytest.mark.parametrize(("content", "message"), BAD_INSTANCES)
def test_plan_bad_input_exits_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, message: str
) -> None:
    path = _write(tmp_path, content)
    code, out, err = _run(capsys, "plan", path, "--json")
    assert code == 2 and out == ""
    assert err.startswith(f"fluid: error: {path}: ")
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_plan_missing_file_and_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.json")
    code, _, err = _run(capsys, "plan", missing)
    assert code == 2 and err == f"fluid: error: {missing}: no such file\n"
    code, _, err = _run(capsys, "plan")
    assert code == 2 and "one of the arguments INSTANCE.json --example is required" in err
    code, _, err = _run(capsys, "plan", missing, "--example", "figure5")
    assert code == 2 and "not allowed with" in err
    code, _, err = _run(capsys, "plan", "--example", "figure9")
    assert code == 2 and "invalid choice" in err
    code, _, err = _run(capsys)
    assert code == 2 and "plan" in err and "bench" in err
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and "plan" in out


def test_subcommands_register_one_line_each() -> None:
    assert SUBCOMMANDS[:2] == ("fluid.cli.plan", "fluid.cli.bench")


@pytest.fixture()
def small_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench grid cut to two sizes (keeping the 1,000 x 512 target cell) for speed."""
    monkeypatch.setattr(bench_cli, "TRIAL_COUNTS", (10, 1000))
    monkeypatch.setattr(bench_cli, "GPU_COUNTS", (8, 512))


def test_bench_policy_json(small_bench: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "bench", "policy", "--json", "--repeat", "2")
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert [(r["trials"], r["gpus"]) for r in rows] == [(10, 8), (10, 512), (1000, 8), (1000, 512)]
    for r in rows:
        assert r["static_ms"] > 0 and r["dynamic_ms"] > 0 and 1 <= r["started"] <= r["trials"]


def test_bench_policy_table(small_bench: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "bench", "policy", "--repeat", "1")
    assert code == 0
    assert "StaticFluid" in out and "DynamicFluid" in out
    assert "1,000 trials on 512 GPUs < 10 ms" in out
    assert len([line for line in out.splitlines() if line.strip()[:1].isdigit()]) == 4


def test_bench_full_grid_is_the_issue_grid() -> None:
    assert bench_cli.TRIAL_COUNTS == (10, 100, 1000, 10000)
    assert bench_cli.GPU_COUNTS == (8, 64, 512)


def test_bench_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "bench")
    assert code == 2 and "TARGET" in err
    code, _, err = _run(capsys, "bench", "policy", "--repeat", "0")
    assert code == 2 and err == "fluid: error: --repeat must be >= 1, got 0\n"


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
    path = _write(tmp_path, {"gpus": 2, "trials": [{"id": "a", "runtime": 0}]})
    proc = subprocess.run(
        [sys.executable, "-m", "fluid", "plan", path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"fluid: error: {path}: trials[0].runtime must be > 0 seconds, got 0\n"


def test_simulate_says_in_one_line_when_ray_is_too_old(monkeypatch, capsys):
    import ray

    monkeypatch.setattr(ray, "__version__", "2.55.1")
    assert main(["simulate", "--algorithm", "grid", "--workload", "synthetic", "--gpus", "4",
                 "--seeds", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "found ray 2.55.1" in err[0] and "ray[tune]>=2.57" in err[0], err
