"""`fluid profile` prints alpha, c, beta, d and reuses its cache (its own Ray instance)."""

from __future__ import annotations

import json

from fluid.cli import main


def test_fluid_profile_cli_prints_and_reuses_cache(tmp_path, capsys):
    cache = str(tmp_path / "p.json")
    args = ["profile", "tests.tune.profile_trainables:busy", "--iterations", "3",
            "--max-pack", "2", "--max-workers", "1", "--gpus", "2", "--cache", cache]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "alpha =" in first and "CPU numbers" in first
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"alpha", "c", "beta", "d", "pack_times", "device", "cpu_numbers"}
    assert out["cpu_numbers"] is True and out["d"] == 1  # not elastic: no gangs
    # Two busy trials share 2 cores here: each iteration takes about as long as alone or
    # longer, never half as long.
    assert out["pack_times"]["2"] >= 0.8 * out["pack_times"]["1"]
