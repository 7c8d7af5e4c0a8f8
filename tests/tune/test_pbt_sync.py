"""Fluid's PBT keeps its population in step (issue 15, item 2).

The same script runs under plain Tune's PBT (one GPU per trial, 8 trials on 4 GPUs) and under
Fluid's PBT (FluidExecutor): under Fluid no unfinished member is ever more than one
perturbation interval behind the most advanced, and no iteration is repeated by an exploit (the
same ``training_iteration`` twice in one trial's results), where plain Tune's asynchronous PBT
repeats some, how many depending on which members happen to run.
"""

from __future__ import annotations

import pytest
from ray.tune import Callback

from fluid import FluidExecutor, tune
from fluid.schedulers import PopulationBasedTraining
from tests.tune.trainables import modeled

INTERVAL, ITERS, POPULATION = 2, 8, 8


class Spread(Callback):
    """At every result: the most minus the least advanced unfinished member (once all
    reported); every trial's reported iterations, in order."""

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}
        self.spreads: list[int] = []
        self.iterations: dict[str, list[int]] = {}

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        it = result["training_iteration"]
        self.latest[trial.trial_id] = it
        self.iterations.setdefault(trial.trial_id, []).append(it)
        unfinished = [self.latest[t.trial_id] for t in trials
                      if t.status != "TERMINATED" and t.trial_id in self.latest]
        if len(self.latest) == POPULATION and unfinished:
            self.spreads.append(max(self.latest.values()) - min(unfinished))

    def repeats(self) -> int:
        return sum(len(v) - len(set(v)) for v in self.iterations.values())


def _run(tmp_path, fluid: bool) -> Spread:
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=INTERVAL,
                                  quantile_fraction=0.5,
                                  metric="score", mode="max", resample_probability=0.5,
                                  hyperparam_mutations={"q": tune.uniform(0.5, 2.0)})
    spread = Spread()
    analysis = tune.run(
        modeled,  # restores its iteration from the checkpoint it reports at every iteration
        config={"q": tune.uniform(0.5, 2.0), "t": 0.3, "iters": ITERS},
        num_samples=POPULATION,
        scheduler=None if fluid else pbt,
        trial_executor=FluidExecutor(pbt, cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.2)
        if fluid else None,
        resources_per_trial=None if fluid else {"cpu": 0.1, "gpu": 1},
        callbacks=[spread],
        storage_path=str(tmp_path / ("fluid" if fluid else "plain")),
        verbose=0,
    )
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    return spread


@pytest.mark.slow
def test_population_stays_in_step(ray4, tmp_path):
    plain = _run(tmp_path, fluid=False)
    fluid = _run(tmp_path, fluid=True)
    print(f"plain: repeats {plain.repeats()}, max spread {max(plain.spreads)}; "
          f"fluid: repeats {fluid.repeats()}, max spread {max(fluid.spreads)}")
    # The barrier (PBT's synchronous perturbation under Fluid): a member runs past a
    # perturbation only once every unfinished member reached it, and exploits clone donors
    # at that same iteration, so no member is more than INTERVAL behind another.
    assert max(fluid.spreads) <= INTERVAL, fluid.spreads
    # Synchronous perturbation under Fluid: every exploit clones a donor saved at the very
    # iteration the exploiting member reached, so no iteration runs twice (plain Tune's
    # asynchronous PBT repeated 0 to 6 here, depending on which members happened to run).
    assert fluid.repeats() == 0, fluid.iterations
    assert fluid.repeats() <= plain.repeats()
