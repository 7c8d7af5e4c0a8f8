"""The simulated controller's bookkeeping: the events on the simulated clock, the trials by
status (as ``TuneController`` files them), a trial's fake actor and simulated training state,
the save future PBT sees, and the seeding of one run.

``_FutureTrainingResult`` and ``_TrainingResult`` (Ray-private, reached through
``fluid.tune._ray_compat``) are what ``Trial.on_checkpoint`` and PBT's exploit take from a save.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from ray.tune.experiment import Trial

from fluid.sim.clock import SimClock
from fluid.sim.workloads.base import TrialModel
from fluid.tune._ray_compat import _FutureTrainingResult, _TrainingResult

#: Kinds of events on the simulated clock.
START, RESULT, SAVED, RESTORED = "start", "result", "saved", "restored"


class EventQueue:
    """Events ``(time, kind, trial, actor token)`` on the simulated clock, earliest first (ties:
    in the order they were pushed)."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, str, Trial, int]] = []
        self._seq = 0

    def push(self, time: float, kind: str, trial: Trial, token: int) -> None:
        """An event due at ``time``."""
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, trial, token))

    def due(self, idle: bool) -> bool:
        """Whether to handle the next event now: it is due, or nothing else happened (the
        clock then jumps to it)."""
        return bool(self._heap) and (self._heap[0][0] <= self.clock() or idle)

    def pop(self) -> tuple[str, Trial, int]:
        """The next event, the clock moved to its time: ``(kind, trial, token)``."""
        time, _, kind, trial, token = heapq.heappop(self._heap)
        self.clock.advance_to(max(time, self.clock()))
        return kind, trial, token


class SimTrials:
    """The trials, as ``TuneController`` files them: every trial in the order added, the live
    ones, each status's set and the PENDING ones in the order they became so."""

    def __init__(self) -> None:
        self.all: list[Trial] = []
        self.live: dict[Trial, None] = {}  # an insertion-ordered set
        self.by_status: dict[str, dict[Trial, None]] = {
            s: {} for s in (Trial.PENDING, Trial.RUNNING, Trial.PAUSED, Trial.TERMINATED,
                            Trial.ERROR)
        }
        self.pending: list[Trial] = []

    def file(self, trial: Trial) -> None:
        """File a trial just added by the status it has (after the scheduler's hook)."""
        self.by_status[trial.status][trial] = None
        if trial.status == Trial.PENDING:
            self.pending.append(trial)

    def set_status(self, trial: Trial, status: str) -> None:
        """``TuneController._set_trial_status``: move a trial between the status sets."""
        current = trial.status
        if current == status:
            return
        assert trial in self.by_status[current], (trial, current)
        assert trial not in self.by_status[status], (trial, status)
        del self.by_status[current][trial]
        self.by_status[status][trial] = None
        if status == Trial.PENDING:
            self.pending.append(trial)
        trial.set_status(status)


@dataclass
class SimActor:
    """A trial's fake Ray actor: its placement-group request and when its current task ends."""

    token: int
    pgf: Any
    asked: float  # GPUs the placement group asks for
    width: float | None = None  # None until placed
    busy_until: float = 0.0


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
