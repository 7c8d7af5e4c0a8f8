"""``fluid.schedulers`` outside Fluid are Ray's schedulers: every edge case, both classes.

Each case runs the same calls against Ray's class and Fluid's subclass (no FluidExecutor
attached), with stub trials and a mock controller as Ray's own scheduler tests use (no Ray
cluster), and asserts the same decisions, or the same exception where Ray raises one.
"""

from __future__ import annotations

import random
from unittest.mock import MagicMock

import numpy as np
import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler as RayASHA
from ray.tune.schedulers import HyperBandScheduler as RayHyperBand
from ray.tune.schedulers import PopulationBasedTraining as RayPBT

from fluid.schedulers import ASHAScheduler, HyperBandScheduler, PopulationBasedTraining
from fluid.tune._group import TrialGroup, iteration_of


def _trials(n: int) -> list[Trial]:
    trials = [Trial("__fake", config={"lr": 0.1 * (i + 1)}, stub=True) for i in range(n)]
    for t in trials:
        t.status = Trial.RUNNING
    return trials


def _controller(trials: list[Trial]) -> MagicMock:
    tc = MagicMock()
    tc.get_trials.return_value = trials
    tc.get_live_trials.return_value = trials
    return tc


def _outcome(call):
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - the exception itself is the outcome compared
        return ("raises", type(e).__name__)


def _play(make, script, n=3, seed=0):
    """Run ``script`` (a list of ``(hook, trial index, result)``) on a fresh scheduler."""
    random.seed(seed)
    np.random.seed(seed)
    sched, trials = make(), _trials(n)
    tc = _controller(trials)
    out = []
    for hook, i, result in script:
        t = trials[i]
        if hook == "add":
            out.append(_outcome(lambda t=t: sched.on_trial_add(tc, t)))
        elif hook == "result":
            out.append(_outcome(lambda t=t, r=result: sched.on_trial_result(tc, t, dict(r))))
        elif hook == "complete":
            out.append(_outcome(lambda t=t, r=result: sched.on_trial_complete(tc, t, dict(r))))
        elif hook == "remove":
            out.append(_outcome(lambda t=t: sched.on_trial_remove(tc, t)))
    return out, sched, trials


def _same(ray_make, fluid_make, script, n=3):
    ray_out, _, ray_trials = _play(ray_make, script, n)
    fluid_out, sched, fluid_trials = _play(fluid_make, script, n)
    assert fluid_out == ray_out
    assert [t.config for t in fluid_trials] == [t.config for t in ray_trials]
    return fluid_out, sched


def _rows(i: int, times, metric=None, attr="time_total_s"):
    return [("result", i, {attr: t, "training_iteration": k + 1,
                           "acc": (metric or (lambda k: k))(k)})
            for k, t in enumerate(times)]


# --------------------------------------------------------------------------- ASHA

ASHA_SECONDS = dict(time_attr="time_total_s", grace_period=0.5, max_t=4.0, reduction_factor=2,
                    metric="acc", mode="max")


def test_asha_fractional_grace_period_in_seconds():
    script = [("add", i, None) for i in range(3)]
    for i, rate in enumerate((0.3, 0.45, 0.7)):
        script += _rows(i, [rate * (k + 1) for k in range(8)], lambda k, i=i: (i + 1) * k)
    out, _ = _same(lambda: RayASHA(**ASHA_SECONDS),
                   lambda: ASHAScheduler(**ASHA_SECONDS), script)
    assert "STOP" in out and "CONTINUE" in out  # the cases decide something


def test_asha_fractional_grace_period_in_iterations():
    kw = dict(grace_period=0.5, max_t=6, reduction_factor=3, metric="acc", mode="max")
    script = [("add", i, None) for i in range(3)]
    for i in range(3):
        script += _rows(i, range(1, 7), lambda k, i=i: -i * k, attr="training_iteration")
    out, _ = _same(lambda: RayASHA(**kw), lambda: ASHAScheduler(**kw), script)
    assert "STOP" in out


@pytest.mark.parametrize("result", [
    {"time_total_s": 0.6},  # no metric: Ray continues
    {"acc": 1.0},  # no time_attr: Ray continues
    {"time_total_s": 9.0, "acc": 1.0},  # past max_t: Ray stops
    {"time_total_s": 0.6, "acc": 1.0},  # Ray itself raises KeyError: so does Fluid
])
@pytest.mark.parametrize("before", ["never added", "completed", "removed"])
def test_asha_result_for_a_trial_it_does_not_track(before, result):
    script = [("add", 0, None), ("add", 1, None)]
    if before == "completed":
        script += [("complete", 1, {"time_total_s": 1.0, "acc": 2.0})]
    elif before == "removed":
        script += [("remove", 1, None)]
    script += [("result", 1 if before != "never added" else 2, result)]
    _same(lambda: RayASHA(**ASHA_SECONDS), lambda: ASHAScheduler(**ASHA_SECONDS), script)


# --------------------------------------------------------------------------- PBT


def _pbt(cls, **kw):
    return cls(time_attr=kw.pop("time_attr", "time_total_s"), metric="acc", mode="max",
               perturbation_interval=kw.pop("interval", 0.5), quantile_fraction=0.5,
               hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4]}, **kw)


@pytest.mark.parametrize("kw", [
    {},  # seconds, a fractional interval
    {"burn_in_period": 0.7},
    {"time_attr": "training_iteration", "interval": 1.5},
    {"synch": True},
])
def test_pbt_fractional_intervals(kw):
    script = [("add", i, None) for i in range(4)]
    for k in range(6):  # interleaved, as a population reports
        for i in range(4):
            script.append(("result", i, {"time_total_s": 0.3 * (k + 1) * (1 + i / 10),
                                         "training_iteration": k + 1, "acc": i * k}))
    out, _ = _same(lambda: _pbt(RayPBT, **dict(kw)), lambda: _pbt(PopulationBasedTraining, **kw),
                   script, n=4)
    assert set(out) - {None} - {"CONTINUE"}  # perturbations happened (PAUSE or NOOP)


@pytest.mark.parametrize("synch", [False, True])
def test_pbt_under_fluid_decides_as_rays_with_the_users_synch(synch):
    # Under FluidExecutor too (a recorder stands in for it): the population is declared, and
    # PBT keeps the user's synch (Fluid used to force synch=True: other decisions).
    def fluid_pbt():
        pbt = _pbt(PopulationBasedTraining, time_attr="training_iteration", interval=2,
                   synch=synch)
        pbt.collect_trial_groups()  # as FluidExecutor does
        return pbt

    script = [("add", i, None) for i in range(4)]
    for k in range(6):
        for i in range(4):
            script.append(("result", i, {"training_iteration": k + 1, "acc": i * k}))
    out, sched = _same(lambda: _pbt(RayPBT, time_attr="training_iteration", interval=2,
                                    synch=synch), fluid_pbt, script, n=4)
    assert set(out) - {None} - {"CONTINUE"}  # perturbations happened (PAUSE or NOOP)
    groups = sched.take_trial_groups()
    assert groups and all(g.keep_shape for g in groups)
    assert sched.take_trial_groups() == []  # taken once


# --------------------------------------------------------------------------- HyperBand


def test_hyperband_in_seconds():
    kw = dict(time_attr="time_total_s", max_t=4.5, reduction_factor=2, metric="acc", mode="max")
    script = [("add", i, None) for i in range(4)]
    for k in range(1, 10):
        for i in range(4):
            script.append(("result", i, {"time_total_s": 0.5 * k, "training_iteration": k,
                                         "acc": i + k}))
    out, _ = _same(lambda: RayHyperBand(**kw), lambda: HyperBandScheduler(**kw), script, n=4)
    assert "PAUSE" in out or "STOP" in out


# --------------------------------------------------------------------------- the groups


def test_groups_are_kept_only_for_a_fluid_executor_and_taken_once():
    sched = ASHAScheduler(**ASHA_SECONDS)
    (t,) = _trials(1)
    sched.on_trial_add(_controller([t]), t)
    assert sched.take_trial_groups() == []  # under plain Tune: nothing kept


def test_groups_budget_in_the_algorithms_unit():
    """With ``time_attr`` in seconds, budgets stay seconds and iterations are estimated."""
    sched = ASHAScheduler(**ASHA_SECONDS)
    sched.collect_trial_groups()
    (t,) = _trials(1)
    tc = _controller([t])
    sched.on_trial_add(tc, t)
    (first,) = sched.take_trial_groups()
    assert (first.time_attr, first.budget, first.until) == (
        "time_total_s", {t.trial_id: 0.5}, {t.trial_id: None})  # no progress known yet
    sched.on_trial_result(tc, t, {"time_total_s": 0.6, "training_iteration": 2, "acc": 1.0})
    group = sched.take_trial_groups()[-1]
    assert group.budget == {t.trial_id: 1.0}  # the next rung, in seconds
    assert group.until == {t.trial_id: 4}  # 1.0 s at 0.3 s an iteration

    pbt = _pbt(PopulationBasedTraining)
    pbt.collect_trial_groups()
    pbt.on_trial_add(tc, t)
    (population,) = pbt.take_trial_groups()
    assert population.budget == {t.trial_id: 0.5}
    # The population keeps plain Tune's shapes and timing (docs/design.md, rule 9).
    assert population.keep_shape


@pytest.mark.parametrize(("budget", "attr", "result", "expected"), [
    (0.5, "training_iteration", None, 1),
    (2.0, "training_iteration", None, 2),
    (2.5, "training_iteration", None, 3),
    (3.0, "time_total_s", {"time_total_s": 1.5, "training_iteration": 3}, 6),
    (3.0, "time_total_s", {"time_total_s": 0.0, "training_iteration": 3}, None),
    (3.0, "time_total_s", {}, None),
    (100.0, "samples", {"samples": 64, "training_iteration": 2}, 4),
])
def test_iteration_of(budget, attr, result, expected):
    assert iteration_of(budget, attr, result) == expected


@pytest.mark.parametrize("until", [0, -1, float("inf"), float("nan"), "3", True])
def test_bad_budgets_are_refused(until):
    (t,) = _trials(1)
    with pytest.raises(ValueError, match="until must be a finite number > 0"):
        TrialGroup.of([t], until)
