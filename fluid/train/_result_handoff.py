"""Ray Train's results into the Tune trial, one at a time, each with a checkpoint.

Ray Train runs a trainer's callbacks in its controller actor, not in the trial's process, and
Ray's ``TuneReportCallback`` passes Tune the metrics only. Fluid needs a checkpoint with each
result (it resizes a trial only right after one) and needs Train to stop where Tune stopped:

* ``HandoffCallback.after_report`` (in Train's controller) hands the result and Train's
  checkpoint to a small actor, ``Handoff``, and returns only once Tune has taken it. Ray Train
  registers a checkpoint as its latest before its callbacks run, and handles the next report
  only after they return: when Tune pauses the trial at a result (a Fluid resize), Train's
  latest checkpoint is that result's, and the restarted run resumes there, losing and
  repeating no iteration.
* A thread in the trial's process (``_forward``) takes each result and calls ``tune.report``
  with a checkpoint that points at Train's (``POINTER``: a JSON file naming its path; Train
  keeps the checkpoint itself, so nothing is copied). Tune's ``report`` returns when Tune asks
  for the next result, and only then is the hand-off done.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
from typing import Any

import ray
from ray import tune
from ray.train.v2.api.callback import UserCallback

#: The name of Ray Train's run inside the trial's directory.
TRAIN_RUN_NAME = "ray_train"
#: The file in a Tune checkpoint that names Ray Train's checkpoint.
POINTER = "fluid_ray_train.json"
#: Where Ray's ``TuneReportCallback`` puts Train's checkpoint path in the metrics (kept).
CHECKPOINT_PATH_KEY = "checkpoint_path"
#: Seconds the forwarding thread waits for a result before it looks whether the trial's
#: training thread is still alive.
POLL_S = 1.0


@ray.remote(num_cpus=0)
class Handoff:
    """One result at a time from Train's controller to the trial's process."""

    def __init__(self) -> None:
        self._results: asyncio.Queue = asyncio.Queue(1)
        self._taken: asyncio.Queue = asyncio.Queue(1)

    async def give(self, item: tuple[dict, Any]) -> None:
        """Hand ``(metrics, checkpoint)`` over; returns once Tune has taken it."""
        await self._results.put(item)
        await self._taken.get()

    async def take(self, timeout: float) -> tuple[dict, Any] | None:
        """The next result, or ``None`` after ``timeout`` seconds without one."""
        try:
            return await asyncio.wait_for(self._results.get(), timeout)
        except asyncio.TimeoutError:
            return None

    async def taken(self) -> None:
        """Tune has the result last taken."""
        await self._taken.put(True)


class HandoffCallback(UserCallback):
    """Ray Train callback (in Train's controller): every result goes through ``Handoff``."""

    def __init__(self, handoff: Any) -> None:
        self._handoff = handoff

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]],
                     checkpoint: Any) -> None:
        ray.get(self._handoff.give.remote((dict(metrics[0]), checkpoint)))


def handoff_callback() -> HandoffCallback:
    """A new hand-off, and the thread of this trial's process that forwards it to Tune."""
    handoff = Handoff.remote()
    owner = threading.current_thread()  # the trial's training thread: forward while it runs
    threading.Thread(target=_forward, args=(handoff, owner), daemon=True,
                     name="fluid-ray-train-results").start()
    return HandoffCallback(handoff)


def _forward(handoff: Any, owner: threading.Thread) -> None:
    while owner.is_alive():
        item = ray.get(handoff.take.remote(POLL_S))
        if item is None:
            continue
        report(*item)
        ray.get(handoff.taken.remote())


def report(metrics: dict[str, Any], checkpoint: Any) -> None:
    """``tune.report`` of one Ray Train result, with a pointer to its checkpoint if any."""
    if checkpoint is None:
        tune.report(metrics)
        return
    metrics = {**metrics, CHECKPOINT_PATH_KEY: checkpoint.path}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, POINTER), "w") as f:
            json.dump({"path": checkpoint.path}, f)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def checkpoint_owner(checkpoint: Any) -> str | None:
    """The path of Ray Train's checkpoint a Tune checkpoint points at (``None``: none)."""
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as d:
        path = os.path.join(d, POINTER)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return str(json.load(f)["path"])
