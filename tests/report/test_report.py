"""`fluid report`: the three kinds of plot from run records, as valid PNGs with their series."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from fluid.cli import report as cli_report
from fluid.report import (
    ReportError,
    gpu_use,
    load_runs,
    load_tune_experiment,
    png_text,
    run_labels,
    write_report,
)
from fluid.report._plots import _sample_average, _step_average


def _record(executor: str, task: str = "cifar10", trials: int = 3, gpus: int = 2) -> dict:
    """A small run record in the format experiments.run writes."""
    out = []
    for i in range(trials):
        width = [0.5, 1.0, 2.0][i % 3]
        ids = [0] if width < 1 else list(range(int(width)))
        start = 1.0 * i
        out.append({
            "id": f"t{i}",
            "config": {"lr": 0.1 * (i + 1)},
            "iterations": 2,
            "status": "TERMINATED" if i else "ERROR",
            "metrics": [{"t": start + 2.0, "training_iteration": 1, "val_accuracy": 0.2 + 0.1 * i},
                        {"t": start + 4.0, "training_iteration": 2, "val_accuracy": 0.3 + 0.1 * i}],
            "shapes": [[start, width, ids], [start + 3.0, 1.0, [1]], [start + 4.0, None, []]],
        })  # fmt: skip
    return {
        "task": task, "algorithm": "hyperband", "executor": executor, "gpus": gpus,
        "metric": "val_accuracy", "mode": "max", "target": 0.5, "wall_clock": 10.0,
        "best_metric": 0.5, "time_to_target": 6.0,
        "best_over_time": [[2.0, 0.2], [3.0, 0.3], [6.0, 0.5]],
        "trials": out,
        "utilization": {"source": "allocation", "gpus": {
            "0": [[0.0, 0.0], [0.0, 0.5], [3.0, 1.0], [10.0, 0.0]],
            "1": [[0.0, 0.0], [2.0, 1.0], [6.0, 0.0], [10.0, 0.0]]}},
    }  # fmt: skip


def _write(tmp_path, name, record):
    d = tmp_path / name
    d.mkdir()
    (d / "run.json").write_text(json.dumps(record))
    return d


def _invoke(argv):
    parser = argparse.ArgumentParser(prog="fluid")
    cli_report.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_three_kinds_of_plot_with_their_series(tmp_path, capsys):
    a = _write(tmp_path, "a", _record("fluid", trials=3))
    b = _write(tmp_path, "b", _record("tune", trials=4))
    out = tmp_path / "plots"
    assert _invoke(["report", str(a), str(b), "--out", str(out), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted([
        "best_metric.png", "utilization-fluid.png", "utilization-tune.png",
        "shapes-fluid.png", "shapes-tune.png",
    ])  # fmt: skip
    assert {e["kind"] for e in listed} == {"best_metric", "utilization", "shapes"}
    expected = {
        "best_metric.png": ["fluid", "tune"],
        "utilization-fluid.png": ["GPU 0", "GPU 1"],
        "shapes-fluid.png": ["t0", "t1", "t2"],
        "shapes-tune.png": ["t0", "t1", "t2", "t3"],
    }
    for name, labels in expected.items():
        text = png_text(out / name)
        assert int(text["fluid:series"]) == len(labels), name
        assert sorted(json.loads(text["fluid:labels"])) == sorted(labels), name


def test_default_out_dir_is_inside_the_first_run(tmp_path, capsys):
    a = _write(tmp_path, "a", _record("fluid"))
    assert cli_report.main([str(a)]) == 0
    assert (a / "report" / "best_metric.png").is_file()
    assert "3 series" in capsys.readouterr().out  # the shapes plot of 3 trials


def test_one_panel_per_task(tmp_path):
    plots = write_report(
        [_write(tmp_path, "a", _record("fluid")),
         _write(tmp_path, "b", _record("fluid", task="wlm"))], tmp_path / "out")
    best = next(p for p in plots if p.kind == "best_metric")
    assert best.series == ["cifar10 / fluid", "wlm / fluid"]
    assert {p.path.name for p in plots} >= {"shapes-cifar10-fluid.png", "shapes-wlm-fluid.png"}


def test_labels_unique_for_repeated_runs():
    runs = [_record("fluid"), _record("fluid"), _record("tune")]
    assert run_labels(runs) == ["fluid #1", "fluid #2", "tune"]


def test_missing_or_bad_records_are_user_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli_report.main([str(empty)]) == 2
    assert "neither a run record (run.json" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run.json").write_text(json.dumps({"task": "x"}))
    with pytest.raises(ReportError, match="missing"):
        load_runs([bad])


def test_png_check_rejects_corrupt_files(tmp_path):
    plots = write_report([_write(tmp_path, "a", _record("fluid"))], tmp_path / "out")
    data = bytearray(plots[0].path.read_bytes())
    data[40] ^= 0xFF  # inside IHDR/early chunk: breaks a CRC
    broken = tmp_path / "broken.png"
    broken.write_bytes(bytes(data))
    with pytest.raises(ReportError):
        png_text(broken)
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(plots[0].path.read_bytes()[:-12])  # no IEND
    with pytest.raises(ReportError):
        png_text(truncated)


def test_heatmap_bins_average_allocation_and_samples():
    edges = np.array([0.0, 2.0, 4.0])
    # 0.5 from t=1 to t=3, then 1.0: bin [0,2) -> 0.25, bin [2,4) -> (0.5 + 1.0) / 2
    np.testing.assert_allclose(_step_average([[0, 0.0], [1, 0.5], [3, 1.0]], edges), [0.25, 0.75])
    got = _sample_average([[0.5, 0.2], [1.5, 0.4]], edges)
    assert got[0] == pytest.approx(0.3) and np.isnan(got[1])


def test_missing_matplotlib_gives_a_clear_error(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ReportError, match=r"pip install matplotlib"):
        write_report([_write(tmp_path, "a", _record("fluid"))], tmp_path / "out")


# --------------------------------------------------------------------------- Tune directories


def _tune_dir(tmp_path, rows_by_trial, state=True):
    """A Tune experiment directory as Tune writes it: one result.json per trial directory."""
    root = tmp_path / "exp"
    root.mkdir()
    trial_data = []
    for name, rows in rows_by_trial.items():
        (root / name).mkdir()
        (root / name / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        meta = {"trial_id": rows[0]["trial_id"], "relative_logdir": name, "status": "TERMINATED"}
        trial_data.append([json.dumps(meta), json.dumps({"start_time": "1000.0"})])
    if state:
        (root / "experiment_state-2026-01-01_00-00-00.json").write_text(json.dumps({
            "trial_data": trial_data, "runner_data": {"_metric": "acc"},
            "stats": {"start_time": 1000.0}}))
    return root


def _row(tid, it, since_it, since, ts, gpus, acc):
    return {"trial_id": tid, "training_iteration": it, "iterations_since_restore": since_it,
            "time_since_restore": since, "time_this_iter_s": 0.5, "timestamp": ts,
            "fluid_gpus": gpus, "fluid_shape": f"{gpus} GPU", "acc": acc, "config": {"lr": 1}}


def test_tune_directory_times_shapes_and_best(tmp_path):
    # Trial a: 0.5 GPU from 1002.2 (rows at 1002.7, 1003.2), resized to a gang of 2 that
    # starts at 1004.0 (one row at 1004.5). Trial b: one GPU, rows at 1003.0 and 1003.5.
    rows = {
        "t_a": [_row("a", 1, 1, 0.5, 1002, 0.5, 0.1), _row("a", 2, 2, 1.0, 1003, 0.5, 0.2),
                _row("a", 3, 1, 0.5, 1004, 2.0, 0.9)],
        "t_b": [_row("b", 1, 1, 0.5, 1003, 1.0, 0.3), _row("b", 2, 2, 1.0, 1003, 1.0, 0.4)],
    }
    root = _tune_dir(tmp_path, rows)
    with pytest.raises(ReportError, match="records no mode; give --metric NAME and --mode"):
        load_tune_experiment(root)  # Tune's state has the metric, not the mode
    run = load_tune_experiment(root, mode="max")
    a, b = sorted(run["trials"], key=lambda t: t["id"])
    assert [m["acc"] for m in a["metrics"]] == [0.1, 0.2, 0.9]
    # Every row's time lies in its whole second of timestamp (relative to the start, 1000).
    for trial, stamps in ((a, [2, 3, 4]), (b, [3, 3])):
        for m, ts in zip(trial["metrics"], stamps, strict=True):
            assert ts <= m["t"] < ts + 1
    assert [(w, round(t, 6)) for t, w, _ in a["shapes"]][1::2] == [
        (None, round(a["metrics"][1]["t"], 6)), (None, round(a["metrics"][2]["t"], 6))]
    assert [w for _, w, _ in a["shapes"]] == [0.5, None, 2.0, None]
    assert [v for _, v in run["best_over_time"]] == [0.1, 0.2, 0.3, 0.4, 0.9]
    assert run["executor"] == "fluid" and a["status"] == "TERMINATED"
    assert max(v for _, v in gpu_use(run)) == 2.0 and gpu_use(run)[-1][1] == 0.0
    # min mode from the command line: the best is the lowest.
    assert load_tune_experiment(root, "acc", "min")["best_metric"] == 0.1


def test_tune_directory_errors(tmp_path):
    root = _tune_dir(tmp_path, {"t_a": [{"trial_id": "a", "acc": 1.0}]})
    with pytest.raises(ReportError, match="without timestamp/time_since_restore"):
        load_tune_experiment(root, mode="max")
    (root / "t_a" / "result.json").write_text("{not json\n")
    with pytest.raises(ReportError, match="t_a/result.json:1: not a JSON result row"):
        load_tune_experiment(root, mode="max")


@pytest.mark.slow
def test_report_on_a_real_tune_run_under_fluid(tmp_path, capsys):
    """A plain Tune experiment directory made under FluidExecutor (no run.json)."""
    import ray

    from fluid import FluidExecutor, tune
    from tests.tune.trainables import modeled

    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False,
             log_to_driver=False)
    try:
        analysis = tune.run(
            modeled, config={"q": tune.grid_search([0.5, 1.0, 1.5]), "t": 0.05, "iters": 3},
            metric="score", mode="max", storage_path=str(tmp_path), name="exp", verbose=0,
            trial_executor=FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.2),
        )
    finally:
        ray.shutdown()
    root = tmp_path / "exp"
    assert not (root / "run.json").exists()
    assert _invoke(["report", str(root), "--out", str(tmp_path / "out")]) == 2
    assert "records no mode" in capsys.readouterr().err  # tune.run keeps no mode
    out = tmp_path / "out"
    assert _invoke(["report", str(root), "--mode", "max", "--out", str(out), "--json"]) == 0
    listed = {e["kind"]: e for e in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"best_metric", "gpu_use", "shapes"}
    ids = sorted(t.trial_id for t in analysis.trials)
    assert sorted(listed["shapes"]["series"]) == ids
    for entry in listed.values():
        assert int(png_text(entry["path"])["fluid:series"]) == len(entry["series"])
    run = load_runs([root], mode="max")[0]
    assert run["best_metric"] == pytest.approx(analysis.best_result["score"])
    assert all(t["shapes"] and t["iterations"] == 3 for t in run["trials"])
