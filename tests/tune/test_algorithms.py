"""Tune's algorithms run to completion under FluidExecutor and form the TrialGroups they should."""

from __future__ import annotations

import re

import pytest
from ray.tune.search.bohb import TuneBOHB
from ray.tune.search.hyperopt import HyperOptSearch

from fluid import FluidExecutor, tune
from fluid.schedulers import (
    ASHAScheduler,
    HyperBandForBOHB,
    HyperBandScheduler,
    PopulationBasedTraining,
    SyncBOHB,
)
from fluid.tune import _ray_versions as versions
from tests.tune.trainables import modeled

SPACE = {"q": tune.uniform(0.5, 2.0), "t": 0.05, "iters": 8}


def _run(tmp_path, scheduler, num_samples, search_alg=None, **executor):
    ex = FluidExecutor(scheduler, cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.2, **executor)
    analysis = tune.run(
        modeled,
        config=dict(SPACE),
        metric="score",
        mode="max",
        num_samples=num_samples,
        search_alg=search_alg,
        trial_executor=ex,
        storage_path=str(tmp_path),
        verbose=0,
    )
    for trial in analysis.trials:
        assert trial.status == "TERMINATED", trial
        df = analysis.trial_dataframes[trial.trial_id]
        n = len(df)
        assert list(df["training_iteration"]) == list(range(1, n + 1)), trial
    return ex, analysis


def _milestone(name):
    return float(re.search(r"r=([0-9.]+)", name).group(1))


def _check_rungs(ex):
    """A rung's survivors form the next group: each later group of a bracket is a subset."""
    brackets = {}
    for g in ex.groups:
        if g.name.startswith("bracket"):
            brackets.setdefault(g.name.split(" r=")[0], []).append(g)
    assert brackets, "no HyperBand groups were declared"
    halved = 0
    for groups in brackets.values():
        groups.sort(key=lambda g: _milestone(g.name))
        for lower, upper in zip(groups, groups[1:], strict=False):
            assert set(upper.until) <= set(lower.until)
            assert all(v == _milestone(upper.name) for v in upper.until.values())
            halved += 1
    assert halved >= 1, "no rung was ever halved"


def test_hyperband(ray4, tmp_path):
    ex, _ = _run(tmp_path, HyperBandScheduler(max_t=8, reduction_factor=2), 6)
    _check_rungs(ex)


def _bohb(tmp_path, scheduler, seed):
    """``_run`` with Ray's TuneBOHB; ``None`` where that Ray's TuneBOHB cannot build its space
    (before ``TUNE_BOHB_CONFIGSPACE_1`` it needs ConfigSpace 0.x, which numpy 2 rules out)."""
    if not versions.since(versions.TUNE_BOHB_CONFIGSPACE_1):
        with pytest.raises(TypeError, match="unexpected keyword argument 'q'"):
            _run(tmp_path, scheduler, 6, search_alg=TuneBOHB(seed=seed))
        return None
    ex, _ = _run(tmp_path, scheduler, 6, search_alg=TuneBOHB(seed=seed))
    return ex


def test_syncbohb(ray4, tmp_path):
    ex = _bohb(tmp_path, SyncBOHB(max_t=8, reduction_factor=2), seed=0)
    if ex is not None:
        _check_rungs(ex)


def test_bohb(ray4, tmp_path):
    ex = _bohb(tmp_path, HyperBandForBOHB(max_t=8, reduction_factor=2), seed=1)
    if ex is not None:
        assert any(g.name.startswith("bracket") for g in ex.groups)


def test_asha(ray4, tmp_path):
    ex, analysis = _run(tmp_path, ASHAScheduler(max_t=8, grace_period=2, reduction_factor=2), 6)
    (group,) = [g for g in ex.groups if g.name == "asha"]
    assert set(group.until) == {t.trial_id for t in analysis.trials}
    assert all(v in (2, 4, 8) for v in group.until.values())


def test_pbt(ray4, tmp_path):
    pbt = PopulationBasedTraining(
        perturbation_interval=2, hyperparam_mutations={"q": tune.uniform(0.5, 2.0)}
    )
    ex, analysis = _run(tmp_path, pbt, 4)
    (group,) = [g for g in ex.groups if g.name == "population"]
    assert set(group.until) == {t.trial_id for t in analysis.trials}


def test_hyperopt_outstanding_bound(ray4, tmp_path):
    ex, analysis = _run(
        tmp_path, None, 6, search_alg=HyperOptSearch(random_state_seed=0), max_outstanding=2
    )
    assert len(analysis.trials) == 6
    spans = []
    for t in analysis.trials:
        times = [at for at, _, _ in ex.shape_timeline(t.trial_id)]
        spans.append((min(times), max(times)))
    for start, _ in spans:
        live = sum(1 for s, e in spans if s <= start < e)
        assert live <= 2, f"{live} trials outstanding with max_outstanding=2"


@pytest.mark.parametrize("bad", [{"alpha": 0.5}, {"c": 0}, {"d": 0}, {"eps": -1},
                                 {"max_outstanding": 0}, {"o_th": 1.5}])
def test_options_out_of_range(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        FluidExecutor(**bad)
