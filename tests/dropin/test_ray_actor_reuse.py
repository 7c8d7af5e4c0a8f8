"""Ray Tune's actor-reuse cases on one CPU (``python/ray/tune/tests/test_actor_reuse.py``, Ray
2.60's API), each run as Ray wrote it and with only the scheduler wrapped
(``FluidExecutor(<its scheduler>)``, ``FluidExecutor()`` for FIFO), and held to Ray's own
assertions: an actor is reused exactly where plain Tune reuses it, in the same order."""

from __future__ import annotations

import os

import pytest
from ray import tune
from ray.tune.error import TuneError
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from tests.dropin.ray_cases import UNDER, UNDER_TUNE_SLOW, local_ray, run, scheduler
from tests.dropin.ray_reuse_trainables import ResettableClass, resettable_function

KINDS = {"class": ResettableClass, "function": resettable_function}

one_cpu = local_ray(num_cpus=1)  # one trial at a time, as Ray's fixture


@pytest.fixture(autouse=True)
def state_refresh(monkeypatch):
    """Tune's state refresh every 0.1 s, as Ray's fixture sets it."""
    monkeypatch.setenv("TUNE_STATE_REFRESH_PERIOD", "0.1")


class FrequentPauses(FIFOScheduler):
    """Pauses every trial after each result."""

    def on_trial_result(self, tune_controller, trial, result):
        return TrialScheduler.PAUSE


def paused_often(trainable, under: str, reuse: bool | None, tmp_path, **kwargs):
    """Four trials paused after each of their two iterations; their last results."""
    trials = run(under, trainable, tmp_path, FrequentPauses(), reuse_actors=reuse,
                 config={"id": tune.grid_search([0, 1, 2, 3])}, **kwargs).trials
    return [t.last_result for t in trials]


@pytest.mark.slow  # eight actor starts per run
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize("reuse", [False, None])
def test_no_reuse_unless_asked(under, reuse, tmp_path):
    """``reuse_actors=False`` and the default (a class trainable) start a fresh actor each time."""
    results = paused_often(ResettableClass, under, reuse, tmp_path)
    assert [r["id"] for r in results] == [0, 1, 2, 3]
    assert [r["iter"] for r in results] == [2, 2, 2, 2]
    assert [r["num_resets"] for r in results] == [0, 0, 0, 0]


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
@pytest.mark.parametrize("kind", list(KINDS))
def test_one_actor_is_reused_for_every_trial_in_turn(under, kind, tmp_path):
    """With reuse, the one actor goes to the trials in FIFO's order: 0, 1, 2, 3, 0, 1, 2, 3."""
    results = paused_often(KINDS[kind], under, True, tmp_path)
    assert [r["id"] for r in results] == [0, 1, 2, 3]
    assert [r["iter"] for r in results] == [2, 2, 2, 2]
    assert [r["num_resets"] for r in results] == [4, 5, 6, 7]


@pytest.mark.parametrize("under", UNDER)
@pytest.mark.slow  # five actor starts per run
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_failed_trials_actor_is_not_reused(under, kind, tmp_path):
    """A trial after a failed one starts a fresh actor; one after a finished one reuses it."""
    fails = [False, True, False, False, True, True, False, False, False]
    trials = run(under, KINDS[kind], tmp_path, config={"fail": tune.grid_search(fails)},
                 reuse_actors=True, raise_on_failed_trial=False).trials
    assert [t.last_result.get("iter") for t in trials] == [2, None, 2, 2, None, None, 2, 2, 2]
    assert ([t.last_result.get("num_resets") for t in trials]
            == [0, None, 0, 1, None, None, 0, 1, 2])


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_a_trainable_that_cannot_reset_fails_the_run(under, tmp_path):
    """``reset_config`` returning False under ``reuse_actors=True`` raises ``TuneError``."""
    experiment = {"run": ResettableClass, "max_failures": 1, "storage_path": str(tmp_path),
                  "config": {"id": tune.grid_search([0, 1, 2, 3]),
                             "fake_reset_not_supported": True}}
    with pytest.raises(TuneError):
        tune.run_experiments({"foo": experiment}, reuse_actors=True, verbose=0,
                             scheduler=scheduler(under, FrequentPauses()))


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_a_reused_actor_logs_to_the_new_trials_files(under, tmp_path):
    """With ``log_to_file``, each trial's stdout and stderr hold its own output only."""
    first, second = run(
        under, ResettableClass, tmp_path, FrequentPauses(), log_to_file=True, reuse_actors=True,
        config={"message": tune.grid_search(["First", "Second"]), "id": -1}).trials
    assert (first.last_result["num_resets"], second.last_result["num_resets"]) == (2, 3)
    for trial, own, other in ((first, "First", "Second"), (second, "Second", "First")):
        out = _read(trial.storage.trial_working_directory, "stdout")
        err = _read(trial.storage.trial_working_directory, "stderr")
        assert f"PRINT_STDOUT: {own}" in out and f"PRINT_STDOUT: {other}" not in out
        assert f"PRINT_STDERR: {own}" in err and f"LOG_STDERR: {own}" in err
        assert f"PRINT_STDERR: {other}" not in err and f"LOG_STDERR: {other}" not in err


def _read(trial_dir: str, name: str) -> str:
    with open(os.path.join(trial_dir, name)) as f:
        return f.read()
