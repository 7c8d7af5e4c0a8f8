"""Ray's own shipped Tune examples under plain Tune and with only their scheduler line wrapped
in ``FluidExecutor`` (``fluid.dropin.ray_examples``): a PBT example as shipped
(``reuse_actors=True``), ASHA with a model-based searcher behind a ``ConcurrencyLimiter``, and
BOHB. Each completes under Fluid with as many trials as under plain Tune, all ended
TERMINATED, each trial's iterations in order with none lost or repeated (a PBT exploit, which
changes the trial's experiment tag, may jump), and a ``fluid_shape`` on every result. The runs
are minutes each: they are slow tests; ``fluid bench dropin`` times them side by side.
"""

from __future__ import annotations

import pytest

from fluid.dropin.ray_examples import (
    LIMIT_S,
    SUITE,
    ExampleRun,
    example_problems,
    fluid_source,
    run_example,
)
from fluid.dropin.recorder import Seen


@pytest.mark.slow
@pytest.mark.timeout(2 * LIMIT_S + 120)
@pytest.mark.parametrize("name", list(SUITE))
def test_ray_example_runs_under_fluid_as_under_tune(tmp_path, name):
    plain, fluid = (run_example(name, mode, tmp_path, SUITE[name]) for mode in ("tune", "fluid"))
    assert example_problems(plain, fluid) == []


def test_only_the_scheduler_changes():
    source = (
        "tuner = tune.Tuner(\n"
        "    train,\n"
        "    tune_config=tune.TuneConfig(\n"
        "        metric='m', mode='max',\n"
        "        scheduler=pbt,\n"
        "    ),\n"
        ")\n")
    wrapped = fluid_source(source)
    assert wrapped.splitlines()[0] == "from fluid import FluidExecutor"
    changed = [(a, b) for a, b in zip(source.splitlines(), wrapped.splitlines()[1:],
                                      strict=True) if a != b]
    assert changed == [("        scheduler=pbt,", "        scheduler=FluidExecutor(pbt),")]
    none = fluid_source("tune.TuneConfig(metric='m')\n")
    assert none.splitlines()[1] == "tune.TuneConfig(scheduler=FluidExecutor(), metric='m')"
    with pytest.raises(ValueError, match="one TuneConfig"):
        fluid_source("tune.run(train)\n")


def _run(results: dict, ended: dict | None = None, shapes: list | None = None,
         returncode: int = 0, hung: bool = False) -> ExampleRun:
    ended = {t: "TERMINATED" for t in results} if ended is None else ended
    seen = Seen(ended, results, ["0 GPU"] if shapes is None else shapes, 1, {})
    return ExampleRun(returncode, 1.0, seen, "its output", hung)


def test_a_lost_or_repeated_iteration_is_seen_and_an_exploit_is_not():
    run = _run({
        "a": [[1, "t"], [2, "t"], [2, "t"], [4, "t"]],  # repeated, then lost
        "b": [[1, "t"], [2, "t"], [5, "t@perturbed"], [6, "t@perturbed"]],  # an exploit
    })
    assert run.seen.iteration_breaks() == [("a", 2, 2), ("a", 2, 4)]
    good = _run({"b": run.seen.results["b"], "a": [[1, "t"]]})
    assert example_problems(good, good) == []
    assert any("lost or repeated" in p for p in example_problems(good, run))


def test_a_hang_an_error_fewer_trials_or_a_missing_shape_is_a_problem():
    good = _run({"a": [[1, "t"]]})
    assert example_problems(_run({}, returncode=1), good)[0].startswith("tune: exit 1:")
    assert example_problems(good, _run({}, hung=True))[0].startswith("fluid: hang:")
    errored = _run({"a": [[1, "t"]]}, ended={"a": "ERROR"})
    assert example_problems(good, errored) == ["fluid: ended {'a': 'ERROR'}"]
    assert example_problems(good, _run({"a": [[1, "t"]], "b": [[1, "t"]]})) == [
        "2 trials under Fluid, 1 under plain Tune"]
    assert example_problems(good, _run({"a": [[1, "t"]]}, shapes=[None])) == [
        "fluid: 1 results without fluid_shape"]


def test_trials_at_once_for_a_moment_are_told_from_those_held_for_seconds():
    seen = Seen({}, {}, [], 2, {0: 8.0, 1: 1.9, 2: 0.1})
    assert (seen.at_once_for(1.0), seen.at_once_for(0.05)) == (1, 2)
    assert seen.held_most_s() == pytest.approx(0.1)
    assert Seen.from_json(seen.to_json()) == seen
