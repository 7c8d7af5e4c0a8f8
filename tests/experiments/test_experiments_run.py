"""The experiment runner (`python -m experiments.run`), its run record and the calibration maths.

The slow test is the CI smoke test: each of the three tasks for a couple of iterations under
FluidExecutor with logical GPUs, then `fluid report` on the three results.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments.calibrate import calibrate, geometric_std, markdown, spearman
from experiments.record import (
    RunRecorder,
    allocation_utilization,
    best_over_time,
    gpu_seconds,
    load_run,
    time_to_target,
    write_run,
)
from experiments.run import ALGORITHMS, SMOKE, build_algorithm, build_parser, summary
from experiments.tasks import TASKS
from experiments.trainable import make_trainable, trial_config

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- run record


def test_best_over_time_keeps_improvements_only():
    points = [(3.0, 0.5), (1.0, 0.2), (2.0, 0.1), (4.0, None), (5.0, 0.7)]
    assert best_over_time(points, "max") == [[1.0, 0.2], [3.0, 0.5], [5.0, 0.7]]
    assert best_over_time(points, "min") == [[1.0, 0.2], [2.0, 0.1]]


def test_time_to_target_is_first_hit_or_none():
    points = [(5.0, 150.0), (2.0, 200.0), (7.0, 139.0), (6.0, 140.0)]
    assert time_to_target(points, "min", 140.0) == 6.0
    assert time_to_target(points, "max", 1000.0) is None


def test_gpu_seconds_integrates_width_over_time():
    shapes = [[0.0, 0.5, [0]], [4.0, 2.0, [0, 1]], [6.0, None, []]]
    assert gpu_seconds(shapes, end=10.0) == pytest.approx(0.5 * 4 + 2 * 2)
    assert gpu_seconds([[1.0, 1.0, [0]]], end=3.0) == pytest.approx(2.0)  # still running


def test_allocation_utilization_sums_packed_shares_and_gangs():
    shapes = {
        "a": [[0.0, 0.5, [0]], [4.0, None, []]],
        "b": [[1.0, 0.25, [0]], [4.0, 2.0, [0, 1]], [5.0, None, []]],
    }
    util = allocation_utilization(shapes, gpus=3, end=6.0)
    assert util["source"] == "allocation"

    def at(series, t):
        return [v for s, v in series if s <= t][-1]

    g0, g1, g2 = (util["gpus"][k] for k in ("0", "1", "2"))
    assert at(g0, 0.5) == 0.5
    assert at(g0, 2.0) == 0.75
    assert at(g0, 4.5) == 1.0  # a left and b became a gang at the same instant
    assert at(g1, 3.5) == 0.0 and at(g1, 4.5) == 1.0 and at(g1, 5.5) == 0.0
    assert at(g0, 5.5) == 0.0
    assert g2 == [[0.0, 0.0], [6.0, 0.0]]  # never used, but present over the whole run


def test_run_record_round_trip_drops_non_finite(tmp_path):
    path = write_run({"trials": [], "best_metric": math.inf, "x": [math.nan, 1.0]}, tmp_path)
    assert path.name == "run.json"
    record = load_run(tmp_path)
    assert record["best_metric"] is None and record["x"] == [None, 1.0]
    with pytest.raises(FileNotFoundError):
        load_run(tmp_path / "nowhere")


def test_recorder_logs_results_and_prints_progress():
    clock = iter([0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).__next__
    out = io.StringIO()
    rec = RunRecorder("acc", "max", clock=clock, progress=out, shape_of=lambda _id: "1 GPU")
    rec.start()
    trial = SimpleNamespace(trial_id="t1", config={"lr": 0.1})
    rec.on_trial_start(0, [], trial)
    rec.on_trial_result(0, [], trial, {"acc": 0.3, "training_iteration": 1, "junk": [1]})
    rec.on_trial_result(0, [], trial, {"acc": 0.2, "training_iteration": 2})
    rec.on_trial_complete(0, [], trial)
    log = rec.trials["t1"]
    assert log.iterations == 2 and log.status == "TERMINATED"
    assert log.metrics[0] == {"t": 2.0, "acc": 0.3, "training_iteration": 1.0}
    assert log.runs == [[1.0, 4.0]]
    line = out.getvalue()
    assert "t1 terminated" in line and "2 iterations" in line and "0.3" in line and "1 GPU" in line


# --------------------------------------------------------------------------- algorithms, CLI


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_builds(algorithm):
    scheduler, search_alg, samples = build_algorithm(TASKS["cifar10"], algorithm, SMOKE)
    expected = {
        "grid": (None, None), "random": (None, None), "hyperband": ("HyperBandScheduler", None),
        "syncbohb": ("SyncBOHB", "TuneBOHB"), "bohb": ("HyperBandForBOHB", "TuneBOHB"),
        "asha": ("ASHAScheduler", None), "pbt": ("PopulationBasedTraining", None),
        "hyperopt": (None, "HyperOptSearch"),
    }[algorithm]  # fmt: skip
    got = tuple(type(x).__name__ if x is not None else None for x in (scheduler, search_alg))
    assert got == expected
    if scheduler is not None:
        assert type(scheduler).__module__.startswith("fluid.schedulers")  # Fluid's adapted ones
    assert samples == (1 if algorithm == "grid" else SMOKE.samples)


def test_pbt_mutates_the_continuous_hyperparameters():
    scheduler, _, _ = build_algorithm(TASKS["wlm"], "pbt", SMOKE)
    assert set(scheduler._hyperparam_mutations) == {"lr", "dropout"}  # as in the simulator
    assert scheduler._time_attr == "training_iteration"
    assert scheduler._perturbation_interval == SMOKE.perturbation_interval


def test_parser_defaults_and_choices():
    args = build_parser().parse_args(["--task", "wlm", "--smoke", "--json"])
    assert (args.algorithm, args.executor, args.gpus) == ("hyperband", "fluid", None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--task", "imagenet"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--task", "wlm", "--algorithm", "sgd"])


def test_summary_counts_trials_and_nulls_non_finite():
    record = {"task": "wlm", "algorithm": "asha", "executor": "tune", "gpus": 2,
              "best_metric": math.inf, "time_to_target": None, "trial_count": 3,
              "trials": [{}, {}, {}], "wall_clock": 1.0, "gpu_seconds": 2.0,
              "results_dir": "r", "metric": "val_perplexity", "mode": "min", "target": 140.0}
    out = summary(record)
    assert out["trials"] == 3 and out["best_metric"] is None
    json.dumps(out, allow_nan=False)


def test_smoke_config_and_elastic_marker():
    task = TASKS["wlm"]
    train, _ = task.build_datasets(None, True)
    cfg = trial_config(task, {"emsize": 256, "nhid": 512}, train, smoke=True)
    assert (cfg["emsize"], cfg["nhid"]) == (16, 32)
    assert cfg["vocab_size"] == len(train.vocab)
    from fluid.train import is_elastic

    assert is_elastic(make_trainable("dcgan", smoke=True))


# --------------------------------------------------------------------------- calibration maths


def test_spearman_and_ratio_spread():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9486833)  # ties: average ranks (as scipy)
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert geometric_std([2.0, 2.0]) == pytest.approx(1.0)
    assert geometric_std([1.0, 4.0]) == pytest.approx(2.0)


def test_calibrate_end_to_end_on_a_small_spread():
    result = calibrate(("dcgan",), configs=2, max_batch=4, steps=1, progress=None)
    rows = result["rows"]["dcgan"]
    assert [r["config"]["ngf"] for r in rows] == [32, 32]  # the varied widths, not lr only
    assert all(r["measured_s"] > 0 and r["flop_model_s"] > 0 for r in rows)
    assert all(r["simulator_s"] > 0 for r in rows)  # the simulator's model for the same configs
    flop = result["summary"]["dcgan"]["flop_model"]
    ratios = [r["measured_s"] / r["flop_model_s"] for r in rows]
    assert min(ratios) <= 1.0 <= max(ratios)  # one throughput fitted to these very configs
    assert flop["ratio_max_over_min"] == pytest.approx(max(ratios) / min(ratios))
    assert "| dcgan | 2 |" in markdown(result)


# --------------------------------------------------------------------------- CI smoke test


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_smoke_three_tasks_then_report(tmp_path):
    """Each task, a couple of iterations under FluidExecutor with logical GPUs, then plots.

    cifar10 and wlm: 2 trials on 2 GPUs (one GPU each, the loop in the trial process);
    dcgan: 2 trials on 4 GPUs with a profile that says scaling pays (``beta`` 1, ``d`` 2), so
    Fluid gives each a gang of 2 (DDP over gloo); without one an unmeasured trial starts on one
    GPU (the conservative prior).
    """
    from fluid.report import png_text

    dirs, gpus = [], {"cifar10": 2, "wlm": 2, "dcgan": 4}
    for name in ("cifar10", "wlm", "dcgan"):
        out = tmp_path / name
        profile = ["--fluid-options", '{"beta": 1.0, "d": 2}'] if name == "dcgan" else []
        proc = _run(["-m", "experiments.run", "--task", name, "--smoke", "--json",
                     "--gpus", str(gpus[name]), "--samples", "2", "--max-t", "2",
                     "--results-dir", str(out), *profile], timeout=200)
        assert proc.returncode == 0, proc.stderr[-4000:]
        head = json.loads(proc.stdout)  # stdout is exactly one JSON object
        for key in ("task", "algorithm", "executor", "best_metric", "time_to_target",
                    "trials", "results_dir"):
            assert key in head, key
        assert (head["task"], head["executor"], head["trials"]) == (name, "fluid", 2)
        assert head["failed_trials"] == 0
        assert isinstance(head["best_metric"], float)
        assert proc.stderr.count("finished): 2 iterations") == 2  # a progress line per trial
        record = load_run(out)
        assert record["utilization"]["source"] == "allocation"  # no NVML here
        assert set(record["utilization"]["gpus"]) == {str(g) for g in range(gpus[name])}
        widths = set()
        for trial in record["trials"]:
            assert trial["status"] == "TERMINATED", trial
            assert [m["training_iteration"] for m in trial["metrics"]] == [1.0, 2.0]
            assert trial["shapes"][0][1] > 0 and trial["shapes"][-1][1] is None
            widths |= {s[1] for s in trial["shapes"] if s[1]}
        if name == "dcgan":
            assert max(widths) >= 2, widths  # a gang ran (GanReplicas under DDP)
        assert 0 < record["gpu_seconds"] <= record["gpu_seconds_available"] + 1e-6
        dirs.append(str(out))
    report = tmp_path / "report"
    proc = _run(["-m", "fluid.cli.report", *dirs, "--out", str(report), "--json"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    listed = {Path(p["path"]).name: p for p in json.loads(proc.stdout)}
    assert set(listed) == {"best_metric.png"} | {
        f"{kind}-{name}-fluid.png" for kind in ("utilization", "shapes")
        for name in ("cifar10", "wlm", "dcgan")}  # fmt: skip
    for file, entry in listed.items():
        text = png_text(report / file)
        task = file.split("-")[1] if "-" in file else None
        want = {"best_metric": 3, "shapes": 2}.get(entry["kind"]) or gpus[task]
        assert int(text["fluid:series"]) == want, file
