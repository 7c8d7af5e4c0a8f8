"""Fluid runs PBT as plain Tune does (issue 12; the rule in ``fluid.schedulers.pbt``).

Six members on four logical GPUs under ``FluidExecutor``: every member runs at one GPU and is
never resized, and Fluid never makes a member train an iteration twice or skip one. A member's
reported iterations go back only where PBT exploited it: its run restored another member's
checkpoint (the trainable reports whose checkpoint it restored), and there are exactly as many
such restores as PBT reports perturbations. Whatever the timing of the run, none of this can
change; what it reaches can (PBT's decisions depend on which member reports first), so the
test does not compare scores with a plain Tune run.

PBT must exploit at least once whatever the timing, or the test proves nothing about exploits.
Asynchronous PBT exploits a member that reports in the lower half of the running and paused
members, from a donor of the upper half that was in the upper half at its own last report (the
first member to report, alone, never is). With more members than GPUs, PBT pauses a member at
each perturbation while another waits and restarts the least trained first, so the members
report in rounds. With their q 1.3 apart, the worst member's score in round 3 (6 q0) is below
the round-2 scores of four others (4 q0 1.3**j, j >= 2), and the best three were in the upper
half when they last reported: the worst member is exploited in round 3 at the latest (ITERS
gives three rounds).
"""

from __future__ import annotations

import re

import pytest
from ray.tune import Callback

from fluid import FluidExecutor, tune
from fluid.schedulers import PopulationBasedTraining
from tests.tune.base_schedulers import ExploitedWhileSaving
from tests.tune.trainables import modeled

#: ITERS is not a multiple of INTERVAL: a member exploited at its last perturbation still
#: reports an iteration after restoring the donor's checkpoint.
INTERVAL, ITERS, POPULATION = 2, 7, 6
QS = [1.3**j for j in range(POPULATION)]


class Results(Callback):
    """Every trial's results, in the order they arrived."""

    def __init__(self) -> None:
        self.of: dict[str, list[dict]] = {}

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        self.of.setdefault(trial.trial_id, []).append(result)


@pytest.mark.slow
@pytest.mark.parametrize("synch", [False, True])
def test_fluid_runs_pbt_as_plain_tune(ray4, tmp_path, synch):
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=INTERVAL,
                                  quantile_fraction=0.5, metric="score", mode="max",
                                  resample_probability=0.5, synch=synch,
                                  hyperparam_mutations={"q": tune.uniform(0.5, 2.0)})
    results = Results()
    fluid = FluidExecutor(pbt, cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.2)
    analysis = tune.run(
        modeled,  # checkpoints every iteration; reports whose checkpoint it restored
        config={"q": tune.grid_search(QS), "t": 0.3, "iters": ITERS},
        trial_executor=fluid, callbacks=[results],
        storage_path=str(tmp_path), verbose=0,
    )
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    # Plain Tune's shape: one GPU per member (they asked for none), never resized.
    assert fluid.resizes == 0
    assert {r["gpus"] for rs in results.of.values() for r in rs} == {1}
    exploits = 0
    for tid, rs in results.of.items():
        assert rs[-1]["training_iteration"] == ITERS, (tid, rs[-1])
        for prev, r in zip(rs, rs[1:], strict=False):
            donor = r["restored_from"] not in (None, tid)
            if r["training_iteration"] != prev["training_iteration"] + 1:
                # Only an exploit moves a member to another iteration, and it goes on from
                # the donor's checkpoint; a restore of its own checkpoint goes on where it was.
                assert donor, (tid, prev, r)
                assert r["training_iteration"] == r["restored_at"] + 1, (tid, r)
            exploits += donor and r["training_iteration"] == r["restored_at"] + 1
    perturbs = int(re.search(r"(\d+) perturbs", pbt.debug_string()).group(1))
    print(f"synch={synch}: {perturbs} perturbations, {exploits} restores from a donor")
    assert perturbs > 0
    assert exploits == perturbs  # every exploit restarted its member from the donor, once


def test_a_member_exploited_while_its_pause_saves_runs_to_its_end(ray4, tmp_path):
    """Plain Tune stops such a trial at the first checkpoint after its restart; under Fluid it
    trains every iteration, and every callback sees each one once."""
    results, base = Results(), ExploitedWhileSaving()
    analysis = tune.run(
        modeled, config={"q": 1.0, "t": 0.05, "iters": 5}, num_samples=2,
        trial_executor=FluidExecutor(base, cpus_per_trial=0.1, eps=0.2), callbacks=[results],
        storage_path=str(tmp_path), verbose=0,
    )
    assert len(base.exploited) == 2
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    for tid, rs in results.of.items():
        assert [r["training_iteration"] for r in rs] == [1, 2, 3, 4, 5], tid
