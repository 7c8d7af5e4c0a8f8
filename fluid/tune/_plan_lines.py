"""What FluidExecutor tells the user: one line per plan change, on the ``fluid`` logger.

A line says which trial starts on which shape (packed on a shared GPU, one GPU, a gang), which
trial is resized, and which trial runs on other GPUs than it asked for (a warning, only with
``resize_requests=True``; one line per experiment when a one-GPU request is sized by
default). Lines are printed at Tune's verbosity: on unless the experiment runs
with ``verbose=0`` or the executor with ``verbose=False``. When neither the ``fluid``
logger nor the root logger has a handler, a handler writing the bare message to stderr is
installed, so the lines appear without any logging set-up; a user's own logging set-up is
left as it is (the ``fluid`` logger is only lowered to INFO when its level was never set).
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from typing import Any

from fluid.core.tolerances import WIDTH_TOL
from fluid.tune import _ray_compat as compat
from fluid.tune._gpu_nodes import MPS_KEY, MPS_REASON_KEY
from fluid.tune._placement_groups import describe
from fluid.tune._records import TrialRecord

logger = logging.getLogger("fluid")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (pytest and notebooks replace it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def ensure_handler() -> None:
    """Make INFO lines of the ``fluid`` logger visible when the user configured no logging."""
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)


class PlanReport:
    """Prints Fluid's plan changes, one line each.

    Args:
        verbose: ``True`` prints them, ``False`` keeps them at DEBUG; ``None`` (default)
            follows Tune's verbosity (silent with ``verbose=0``).
    """

    def __init__(self, verbose: bool | None = None, resize_requests: bool | None = None,
                 ) -> None:
        self.verbose, self.resize_requests = verbose, resize_requests
        self.on = verbose is not False
        self._warned: set[str] = set()  # trials told that Fluid resized their request
        self._no_gpu_said = False  # the line on trials without GPU was printed
        self._clients_said: set[tuple[str, Any]] = set()  # (trial, process) said

    def start(self, controller: Any) -> None:
        """Decide from Tune's verbosity (at the first trial) and install the handler."""
        if self.verbose is None:
            self.on = compat.tune_verbosity(controller) > 0
        if self.on:
            ensure_handler()

    def summary(self, gpus: float, widths: list[float | None], queued: int, resizes: int,
                eps: float, group: str) -> str:
        """One line on Fluid's state (``FluidExecutor.debug_string``): GPUs, the shapes of
        the placed trials, the queue, resizes, ``eps`` and the current TrialGroup."""
        counts = Counter(describe(w) for w in widths)
        shapes = ", ".join(f"{n} x {k}" for k, n in sorted(counts.items())) or "none"
        return (f"Fluid: {gpus:g} GPUs, running {shapes}; queued {queued}; resizes {resizes}, "
                f"eps {eps:.2f}s; TrialGroup {group!r}.")

    def line(self, message: str, *args: Any) -> None:
        """One plan change (INFO when on, else DEBUG)."""
        logger.log(logging.INFO if self.on else logging.DEBUG, message, *args)

    def started(self, rec: TrialRecord, gpus: tuple[int, ...], mates: int) -> None:
        """A trial starts (or restarts after a resize) on ``gpus`` of Fluid's plan.

        The plan's GPUs are slots of Fluid's own accounting: Ray picks the device a placement
        group gets (the trial sees it in ``CUDA_VISIBLE_DEVICES``), so the line names the slot
        and who shares it, not a device. A trial without GPU gets one line per experiment.
        """
        assert rec.width is not None
        if rec.no_gpu:
            if not self._no_gpu_said:
                self._no_gpu_said = True
                self.line("Fluid: trials that ask for no GPU (%s, ...) run on their own "
                          "request, as under plain Tune", rec.trial)
            return
        where = ", ".join(str(g) for g in gpus) or "-"
        shared = f", shared with {mates} other trial{'s' if mates != 1 else ''}" if mates else ""
        slot = "slot" if len(gpus) == 1 else "slots"
        self.line("Fluid: %s runs on %s (plan %s %s%s; Ray picks the device)", rec.trial,
                  rec.shape(rec.width), slot, where, shared)

    def client(self, rec: TrialRecord, result: dict) -> None:
        """Once per trial process: whether it is an MPS client, or why not, as it checked
        itself (its result's ``fluid_mps``)."""
        key = (rec.trial_id, result.get("pid"))
        if MPS_KEY not in result or key in self._clients_said:
            return
        self._clients_said.add(key)
        if result[MPS_KEY]:
            self.line("Fluid: %s is an MPS client of its node's daemon", rec.trial)
        else:
            self.line("Fluid: %s runs without MPS: %s", rec.trial, result.get(MPS_REASON_KEY))

    def resizing(self, rec: TrialRecord) -> None:
        """A running trial pauses to restart at another width."""
        self.line("Fluid: resizing %s from %s to %s", rec.trial, rec.shape(rec.actual),
                  rec.shape(rec.width))

    def request_resized(self, rec: TrialRecord) -> None:
        """A trial runs on other GPUs than it asked for. With ``resize_requests=True`` a
        WARNING, once per trial, whatever Tune's verbosity (DEBUG with ``verbose=False``); by
        default (a one-GPU request sized by Fluid) one line per experiment."""
        if (rec.trial_id in self._warned or rec.width is None
                or abs(rec.width - rec.asked) < WIDTH_TOL):
            return
        if self.resize_requests is None:
            if not self._warned:
                self.line("Fluid: trials that ask for one GPU are sized by Fluid (packed where "
                          "measured cheap and memory-safe; %s runs on %s); "
                          "resize_requests=False keeps every request", rec.trial,
                          rec.shape(rec.width))
            self._warned.add(rec.trial_id)
            return
        self._warned.add(rec.trial_id)
        logger.log(logging.DEBUG if self.verbose is False else logging.WARNING,
                   "Fluid: trial %s asked for %g GPUs; Fluid runs it on %s "
                   "(resize_requests=True)", rec.trial, rec.asked, rec.shape(rec.width))
