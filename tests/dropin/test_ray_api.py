"""Core cases of Ray Tune's ``python/ray/tune/tests/test_api.py`` in Ray 2.60's API: stop
criteria (dicts, path keys, keys matching no result, callables, ``Stopper`` classes), nested
results, iteration and timestep counters, what loggers and schedulers are given by function and
class trainables, trial errors and ``raise_on_failed_trial``, ``checkpoint_at_end`` for class
trainables, ``tune.with_parameters``, ``resources_per_trial`` and resuming errored trials.

Each case runs under plain Tune and under Fluid (``tests.dropin.ray_cases``) on 4 CPUs, and
both runs are held to Ray's assertions."""

from __future__ import annotations

import os

import pytest
from ray import tune
from ray.tune import CheckpointConfig, PlacementGroupFactory, Stopper, TuneError
from ray.tune.experiment import Trial
from ray.tune.logger import LoggerCallback
from ray.tune.result import DONE, TIMESTEPS_TOTAL, TRAINING_ITERATION
from ray.tune.schedulers import FIFOScheduler, TrialScheduler
from ray.tune.search import Searcher
from ray.tune.stopper import MaximumIterationStopper, TrialPlateauStopper
from ray.tune.utils import flatten_dict

from tests.dropin.ray_cases import UNDER, UNDER_TUNE_SLOW, LargeData, local_ray, run

ray4 = local_ray(num_cpus=4)  # as Ray's tests start it


def count_to_ten(config):
    """Reports ``test`` = 0..9."""
    for i in range(10):
        tune.report({"test": i})


def nested_ten(config):
    """Reports ``test/test1/test2`` = 0..9, nested."""
    for i in range(10):
        tune.report({"test": {"test1": {"test2": i}}})


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_a_path_stop_key_stops_on_a_nested_result(under, tmp_path):
    """The stop key ``test/test1/test2`` stops the trial at that nested value."""
    [trial] = run(under, nested_ten, tmp_path, stop={"test/test1/test2": 6}).trials
    assert trial.last_result[TRAINING_ITERATION] == 7


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize("stop", [{"test": {"test1": {"test2": 6}}}, {"time": 10},
                                  {"1/2/3": 6}, {"test": 1}])
def test_a_stop_key_matching_no_result_stops_nothing(under, stop, tmp_path):
    """A nested stop dict, a key never reported or a path not in the results matches no
    (flattened) result key: the trial runs to its end."""
    [trial] = run(under, nested_ten, tmp_path, stop=stop).trials
    assert trial.status == Trial.TERMINATED
    assert trial.last_result[TRAINING_ITERATION] == 10


class StopClass:
    def stop(self, trial_id, result):
        return result["test"] > 6


def stop_above_six(trial_id, result):
    return result["test"] > 6


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize("kind", ["function", "member"])
def test_stop_callable_stops_the_trial(under, kind, tmp_path):
    """``stop=f(trial_id, result)`` ends the trial at the first result it is true for."""
    stop = stop_above_six if kind == "function" else StopClass().stop
    [trial] = run(under, count_to_ten, tmp_path, stop=stop).trials
    assert trial.last_result[TRAINING_ITERATION] == 8


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_stop_callable_of_one_argument_is_refused(under, tmp_path):
    """A stop callable that takes only the result is a TuneError."""
    class CustomStopper:
        def stop(self, result):
            return result["test"] > 6

    for stop in (CustomStopper().stop, lambda result: result["test"] > 6):
        with pytest.raises(TuneError):
            run(under, count_to_ten, tmp_path, stop=stop)


class CountingStopper(Stopper):
    """Stops a trial past ``test`` 6, and every trial after its sixth result."""

    def __init__(self):
        self._count = 0

    def __call__(self, trial_id, result):
        self._count += 1
        return result["test"] > 6

    def stop_all(self):
        return self._count > 5


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_stopper_stop_all_ends_the_experiment(under, tmp_path):
    """``Stopper.stop_all`` ends every trial, some before they reported anything."""
    trials = run(under, count_to_ten, tmp_path, num_samples=5, stop=CountingStopper()).trials
    assert all(t.status == Trial.TERMINATED for t in trials)
    assert any(t.last_result.get(TRAINING_ITERATION) is None for t in trials)


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_maximum_iteration_stopper(under, tmp_path):
    """``MaximumIterationStopper(max_iter=6)`` ends the trial at its sixth iteration."""
    out = run(under, count_to_ten, tmp_path, stop=MaximumIterationStopper(max_iter=6))
    assert out.trials[0].last_result[TRAINING_ITERATION] == 6


def plateau(config):
    """10, 11, 12, then 20 ten times."""
    for value in [10.0, 11.0, 12.0] + [20.0] * 10:
        tune.report({"_metric": value})


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize(("options", "last"), [
    ({}, 7), ({"grace_period": 9}, 9), ({"metric_threshold": 22.0, "mode": "max"}, 13)])
def test_trial_plateau_stopper(under, options, last, tmp_path):
    """``TrialPlateauStopper`` stops after 4 equal results, not before its grace period,
    and never while the metric is below its threshold."""
    stopper = TrialPlateauStopper(metric="_metric", num_results=4, **options)
    out = run(under, plateau, tmp_path, stop=stopper)
    assert out.trials[0].last_result[TRAINING_ITERATION] == last


def nested_result(i):
    return {"test": {"1": {"2": {"3": i, "4": False}}}}


class Recording(FIFOScheduler):
    """FIFO that keeps every result it is given and those trials completed with."""

    def __init__(self):
        super().__init__()
        self.results, self.completed = [], []

    def on_trial_result(self, tune_controller, trial, result):
        self.results.append(result)
        return TrialScheduler.CONTINUE

    def on_trial_complete(self, tune_controller, trial, result):
        self.completed.append(result)


class OneConfig(Searcher):
    """Suggests one empty config and keeps every result it is given."""

    def __init__(self):
        super().__init__()
        self.suggested, self.results = False, []

    def suggest(self, trial_id):
        if self.suggested:
            return Searcher.FINISHED
        self.suggested = True
        return {}

    def on_trial_result(self, trial_id, result):
        self.results.append(result)

    def on_trial_complete(self, trial_id, result=None, error=False):
        pass


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_nested_results_reach_the_scheduler_and_searcher(under, tmp_path):
    """Nested results stop on a path key and reach scheduler and searcher flattened."""
    def train(config):
        for i in range(100):
            tune.report(nested_result(i))

    keys = set(flatten_dict(nested_result(0)))
    algo, base = OneConfig(), Recording()
    [trial] = run(under, train, tmp_path, base, search_alg=algo,
                  stop={"test/1/2/3": 20}).trials
    assert trial.status == Trial.TERMINATED
    assert trial.last_result["test"]["1"]["2"] == {"3": 20, "4": False}
    assert trial.last_result[TRAINING_ITERATION] == 21
    assert len(base.results) == 20
    assert all(set(r) >= keys for r in base.results)
    assert set(base.completed[0]) >= keys
    assert len(algo.results) == 20
    assert all(set(r) >= keys for r in algo.results)


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_timesteps_total_counts_timesteps_this_iter(under, tmp_path):
    """``timesteps_this_iter`` adds up to ``timesteps_total``, which the stop dict ends on."""
    def train(config):
        for i in range(100):
            tune.report({"itr": i, "timesteps_this_iter": 1})

    [trial] = run(under, train, tmp_path, config={"iterations": 100},
                  stop={TIMESTEPS_TOTAL: 100}).trials
    assert trial.status == Trial.TERMINATED
    assert trial.last_result[TRAINING_ITERATION] == 100
    assert trial.last_result["itr"] == 99


def fails(config):
    raise Exception("uh oh")


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
def test_a_failed_trial_raises_tune_error_unless_told_not_to(under, tmp_path):
    """A trainable that raises fails ``tune.run`` with a TuneError; with
    ``raise_on_failed_trial=False`` the run returns, the trial in ERROR."""
    with pytest.raises(TuneError):
        run(under, fails, tmp_path)
    [trial] = run(under, fails, tmp_path, raise_on_failed_trial=False).trials
    assert trial.status == Trial.ERROR


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
@pytest.mark.parametrize(("key", "values", "last"), [
    (TIMESTEPS_TOTAL, list(range(100)), 99),
    ("mean_accuracy", [float("inf")] * 100, float("inf"))])
def test_last_result_is_the_last_report(under, key, values, last, tmp_path):
    """The trial ends TERMINATED with its last report, infinity included."""
    def train(config):
        for value in values:
            tune.report({key: value})

    [trial] = run(under, train, tmp_path).trials
    assert trial.status == Trial.TERMINATED
    assert trial.last_result[key] == last


class DictState(tune.Trainable):
    """Saves its state as a dict; reports what it restored."""

    def setup(self, config):
        self.state = {"hi": 1, "iter": 0}

    def step(self):
        self.state["iter"] += 1
        return {"timesteps_this_iter": 1, "done": True, **self.state}

    def save_checkpoint(self, checkpoint_dir):
        return self.state

    def load_checkpoint(self, checkpoint):
        self.state = checkpoint


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_checkpoint_at_end_of_a_class_trainable(under, tmp_path):
    """``checkpoint_at_end`` saves a dict-state class trainable; a run restored from it goes on."""
    [trial] = run(under, DictState, tmp_path,
                  checkpoint_config=CheckpointConfig(checkpoint_at_end=True)).trials
    assert trial.status == Trial.TERMINATED
    assert trial.checkpoint is not None
    [again] = run(under, DictState, tmp_path, restore=trial.checkpoint.path).trials
    assert again.status == Trial.TERMINATED
    assert (again.last_result["hi"], again.last_result["iter"]) == (1, 2)


class WithData(tune.Trainable):
    def setup(self, config, data):
        self.data = data.data
        self.data[101] = 2  # changes are local

    def step(self):
        return {"metric": len(self.data), "hundred": self.data[100], "done": True}


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_with_parameters_of_a_class_trainable(under, tmp_path):
    """``tune.with_parameters`` hands every trial its own copy of a large object."""
    data = LargeData()
    data.data[100] = 1
    trials = run(under, tune.with_parameters(WithData, data=data), tmp_path,
                 num_samples=2).trials
    assert data.data[101] == 0
    assert [(t.last_result["metric"], t.last_result["hundred"]) for t in trials] == [
        (500_000, 1), (500_000, 1)]
    assert str(trials[0]).startswith("WithData")


class TrialInfo(tune.Trainable):
    def step(self):
        return {"name": self.trial_name, "trial_id": self.trial_id,
                "trial_resources": self.trial_resources}


def trial_info(config):
    context = tune.get_context()
    tune.report({"name": context.get_trial_name(), "trial_id": context.get_trial_id(),
                 "trial_resources": context.get_trial_resources()})


@pytest.mark.parametrize("under", UNDER_TUNE_SLOW)
@pytest.mark.parametrize("kind", ["class", "function"])
def test_trainable_sees_its_trial_name_id_and_resources(under, kind, tmp_path):
    """A trainable reads its trial's name, id and ``resources_per_trial``."""
    trainable = TrialInfo if kind == "class" else trial_info
    [trial] = run(under, trainable, tmp_path, stop={TRAINING_ITERATION: 1},
                  resources_per_trial=PlacementGroupFactory([{"CPU": 1}])).trials
    assert trial.last_result["name"] == str(trial)
    assert trial.last_result["trial_id"] == trial.trial_id
    assert trial.last_result["trial_resources"] == trial.placement_group_factory


#: Keys Ray leaves out when it compares two runs' results (``done``: the APIs set it apart).
NO_COMPARE = {"hostname", "node_ip", "trial_id", "experiment_tag", "pid", "time_this_iter_s",
              "time_total_s", "done", "timestamp", "time_since_restore", "experiment_id",
              "date", "warmup_time", "checkpoint_dir_name"}


def comparable(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in NO_COMPARE}


class Logged(LoggerCallback):
    """Keeps every result it logs."""

    def __init__(self):
        self.results = []

    def log_trial_result(self, iteration, trial, result):
        self.results.append(result)


def five_results(config):
    for i in range(5):
        tune.report({"timesteps_total": i + 1, "my_score": i ** 2, "done": i == 4})


class FiveResults(tune.Trainable):
    def step(self):
        i = self.iteration
        return {"timesteps_total": i + 1, "my_score": i ** 2, "done": i == 4}


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_function_and_class_trainables_log_every_value_alike(under, tmp_path):
    """Function and class trainables log every reported value, alike, ``done`` once, and the
    scheduler gets the same completed result from both."""
    runs = []
    for trainable in (five_results, FiveResults):
        logged, base = Logged(), Recording()
        [trial] = run(under, trainable, tmp_path, base, raise_on_failed_trial=False,
                      callbacks=[logged]).trials
        runs.append((logged.results, base.completed, trial.last_result))
    (f_logged, f_done, f_last), (c_logged, c_done, c_last) = runs
    assert len(f_logged) == len(c_logged) == 5
    assert [comparable(r) for r in f_logged] == [comparable(r) for r in c_logged]
    assert [(r["timesteps_total"], r["my_score"]) for r in f_logged] == [
        (i + 1, i ** 2) for i in range(5)]
    assert len([r for r in f_logged if r.get(DONE)]) == 1
    assert sum(r.get(DONE) for r in f_done + c_done) == 2
    assert comparable(f_done[0]) == comparable(c_done[0])
    assert comparable(f_last) == comparable(c_last)


@pytest.mark.slow
@pytest.mark.parametrize("under", UNDER)
def test_resume_errored_only_reruns_the_failed_trials(under, tmp_path):
    """Resuming with ``+ERRORED_ONLY`` reruns the errored trials, which then finish."""
    def train(config):
        marker = os.path.join(str(tmp_path), f"t{config['id']}-{config['fail']}.log")
        if config["fail"] and not os.path.exists(marker):
            open(marker, "w").close()
            raise ValueError("the first try fails")
        for _ in range(3):
            tune.report({"hello": 123})

    options = dict(name="hi-2", config={"fail": tune.grid_search([True, False]),
                                        "id": tune.grid_search(list(range(5)))})
    trials = run(under, train, tmp_path, raise_on_failed_trial=False, **options).trials
    assert [t.status for t in trials].count(Trial.ERROR) == 5
    again = run(under, train, tmp_path, resume="AUTO+ERRORED_ONLY", **options).trials
    assert [t.status for t in again].count(Trial.ERROR) == 0
    assert all(t.last_result.get("hello") == 123 for t in again)
