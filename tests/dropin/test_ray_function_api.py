"""Cases of Ray Tune's ``python/ray/tune/tests/test_function_api.py`` in Ray 2.60's API:
function trainables that report with ``tune.report(metrics, checkpoint=...)`` and restore with
``tune.get_checkpoint()``; paused and resumed, failed and retried (``max_failures``), restored
from a checkpoint path, given objects by ``tune.with_parameters``, returning or yielding results,
resized by a ``ResourceChangingScheduler`` (Fluid's documented refusal: it resizes trials itself).
Ray saved and restored its trainables by hand; here a scheduler pauses the trial
(``PauseAt``) and Tune saves and restores it.

Each case runs under plain Tune and under Fluid (``tests.dropin.ray_cases``) on 4 CPUs, and
both runs are held to Ray's assertions."""

from __future__ import annotations

import os
import sys
import tempfile

import cloudpickle
import numpy as np
import pytest
from ray import tune
from ray.tune import Checkpoint, CheckpointConfig, PlacementGroupFactory
from ray.tune.experiment import Trial
from ray.tune.result import DEFAULT_METRIC, TRAINING_ITERATION
from ray.tune.schedulers import FIFOScheduler, ResourceChangingScheduler, TrialScheduler

from fluid import FluidConfigError
from tests.dropin.ray_cases import UNDER, UNDER_TUNE_SLOW, LargeData, local_ray, run

ray4 = local_ray(num_cpus=4)  # as Ray's tests start it


class PauseAt(FIFOScheduler):
    """FIFO that pauses a trial once at each of the given iterations and keeps the
    ``(training_iteration, test)`` of every result it is given."""

    def __init__(self, *iterations: int):
        super().__init__()
        self.iterations, self.seen = set(iterations), []

    def on_trial_result(self, tune_controller, trial, result):
        self.seen.append((result[TRAINING_ITERATION], result.get("test")))
        first = self.seen.count(self.seen[-1]) == 1
        if result[TRAINING_ITERATION] in self.iterations and first:
            return TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE


def report_with_files(metrics: dict, files: dict[str, str]) -> None:
    """``tune.report`` with a checkpoint holding ``files`` (name -> text)."""
    with tempfile.TemporaryDirectory() as directory:
        for name, text in files.items():
            with open(os.path.join(directory, name), "w") as f:
                f.write(text)
        tune.report(metrics, checkpoint=Checkpoint.from_directory(directory))


def restored(name: str) -> str | None:
    """The text of file ``name`` in the checkpoint the trial was restored from, if any."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as directory, open(os.path.join(directory, name)) as f:
        return f.read()


def progress_rows(analysis) -> int:
    """Rows of the trial's ``progress.csv``."""
    [frame] = analysis.trial_dataframes.values()
    return len(frame)


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_a_restored_checkpoint_holds_only_its_own_files(under, tmp_path):
    """Repeated save and restore never reuse a checkpoint directory: each restore sees the
    one file of its checkpoint, and the iteration count goes on across restores."""
    def train(config):
        checkpoint = tune.get_checkpoint()
        if checkpoint is not None:
            with checkpoint.as_directory() as directory:
                names = os.listdir(directory)
            assert sum("checkpoint-" in n for n in names) == 1, names
        for step in range(20):
            report_with_files({"test": step}, {f"checkpoint-{step}": ""})

    base = PauseAt(2, 4)
    [trial] = run(under, train, tmp_path, base, stop={TRAINING_ITERATION: 6}).trials
    assert trial.status == Trial.TERMINATED
    assert (trial.last_result[TRAINING_ITERATION], trial.last_result["test"]) == (6, 1)
    # (the stopping result goes to on_trial_complete, not on_trial_result)
    assert base.seen == [(1, 0), (2, 1), (3, 0), (4, 1), (5, 0)]


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_a_trial_paused_without_checkpoint_starts_over(under, tmp_path):
    """A function that never checkpoints is restored from no checkpoint: after a pause it runs
    from its start, its iteration count from 1 again."""
    def train(config):
        assert tune.get_checkpoint() is None
        for step in range(6):
            tune.report({"test": step})

    base = PauseAt(2)
    [trial] = run(under, train, tmp_path, base).trials
    assert trial.status == Trial.TERMINATED
    assert trial.last_result[TRAINING_ITERATION] == 6
    assert trial.checkpoint is None
    assert base.seen == [(1, 0), (2, 1)] + [(i + 1, i) for i in range(6)]


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_a_pause_between_checkpoints_restores_the_last_one(under, tmp_path):
    """A function checkpointing every third step, paused in between, is restored from its last
    checkpoint and reruns the steps after it."""
    def train(config):
        start = int(restored("step") or -1) + 1
        for step in range(start, 10):
            if step % 3 == 0:
                report_with_files({"test": step}, {"step": str(step)})
            else:
                tune.report({"test": step})

    base = PauseAt(2)
    [trial] = run(under, train, tmp_path, base).trials
    assert trial.status == Trial.TERMINATED
    assert trial.last_result[TRAINING_ITERATION] == 10
    assert base.seen == [(1, 0), (2, 1)] + [(i + 1, i) for i in range(1, 10)]


def one_report(config):
    tune.report({"test": 0})


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize("setting", ["checkpoint_frequency", "checkpoint_at_end"])
def test_tune_checkpointing_of_a_function_trainable_is_refused(under, setting, tmp_path):
    """``checkpoint_frequency`` and ``checkpoint_at_end`` are a ValueError for a function."""
    config = CheckpointConfig(**{setting: 1 if setting == "checkpoint_frequency" else True})
    with pytest.raises(ValueError, match=setting):
        run(under, one_report, tmp_path, checkpoint_config=config)


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_a_checkpoint_reported_at_the_end_is_the_trials(under, tmp_path):
    """A checkpoint reported after the last result becomes the trial's checkpoint."""
    def train(config):
        for i in range(10):
            tune.report({"test": i})
        report_with_files({"test": 10}, {"ckpt.log": "hello"})

    [trial] = run(under, train, tmp_path).trials
    assert os.path.exists(os.path.join(trial.checkpoint.path, "ckpt.log"))


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_the_last_of_many_checkpoints_is_kept(under, tmp_path):
    """With ``num_to_keep=3`` the trial keeps three checkpoints, the last reported one its own."""
    def train(config):
        for i in range(10):
            report_with_files({"test": i}, {"ckpt.log": "hello"})
        report_with_files({"test": 10}, {"ckpt.log2": "goodbye"})

    [trial] = run(under, train, tmp_path, checkpoint_config=CheckpointConfig(num_to_keep=3)).trials
    assert os.path.exists(os.path.join(trial.checkpoint.path, "ckpt.log2"))
    trial_dir = os.path.dirname(trial.checkpoint.path)
    kept = [n for n in os.listdir(trial_dir) if n.startswith("checkpoint_")]
    assert len(kept) == 3


def count_from_checkpoint(config):
    """Reports ``test`` from one past its checkpoint's step up to ``max_iter``."""
    start = int(restored("ckpt.log") or -1) + 1
    for i in range(start, config["max_iter"]):
        report_with_files({"test": i}, {"ckpt.log": str(i)})


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_a_run_restored_from_a_checkpoint_goes_on_from_it(under, tmp_path):
    """``restore=<checkpoint path>`` starts the new trial from that checkpoint."""
    [trial] = run(under, count_from_checkpoint, tmp_path, config={"max_iter": 5}).trials
    last = trial.checkpoint.path
    assert os.path.exists(os.path.join(last, "ckpt.log"))
    analysis = run(under, count_from_checkpoint, tmp_path, config={"max_iter": 10}, restore=last)
    assert progress_rows(analysis) == 5
    assert analysis.trials[0].last_result["test"] == 9


def fail_once_at_five(config, same_directory: bool):
    """Counts to 9 from its checkpoint, failing at 5 unless restored; each step's checkpoint
    in a fresh directory, or (``same_directory``) in one directory rewritten each step."""
    text = restored("ckpt.log")
    directory = tempfile.mkdtemp() if same_directory else None
    for i in range(int(text or -1) + 1, 10):
        if i == 5 and text is None:
            raise Exception("try to fail me")
        if directory is None:
            report_with_files({"test": i}, {"ckpt.log": str(i)})
            continue
        with open(os.path.join(directory, "ckpt.log"), "w") as f:
            f.write(str(i))
        tune.report({"test": i}, checkpoint=Checkpoint.from_directory(directory))


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
@pytest.mark.parametrize("same_directory", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_failed_trial_is_retried_from_its_checkpoint(under, same_directory, tmp_path):
    """With ``max_failures=3`` a trial that fails once goes on from its last checkpoint: ten
    results in all, also when every checkpoint came from the same directory."""
    trainable = tune.with_parameters(fail_once_at_five, same_directory=same_directory)
    analysis = run(under, trainable, tmp_path, max_failures=3)
    [trial] = analysis.trials
    assert trial.status == Trial.TERMINATED
    assert os.path.exists(os.path.join(trial.checkpoint.path, "ckpt.log"))
    assert progress_rows(analysis) == 10


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_with_parameters_hands_each_trial_its_own_copy(under, tmp_path):
    """``tune.with_parameters`` passes a large object to every trial; changes stay local."""
    data = LargeData()
    data.data[100] = 1

    def train(config, data=None):
        data.data[101] = 2  # changes are local
        tune.report({"metric": len(data.data), "hundred": data.data[100]})

    trial_1, trial_2 = run(under, tune.with_parameters(train, data=data), tmp_path,
                           num_samples=2).trials
    assert data.data[101] == 0
    assert [(t.last_result["metric"], t.last_result["hundred"]) for t in (trial_1, trial_2)] == [
        (500_000, 1), (500_000, 1)]
    assert str(trial_1).startswith("train_")


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_with_parameters_pickles_small(under, tmp_path):
    """A trainable given 16 MB by ``tune.with_parameters`` pickles to under 100 kB, and runs."""
    class Big:
        def __init__(self):
            self.data = np.random.rand(2 * 1024 * 1024)

    def train(config, data=None):
        tune.report({"metric": len(data.data)})

    trainable = tune.with_parameters(train, data=Big())
    assert sys.getsizeof(cloudpickle.dumps(trainable)) < 100 * 1024
    [trial] = run(under, trainable, tmp_path).trials
    assert trial.last_result["metric"] == 2 * 1024 * 1024


def returns_number(config):
    return config["a"]


def returns_dict(config):
    return {"m": config["a"]}


def yields_numbers(config):
    for i in range(10):
        yield config["a"] + i


def yields_dicts(config):
    for i in range(10):
        yield {"m": config["a"] + i}


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize(("train", "key", "offset"), [
    (returns_number, DEFAULT_METRIC, 0), (returns_dict, "m", 0),
    (yields_numbers, DEFAULT_METRIC, 9), (yields_dicts, "m", 9)])
def test_returned_and_yielded_values_are_results(under, train, key, offset, tmp_path):
    """A returned or yielded number is the result ``_metric``, a dict the result itself."""
    trial_1, trial_2 = run(under, train, tmp_path, config={"a": tune.grid_search([4, 8])}).trials
    assert (trial_1.last_result[key], trial_2.last_result[key]) == (4 + offset, 8 + offset)


def report_cpus(config):
    """Reports the CPUs its trial holds, three times, resumed from its checkpoint."""
    step = int(restored("step") or 0)
    while step < 3:
        step += 1
        cpus = tune.get_context().get_trial_resources().required_resources["CPU"]
        report_with_files({"cpus": cpus}, {"step": str(step)})


def two_cpus(tune_controller, trial, result, scheduler):
    """A ``resources_allocation_function`` that moves every trial to 2 CPUs."""
    return PlacementGroupFactory([{"CPU": 2}])


@pytest.mark.slow
def test_a_resource_changing_scheduler_resizes_a_function_trial_under_tune(tmp_path):
    """Under plain Tune the trial is paused, given 2 CPUs and resumed from its checkpoint."""
    base = ResourceChangingScheduler(FIFOScheduler(), resources_allocation_function=two_cpus)
    analysis = run("tune", report_cpus, tmp_path, base, resources_per_trial={"cpu": 1})
    [frame] = analysis.trial_dataframes.values()
    assert frame["cpus"].iloc[0] == 1 and frame["cpus"].iloc[-1] == 2


def test_a_resource_changing_scheduler_is_refused_by_fluid():
    """Fluid resizes trials itself: ``FluidExecutor(ResourceChangingScheduler(...))`` is a
    ``FluidConfigError`` naming ``base_scheduler``, before any trial runs."""
    base = ResourceChangingScheduler(FIFOScheduler(), resources_allocation_function=two_cpus)
    with pytest.raises(FluidConfigError, match="base_scheduler cannot be a ResourceChanging"):
        run("fluid", report_cpus, ".", base)
