"""FluidExecutor beside what a Tune set-up already has: ``max_concurrent_trials``, Optuna's
searcher, HyperOpt behind a ``ConcurrencyLimiter``, and (refused) a ResourceChangingScheduler."""

from __future__ import annotations

import logging

import pytest
from ray import tune
from ray.tune import Callback
from ray.tune.schedulers import FIFOScheduler, ResourceChangingScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.hyperopt import HyperOptSearch
from ray.tune.search.optuna import OptunaSearch

from fluid import FluidExecutor
from fluid.core import Tunables
from fluid.tune import FluidConfigError
from fluid.tune._limits import concurrency_cap
from tests.tune.trainables import modeled

ITERS = 3
SPACE = {"q": tune.uniform(0.5, 1.5), "t": 0.1, "iters": ITERS}


class Running(Callback):
    """The most trials Tune runs at once, counted at every controller step."""

    def __init__(self):
        self.most = 0

    def on_step_end(self, iteration, trials, **info):
        self.most = max(self.most, sum(t.status == "RUNNING" for t in trials))


def _fit(tmp_path, tune_config: tune.TuneConfig, space=SPACE):
    running = Running()
    results = tune.Tuner(
        modeled, param_space=space, tune_config=tune_config,
        run_config=tune.RunConfig(storage_path=str(tmp_path), callbacks=[running], verbose=0),
    ).fit()
    assert not results.errors, results.errors
    for r in results:  # each iteration once
        assert list(r.metrics_dataframe["training_iteration"]) == list(range(1, ITERS + 1))
    return results, running


def _ex():
    return FluidExecutor(cpus_per_trial=0.1, eps=0.2, verbose=True)


def _cap_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "caps the trials" in r.getMessage()]


def test_max_concurrent_trials_caps_fluid_and_fluid_says_so(ray4, tmp_path, caplog):
    # 4 GPUs, 3 one-GPU trials: the cap, not the GPUs, decides; how many overlap at an instant
    # depends on how fast actors start, so only the cap's bound is asserted.
    space = {"t": 0.5, "iters": ITERS, "n": tune.grid_search(list(range(3)))}
    with caplog.at_level(logging.INFO, logger="fluid"):
        results, running = _fit(tmp_path, tune.TuneConfig(
            scheduler=_ex(), max_concurrent_trials=2), space)
    assert len(results) == 3
    assert 1 <= running.most <= 2
    assert len(_cap_lines(caplog)) == 1 and "at 2;" in _cap_lines(caplog)[0]


def test_hyperopt_behind_a_concurrency_limiter(ray4, tmp_path, caplog):
    searcher = ConcurrencyLimiter(HyperOptSearch(random_state_seed=0), max_concurrent=3)
    with caplog.at_level(logging.INFO, logger="fluid"):
        results, running = _fit(tmp_path, tune.TuneConfig(
            metric="score", mode="max", search_alg=searcher, num_samples=6, scheduler=_ex()))
    assert len(results) == 6 and running.most <= 3
    assert "at 3;" in _cap_lines(caplog)[0]


def test_optuna_searcher(ray4, tmp_path):
    searcher = OptunaSearch(seed=0)
    results, running = _fit(tmp_path, tune.TuneConfig(
        metric="score", mode="max", search_alg=searcher, num_samples=5, scheduler=_ex()))
    assert len(results) == 5
    # Fluid's own bound for a model-based searcher: what the 4 GPUs run alone, plus the
    # packing probes wanted while packing is unmeasured (pairs beside the trials alone)
    assert 1 <= running.most <= 4 + 2 * Tunables().probe_pairs
    best = results.get_best_result()
    assert best.metrics["score"] == max(r.metrics["score"] for r in results)


def test_resource_changing_scheduler_as_the_base_is_refused():
    with pytest.raises(FluidConfigError, match="cannot be a ResourceChangingScheduler"):
        FluidExecutor(ResourceChangingScheduler(FIFOScheduler()))


def test_the_cap_is_read_through_searcher_wrappers():
    from ray.tune.search import BasicVariantGenerator, SearchGenerator

    assert concurrency_cap(BasicVariantGenerator(max_concurrent=3)) == 3
    assert concurrency_cap(BasicVariantGenerator()) is None
    limited = SearchGenerator(ConcurrencyLimiter(HyperOptSearch(), max_concurrent=2))
    assert concurrency_cap(limited) == 2
    assert concurrency_cap(SearchGenerator(HyperOptSearch())) is None
    assert concurrency_cap(None) is None
