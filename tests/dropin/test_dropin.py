"""The drop-in conformance suite, requests: user scripts (``fluid.dropin.suite.REQUESTS``)
under plain Tune and under ``FluidExecutor()`` with no option, compared on what the runs did
(docs/reliability.md has the table of what holds; ``test_dropin_algorithms`` has the scripts
of Tune's and other libraries' algorithms); ``fluid bench dropin`` times the same scripts.

Every script: every trial completes (a run that reaches its limit is reported as a hang), each
iteration once in the result files and for a callback, a ``fluid_shape`` and ``fluid_gpus`` on
every row under Fluid, the same best config, no GPU to a trial that asked for none, and a
share asked for is the share it runs on.
"""

from __future__ import annotations

from collections import Counter

import pytest

from fluid.dropin.recorder import Seen
from fluid.dropin.suite import LIMIT_S, RAY_TRAIN, REQUESTS, Outcome, Script, run, script_problems

# Two runs of a script, each stopped as a hang at LIMIT_S: the test's own limit lies beyond.
pytestmark = pytest.mark.timeout(2 * LIMIT_S + 120)


def _asked_share(script: Script, fluid: Outcome) -> None:
    if script.name == "cpu":  # asked for no GPU: none, as under plain Tune
        assert set(fluid.column("trial_gpus")) == {0.0} and set(fluid.column("gpu_ids")) == {0}
        assert set(fluid.column("fluid_shape")) == {"no GPU"}
    if script.name.startswith("fractional"):  # a share asked for is the share it runs on
        assert set(fluid.column("trial_gpus")) == {0.5}, set(fluid.column("trial_gpus"))


@pytest.mark.parametrize("script", REQUESTS, ids=[s.name for s in REQUESTS])
def test_fluid_runs_the_script_as_tune_does(cluster, tmp_path, script):
    plain = run(script, False, tmp_path)
    fluid = run(script, True, tmp_path)
    assert script_problems(script, plain, fluid) == []
    _asked_share(script, fluid)


@pytest.mark.slow
def test_an_unmarked_ray_train_trial_completes_as_under_tune(cluster, tmp_path):
    """Its driver asks for no GPU; its trainer's 2 workers take one each, outside Tune's
    placement group: under Fluid too the driver gets none. (Minutes of Ray Train worker
    starts: slow. ``tests/gpu/test_gpu_mps_workers.py`` runs a Ray Train trial in
    ``make test``.)"""
    plain = run(RAY_TRAIN, False, tmp_path)
    fluid = run(RAY_TRAIN, True, tmp_path)
    assert script_problems(RAY_TRAIN, plain, fluid) == []
    assert set(fluid.column("trial_gpus")) == {0.0}


def _outcome(wall_s: float, ended: dict, results: dict, rows: dict | None = None,
             best_q: float | None = 1.0):
    seen = Seen(ended, results, [], 0, {})
    return Outcome(wall_s, seen, rows or {}, best_q, 100.0)


def test_a_run_at_its_limit_is_a_hang_and_a_repeat_or_a_lost_row_is_seen():
    script = Script("s", None, {}, trials=2)
    row = {"training_iteration": 1, "fluid_shape": "1 GPU", "fluid_gpus": 1.0}
    good = _outcome(5.0, {"a": "TERMINATED", "b": "TERMINATED"},
                    {"a": [[1, "t"]], "b": [[1, "t"]]}, {"a": [row], "b": [row]})
    assert script_problems(script, good, good) == []
    hung = _outcome(100.0, {"a": "TERMINATED"}, {"a": [[1, "t"]]})
    assert script_problems(script, good, hung) == [
        "fluid: hang: 1 of 2 trials ended within the limit of 100 s"]
    twice = _outcome(5.0, good.seen.ended, {"a": [[1, "t"], [1, "t"]], "b": [[1, "t"]]},
                     good.rows)
    problems = script_problems(script, good, twice)
    assert "fluid: a reported iterations [1] twice" in problems
    assert any("a's result file has iterations [1]" in p for p in problems)
    other = _outcome(5.0, good.seen.ended, good.seen.results, good.rows, best_q=0.5)
    assert script_problems(script, good, other) == [
        "best q 0.5 under Fluid, 1.0 under plain Tune"]


@pytest.mark.slow
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
