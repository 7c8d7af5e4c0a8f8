"""The drop-in conformance suite: user scripts under plain Tune and under ``FluidExecutor()``
with no option, compared (docs/reliability.md has the table of what holds).

Every script: every trial completes within the script's time limit (a hang is a failure),
each iteration once in the result files and for a callback, a ``fluid_shape`` and
``fluid_gpus`` on every row under Fluid, the same best config (deterministic trainables), no
GPU to a trial that asked for none, and at least as many trials at once as plain Tune.
"""

from __future__ import annotations

from collections import Counter

import pytest
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler, HyperBandScheduler
from ray.tune.schedulers import PopulationBasedTraining as RayPBT
from ray.tune.search import ConcurrencyLimiter

from fluid.schedulers import PopulationBasedTraining as FluidPBT
from tests.dropin import scripts
from tests.dropin.harness import Outcome, Script, run, uniform_q

GRID4 = {"q": tune.grid_search([0.2, 0.4, 0.6, 0.8]), "iters": 3, "t": 0.3}


def _hyperband():
    return HyperBandScheduler(max_t=4, reduction_factor=2)


def _pbt(cls):
    return lambda: cls(time_attr="training_iteration", perturbation_interval=2, synch=True,
                       hyperparam_mutations={"q": [0.2, 0.4, 0.6, 0.8]})


def _optuna():
    from ray.tune.search.optuna import OptunaSearch

    return OptunaSearch(seed=0)


def _hyperopt():
    from ray.tune.search.hyperopt import HyperOptSearch

    # Every config from the seed (n_initial_points >= samples): the same trials in both runs.
    return ConcurrencyLimiter(HyperOptSearch(random_state_seed=0, n_initial_points=8),
                              max_concurrent=2)


def _asking(resources: dict):
    """``function_trial`` with its own request: ``tune.with_resources`` marks the function
    object it is given, so each request needs a function of its own."""
    def trial(config: dict) -> None:
        scripts.function_trial(config)

    return tune.with_resources(trial, resources)


def _gpu(n: float):
    return _asking({"gpu": n})


SCRIPTS = [
    Script("cpu", scripts.cpu_trial, {"q": tune.grid_search([0.1, 0.3, 0.5, 0.7, 0.9, 1.0]),
                                      "iters": 3, "t": 0.3}, trials=6, expect=6),
    Script("fractional", _asking({"cpu": 0.5, "gpu": 0.5}),
           {"q": tune.grid_search([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]), "iters": 3,
            "t": 0.3}, trials=8, expect=8),
    # Fewer shares than fit: each still on exactly its 0.5 GPU, all at once (none widened).
    Script("fractional-6", _asking({"cpu": 0.5, "gpu": 0.5}),
           {"q": tune.grid_search([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]), "iters": 3, "t": 0.3},
           trials=6, expect=6),
    Script("one-gpu", _gpu(1), GRID4, trials=4, expect=4),
    Script("two-gpus", _gpu(2), {"q": tune.grid_search([0.3, 0.6]), "iters": 3, "t": 0.3},
           trials=2, expect=2),
    Script("class-hyperband", tune.with_resources(scripts.ClassTrial, {"gpu": 1}),
           {"q": tune.grid_search([0.2, 0.4, 0.6, 0.8]), "t": 0.2}, trials=4,
           scheduler=_hyperband, stop={"training_iteration": 4}),
    Script("ray-pbt", _gpu(1), {"q": tune.grid_search([0.2, 0.4, 0.6, 0.8]), "iters": 4,
                                "t": 0.2}, trials=4, scheduler=_pbt(RayPBT),
           deterministic=False),
    # Actors reused as under Tune: PBT's exploit keeps the shape; ASHA's trials get shapes
    # of Fluid's, each a fresh actor where the shape changed.
    Script("ray-pbt-reuse", _gpu(1), {"q": tune.grid_search([0.2, 0.4, 0.6, 0.8]), "iters": 4,
                                      "t": 0.2}, trials=4, scheduler=_pbt(RayPBT),
           deterministic=False, reuse_actors=True),
    Script("optuna-asha-reuse", _gpu(1), {"q": uniform_q(), "iters": 4, "t": 0.2}, trials=6,
           samples=6, search=_optuna, reuse_actors=True,
           scheduler=lambda: ASHAScheduler(max_t=4, grace_period=1, reduction_factor=2)),
    Script("fluid-pbt", _gpu(1), {"q": tune.grid_search([0.2, 0.4, 0.6, 0.8]), "iters": 4,
                                  "t": 0.2}, trials=4, scheduler=_pbt(FluidPBT),
           deterministic=False),
    Script("optuna-asha", _gpu(1), {"q": uniform_q(), "iters": 4, "t": 0.2}, trials=4,
           samples=4, search=_optuna,
           scheduler=lambda: ASHAScheduler(max_t=4, grace_period=1, reduction_factor=2)),
    Script("hyperopt-limiter", _gpu(1), {"q": uniform_q(), "iters": 3, "t": 0.2}, trials=4,
           samples=4, search=_hyperopt),
]


@pytest.fixture(scope="module")
def cluster():
    """One local Ray for the whole suite: 8 logical CPUs, 4 logical GPUs."""
    ray.init(address="local", num_cpus=8, num_gpus=4, include_dashboard=False,
             log_to_driver=False)
    yield
    ray.shutdown()


def check_completes_once(script: Script, out: Outcome, files: bool = True) -> None:
    """Every trial completed, each iteration once for the callback and (``files``) in its
    result file: plain Tune's ``result.json`` of a PBT member loses the rows before its
    exploit (Tune's logger replaces the file with the copy in storage at the restore)."""
    assert not out.errors, out.errors
    assert len(out.ended) == script.trials and set(out.ended.values()) == {"TERMINATED"}, \
        out.ended
    for trial_id, rows in out.rows.items():
        seen = out.seen[trial_id]
        assert seen and max(Counter(seen).values()) == 1, (trial_id, seen)
        if files:
            assert sorted(r["training_iteration"] for r in rows) == sorted(seen), trial_id


def compare(script: Script, plain: Outcome, fluid: Outcome) -> None:
    """What Fluid must keep of plain Tune's run of ``script``."""
    check_completes_once(script, plain, files=False)
    check_completes_once(script, fluid)
    shapes = fluid.column("fluid_shape")
    assert None not in shapes and None not in fluid.column("fluid_gpus"), shapes
    if script.deterministic:
        assert fluid.best_q == plain.best_q
    if script.expect:
        assert plain.at_once == script.expect  # the script measures what it should
        assert fluid.at_once >= plain.at_once


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_fluid_runs_the_script_at_least_as_well_as_tune(cluster, tmp_path, script):
    plain = run(script, False, tmp_path)
    fluid = run(script, True, tmp_path)
    compare(script, plain, fluid)
    if script.name == "cpu":  # asked for no GPU: none, as under plain Tune
        assert set(fluid.column("trial_gpus")) == {0.0} and set(fluid.column("gpu_ids")) == {0}
        assert set(fluid.column("fluid_shape")) == {"no GPU"}
    if script.name.startswith("fractional"):  # a share asked for is the share it runs on
        assert set(fluid.column("trial_gpus")) == {0.5}, set(fluid.column("trial_gpus"))


def test_an_unmarked_ray_train_trial_completes_as_under_tune(cluster, tmp_path):
    """Its driver asks for no GPU; its trainer's 2 workers take one each, outside Tune's
    placement group. Fluid must not give the driver a GPU its workers then wait for (two such
    trials fill the 4 GPUs: a driver on a GPU would leave the other trial's workers waiting)."""
    script = Script("ray-train", scripts.ray_train_trial,
                    {"q": tune.grid_search([0.2, 0.6]), "iters": 2, "t": 0.2},
                    trials=2)
    plain = run(script, False, tmp_path)
    fluid = run(script, True, tmp_path)
    compare(script, plain, fluid)
    assert set(fluid.column("trial_gpus")) == {0.0}
    assert fluid.wall_s <= 1.5 * plain.wall_s, (fluid.wall_s, plain.wall_s)


@pytest.mark.parametrize("script", SCRIPTS[1:3], ids=[s.name for s in SCRIPTS[1:3]])
def test_a_share_stays_exactly_as_asked_with_resize_requests_false(cluster, tmp_path, script):
    fluid = run(script, True, tmp_path, resize_requests=False)
    check_completes_once(script, fluid)
    assert set(fluid.column("trial_gpus")) == {0.5}
    assert fluid.at_once == script.expect


def test_a_driver_restore_under_tune_repeats_what_it_repeats_under_fluid(tmp_path):
    """The SIGKILL-and-restore script under plain Tune: what its callbacks get is what
    ``tests/tune/test_restore.py`` asserts of the same script under Fluid (each iteration
    once per driver, the iterations since the last snapshot again in the new driver)."""
    from tests.tune.driver_script import ITERS
    from tests.tune.test_restore import _kill_then_restore, seen_by_driver

    _, after, statuses = _kill_then_restore(
        str(tmp_path), "grid", lambda s: sum(map(len, seen_by_driver(s))) >= 6, executor="tune")
    assert len(after) == 4 and set(statuses.values()) == {"TERMINATED"}
    drivers = seen_by_driver(str(tmp_path))
    assert len(drivers) == 2 and all(max(Counter(d).values()) == 1 for d in drivers), drivers
    assert set(drivers[0]) | set(drivers[1]) == {
        (t, i) for t in statuses for i in range(1, ITERS + 1)}
