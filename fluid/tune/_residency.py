"""Which trials compute on each GPU, and since when that has not changed.

How fast a packed trial runs depends on the trials that actually compute beside it, not on the
share its placement group holds: Ray does not enforce fractional GPUs, and neither does MPS
unless its active-thread percentage is set, so a trial alone on its GPU runs as fast as on a
whole GPU, and one beside ``k - 1`` others as it does ``k`` to a GPU. An iteration measures
packing at ``k`` to a GPU only if the same ``k`` trials computed on its GPU for all of it: a
trial arriving (placed, then starting its actor and restoring) or leaving (paused, resized,
finished) makes the iterations it overlapped say nothing about either degree.

Fluid's own plan (``GpuPool``) says which GPU a share is on; Ray fills one GPU before the
next for fractional requests, as the plan does, so the two agree on who shares a GPU.

Example:
    >>> r = Residency()
    >>> r.arrive("a", (0,), now=0.0); r.began("a", at=5.0)
    >>> r.degree("a", start=6.0)
    1
    >>> r.arrive("b", (0,), now=10.0)
    >>> r.degree("a", start=8.0) is None, r.degree("a", start=10.0)
    (True, 2)
    >>> r.exposure("a", start=6.0, end=14.0)
    0.5
"""

from __future__ import annotations

import math

from fluid.core.tolerances import TIME_TOL


class Residency:
    """The trials on each GPU and the time since which that set is unchanged and computing."""

    def __init__(self) -> None:
        self._gpus: dict[str, tuple[int, ...]] = {}
        self._on: dict[int, set[str]] = {}
        self._since: dict[int, float] = {}
        # gpu -> [trial id, computes from, until (None: still there), asked up to]: who
        # computed beside an iteration, and for how much of it (``exposure``).
        self._spans: dict[int, list[list]] = {}

    def arrive(self, trial_id: str, gpus: tuple[int, ...], now: float) -> None:
        """A trial was handed ``gpus`` at ``now`` (it computes only once it has started)."""
        self.leave(trial_id, now)
        self._gpus[trial_id] = gpus
        for g in gpus:
            self._on.setdefault(g, set()).add(trial_id)
            self._spans.setdefault(g, []).append([trial_id, now, None, now])
        self._touch(gpus, now)

    def began(self, trial_id: str, at: float) -> None:
        """The trial's first iteration after it (re)started began at ``at``: it computes since."""
        gpus = self._gpus.get(trial_id, ())
        for span in self._open(trial_id, gpus):
            span[1] = span[3] = max(span[1], at)
        self._touch(gpus, at)

    def leave(self, trial_id: str, now: float) -> None:
        """The trial stopped computing on its GPUs at ``now`` (paused, resized or done)."""
        gpus = self._gpus.pop(trial_id, ())
        for span in self._open(trial_id, gpus):
            span[2] = now
        for g in gpus:
            self._on[g].discard(trial_id)
            # Only a trial on the GPU asks, about an iteration that began after the one it
            # last asked about: spans that ended before the earliest of those overlap no
            # question left.
            spans = self._spans[g]
            first = min((s[3] for s in spans if s[2] is None), default=math.inf)
            spans[:] = [s for s in spans if s[2] is None or s[2] >= first - TIME_TOL]
        self._touch(gpus, now)

    def _open(self, trial_id: str, gpus: tuple[int, ...]) -> list[list]:
        return [s for g in gpus for s in self._spans.get(g, ()) if s[0] == trial_id and s[2] is None]

    def exposure(self, trial_id: str, start: float, end: float) -> float | None:
        """How many other trials computed on the trial's GPU from ``start`` to ``end``, on
        average over that time (a trial there for half of it counts a half; one handed the
        GPU counts from then until its first iteration says when it began), ``None`` if the
        trial is a gang or not placed, or the time is empty. Asked once per iteration, in
        order: the trial's next iteration begins after this one did, so it asks about no time
        before ``start`` again (what ``leave`` keeps; not ``end``: the driver learns of a
        result after the trial began its next iteration)."""
        gpus = self._gpus.get(trial_id, ())
        if len(gpus) != 1 or not end > start:
            return None
        shared = 0.0
        for span in self._spans.get(gpus[0], ()):
            tid, since, until, _ = span
            if tid == trial_id:
                span[3] = max(span[3], start)
            else:
                last = until if until is not None else end
                shared += max(0.0, min(end, last) - max(start, since))
        return shared / (end - start)

    def degree(self, trial_id: str, start: float) -> int | None:
        """How many trials computed on the trial's GPU from ``start`` until now, ``None`` if
        that changed meanwhile, or if the trial is a gang or not placed."""
        gpus = self._gpus.get(trial_id, ())
        if len(gpus) != 1:
            return None
        g = gpus[0]
        if self._since.get(g, -math.inf) > start + TIME_TOL:
            return None
        return len(self._on[g])

    def _touch(self, gpus: tuple[int, ...], at: float) -> None:
        for g in gpus:
            self._since[g] = max(self._since.get(g, -math.inf), at)
