"""`fluid report`: the three kinds of plot from run records, as valid PNGs with their series."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from fluid.cli import report as cli_report
from fluid.report import ReportError, load_runs, png_text, run_labels, write_report
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
    assert "no run record" in capsys.readouterr().err
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
    with pytest.raises(ReportError, match=r"fluid-tune\[plot\]"):
        write_report([_write(tmp_path, "a", _record("fluid"))], tmp_path / "out")
