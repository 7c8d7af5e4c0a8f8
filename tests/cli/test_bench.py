"""``fluid bench policy``: StaticFluid and DynamicFluid timed on the issue's grid."""

from __future__ import annotations

import json

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
