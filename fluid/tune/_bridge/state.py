"""FluidExecutor's measurements kept beside the experiment, so a restored experiment has them.

``fluid_state.json`` in the experiment's driver directory holds the measured resize costs
(``eps``) and, per trial, its iteration-time samples, whether it checkpoints, its resizes, its
iteration, the GPUs it asked for (its placement group is Fluid's shape by then) and the least
GPU share it needs once it ran out of GPU memory. Writes are throttled (with thousands of
trials, a write per result would dominate the driver: the file grows with every trial seen) and
never fail a run.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

from ray.tune import PlacementGroupFactory

from fluid.tune._estimator import OverheadEstimator
from fluid.tune._records import TrialBook, TrialRecord

logger = logging.getLogger("fluid")

STATE_FILE = "fluid_state.json"
#: Least seconds between two unforced writes.
SAVE_EVERY_S = 2.0
#: Unforced writes take at most about 1 / SAVE_SHARE of the wall clock: the gap after a write
#: is at least SAVE_SHARE times what it took. The state grows with every trial seen (tens of
#: ms at 1,000 trials); at 1% of the wall clock, with 16 short trials at a time, the writes alone
#: were 10 ms per trial.
SAVE_SHARE = 1000.0


def state_of(book: TrialBook, estimator: OverheadEstimator) -> dict[str, Any]:
    """The measurements to keep, as JSON-ready data."""
    return {
        "eps_samples": list(estimator.eps_samples),
        "trials": {
            tid: {"samples": [list(x) for x in r.samples], "checkpoints": r.checkpoints,
                  "resizes": r.resizes, "iteration": r.iteration, "asked": r.asked,
                  "w_min": r.w_min, "request": r.request.bundles if r.request else None,
                  "min_share": r.min_share}
            for tid, r in book.records.items()
        },
    }


def apply_saved(rec: TrialRecord, saved: dict[str, Any] | None) -> None:
    """Give a new record the samples, checkpointing, request and least GPU share
    (``min_share``) a saved state has for its trial."""
    if not saved:
        return
    rec.samples.extend(tuple(x) for x in saved.get("samples", [])
                       if isinstance(x, list) and len(x) == 2)
    rec.checkpoints = saved.get("checkpoints", False)
    rec.min_share = saved.get("min_share")
    if "asked" in saved:  # what the trial asked for: its placement group is Fluid's shape now
        rec.asked, rec.w_min = float(saved["asked"]), saved.get("w_min")
        bundles = saved.get("request")
        rec.request = PlacementGroupFactory(bundles) if bundles else None


class StateStore:
    """Reads and writes ``fluid_state.json`` in ``directory`` (``None``: nothing is kept)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.directory: str | None = None
        self._next_at = -math.inf

    def save(self, state: Callable[[], dict[str, Any]], force: bool = False) -> None:
        """Write ``state()`` unless ``force`` is false and the last write was less than
        ``SAVE_EVERY_S`` seconds, or ``SAVE_SHARE`` times its own duration, ago."""
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
        self._next_at = self._clock() + max(SAVE_EVERY_S, SAVE_SHARE * took)

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
