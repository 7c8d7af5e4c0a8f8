"""``fluid simulate --validate``: references with sources, the JSON shape, the goals."""

from __future__ import annotations

import json

import pytest

from fluid.sim.validate import load, packing_points, scaling_points


def test_every_reference_point_carries_its_source():
    for name in ("scaling", "packing"):
        for pt in load(name)["points"]:
            assert pt["source"]["citation"] and pt["source"]["url"] and pt["source"]["where"]
            assert pt["measured"] and pt["hardware"]
    t2 = load("table2")
    assert [r["workers"] for r in t2["rows"]] == [2, 4, 8, 16, 32]
    assert t2["source"]["citation"]


def test_scaling_goal_median_error_within_20_percent_over_8_points():
    pts = scaling_points()
    assert len(pts) >= 8
    errs = sorted(abs(p["model"] - p["reference"]) / p["reference"] for p in pts)
    assert errs[len(errs) // 2] <= 0.20


def test_packing_points_compare_the_cifar10_truth():
    (pt,) = packing_points(n=16)
    assert 0 < pt["model"] <= 1 and pt["reference"] == 0.60


@pytest.mark.slow
def test_validate_json_shape_and_table2(capsys):
    from fluid.cli import main

    assert main(["simulate", "--validate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"scaling", "packing", "table2"}
    for key in ("scaling", "packing"):
        assert set(out[key]) == {"points", "median_abs_rel_error"}
        for p in out[key]["points"]:
            assert set(p) == {"config", "gpus", "reference", "model"}
    rows = out["table2"]["rows"]
    assert [r["workers"] for r in rows] == [2, 4, 8, 16, 32]
    assert set(rows[0]) == {"workers", "paper_utilization", "utilization", "paper_runtime",
                            "makespan"}
    errs = [abs(r["utilization"] - r["paper_utilization"]) for r in rows]
    assert out["table2"]["max_abs_utilization_error"] == pytest.approx(max(errs))
    # Goal: within 15 points on every row (docs/simulator.md, "Validation").
    assert max(errs) <= 0.15
    # Utilisation falls as workers grow, as in the paper.
    assert rows[0]["utilization"] > rows[-1]["utilization"]

