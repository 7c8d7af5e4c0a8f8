"""``fluid plan``: the plan of one TrialGroup, as a table or JSON; its bad inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .running import run_cli, write_file


def test_plan_figure5_json_meets_the_acceptance(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "plan", "--example", "figure5", "--json")
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
    code, out, err = run_cli(capsys, "plan", "--example", "figure5")
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
    path = write_file(
        tmp_path,
        {
            "gpus": 4,
            "c": 2,
            "d": 1,
            "trials": [{"id": "x", "runtime": 10}, {"id": "y", "runtime": 3}],
        },
    )
    code, out, _ = run_cli(capsys, "plan", path, "--json")
    result = json.loads(out)
    assert code == 0
    # d = 1 and packing is free (alpha = 1): no trial would end sooner on the spare GPUs.
    assert result["widths"] == {"x": 1.0, "y": 0.5}
    assert result["placement"]["2"] == [] and result["idle_gpus"] == [2, 3]
    assert result["makespan"]["fifo"] == 10.0
    code, out, _ = run_cli(capsys, "plan", path)
    assert code == 0 and "idle GPUs at t = 0: 2, 3 (2 of 4)" in out


def test_plan_large_group_has_no_best_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trials = [{"id": f"t{i}", "runtime": 10 + i, "alpha": 1.2, "beta": 1.05} for i in range(20)]
    path = write_file(tmp_path, {"gpus": 16, "eps": 2.0, "trials": trials})
    code, out, _ = run_cli(capsys, "plan", path, "--json")
    span = json.loads(out)["makespan"]
    assert code == 0 and span["best_found"] is None
    for policy in ("fifo", "static", "dynamic"):
        assert span[policy] >= span["lower_bound"]
    code, out, _ = run_cli(capsys, "plan", path)
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
    path = write_file(tmp_path, content)
    code, out, err = run_cli(capsys, "plan", path, "--json")
    assert code == 2 and out == ""
    assert err.startswith(f"fluid: error: {path}: ")
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_plan_missing_file_and_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.json")
    code, _, err = run_cli(capsys, "plan", missing)
    assert code == 2 and err == f"fluid: error: {missing}: no such file\n"
    code, _, err = run_cli(capsys, "plan")
    assert code == 2 and "one of the arguments INSTANCE.json --example is required" in err
    code, _, err = run_cli(capsys, "plan", missing, "--example", "figure5")
    assert code == 2 and "not allowed with" in err
    code, _, err = run_cli(capsys, "plan", "--example", "figure9")
    assert code == 2 and "invalid choice" in err
    code, _, err = run_cli(capsys)
    assert code == 2 and "plan" in err and "bench" in err
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "plan" in out
