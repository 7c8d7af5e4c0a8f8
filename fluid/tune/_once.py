"""Each training iteration once for every logger and callback, across restarts.

A trial that restarts from a checkpoint older than its last result (its process died between
a result and that result's checkpoint, a driver restored from an older snapshot, a trainable
that checkpoints every few iterations or never) runs those iterations again, and Tune hands
every callback their results a second time: TensorBoard event files, MLflow runs, W&B charts
and a user's own callbacks would each show the iteration twice.

``Once`` wraps every such callback of the experiment (at the first trial, in its place in the
list): a result reaches it only when its ``training_iteration`` is past the last one it was
given for that trial (``Delivered``, shared by the wrappers). What a callback once saw stays as
it saw it; the re-run of those iterations is not passed on. Left as they are:

* Tune's JSON and CSV loggers: their files are restored from storage when a trial restarts
  and trimmed to the restart iteration (``_history.RestartTrim``), so they must
  get the re-run's rows;
* progress reporters (a display, not a log) and Fluid's own callbacks.

A trial restarted from another trial's checkpoint (PBT's exploit) continues from that trial's
iteration, as under plain Tune: its next results are passed on. After a driver restore, a
trial's last iteration passed on is the largest of Tune's restored last result and the rows of
its stored ``result.json``.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.tune.callback import Callback
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
from ray.tune.progress_reporter import TrialProgressCallback

from fluid.tune import _ray_compat as compat
from fluid.tune._history import (
    ITERATION,
    RestartTrim,
    install_restart_trim,
    last_iteration_stored,
)
from fluid.tune._result_files import checkpoint_iteration, restart_iteration

logger = logging.getLogger("fluid")

#: Callbacks that must see every result: trimmed result files, displays.
UNGATED = (JsonLoggerCallback, CSVLoggerCallback, compat.ProgressReporter, TrialProgressCallback,
           RestartTrim)


class Delivered:
    """The last iteration of each trial passed on to the wrapped callbacks (shared by them).

    Not a callback of its own: Tune saves and restores its callbacks' states by their place in
    the list, so the wrappers take the places of the callbacks they wrap and add none. The
    first wrapper handed a trial's start or result asks here; the others get the same answer.
    """

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.held_back = 0  # results not passed on (repeats)
        # The result decided last and whether it was passed on; the result itself is held so
        # that a new one is never taken for it.
        self._current: tuple[dict | None, bool] = (None, True)

    def starting(self, trial: Any) -> None:
        """A trial starts: learn where it restarts from (the same answer for every wrapper)."""
        tid = trial.trial_id
        if restart_iteration(trial) is None:  # another trial's checkpoint (PBT)
            self.last[tid] = checkpoint_iteration(trial)
        elif tid not in self.last:  # first seen: a new trial, or one of a restored driver
            restored = int(trial.last_result.get(ITERATION, 0) or 0)
            self.last[tid] = max(restored, last_iteration_stored(trial))

    def passes(self, trial: Any, result: dict) -> bool:
        """Whether the wrapped callbacks get ``result``: its iteration is past the last one
        they were given for the trial."""
        if self._current[0] is result:
            return self._current[1]
        it = result.get(ITERATION)
        passed = it is None or it > self.last.get(trial.trial_id, 0)
        if passed and it is not None:
            self.last[trial.trial_id] = int(it)
        elif not passed:
            self.held_back += 1
            logger.debug("Fluid: %s iteration %d was logged already; not passed on again",
                         trial, it)
        self._current = (result, passed)
        return passed


def _passing(hook: str) -> Any:
    """A ``Once`` hook that hands its call to the wrapped callback unchanged."""

    def passed(self, **info: Any) -> None:
        getattr(self.inner, hook)(**info)

    passed.__name__ = hook
    return passed


class Once(Callback):
    """A callback that gets each iteration of a trial once (``Delivered``); every other hook
    and its state are passed through unchanged."""

    def __init__(self, inner: Callback, delivered: Delivered) -> None:
        self.inner, self._delivered = inner, delivered

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        if self._delivered.passes(trial, result):
            self.inner.on_trial_result(iteration=iteration, trials=trials, trial=trial,
                                       result=result, **info)

    setup = _passing("setup")
    on_step_begin = _passing("on_step_begin")
    on_step_end = _passing("on_step_end")

    def on_trial_start(self, **info: Any) -> None:
        self._delivered.starting(info["trial"])
        self.inner.on_trial_start(**info)

    on_trial_restore = _passing("on_trial_restore")
    on_trial_save = _passing("on_trial_save")
    on_trial_complete = _passing("on_trial_complete")
    on_trial_recover = _passing("on_trial_recover")
    on_trial_error = _passing("on_trial_error")
    on_checkpoint = _passing("on_checkpoint")
    on_experiment_end = _passing("on_experiment_end")

    def get_state(self) -> dict | None:
        return self.inner.get_state()

    def set_state(self, state: dict) -> None:
        self.inner.set_state(state)

    def __repr__(self) -> str:
        return f"Once({self.inner!r})"


def install_once(controller: Any) -> Delivered | None:
    """Each iteration once for every logger: ``RestartTrim`` after the result-file loggers,
    and the other callbacks wrapped in ``Once``, each in its own place; ``None`` when the
    controller has no callback list."""
    if install_restart_trim(controller) is None:
        return None
    callbacks = compat.callback_list(controller)
    delivered = Delivered()
    for i, cb in enumerate(callbacks):
        if not isinstance(cb, UNGATED + (Once,)):
            callbacks[i] = Once(cb, delivered)
    return delivered
