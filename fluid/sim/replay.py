"""Replay a finished Ray Tune experiment under every executor: what would Fluid have saved?

``fluid simulate --replay RESULTS_DIR`` reads every ``result.json`` under ``RESULTS_DIR`` (one
per trial, one JSON result per line, as Ray Tune writes them), and for each trial its config,
its number of iterations, its measured ``time_this_iter_s`` and its metric after every
iteration. The replay runs *the same work*: every recorded trial, in the order the trials
started, for exactly the iterations it ran, each iteration taking the trial's measured mean
time on one GPU and reporting the recorded metric. So the replay answers "how long would this
experiment have taken under Fluid", not "what would the algorithm have decided with other
timings" (an early-stopping algorithm replayed here keeps the decisions it made).

What a plain Tune run does not record, and is taken as given (``--alpha``, ``--beta``, option
defaults below): the packing and scaling overheads. The report says which values were used;
run it with several to see how much the answer depends on them.

Example:
    >>> records = [RecordedTrial("a", {"lr": 0.1}, [2.0, 2.0], [0.5, 0.7], 0.0)]
    >>> w = replay_workload(records, "acc", "max", 0.6)
    >>> w.trial_model({"_replay": 0}).iteration_time
    2.0
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray.tune import PlacementGroupFactory
from ray.tune.experiment import Trial
from ray.tune.search import SearchAlgorithm

from fluid.sim.experiment import TRAINABLE, compare, ensure_trainable
from fluid.sim.results import Comparison
from fluid.sim.workloads.base import TrialModel, Workload
from fluid.tune._ray_compat import StorageContext

#: Overheads assumed when the results do not say (a mid-sized CNN on one GPU, 10 GbE).
DEFAULT_ALPHA = 1.3
DEFAULT_BETA = 1.2


@dataclass(frozen=True)
class RecordedTrial:
    """One trial of a finished experiment.

    Attributes:
        trial_id: its id in the experiment.
        config: its config.
        iteration_times: ``time_this_iter_s`` of every iteration.
        metrics: the metric after every iteration (``nan`` where not reported).
        started: when it started (first result's timestamp minus its time), for the order.
    """

    trial_id: str
    config: dict[str, Any]
    iteration_times: list[float]
    metrics: list[float]
    started: float


def read_results(results_dir: str | os.PathLike, metric: str | None = None) -> list[RecordedTrial]:
    """Every trial under ``results_dir`` (searched recursively for ``result.json``).

    ``metric``: the objective to record (default: the first of the experiment's numeric result
    keys that is not one of Tune's own).
    """
    root = Path(results_dir)
    if not root.exists():
        raise FileNotFoundError(2, "no such results directory", str(root))
    files = sorted(root.rglob("result.json"))
    if not files:
        raise ValueError(f"{root}: no result.json files (is it a Ray Tune experiment directory?)")
    trials = []
    for f in files:
        rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        if not rows:
            continue
        rows.sort(key=lambda r: r.get("training_iteration", 0))
        metric = metric or _guess_metric(rows[0])
        times = [float(r.get("time_this_iter_s", math.nan)) for r in rows]
        values = [float(r[metric]) if isinstance(r.get(metric), (int, float)) else math.nan
                  for r in rows]
        first = rows[0]
        started = float(first.get("timestamp", 0.0)) - float(first.get("time_this_iter_s", 0.0))
        trials.append(RecordedTrial(str(first.get("trial_id", f.parent.name)),
                                    dict(first.get("config", {})), times, values, started))
    if not trials:
        raise ValueError(f"{root}: every result.json is empty")
    trials.sort(key=lambda t: (t.started, t.trial_id))
    return trials


_TUNE_KEYS = {
    "training_iteration", "time_this_iter_s", "time_total_s", "timestamp", "time_since_restore",
    "iterations_since_restore", "pid", "done", "timesteps_total", "episodes_total",
    "timesteps_since_restore", "checkpoint_dir_name", "should_checkpoint",
}


def _guess_metric(row: Mapping[str, Any]) -> str:
    for k, v in row.items():
        if k not in _TUNE_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool):
            return k
    raise ValueError("no numeric metric in the results; pass --metric")


class RecordedCurve:
    """A learning curve that reports the recorded metric of each iteration."""

    noise = 0.0

    def __init__(self, metrics: Sequence[float]) -> None:
        self._metrics = list(metrics) or [math.nan]

    @property
    def initial(self) -> float:
        """State 0: before the first iteration."""
        return 0.0

    def step(self, state: float) -> float:
        """One more iteration."""
        return state + 1.0

    def value(self, state: float) -> float:
        """The recorded metric after iteration ``state`` (the last one past the end)."""
        i = min(max(int(round(state)) - 1, 0), len(self._metrics) - 1)
        return self._metrics[i]


def replay_workload(
    records: Sequence[RecordedTrial],
    metric: str,
    mode: str,
    target: float,
    alpha: float = DEFAULT_ALPHA,
    beta: float = DEFAULT_BETA,
    memory_gb: float = 2.0,
    checkpoint_gb: float = 0.1,
) -> Workload:
    """A ``Workload`` whose trial ``i`` (config ``{"_replay": i}``) is ``records[i]``."""
    models, curves = [], []
    for r in records:
        times = [t for t in r.iteration_times if math.isfinite(t) and t > 0]
        mean = statistics.fmean(times) if times else 1.0
        models.append(TrialModel(mean, alpha, beta, memory_gb, min(1.0, 1.0 / alpha),
                                 checkpoint_gb))
        curves.append(RecordedCurve(r.metrics))
    return Workload(
        name="replay", metric=metric, mode=mode, target=target, space={}, grid={},
        max_t=max((len(r.metrics) for r in records), default=1), default_config={},
        model=lambda c: models[int(c["_replay"])],
        curve_of=lambda c: curves[int(c["_replay"])],  # type: ignore[arg-type,return-value]
        configs=[{"_replay": i} for i in range(len(records))],
        description=f"{len(records)} recorded trials (alpha {alpha:g}, beta {beta:g} assumed)",
    )


class TrialListSearch(SearchAlgorithm):
    """Yields a fixed list of trials, each with its own iteration budget (not an algorithm:
    the replay of decisions already made; it learns nothing from results).

    Args:
        budgets: iterations of trial ``i`` (its config is ``{"_replay": i}``).
        storage_path: where Ray's ``StorageContext`` points (nothing is written).
        seed: makes trial ids ``r<seed>_<i>``.
    """

    def __init__(self, budgets: Sequence[int], storage_path: str, seed: int = 0) -> None:
        super().__init__()
        self._budgets = list(budgets)
        self._next = 0
        self._storage = StorageContext(storage_path=storage_path, experiment_dir_name="replay")
        self._seed = seed

    def next_trial(self) -> Trial | None:
        if self.is_finished():
            return None
        ensure_trainable()  # a Ray instance shut down since took Tune's registry with it
        i = self._next
        self._next += 1
        return Trial(
            TRAINABLE,
            config={"_replay": i},
            trial_id=f"r{self._seed}_{i:05d}",
            stopping_criterion={"training_iteration": int(self._budgets[i])},
            placement_group_factory=PlacementGroupFactory([{"CPU": 1, "GPU": 1}]),
            storage=self._storage,
        )

    def add_configurations(self, experiments: Any) -> None:
        """Nothing to add: the trials are given."""

    def is_finished(self) -> bool:
        return self._next >= len(self._budgets)


def replay(
    results_dir: str | os.PathLike,
    gpus: int,
    *,
    metric: str | None = None,
    mode: str = "max",
    target: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    beta: float = DEFAULT_BETA,
    seeds: int = 1,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> tuple[Comparison, Workload]:
    """Replay ``results_dir`` on ``gpus`` GPUs under every executor (module docstring).

    ``target``: the metric value that counts as reached (default: the best value recorded,
    so time to target is the time to find the experiment's best).
    """
    records = read_results(results_dir, metric)
    metric = metric or _guess_metric_from(records, results_dir)
    values = [v for r in records for v in r.metrics if math.isfinite(v)]
    if not values:
        raise ValueError(f"{results_dir}: no finite values of metric {metric!r}")
    if target is None:
        target = max(values) if mode == "max" else min(values)
    workload = replay_workload(records, metric, mode, target, alpha, beta)
    budgets = [len(r.metrics) for r in records]

    def factory(seed: int, storage: str) -> SearchAlgorithm:
        return TrialListSearch(budgets, storage, seed)

    comp = compare("replay", workload, gpus, seeds, search_factory=factory, progress=progress,
                   **options)
    return comp, workload


def _guess_metric_from(records: Sequence[RecordedTrial], results_dir: Any) -> str:
    f = next(Path(results_dir).rglob("result.json"))
    first = json.loads(f.read_text().splitlines()[0])
    return _guess_metric(first)
