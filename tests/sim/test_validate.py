"""``fluid simulate --validate``: references with sources, the JSON shape, the goals."""

from __future__ import annotations

import json

import pytest

from fluid.sim import packing_refs
from fluid.sim.truth import PerfParams
from fluid.sim.validate import (
    load,
    packing_points,
    paper_consistent_range,
    scaling_points,
    scaling_summary,
)


def test_every_reference_point_carries_its_source():
    for pt in load("scaling")["points"]:
        assert pt["source"]["citation"] and pt["source"]["url"] and pt["source"]["where"]
        assert pt["measured"] and pt["hardware"] and pt["kind"] in ("weak", "strong")
    for pt in load("packing")["points"]:
        assert pt["source"] and pt["mode_inferred"] in packing_refs.MODES
        assert pt["throughput_ratio"] > 0 and pt["gpu"] and pt["workload"]
    t2 = load("table2")
    assert [r["workers"] for r in t2["rows"]] == [2, 4, 8, 16, 32]
    assert t2["source"]["citation"]


def test_one_work_run_in_waves_stays_in_the_range_its_neighbours_allow():
    """Successive halving of equal trials (81, 27, 9, 3 trials of 1, 2, 6, 18 epochs) on 2..32
    workers: every row within its neighbours' range; the paper's 8 and 16 rows are not."""
    rows = []
    for n in (2, 4, 8, 16, 32):
        runtime = sum(-(-k // n) * e for k, e in ((81, 1), (27, 2), (9, 6), (3, 18)))
        rows.append({"workers": n, "utilization": 243 / (n * runtime), "runtime_s": runtime})
    ranges = paper_consistent_range(rows)
    assert all(low <= r["utilization"] <= high for r, (low, high) in zip(rows, ranges, strict=True))
    assert ranges[0][1] == 1.0 and ranges[-1][0] == 0.0  # no neighbour: no bound
    paper = load("table2")["rows"]
    outside = [r["workers"] for r, (low, high) in zip(paper, paper_consistent_range(paper),
                                                          strict=True)
               if not low <= r["utilization"] <= high]
    assert outside == [8, 16]
    low, high = paper_consistent_range(paper)[2]
    assert low == pytest.approx(3931.2 / (16 * 475), rel=1e-3) and high < 0.7


def test_scaling_goal_weak_and_strong_together():
    s = scaling_summary(scaling_points())
    assert len(s["points"]) >= 12 and s["median_abs_rel_error"] <= 0.20
    assert s["strong_one_node"]["points"] >= 4
    assert s["by_kind"]["weak"]["points"] + s["by_kind"]["strong"]["points"] == len(s["points"])


def test_packing_goal_over_the_shipped_points():
    out = packing_points()
    assert len(out["points"]) >= 25 and out["median_abs_rel_error"] <= 0.15
    for fam, v in out["by_family"].items():
        assert abs(v["median_signed_error"]) <= 0.15, fam
    assert set(out["by_family"]) <= set(packing_refs.FAMILIES)
    assert all(s["reason"] for s in out["skipped"])


def test_packing_model_is_the_truth_and_follows_the_inputs():
    pt = {"gpu": "X", "gpu_fp32_peak_tflops": 20.0, "workload": "AlexNet", "batch": 32,
          "flops_per_sample": 1e9, "k": 2, "mode_inferred": "time-slicing",
          "throughput_ratio": 1.5}
    base = packing_refs.model_ratio(pt)
    # A faster GPU leaves more of each step to the fixed overhead: packing gains more.
    assert packing_refs.model_ratio({**pt, "gpu_fp32_peak_tflops": 80.0}) > base
    # A bigger batch fills the GPU: packing gains less.
    assert packing_refs.model_ratio({**pt, "batch": 1024}) < base
    # A measured utilisation replaces the step model; MPS never beats time-slicing by more
    # than the published bound.
    idle = {**pt, "solo_utilization": 0.4}
    assert packing_refs.model_ratio(idle) == pytest.approx(
        2 / (1 + PerfParams().contention * 0.4))
    ratio = packing_refs.model_ratio({**pt, "mode_inferred": "mps"}) / base
    assert 1.0 < ratio <= 1.0 / (1.0 - PerfParams().mps_overlap)
    assert packing_refs.family({"workload": "2-layer LSTM LM"}) == "RNN"
    assert packing_refs.family({"workload": "DCGAN"}) == "GAN"
    assert packing_refs.family({"workload": "PointNet", "family": "other"}) == "other"


def _write(tmp_path, points):
    path = tmp_path / "refs.json"
    path.write_text(json.dumps({"points": points}))
    return path


def test_references_file_not_in_the_repository(tmp_path, capsys):
    from fluid.cli import main

    shipped = load("packing")["points"]
    # Points of the schema the repository does not ship: shipped inputs at other degrees,
    # modes and utilisations, with their own reference ratios.
    points = [{**shipped[0], "k": 3, "mode_inferred": "mps", "throughput_ratio": 1.7},
              {**shipped[40], "solo_utilization": 0.5, "throughput_ratio": 1.9},
              {"gpu": "H100", "gpu_fp32_peak_tflops": 66.9, "workload": "GRU LM", "batch": 8,
               "flops_per_sample": 2e9, "k": 2, "mode_inferred": "other",
               "throughput_ratio": 1.6},
              {"gpu": "A100", "workload": "something", "k": None, "throughput_ratio": 1.2}]
    path = _write(tmp_path, points)
    assert main(["simulate", "--validate", "--references", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["packing"]
    assert [p["index"] for p in out["points"]] == [0, 1, 2]
    for row, pt in zip(out["points"], points, strict=False):
        assert row["model"] == pytest.approx(packing_refs.model_ratio(pt))
        assert row["error"] == pytest.approx((row["model"] - pt["throughput_ratio"])
                                             / pt["throughput_ratio"])
    fams = [packing_refs.family(pt) for pt in points[:3]]
    assert {f: v["points"] for f, v in out["by_family"].items()} == {
        f: fams.count(f) for f in set(fams)}
    assert out["skipped"][0]["index"] == 3
    assert main(["simulate", "--validate", "--references", str(path)]) == 0
    assert "median |relative error|" in capsys.readouterr().out


@pytest.mark.parametrize(("bad", "match"), [
    ({"mode_inferred": "mig"}, "mode_inferred"),
    ({"throughput_ratio": -1.0}, "throughput_ratio"),
    ({"k": 2.5}, "k must be an integer"),
    ({"solo_utilization": 1.5}, "solo_utilization"),
    ({"family": "Transformer"}, "family"),
])
def test_a_malformed_references_file_is_refused_by_field(tmp_path, capsys, bad, match):
    from fluid.cli import main

    pt = {"gpu": "X", "gpu_fp32_peak_tflops": 20.0, "workload": "AlexNet", "batch": 32,
          "flops_per_sample": 1e9, "k": 2, "mode_inferred": "mps", "throughput_ratio": 1.5}
    path = _write(tmp_path, [{**pt, **bad}])
    assert main(["simulate", "--validate", "--references", str(path)]) != 0
    assert match in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert main(["simulate", "--validate", "--references", str(empty)]) != 0
    assert "non-empty" in capsys.readouterr().err
    assert main(["simulate", "--references", str(path)]) != 0
    assert "--references needs --validate" in capsys.readouterr().err


@pytest.mark.slow
def test_the_fit_reproduces_the_shipped_constants():
    from experiments.fit_truth import _data, fit

    got, p = fit(_data()), PerfParams()
    assert (got.step_overhead_s, got.half_flops, got.contention) == pytest.approx(
        (p.step_overhead_s, p.half_flops, p.contention))


def test_the_fit_reports_each_group_held_out(monkeypatch, capsys):
    """The report around the fit (the grid search itself is the test above, run once): each
    fit stands in as the shipped constants."""
    from experiments import fit_truth

    monkeypatch.setattr(fit_truth, "fit", lambda rows: PerfParams())
    out = fit_truth.main(["--json"])
    assert json.loads(capsys.readouterr().out) == out
    assert set(out["held_out"]) == {"K80", "3090", "V100", "P100", "strong, one node"}
    total = sum(v["points"] for v in out["held_out"].values())
    assert total == out["fit"]["points"] and all(
        0 <= v["median_abs_rel_error"] < 1 for v in out["held_out"].values())


@pytest.mark.slow
def test_validate_json_shape_and_table2(capsys):
    from fluid.cli import main

    assert main(["simulate", "--validate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"scaling", "packing", "table2"}
    assert {"points", "median_abs_rel_error", "by_kind", "strong_one_node"} <= set(out["scaling"])
    assert {"points", "median_abs_rel_error", "by_family", "skipped"} <= set(out["packing"])
    for p in out["packing"]["points"]:
        assert {"config", "family", "k", "reference", "model", "error"} <= set(p)
    rows = out["table2"]["rows"]
    assert [r["workers"] for r in rows] == [2, 4, 8, 16, 32]
    assert set(rows[0]) == {"workers", "paper_utilization", "paper_consistent_range",
                            "utilization", "paper_runtime", "makespan"}
    assert out["table2"]["paper_rows_outside_their_range"] == [8, 16]
    errs = [abs(r["utilization"] - r["paper_utilization"]) for r in rows]
    assert out["table2"]["max_abs_utilization_error"] == pytest.approx(max(errs))
    # Utilisation falls as workers grow, as in the paper.
    assert rows[0]["utilization"] > rows[-1]["utilization"]
