"""The simulated controller's bookkeeping: a trial's fake actor, its simulated training state,
the save future PBT sees, and the seeding of one run.

``_FutureTrainingResult`` and ``_TrainingResult`` (Ray-private, reached through
``fluid.tune._ray_compat``) are what ``Trial.on_checkpoint`` and PBT's exploit take from a save.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from fluid.sim.workloads.base import TrialModel
from fluid.tune._ray_compat import _FutureTrainingResult, _TrainingResult

#: Kinds of events on the simulated clock.
START, RESULT, SAVED, RESTORED = "start", "result", "saved", "restored"


@dataclass
class SimActor:
    """A trial's fake Ray actor: its placement-group request and when its current task ends."""

    token: int
    pgf: Any
    asked: float  # GPUs the placement group asks for
    width: float | None = None  # None until placed
    busy_until: float = 0.0
    started: bool = False


@dataclass
class SimTrialState:
    """A trial's simulated training: its model, learning-curve state, timings and noise."""

    index: int
    model: TrialModel | None = None
    curve: Any = None
    state: float | None = None  # learning-curve state
    iteration: int = 0
    train_time: float = 0.0
    work_time: float = 0.0  # one-GPU seconds of the iterations trained
    starts: int = 0
    reached: int | None = None  # iteration at which it first met the target
    first_start: float | None = None  # when it first started training
    end: float | None = None  # when it was stopped
    rng: np.random.Generator | None = None
    config_key: Any = None


class SimSaveFuture(_FutureTrainingResult):
    """A save in flight, as PBT sees it: resolves to the checkpoint it will hold."""

    def __init__(self, result: _TrainingResult) -> None:
        super().__init__(None)
        self._result = result

    def resolve(self, block: bool = True) -> _TrainingResult | None:
        return self._result


class NoSyncer:
    """The experiment storage's syncer, as schedulers reach it: nothing to wait for."""

    def wait(self) -> None:
        """Nothing to sync: the simulation writes no files."""


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed the global ``random`` and ``numpy.random`` (PBT, HyperBand ties) for one run."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
