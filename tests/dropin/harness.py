"""Runs one user script under plain Tune or under ``FluidExecutor()`` and reads back what a
user would see: trial statuses, the result files, what a callback got, the best config.

A scenario is a ``Script``: the trainable (with its request), the search space, and the
scheduler and searcher as factories (each run gets fresh ones). ``run(script, fluid=...)``
wraps the scheduler in ``FluidExecutor`` with no option (or runs it as is), bounds the run
with Tune's own ``time_budget_s`` (a hang ends as trials not completed) and returns an
``Outcome``.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune import Callback, RunConfig, TuneConfig, Tuner

from fluid import FluidExecutor


class Recorder(Callback):
    """What a user's callback gets: each result's iteration, and how each trial ended."""

    def __init__(self) -> None:
        self.iterations: dict[str, list[int]] = defaultdict(list)
        self.ended: dict[str, str] = {}

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        self.iterations[trial.trial_id].append(int(result["training_iteration"]))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.ended[trial.trial_id] = "TERMINATED"

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.ended[trial.trial_id] = "ERROR"


@dataclass(frozen=True)
class Script:
    """One user script: what it trains, on what, with which algorithm."""

    name: str
    trainable: Any
    space: dict
    trials: int  # trials the experiment has in all
    scheduler: Callable[[], Any] | None = None
    search: Callable[[], Any] | None = None
    samples: int = 1
    stop: dict | None = None
    expect: int = 0  # trials that can run at once under plain Tune (0: not measured)
    deterministic: bool = True  # the best config is the same under any scheduler
    # Stops a hang, not a slow start: on 2 loaded cores 8 actors can take 2 minutes to start.
    limit_s: float = 300.0
    reuse_actors: bool = False


@dataclass
class Outcome:
    """What one run showed."""

    wall_s: float
    ended: dict[str, str]  # trial id -> TERMINATED / ERROR (what the callback was told)
    rows: dict[str, list[dict]]  # trial id -> its result.json rows
    seen: dict[str, list[int]]  # trial id -> the iterations a callback got
    best_q: float | None
    errors: list = field(default_factory=list)

    def column(self, key: str) -> list:
        """Every row's ``key`` (``None`` where a row lacks it)."""
        return [row.get(key) for rows in self.rows.values() for row in rows]

    @property
    def at_once(self) -> int:
        """The most trials seen running at once (``scripts.rendezvous``)."""
        return max((v or 0 for v in self.column("at_once")), default=0)


def _rows(path: str) -> list[dict]:
    file = Path(path) / "result.json"
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]


def run(script: Script, fluid: bool, storage: Path, **options: Any) -> Outcome:
    """Run ``script`` under plain Tune, or under ``FluidExecutor(base, **options)``."""
    base = script.scheduler() if script.scheduler else None
    scheduler = FluidExecutor(base, **options) if fluid else base
    recorder = Recorder()
    space = dict(script.space)
    if script.expect:
        folder = storage / f"{script.name}-{'fluid' if fluid else 'tune'}-at-once"
        folder.mkdir(parents=True)
        space.update(rendezvous=str(folder), expect=script.expect)
    tuner = Tuner(
        script.trainable, param_space=space,
        tune_config=TuneConfig(metric="score", mode="max", scheduler=scheduler,
                               search_alg=script.search() if script.search else None,
                               num_samples=script.samples, time_budget_s=script.limit_s,
                               reuse_actors=script.reuse_actors),
        run_config=RunConfig(name=f"{script.name}-{'fluid' if fluid else 'tune'}",
                             storage_path=str(storage), stop=script.stop, verbose=0,
                             callbacks=[recorder]),
    )
    start = time.monotonic()
    grid = tuner.fit()
    wall = time.monotonic() - start
    rows = {r.metrics.get("trial_id", r.path): _rows(r.path) for r in grid}
    best = grid.get_best_result(scope="all") if len(grid) else None
    q = None if best is None or best.config is None else best.config.get("q")
    print(f"dropin {script.name} {'fluid' if fluid else 'tune'}: {wall:.1f} s, "
          f"{len(recorder.ended)} trials ended, best q {q}")  # shown with pytest -s
    return Outcome(wall, dict(recorder.ended), rows, dict(recorder.iterations), q,
                   list(grid.errors))


def uniform_q(low: float = 0.1, high: float = 1.0) -> Any:
    """The searched hyperparameter of the searcher scripts."""
    return tune.uniform(low, high)
