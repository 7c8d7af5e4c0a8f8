"""A user's stateful callbacks get their own saved state back when an experiment run under
Fluid is restored: Tune saves and restores callback states by their place in its callback list,
so whatever Fluid installs must leave every callback in its place."""

from __future__ import annotations

from ray.tune import Callback

from fluid import FluidExecutor, tune
from tests.tune.trainables import modeled

ITERS = 3


class Counting(Callback):
    """Counts the results it is handed; its state is that count under its own key."""

    def __init__(self, key: str) -> None:
        self.key, self.results, self.restored = key, 0, None

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.results += 1

    def get_state(self) -> dict:
        return {self.key: self.results}

    def set_state(self, state: dict) -> None:
        self.restored = state


def _run(tmp_path, callbacks, resume):
    return tune.run(modeled, name="state", config={"t": 0.05, "iters": ITERS,
                                                   "n": tune.grid_search([1, 2])},
                    trial_executor=FluidExecutor(cpus_per_trial=0.1, eps=0.2),
                    storage_path=str(tmp_path), verbose=0, callbacks=callbacks, resume=resume)


def test_restored_callbacks_get_their_own_state(ray4, tmp_path):
    first = [Counting("a"), Counting("b")]
    analysis = _run(tmp_path, list(first), resume=False)  # Tune adds its loggers to the list
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    assert [cb.results for cb in first] == [2 * ITERS, 2 * ITERS]
    again = [Counting("a"), Counting("b")]
    _run(tmp_path, list(again), resume=True)
    assert [cb.restored for cb in again] == [{"a": 2 * ITERS}, {"b": 2 * ITERS}]
