"""Ray Tune's ``Tuner.restore`` cases (``python/ray/tune/tests/test_tuner_restore.py``, Ray 2.60's
API, 2 CPUs), each run as Ray wrote it and with only the scheduler wrapped
(``TuneConfig(scheduler=FluidExecutor())``, FIFO's place), and held to Ray's own assertions:
``resume_unfinished``, ``resume_errored`` and ``restart_errored`` mean what they mean under
plain Tune, and the interrupted first run leaves the trials in the states Ray's case expects."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from ray import tune
from ray.tune import Callback, Checkpoint, FailureConfig, RunConfig, TuneConfig, Tuner
from ray.tune.experiment import Trial

from tests.dropin.ray_cases import UNDER, UNDER_TUNE_SLOW, local_ray, scheduler

two_cpus = local_ray(num_cpus=2)  # as Ray's fixture


def sometimes_failing(config: dict) -> None:
    """Reports ``it`` with a checkpoint ``num_epochs`` times, then fails where the fail marker
    exists or hangs where the hang marker does, then reports once more."""
    failing, hanging = config["failing_hanging"]
    state = {"it": 0}
    if (checkpoint := tune.get_checkpoint()) is not None:
        with checkpoint.as_directory() as d:
            state = json.loads(Path(d, "state.json").read_text())

    def report() -> None:
        d = tempfile.mkdtemp()
        Path(d, "state.json").write_text(json.dumps(state))
        tune.report(dict(state), checkpoint=Checkpoint.from_directory(d))

    for _ in range(config.get("num_epochs", 1)):
        state["it"] += 1
        report()
    if failing and os.path.exists(failing):
        raise RuntimeError("I am failing")
    if hanging and os.path.exists(hanging):
        time.sleep(60)
    state["it"] += 1
    report()


class FailOnStats(Callback):
    """Fails the driver ``delay`` steps after ``num_trials`` exist and ``num_finished`` ended."""

    def __init__(self, num_trials: int, num_finished: int, delay: int = 1) -> None:
        self.num_trials, self.num_finished, self.delay = num_trials, num_finished, delay
        self.fail_at: int | None = None

    def on_step_begin(self, iteration: int, trials: list, **info) -> None:
        if self.fail_at is not None and iteration >= self.fail_at:
            raise RuntimeError("Failing")
        ended = [t for t in trials if t.status in (Trial.TERMINATED, Trial.ERROR)]
        if len(trials) >= self.num_trials and len(ended) >= self.num_finished:
            self.fail_at = iteration + self.delay


def tuner(under: str, tmp_path: Path, name: str, space: dict, **run: object) -> Tuner:
    """The case's Tuner, its scheduler as Ray wrote it (FIFO) or Fluid's."""
    config = TuneConfig(num_samples=1, scheduler=scheduler(under))
    return Tuner(sometimes_failing, tune_config=config, param_space=space,
                 run_config=RunConfig(name=name, storage_path=str(tmp_path), **run))


def markers(tmp_path: Path) -> tuple[str, str]:
    """A fail marker and a hang marker, both present."""
    fail, hang = tmp_path / "fail_marker", tmp_path / "hang_marker"
    fail.write_text("")
    hang.write_text("")
    return str(fail), str(hang)


def restored(tmp_path: Path, name: str, **resume: bool) -> Tuner:
    """``Tuner.restore`` of the experiment ``name``, without the first run's callbacks."""
    for marker in ("fail_marker", "hang_marker"):
        (tmp_path / marker).unlink(missing_ok=True)
    again = Tuner.restore(str(tmp_path / name), trainable=sometimes_failing, **resume)
    again._local_tuner._run_config.callbacks = None  # as Ray's case does
    return again


def interrupted(under: str, tmp_path: Path, name: str) -> None:
    """Ray's interrupted run: the first trial succeeds, the second hangs, the third fails, the
    fourth hangs; the driver fails once two ended, leaving
    ``[TERMINATED 2, RUNNING 1, ERROR 1, PENDING]``."""
    fail, hang = markers(tmp_path)
    space = {"failing_hanging": tune.grid_search(
        [(None, None), (None, hang), (fail, None), (None, hang)])}
    first = tuner(under, tmp_path, name, space, failure_config=FailureConfig(fail_fast=False),
                  callbacks=[FailOnStats(num_trials=4, num_finished=2)])
    with pytest.raises(RuntimeError):
        first.fit()


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_resume_unfinished_continues_running_trials_and_keeps_errors(under, tmp_path):
    """Defaults: the running trial continues from its checkpoint, the pending one starts, the
    errored one stays errored: ``it`` 2, 3, 1, 2 and one error."""
    os.environ["TUNE_GLOBAL_CHECKPOINT_S"] = "0"
    interrupted(under, tmp_path, "resume_unfinished")
    results = restored(tmp_path, "resume_unfinished").fit()
    assert len(results) == 4 and len(results.errors) == 1
    assert sorted(r.metrics["it"] for r in results) == [1, 2, 2, 3]


@pytest.mark.slow  # as the case above, with other resume options
@pytest.mark.parametrize("under", UNDER)
def test_resume_errored_only_continues_the_errored_trial(under, tmp_path):
    """``resume_unfinished=False, resume_errored=True``: the errored trial continues to ``it``
    3, the unfinished ones end where they were: 2, 1, 3, 0 and no error."""
    os.environ["TUNE_GLOBAL_CHECKPOINT_S"] = "0"
    interrupted(under, tmp_path, "errored_only")
    results = restored(tmp_path, "errored_only", resume_unfinished=False,
                       resume_errored=True).fit()
    assert len(results) == 4 and not results.errors
    assert sorted(r.metrics.get("it", 0) for r in results) == [0, 1, 2, 3]


def failed_twice(under: str, tmp_path: Path, name: str) -> None:
    """Four trials, the second and the fourth fail after their first report."""
    fail, _ = markers(tmp_path)
    space = {"failing_hanging": tune.grid_search(
        [(None, None), (fail, None), (None, None), (fail, None)])}
    results = tuner(under, tmp_path, name, space).fit()
    assert len(results.errors) == 2 and by_failing(results) == {False: [2, 2], True: [1, 1]}


def by_failing(results) -> dict[bool, list[int]]:
    """Each result's ``it`` by whether its trial was set to fail (a ResultGrid has no order)."""
    its: dict[bool, list[int]] = {False: [], True: []}
    for r in results:
        its[r.config["failing_hanging"][0] is not None].append(r.metrics["it"])
    return its


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize(("resume", "its"), [("resume_errored", [3, 3]),
                                             ("restart_errored", [2, 2])])
def test_errored_trials_resume_or_restart_as_asked(under, resume, its, tmp_path):
    """``resume_errored`` continues the errored trials from their checkpoints (``it`` 3);
    ``restart_errored`` starts them again (``it`` 2); the restored results first show the
    errors as they were."""
    failed_twice(under, tmp_path, resume)
    again = restored(tmp_path, resume, **{resume: True})
    before = again.get_results()
    assert len(before.errors) == 2 and by_failing(before) == {False: [2, 2], True: [1, 1]}
    results = again.fit()
    assert not results.errors and by_failing(results) == {False: [2, 2], True: its}


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_a_finished_experiment_restores_with_its_trials(under, tmp_path):
    """A finished experiment restored and fitted again has the same four trials and results."""
    space = {"failing_hanging": (None, None), "num_epochs": tune.grid_search([1, 2, 3, 4])}
    tuner(under, tmp_path, "num_trials", space).fit()
    again = restored(tmp_path, "num_trials")
    assert sorted(r.metrics["it"] for r in again.get_results()) == [2, 3, 4, 5]
    results = again.fit()
    assert len(results) == 4 and sorted(r.metrics["it"] for r in results) == [2, 3, 4, 5]
