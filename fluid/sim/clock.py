"""The simulated clock: seconds since the start of a simulated experiment.

``SimClock`` is what the simulated controller advances and what ``FluidExecutor(clock=...)``
reads, so every time the executor measures (``eps``, iteration times, plan timestamps) is
simulated time.

Example:
    >>> clock = SimClock()
    >>> clock()
    0.0
    >>> clock.advance_to(2.5)
    >>> clock()
    2.5
"""

from __future__ import annotations


class SimClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        """The current simulated time in seconds."""
        return self._now

    def advance_to(self, t: float) -> None:
        """Move the clock forward to ``t`` (never backwards)."""
        if t < self._now:
            raise ValueError(f"the clock cannot go back from {self._now} to {t}")
        self._now = float(t)
