"""FluidExecutor's measurements kept beside the experiment, so a restored experiment has them.

``fluid_state.json`` in the experiment's driver directory holds the measured resize costs
(``eps``) and, per trial, its iteration-time samples, whether it checkpoints, its resizes, its
iteration, the GPUs it asked for (its placement group is Fluid's shape by then) and the least
GPU share it needs once it ran out of GPU memory. Writes are throttled (``Tunables.save_every_s``
and ``save_share``: with thousands of trials, a write per result would dominate the driver, the
file growing with every trial seen) and never fail a run.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ray.tune import PlacementGroupFactory

from fluid.core import Tunables
from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import TrialRecord, TrialStore

logger = logging.getLogger("fluid")

STATE_FILE = "fluid_state.json"


def state_of(store: TrialStore, estimator: OverheadEstimator) -> dict[str, Any]:
    """The measurements to keep, as JSON-ready data."""
    return {
        "eps_samples": list(estimator.eps_samples),
        "trials": {
            tid: {"samples": [list(x) for x in r.samples], "checkpoints": r.checkpoints,
                  "resizes": r.resizes, "iteration": r.iteration, "asked": r.asked,
                  "w_min": r.w_min, "request": r.request.bundles if r.request else None,
                  "min_share": r.min_share}
            for tid, r in store.records.items()
        },
    }


def apply_saved(store: TrialStore, rec: TrialRecord, saved: dict[str, Any] | None) -> None:
    """Give a new record the samples, checkpointing, request and least GPU share
    (``min_share``) a saved state has for its trial."""
    if not saved:
        return
    samples = deque(tuple(x) for x in saved.get("samples", [])
                    if isinstance(x, list) and len(x) == 2)
    store.update(rec, samples=samples, checkpoints=saved.get("checkpoints", False),
                 min_share=saved.get("min_share"))
    if "asked" in saved:  # what the trial asked for: its placement group is Fluid's shape now
        bundles = saved.get("request")
        store.update(rec, asked=float(saved["asked"]), w_min=saved.get("w_min"),
                     request=PlacementGroupFactory(bundles) if bundles else None)


class StateFile:
    """Reads and writes ``fluid_state.json`` in ``directory`` (``None``: nothing is kept), and
    keeps what was read for the trials added later (``saved``)."""

    def __init__(self, clock: Callable[[], float], tunables: Tunables) -> None:
        self._clock, self._tunables = clock, tunables
        self.directory: str | None = None
        self._next_at = -math.inf
        self._trials: dict[str, Any] = {}  # saved measurements by trial id

    def open(self, directory: str | None, estimator: OverheadEstimator) -> None:
        """Keep the state in ``directory``; what it holds already is read: the resize costs
        go to ``estimator``, the trials' measurements to the trials added later."""
        self.directory = directory
        state = self.load()
        estimator.restore_eps(state.get("eps_samples", []))
        self.restored(state)

    def restored(self, state: dict[str, Any]) -> None:
        """Measurements saved before (``state_of``): trials added later start with them."""
        self._trials = state.get("trials", {})

    def saved(self, trial_id: str) -> dict[str, Any] | None:
        """What was saved of the trial (``None``: nothing)."""
        return self._trials.get(trial_id)

    def save(self, state: Callable[[], dict[str, Any]], force: bool = False) -> None:
        """Write ``state()`` unless ``force`` is false and the last write was less than
        ``Tunables.save_every_s`` seconds, or ``save_share`` times its own duration, ago."""
        if not self.directory or (not force and self._clock() < self._next_at):
            return
        path = os.path.join(self.directory, STATE_FILE)
        started = time.perf_counter()  # the driver's real cost, also under a simulated clock
        try:
            os.makedirs(self.directory, exist_ok=True)
            text = json.dumps(state())  # one C-encoded string: json.dump writes in chunks
            with open(path + ".tmp", "w") as f:
                f.write(text)
            os.replace(path + ".tmp", path)
        except OSError as e:  # state is an optimisation; never fail a run over it
            logger.debug("Fluid: could not save state to %s: %s", path, e)
        took = time.perf_counter() - started
        t = self._tunables
        self._next_at = self._clock() + max(t.save_every_s, t.save_share * took)

    def load(self) -> dict[str, Any]:
        """The saved state, or ``{}`` when there is none (or it cannot be read)."""
        if not self.directory:
            return {}
        path = os.path.join(self.directory, STATE_FILE)
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            return {}
        logger.info("Fluid: restored measurements of %d trials", len(state.get("trials", {})))
        return state
