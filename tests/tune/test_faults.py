"""Faults under FluidExecutor: retries, trials failing for good, bad input, plain trainables."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import ray.tune
from ray.tune import RunConfig, TuneConfig, Tuner

from fluid import FluidConfigError, FluidExecutor, tune
from fluid.schedulers import ASHAScheduler
from fluid.tune._records import Phase
from fluid.tune._state_file import STATE_FILE
from tests.tune.trainables import modeled, plain

ITERS = 5


def _ex(**kw):
    return FluidExecutor(**{"cpus_per_trial": 0.1, "cpus_per_worker": 0.1, "eps": 0.2, **kw})


def test_retry_and_failure_for_good(ray4, tmp_path):
    tag = uuid.uuid4().hex
    configs = [
        {"t": 0.1, "iters": ITERS, "tag": f"{tag}-retry", "fail_at": 3},  # fails once
        {"t": 0.1, "iters": ITERS, "tag": f"{tag}-dies", "fail_at": 2, "always": True},
        {"t": 0.6, "iters": ITERS},
        {"t": 0.6, "iters": ITERS},
    ]
    ex = _ex(beta=1.0, eps=0.02)  # a profile says gangs scale; resizes are cheap
    analysis = tune.run(
        modeled,
        config={"cfg": tune.grid_search(configs)},
        stop={"training_iteration": ITERS},  # Fluid's budgets
        trial_executor=ex,
        storage_path=str(tmp_path),
        max_failures=1,
        raise_on_failed_trial=False,
        verbose=0,
    )
    by_tag = {t.config["cfg"].get("tag", t.trial_id): t for t in analysis.trials}
    died = by_tag[f"{tag}-dies"]
    assert died.status == "ERROR"
    for trial in analysis.trials:
        if trial is died:
            continue
        assert trial.status == "TERMINATED", trial
        df = analysis.trial_dataframes[trial.trial_id]
        assert list(df["it"]) == list(range(1, ITERS + 1)), trial
    # The GPUs of the trial that failed for good went to the others.
    assert any(e["kind"] == "dynamic" for e in ex.plan_log)


def test_packed_trial_out_of_gpu_memory_is_retried_alone(ray4, tmp_path):
    """A packed trial that dies of CUDA OOM is retried on a larger share (here alone) without
    using the user's max_failures, and Fluid remembers the share it needs."""
    configs = [{"t": 0.2, "iters": ITERS, "oom_below": 1.0}] + [{"t": 0.2, "iters": ITERS}] * 7
    ex = _ex(alpha=1.0)  # a profile says packing is free: Fluid packs before it knows better
    analysis = tune.run(
        modeled,
        config={"cfg": tune.grid_search(configs)},
        trial_executor=ex,
        storage_path=str(tmp_path),
        max_failures=0,
        raise_on_failed_trial=False,
        verbose=0,
    )
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    (big,) = [t for t in analysis.trials if "oom_below" in t.config["cfg"]]
    assert big.num_failures == 0
    first = [w for _, w, _ in ex.shape_timeline(big.trial_id) if w][0]
    assert first < 1  # it was packed, and ran out of memory there
    need = ex.gpu_need(big.trial_id)
    assert need is not None and need >= 2 * first
    df = analysis.trial_dataframes[big.trial_id]
    assert list(df["it"]) == list(range(1, ITERS + 1))
    assert min(df["gpus"]) >= 1.0
    assert all(ex.gpu_need(t.trial_id) is None for t in analysis.trials if t is not big)
    state = json.loads((tmp_path / Path(analysis.experiment_path).name / STATE_FILE).read_text())
    assert state["trials"][big.trial_id]["min_share"] == need


def test_plain_trainable_with_asha_matches_plain_tune(ray4, tmp_path):
    space = {"lr": tune.grid_search([0.001, 0.003, 0.01, 0.03, 0.1, 0.3])}

    def fit(scheduler, resources):
        trainable = ray.tune.with_resources(plain, resources) if resources else plain
        return Tuner(
            trainable,
            param_space=space,
            tune_config=TuneConfig(metric="acc", mode="max", scheduler=scheduler),
            run_config=RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit()

    asha = dict(max_t=8, grace_period=2, reduction_factor=2)
    baseline = fit(ray.tune.schedulers.ASHAScheduler(**asha), {"cpu": 0.1, "gpu": 1})
    # The same 1-GPU request, which Fluid may resize only when told so.
    fluid = fit(_ex(base_scheduler=ASHAScheduler(**asha), resize_requests=True, alpha=1.0),
                {"cpu": 0.1, "gpu": 1})
    best = baseline.get_best_result().metrics["acc"]
    assert fluid.get_best_result().metrics["acc"] == pytest.approx(best)
    gpus = [g for r in fluid for g in r.metrics_dataframe["gpus"]]
    assert max(gpus) <= 1, "an ordinary trainable was given a gang"
    assert min(gpus) < 1, "an ordinary trainable was never packed"


def test_bad_input_is_refused(ray4, tmp_path):
    with pytest.raises(FluidConfigError, match="trial_executor must be a fluid.FluidExecutor"):
        tune.run(modeled, trial_executor="ray", verbose=0, storage_path=str(tmp_path))
    def greedy_trainable(config):  # with_resources sets an attribute: not on a shared function
        modeled(config)

    greedy = ray.tune.with_resources(greedy_trainable, {"cpu": 0.1, "gpu": 8})
    with pytest.raises(Exception, match="asks for 8 GPUs but the cluster has 4"):
        tune.run(greedy, trial_executor=_ex(wait_for_nodes=False), verbose=0,
                 storage_path=str(tmp_path))


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_trial_process_killed_mid_run(ray4, tmp_path):
    import os
    import signal
    import threading
    import time

    ex = _ex()
    out = {}

    def experiment():
        out["analysis"] = tune.run(
            modeled,
            config={"t": tune.grid_search([0.5, 0.5, 1.0]), "iters": 12},
            trial_executor=ex,
            storage_path=str(tmp_path),
            max_failures=2,
            verbose=0,
        )

    thread = threading.Thread(target=experiment, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    victim = None
    while victim is None and time.monotonic() < deadline:
        time.sleep(1)
        # A trial running at its planned shape (not about to be resized into a new process),
        # whose process reported at least twice and is alive.
        for rec in list(ex.records.values()):
            pid = rec.trial.last_result.get("pid")
            if (rec.phase is Phase.RUNNING and rec.width == rec.actual
                    and rec.trial.last_result.get("it", 0) >= 2 and pid and _alive(pid)):
                victim = pid
                break
    assert victim is not None, "trials never got going"
    os.kill(victim, signal.SIGKILL)  # the trial's process dies, as on a crash
    thread.join(timeout=300)
    analysis = out["analysis"]
    for trial in analysis.trials:
        assert trial.status == "TERMINATED", trial
        df = analysis.trial_dataframes[trial.trial_id]
        assert list(df["it"]) == list(range(1, 13)), (trial, list(df["it"]))
    assert any(t.num_failures == 1 for t in analysis.trials)
