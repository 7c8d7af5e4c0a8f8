"""What ``fluid bench e2e`` predicts moves little with the restart cost it is given: the
simulated Fluid resizes where a resize pays for itself and for its undoing, so a small change
of the measured cost changes the plan a little, not the outcome by a cliff. Told the resize
cost the real Fluid's decisions rested on, the simulated one takes the same decisions."""

from __future__ import annotations

import numpy as np
import pytest

from fluid.cli.bench_e2e import QUICK, compare_runs, predict_modeled
from fluid.core import Tunables

#: Restart costs from 0.5 s to 4 s in steps of 0.1 s (Ray's measured costs on these machines).
COSTS = [round(c, 1) for c in np.arange(0.5, 4.01, 0.1)]


def speedups(job: str, tunables: Tunables | None = None) -> list[float]:
    """The simulated speedup of ``--quick``'s job over plain Tune at each of ``COSTS``."""
    options = None if tunables is None else {"alpha": 1.25, "beta": 1.05, "tunables": tunables}
    out = []
    for cost in COSTS:
        p = predict_modeled(job, QUICK["t1"], QUICK["iters"], QUICK["gpus"], cost,
                            fluid_options=options)
        out.append(p["tune"] / p["fluid"])
    return out


@pytest.mark.parametrize("job", ["hyperband", "grid"])
def test_the_simulated_speedup_has_no_cliff_in_the_restart_cost(job: str) -> None:
    gains = speedups(job)
    steps = np.abs(np.diff(gains))
    # A tenth of a second more per restart moves the figure by a tenth at most (a margin of
    # twelve restarts moved it by 0.20-0.27 at single steps, HyperBand 1.68x -> 1.47x).
    assert steps.max() < 0.1, list(zip(COSTS, np.round(gains, 3), strict=True))
    assert min(gains) > 1.3


def test_a_margin_of_many_restarts_makes_the_cliff() -> None:
    """The same job with the margin a resize needed before: the step the test above bounds."""
    gains = speedups("hyperband", Tunables(resize_gain=12.0, idle_gain=5.0))
    assert np.abs(np.diff(gains)).max() > 0.15


def measured(eps: float, restart: float | None) -> dict[str, dict]:
    """The two runs of a job as ``_run`` reports them (set-up and tear-down left out)."""
    ray = {"makespan": 70.0, "trials": 7, "trial_overhead_s": 0.45, "setup_s": 0.0,
           "teardown_s": 0.0}
    return {"tune": ray, "fluid": {**ray, "resizes": 0, "restart_s": restart, "eps_s": eps}}


@pytest.mark.parametrize("job", ["hyperband", "grid"])
def test_the_simulated_fluid_takes_the_decisions_of_the_resize_cost_the_run_measured(
        job: str) -> None:
    """On a loaded machine a trial start took 30 s, so the real Fluid resized nothing and ran
    as plain Tune did; told that cost, the simulated Fluid does the same, though Ray's own
    cost per start in the simulation (what plain Tune's trials pay) stays 0.45 s."""
    loaded = compare_runs(job, measured(30.0, None), QUICK["t1"], QUICK["iters"], QUICK["gpus"])
    assert loaded["simulated_eps_s"] == 30.0 and loaded["simulated_restart_s"] == 0.45
    assert loaded["simulated_speedup"] == pytest.approx(1.0, abs=0.01), loaded["simulated"]
    idle = compare_runs(job, measured(2.2, 2.2), QUICK["t1"], QUICK["iters"], QUICK["gpus"])
    assert idle["simulated_speedup"] > 1.3, idle["simulated"]
