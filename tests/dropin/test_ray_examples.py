"""Ray's own shipped Tune examples under plain Tune and with only their scheduler line wrapped
in ``FluidExecutor`` (``ray_examples``): a PBT example as shipped (``reuse_actors=True``), ASHA
with a model-based searcher behind a ``ConcurrencyLimiter``, and BOHB.

Each completes under Fluid with as many trials, all ended TERMINATED, at least as many running
at once as plain Tune kept running for a second or more (``ExampleRun.at_once_for``: the most
at one instant is a race between actor starts where trials are RUNNING a small part of the
time, as in ``pbt_example``, 0.1 trials on average), each trial's iterations in order with none lost or repeated (a PBT exploit, which
changes the trial's experiment tag, may jump), a ``fluid_shape`` on every result, and a wall
time of at most 1.3x plain Tune's + 10 s, plain Tune's scaled to the iterations Fluid's run
did (the examples' searchers are unseeded, so each run does other work) (both run at once: the same load on each). ``python -m tests.dropin.ray_examples compare``
runs every example that runs here and prints the same figures side by side.
"""

from __future__ import annotations

import pytest

from tests.dropin.ray_examples import HELD_S, ExampleRun, fluid_source, run_examples

#: (example, its arguments): run as Ray's CI runs them (``--smoke-test``).
EXAMPLES = [
    ("pbt_example", ("--smoke-test",)),
    ("optuna_example", ("--smoke-test",)),
    ("bohb_example", ()),
]


def check(plain: ExampleRun, fluid: ExampleRun) -> None:
    """What Fluid keeps of plain Tune's run of the same example."""
    for run in (plain, fluid):
        assert run.returncode == 0, run.output
        assert run.ended and set(run.ended.values()) == {"TERMINATED"}, run.ended
        assert not run.iteration_breaks(), run.iteration_breaks()
    assert len(fluid.ended) == len(plain.ended)
    assert fluid.at_once >= plain.at_once_for(HELD_S), (fluid.at_once, plain.held_s)
    assert None not in fluid.shapes
    # The examples' searchers are unseeded: each run draws other configs, which an early
    # stopping scheduler runs for more or fewer iterations. Plain Tune's time is scaled up to
    # the work Fluid's run did where it did more; where it did less, the bound is plain Tune's
    # own time (trial starts, not iterations, fill most of these runs: Optuna's took 27 s for
    # 115 iterations where plain Tune's took 42 s for 406).
    work = max(1.0, fluid.iterations / max(1, plain.iterations))
    assert fluid.wall_s <= 1.3 * plain.wall_s * work + 10, (
        fluid.wall_s, plain.wall_s, fluid.iterations, plain.iterations)


@pytest.mark.parametrize(("name", "args"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_ray_example_runs_under_fluid_as_under_tune(tmp_path, name, args):
    plain, fluid = run_examples(name, tmp_path, args)
    print(f"{name}: tune {plain.wall_s:.1f} s, {plain.at_once} at once, {plain.held_s}; "
          f"fluid {fluid.wall_s:.1f} s, {fluid.at_once} at once, {fluid.held_s}")
    check(plain, fluid)


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


def test_plain_tunes_time_is_scaled_up_to_more_work_fluid_did_never_down():
    rows = {"a": [[i, "t"] for i in range(1, 11)]}
    plain = ExampleRun(0, 40.0, {"a": "TERMINATED"}, rows, 2, [None] * 10, "")
    fluid = ExampleRun(0, 70.0, {"a": "TERMINATED"}, {"a": rows["a"] * 2}, 2, ["0 GPU"] * 20,
                       "")
    fluid.results = {"a": rows["a"], "b": rows["a"]}  # twice the work: up to 2 x 52 + 10 s
    check(plain, fluid)
    fluid.wall_s = 125.0
    with pytest.raises(AssertionError):
        check(plain, fluid)
    fluid.results = {"a": rows["a"][:3]}  # less work: up to plain Tune's own 52 + 10 s
    fluid.wall_s = 60.0
    check(plain, fluid)
    fluid.wall_s = 63.0
    with pytest.raises(AssertionError):
        check(plain, fluid)


def test_a_lost_or_repeated_iteration_is_seen_and_an_exploit_is_not():
    run = ExampleRun(0, 1.0, {"a": "TERMINATED"}, {
        "a": [[1, "t"], [2, "t"], [2, "t"], [4, "t"]],  # repeated, then lost
        "b": [[1, "t"], [2, "t"], [5, "t@perturbed"], [6, "t@perturbed"]],  # an exploit
    }, 1, [], "")
    assert run.iteration_breaks() == [("a", 2, 2), ("a", 2, 4)]


def test_trials_at_once_for_a_moment_are_not_asked_of_fluid_and_for_seconds_are():
    plain = ExampleRun(0, 10.0, {"a": "TERMINATED"}, {"a": [[1, "t"]]}, 2, [None], "",
                       {0: 8.0, 1: 1.9, 2: 0.1})
    fluid = ExampleRun(0, 10.0, {"a": "TERMINATED"}, {"a": [[1, "t"]]}, 1, ["0 GPU"], "",
                       {0: 8.0, 1: 2.0})
    assert (plain.at_once_for(1.0), plain.at_once_for(0.05)) == (1, 2)
    check(plain, fluid)
    plain.held_s = {0: 7.0, 1: 1.0, 2: 2.0}
    with pytest.raises(AssertionError):
        check(plain, fluid)
