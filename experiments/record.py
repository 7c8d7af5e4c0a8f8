"""The record of one experiment run (``RESULTS_DIR/run.json``) and how it is built.

A run record is one JSON object. Times are seconds since the run started (the call to
``Tuner.fit``), on the driver's monotonic clock, unless said otherwise::

    {
      "task", "algorithm", "executor", "gpus", "smoke", "metric", "mode", "target",
      "best_metric", "time_to_target" (null if not reached), "wall_clock",
      "gpu_seconds"            # GPU-seconds allocated to trials (sum of width x time),
      "gpu_seconds_available"  # gpus x wall_clock,
      "best_over_time": [[t, best so far], ...]   # one point per improvement,
      "trial_count", "failed_trials", "results_dir",
      "trials": [{"id", "config", "iterations", "status",
                  "metrics": [{"t", "training_iteration", <metric>, ...}, ...],
                  "shapes": [[t, width or null (stopped), [gpu ids]], ...]}, ...],
                  # fluid: from Fluid's release of the trial (its placement group request);
                  # tune: from the start of the trial's actor to its end (Tune does not tell
                  # callbacks when it requested the resources), GPU ids from ray.get_gpu_ids()
      "utilization": {"source": "nvml" | "allocation", "unit", "description",
                      "gpus": {"<gpu>": [[t, value 0..1], ...]}},
      "fluid": {...}            # FluidExecutor runs: groups, plan log, hook seconds
    }

``utilization`` holds NVML samples (SM utilisation) when NVML sees GPUs; otherwise the GPU
share Fluid (or Tune) allocated on each GPU over time, derived from the trials' shapes, labelled
``"source": "allocation"``. Allocation series are step functions (each value holds until the
next point); NVML series are samples.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ray.tune import Callback

__all__ = [
    "RUN_FILE",
    "RunRecorder",
    "TrialLog",
    "allocation_utilization",
    "best_over_time",
    "gpu_seconds",
    "load_run",
    "nvml_utilization",
    "time_to_target",
    "write_run",
]

RUN_FILE = "run.json"
#: Result keys copied into each trial's per-iteration metrics (besides the task's metric).
KEPT_KEYS = (
    "training_iteration", "train_loss", "iteration_s", "world_size", "gpu_share", "ray_gpu_ids",
    "time_this_iter_s",
)  # fmt: skip

Shape = tuple[float, float | None, tuple[int, ...]]


def _finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing or not a finite number (JSON-safe)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class TrialLog:
    """What the driver saw of one trial (times relative to the run start)."""

    id: str
    config: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)
    runs: list[list[float | None]] = field(default_factory=list)  # [[start, end or None], ...]
    status: str = "PENDING"

    @property
    def iterations(self) -> int:
        """Highest ``training_iteration`` reported."""
        return max((int(m["training_iteration"]) for m in self.metrics), default=0)


class RunRecorder(Callback):
    """A Tune callback recording every trial's config, results and run intervals.

    It also prints one progress line per finished trial on ``progress`` (stderr).

    Args:
        metric: the task's metric (kept with every result).
        mode: ``"max"`` or ``"min"`` (for the progress line's best value).
        clock: monotonic clock (the one FluidExecutor uses, so shapes line up).
        progress: where progress lines go (``None``: nowhere).
        shape_of: ``trial_id -> description`` of the trial's current shape, for progress lines.
    """

    def __init__(
        self,
        metric: str,
        mode: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        progress: TextIO | None = sys.stderr,
        shape_of: Callable[[str], str] | None = None,
    ) -> None:
        self.metric, self.mode = metric, mode
        self.clock = clock
        self.progress = progress
        self.shape_of = shape_of
        self.t0 = clock()
        self.wall0 = time.time()
        self.trials: dict[str, TrialLog] = {}
        self.finished = 0

    def start(self) -> None:
        """Mark the run start (t = 0)."""
        self.t0, self.wall0 = self.clock(), time.time()

    def now(self) -> float:
        """Seconds since the run start."""
        return self.clock() - self.t0

    def _log(self, trial: Any) -> TrialLog:
        log = self.trials.get(trial.trial_id)
        if log is None:
            log = self.trials[trial.trial_id] = TrialLog(trial.trial_id, dict(trial.config))
        return log

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        log = self._log(trial)
        log.config = dict(trial.config)
        log.runs.append([self.now(), None])
        log.status = "RUNNING"

    def on_trial_restore(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._log(trial).config = dict(trial.config)  # PBT may have changed it

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        log = self._log(trial)
        row: dict[str, Any] = {"t": self.now()}
        for key in (self.metric, *KEPT_KEYS):
            if key in result:
                value = result[key]
                row[key] = value if isinstance(value, str) else _finite(value)
        log.metrics.append(row)

    def _end(self, trial: Any, status: str) -> None:
        log = self._log(trial)
        if log.runs and log.runs[-1][1] is None:
            log.runs[-1][1] = self.now()
        log.status = status

    def on_trial_save(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        pass

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._end(trial, "TERMINATED")
        self._announce(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._end(trial, "ERROR")
        self._announce(trial)

    def _announce(self, trial: Any) -> None:
        self.finished += 1
        if self.progress is None:
            return
        log = self.trials[trial.trial_id]
        values = [m[self.metric] for m in log.metrics if m.get(self.metric) is not None]
        best = (max if self.mode == "max" else min)(values) if values else None
        shape = f", shape {self.shape_of(trial.trial_id)}" if self.shape_of else ""
        best_s = f"{best:.4g}" if best is not None else "n/a"
        print(
            f"[{self.now():7.1f}s] trial {trial.trial_id} {log.status.lower()} "
            f"({self.finished} finished): {log.iterations} iterations, "
            f"best {self.metric} {best_s}{shape}",
            file=self.progress,
            flush=True,
        )


# --------------------------------------------------------------------------- summaries


def best_over_time(
    points: Iterable[tuple[float, float | None]], mode: str
) -> list[list[float]]:
    """``[[t, best so far], ...]``: one point per improvement of the metric, in time order."""
    better = (lambda a, b: a > b) if mode == "max" else (lambda a, b: a < b)
    out: list[list[float]] = []
    for t, value in sorted((p for p in points if p[1] is not None), key=lambda p: p[0]):
        assert value is not None
        if not out or better(value, out[-1][1]):
            out.append([t, value])
    return out


def time_to_target(
    points: Iterable[tuple[float, float | None]], mode: str, target: float
) -> float | None:
    """First time a result met ``target`` (``>=`` for max, ``<=`` for min), or None."""
    hits = [
        t for t, v in points
        if v is not None and (v >= target if mode == "max" else v <= target)
    ]  # fmt: skip
    return min(hits) if hits else None


def gpu_seconds(shapes: Sequence[Sequence[Any]], end: float) -> float:
    """GPU-seconds of one trial from its shape timeline (width held until the next point)."""
    total = 0.0
    for i, (t, width, *_rest) in enumerate(shapes):
        t_next = shapes[i + 1][0] if i + 1 < len(shapes) else end
        if width:
            total += float(width) * max(0.0, t_next - t)
    return total


def allocation_utilization(
    trial_shapes: dict[str, Sequence[Sequence[Any]]], gpus: int, end: float
) -> dict[str, Any]:
    """The GPU share allocated on each GPU over time, from the trials' shapes.

    A packed trial (width ``< 1``) adds its width to its GPU; a trial of width ``w >= 1`` adds
    1 to each of its GPUs. The result is a step function per GPU (``[[t, share], ...]``, each
    share holding until the next point), with ``"source": "allocation"``.
    """
    events: list[tuple[float, str, float | None, tuple[int, ...]]] = []
    for tid, shapes in trial_shapes.items():
        for t, width, ids, *_ in shapes:
            events.append((float(t), tid, width, tuple(int(g) for g in ids or ())))
    events.sort(key=lambda e: e[0])
    holding: dict[str, dict[int, float]] = {}
    series: dict[str, list[list[float]]] = {str(g): [[0.0, 0.0]] for g in range(gpus)}

    def level(g: int) -> float:
        return sum(h.get(g, 0.0) for h in holding.values())

    for t, tid, width, ids in events:
        before = holding.pop(tid, {})
        if width:
            share = float(width) if width < 1 else 1.0
            holding[tid] = {g: share for g in ids}
        for g in set(before) | set(holding.get(tid, {})):
            key = str(g)
            points = series.setdefault(key, [[0.0, 0.0]])
            value = round(level(g), 6)
            if points[-1][0] == t:
                points[-1][1] = value
            elif points[-1][1] != value:
                points.append([t, value])
    for points in series.values():
        if points[-1][0] < end:
            points.append([end, points[-1][1]])
    return {
        "source": "allocation",
        "unit": "fraction of the GPU allocated to trials",
        "description": "no NVML on this machine: GPU share allocated to trials per GPU, "
        "derived from the trials' shapes (a step function), not measured utilisation",
        "gpus": dict(sorted(series.items(), key=lambda kv: int(kv[0]))),
    }


def nvml_utilization(records: Sequence[Any], wall0: float) -> dict[str, Any]:
    """NVML samples (``fluid.gpu.nvml.GPURecord``) as per-GPU series of utilisation 0..1."""
    nodes = sorted({r.node for r in records})
    series: dict[str, list[list[float]]] = {}
    for r in records:
        key = str(r.gpu_index) if len(nodes) == 1 else f"{nodes.index(r.node)}:{r.gpu_index}"
        series.setdefault(key, []).append([r.time - wall0, r.util_percent / 100.0])
    return {
        "source": "nvml",
        "unit": "SM utilisation (fraction of the sample period a kernel ran)",
        "description": "NVML samples of every GPU node (node:gpu when several nodes)",
        "gpus": series,
    }


def write_run(record: dict[str, Any], results_dir: str | Path) -> Path:
    """Write ``record`` to ``results_dir/run.json`` (non-finite numbers become null)."""
    path = Path(results_dir) / RUN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_json_safe(record), indent=1, default=str))
    tmp.replace(path)
    return path


def load_run(results_dir: str | Path) -> dict[str, Any]:
    """The run record in ``results_dir`` (a directory with ``run.json``, or the file itself)."""
    path = Path(results_dir)
    if path.is_dir():
        path = path / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(2, "no run record (run.json) here", str(path))
    try:
        record = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"{path}: not a run record ({e})") from None
    if not isinstance(record, dict) or "trials" not in record:
        raise ValueError(f"{path}: not a run record (no 'trials')")
    return record


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            return _json_safe(value.item())
        except (TypeError, ValueError):
            return str(value)
    return value
