"""`fluid profile` prints alpha, c, beta, d and reuses its cache (its own Ray instance)."""

from __future__ import annotations

import json
from pathlib import Path

from fluid.cli import main


def test_fluid_profile_cli_prints_and_reuses_cache(tmp_path, capsys):
    cache = str(tmp_path / "p.json")
    args = ["profile", "tests.tune.profile_trainables:busy", "--iterations", "3",
            "--max-pack", "2", "--max-workers", "1", "--gpus", "2", "--cache", cache]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "alpha =" in first and "CPU numbers" in first
    # no MPS here: the packed copies time-sliced, and the output says why
    assert "packing (time-sliced (nvidia-cuda-mps-control is not on PATH)):" in first
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"alpha", "c", "beta", "d", "pack_times", "device", "cpu_numbers"}
    assert out["cpu_numbers"] is True and out["d"] == 1  # not elastic: no gangs
    assert out["sharing"].startswith("time-sliced")
    # One measured time per packing (how fast is for benchmarks, not for a shared machine).
    assert set(out["pack_times"]) == {"1", "2"} and min(out["pack_times"].values()) > 0
    # The second call measured nothing: it printed what the first one cached.
    cached = json.loads(Path(cache).read_text())
    assert any(entry.get("pack_times") == out["pack_times"] for entry in cached.values()), cached
