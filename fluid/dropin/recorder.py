"""What a user's Tune callback sees of a run: each trial's results, how it ended, its shapes,
and how many trials were RUNNING at once and for how long (``Recorder``, kept as ``Seen``)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ray.tune import Callback


@dataclass
class Seen:
    """What a ``Recorder`` saw of one run."""

    ended: dict[str, str] = field(default_factory=dict)  # trial id -> TERMINATED / ERROR
    results: dict[str, list[list]] = field(default_factory=dict)  # id -> [[iteration, tag]]
    shapes: list = field(default_factory=list)  # every result's fluid_shape (None: none)
    at_once: int = 0  # most trials RUNNING at one instant
    held_s: dict[int, float] = field(default_factory=dict)  # trials RUNNING -> seconds so

    def at_once_for(self, seconds: float) -> int:
        """The most trials RUNNING at once for ``seconds`` in all over the run. Where trials
        run for less than an actor takes to start, the most at any one instant is a race
        between actor starts; this is what the run held."""
        return max((n for n in self.held_s
                    if sum(s for m, s in self.held_s.items() if m >= n) >= seconds), default=0)

    def held_most_s(self) -> float:
        """Seconds in all the run held its most trials at once (``at_once``)."""
        return sum(s for n, s in self.held_s.items() if n >= self.at_once)

    @property
    def iterations(self) -> int:
        """Results reported over all trials: the work the run did."""
        return sum(len(rows) for rows in self.results.values())

    def repeats(self) -> dict[str, list[int]]:
        """Trial id -> the iterations a callback got more than once, where any."""
        counts = {tid: Counter(i for i, _tag in rows) for tid, rows in self.results.items()}
        return {tid: sorted(i for i, n in c.items() if n > 1) for tid, c in counts.items()
                if max(c.values(), default=0) > 1}

    def iteration_breaks(self) -> list[tuple[str, int, int]]:
        """``(trial, iteration, next)`` where a trial's next result is not the next iteration
        and its experiment tag stayed the same (a PBT exploit changes the tag): a result lost
        or repeated."""
        breaks = []
        for tid, rows in self.results.items():
            for (i, tag), (j, tag2) in zip(rows, rows[1:], strict=False):
                if j != i + 1 and tag == tag2:
                    breaks.append((tid, i, j))
            if rows and rows[0][0] != 1:
                breaks.append((tid, 0, rows[0][0]))
        return breaks

    def to_json(self) -> dict:
        """A JSON-ready dict (``from_json`` reads it back)."""
        return {"ended": self.ended, "results": self.results, "shapes": self.shapes,
                "at_once": self.at_once, "held_s": self.held_s}

    @classmethod
    def from_json(cls, data: dict) -> Seen:
        """The ``Seen`` that ``to_json`` wrote."""
        return cls(data["ended"], data["results"], data["shapes"], data["at_once"],
                   {int(n): s for n, s in data["held_s"].items()})


class Recorder(Callback):
    """A Tune callback that records what a user's callback gets (``seen``)."""

    def __init__(self) -> None:
        self.seen = Seen(results=defaultdict(list), held_s=defaultdict(float))
        self._running = 0  # trials RUNNING at the last count, since self._since
        self._since: float | None = None

    def _count(self, trials: list, starting: Any = None) -> None:
        running = sum(t.status == "RUNNING" or t is starting for t in trials)
        self.seen.at_once = max(self.seen.at_once, running)
        now = time.monotonic()
        if self._since is not None:
            self.seen.held_s[self._running] += now - self._since
        self._running, self._since = running, now

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        self._count(trials)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._count(trials)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._count(trials, starting=trial)  # Tune marks it RUNNING after this call

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        self._count(trials)
        self.seen.results[trial.trial_id].append([int(result["training_iteration"]),
                                                  trial.experiment_tag])
        self.seen.shapes.append(result.get("fluid_shape"))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.seen.ended[trial.trial_id] = "TERMINATED"

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.seen.ended[trial.trial_id] = "ERROR"
