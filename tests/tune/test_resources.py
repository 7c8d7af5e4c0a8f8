"""Resource requests under FluidExecutor (4 CPUs, 4 logical GPUs), and what Fluid prints.

A trial that asks for more than one GPU gets at least that many unless the user lets Fluid
resize it; one that asks for exactly one GPU is sized by Fluid unless ``resize_requests=False``;
an elastic trial that asks for none (Tune's default) is sized freely; the plan never runs more
trials than the CPUs allow; plan changes are printed one line each, at Tune's verbosity.
"""

from __future__ import annotations

import logging
import types

import pytest
import ray
from ray.tune.experimental.output import AirVerbosity, TuneTerminalReporter

from fluid import FluidExecutor, tune
from fluid.tune import _plan_lines as plan_lines
from fluid.tune import _ray_compat as compat
from tests.tune.grid_run import run_both
from tests.tune.trainables import modeled

ITERS = 3


def _asking(resources: dict):
    """``modeled`` as an ordinary (not elastic) trainable that asks for ``resources``."""

    def trainable(config: dict) -> None:  # with_resources marks the function: one per request
        modeled(config)

    return ray.tune.with_resources(trainable, resources)


def _run(trainable, ex: FluidExecutor, tmp_path, n: int, verbose: int = 0):
    return tune.run(
        trainable,
        config={"t": 0.1, "iters": ITERS, "n": tune.grid_search(list(range(n)))},
        trial_executor=ex,
        storage_path=str(tmp_path),
        verbose=verbose,
    )


def _gpus_seen(analysis) -> list[float]:
    return [g for t in analysis.trials for g in analysis.trial_dataframes[t.trial_id]["gpus"]]


def _most_placed_at_once(ex: FluidExecutor, trials) -> int:
    """Most trials in Fluid's plan at one time, from every trial's shape timeline."""
    events = []
    for t in trials:
        for at, width, _gpus in ex.shape_timeline(t.trial_id):
            events.append((at, 0 if width is None else 1, t.trial_id))
    placed: set[str] = set()
    most = 0
    for _at, start, tid in sorted(events):  # at equal times, stops (0) before starts (1)
        if start:
            placed.add(tid)
        else:
            placed.discard(tid)
        most = max(most, len(placed))
    return most


def test_two_gpu_request_gets_two_gpus(ray4x4, tmp_path):
    ex = FluidExecutor(cpus_per_trial=0.1, eps=0.5)
    analysis = _run(_asking({"cpu": 0.1, "gpu": 2}), ex, tmp_path, n=3)
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    # Seen from inside the trial: its own placement group, 2 GPUs, never fewer.
    assert _gpus_seen(analysis) == [2.0] * (3 * ITERS)
    assert {r.width for r in ex.records.values() if r.width is not None} <= {2.0}
    # 4 GPUs hold two such trials at once, never three.
    assert _most_placed_at_once(ex, analysis.trials) == 2


def test_one_gpu_request_is_kept_with_resize_requests_false(ray4x4, tmp_path, caplog, capsys):
    ex = FluidExecutor(cpus_per_trial=0.1, eps=0.5, verbose=False, resize_requests=False)
    with caplog.at_level(logging.INFO, logger="fluid"):
        analysis = _run(_asking({"cpu": 0.1, "gpu": 1}), ex, tmp_path, n=8, verbose=1)
    assert _gpus_seen(analysis) == [1.0] * (8 * ITERS)
    shapes = {s for t in analysis.trials for s in analysis.trial_dataframes[t.trial_id]["fluid_shape"]}
    assert shapes == {"1 GPU"}
    # verbose=False: no plan line, although Tune itself is verbose.
    assert not [r for r in caplog.records if r.levelno >= logging.INFO and r.name == "fluid"
                and " runs on " in r.getMessage()]
    # The progress table Tune printed has Fluid's shape column.
    out = capsys.readouterr().out
    assert "fluid_shape" in out and "1 GPU" in out


def test_a_one_gpu_request_is_packed_once_packing_is_measured_cheap(ray4x4, tmp_path, caplog):
    # No Fluid option: the trials' packing is free (``modeled`` runs as fast on a share), which
    # only probes can tell; once measured, later trials start two to a GPU.
    ex = FluidExecutor(cpus_per_trial=0.1)
    with caplog.at_level(logging.INFO, logger="fluid"):
        analysis = tune.run(_asking({"cpu": 0.1, "gpu": 1}), trial_executor=ex,
                            # 1 s iterations: reporting and checkpointing under load must not
                            # look like a packing cost
                            config={"t": 1.0, "iters": 5, "n": tune.grid_search(list(range(12)))},
                            storage_path=str(tmp_path), verbose=1)
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    assert ex.estimator.packing_measured and ex.alpha < 1.2
    probed = {t for t, r in ex.records.items() if r.probe}
    packed = [t.trial_id for t in analysis.trials if t.trial_id not in probed
              and min(analysis.trial_dataframes[t.trial_id]["gpus"]) < 1]
    assert packed, "no trial was packed after packing was measured cheap"
    said = [r.getMessage() for r in caplog.records
            if "trials that ask for one GPU are sized by Fluid" in r.getMessage()]
    assert len(said) == 1 and "resize_requests=False" in said[0]  # one line per experiment


@pytest.mark.slow
def test_a_one_gpu_script_under_fluid_ends_sooner_than_under_plain_tune(tmp_path):
    """The typical script, ``with_resources(train, {"gpu": 1})``, no Fluid option: Fluid
    measures packing on its first trials and packs the rest, with the same trials and the
    same results as plain Tune (one trial per GPU). ``fluid bench e2e`` times such a grid."""
    runs = run_both(tmp_path, {"trainable": "ordinary", "trials": 12,
                               "config": {"t": 2.0, "iters": 5}})
    for run in runs.values():
        assert run["status"] == ["TERMINATED"] * 12 and run["rows"] == [5] * 12
    assert min(runs["fluid"]["least_gpus"]) < 1, "Fluid never packed the one-GPU requests"


@pytest.mark.slow
def test_a_grid_of_cheap_packing_packs_after_its_first_wave(tmp_path):
    """A grid under FIFO: its answer comes with its last trial. Packing costs each trial 1.25x
    (a pair runs 1.6x one trial's throughput, too costly to pack a trial that may reach a
    target): the first wave runs alone as under plain Tune and the rest packs (``fluid bench
    e2e`` times such a grid)."""
    runs = run_both(tmp_path, {"trainable": "modeled_trainable", "trials": 12,
                               "config": {"t1": 2.0, "iters": 8, "alpha": 1.25},
                               "fluid": {"alpha": 1.25}})
    for run in runs.values():
        assert run["status"] == ["TERMINATED"] * 12 and run["rows"] == [8] * 12
    least = runs["fluid"]["least_gpus"]
    assert least[:4] == [1.0] * 4, least  # the first wave, one GPU each
    assert min(least[4:]) == 0.5, least


def test_resize_requests_opt_in_resizes_and_warns(ray4x4, tmp_path, caplog):
    ex = FluidExecutor(cpus_per_trial=0.1, eps=0.5, resize_requests=True, alpha=1.0)
    with caplog.at_level(logging.INFO, logger="fluid"):
        analysis = _run(_asking({"cpu": 0.1, "gpu": 1}), ex, tmp_path, n=8)
    assert min(_gpus_seen(analysis)) < 1, "Fluid never packed a request it may resize"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
              and "resize_requests=True" in r.getMessage()]
    packed = [t for t in analysis.trials
              if min(analysis.trial_dataframes[t.trial_id]["gpus"]) < 1]
    # One line per trial whose shape differs, naming it.
    assert len(warned) == len({m.split()[2] for m in warned})
    for t in packed:
        assert any(f"trial {t} asked for 1 GPUs" in m for m in warned), t


def test_cpu_limited_cluster(ray4x4, tmp_path, caplog):
    # An elastic trainable with Tune's default request (1 CPU, no GPU): Fluid sizes the trials,
    # but only 4 fit the CPUs.
    ex = FluidExecutor(eps=0.5, verbose=True)
    with caplog.at_level(logging.INFO, logger="fluid"):
        analysis = _run(modeled, ex, tmp_path, n=8)
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    assert _most_placed_at_once(ex, analysis.trials) == 4
    # The first four were spread over the GPUs, not packed on GPU 0.
    first = sorted((ex.shape_timeline(t.trial_id)[0] for t in analysis.trials),
                   key=lambda s: s[0])[:4]
    assert len({g for _at, _w, gpus in first for g in gpus}) == 4
    # One plan line per trial start, each naming the trial and its shape.
    lines = [r.getMessage() for r in caplog.records if " runs on " in r.getMessage()]
    for t in analysis.trials:
        assert any(m.startswith(f"Fluid: {t} runs on ") for m in lines), t


def test_plan_lines_follow_tune_verbosity():
    def controller(level: AirVerbosity):
        reporter = TuneTerminalReporter(level, num_samples=1)
        return types.SimpleNamespace(_callbacks=types.SimpleNamespace(_callbacks=[reporter]))

    assert compat.tune_verbosity(controller(AirVerbosity.SILENT)) == 0
    report = plan_lines.PlanReport()
    report.start(controller(AirVerbosity.SILENT))
    assert not report.on  # Tune's verbose=0
    report.start(controller(AirVerbosity.DEFAULT))
    assert report.on
    forced = plan_lines.PlanReport(verbose=False)
    forced.start(controller(AirVerbosity.VERBOSE))
    assert not forced.on


def test_default_handler_prints_to_stderr(monkeypatch, capsys):
    logger = logging.getLogger("fluid")
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    plan_lines.ensure_handler()
    plan_lines.PlanReport(verbose=True).line("Fluid: %s runs on %s", "t1", "0.5 GPU")
    plan_lines.PlanReport(verbose=False).line("Fluid: %s runs on %s", "t2", "1 GPU")
    err = capsys.readouterr().err
    assert "Fluid: t1 runs on 0.5 GPU" in err
    assert "t2" not in err
