"""A finished run's record (``run.json``, see :mod:`experiments.record`): each trial's metrics
and shapes over time, and the run's figures."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.record import (
    allocation_utilization,
    best_over_time,
    gpu_seconds,
    nvml_utilization,
    time_to_target,
)
from experiments.tasks import Task


def trial_records(recorder: Any, executor: Any, wall_clock: float) -> list[dict[str, Any]]:
    """Each trial's record; its shapes from Fluid's timeline, or under plain Tune one whole GPU
    (the one Ray assigned it) over each of its runs."""
    trials: list[dict[str, Any]] = []
    for tid, log in recorder.trials.items():
        if executor is not None:
            shapes = [
                [t - recorder.t0, w, list(ids)] for t, w, ids in executor.shape_timeline(tid)
            ]
        else:
            ids = next((m["ray_gpu_ids"] for m in log.metrics if m.get("ray_gpu_ids")), "")
            gpu_ids = [int(g) for g in str(ids).split(",") if g.strip().isdigit()]
            shapes = []
            for start, end in log.runs:
                shapes.append([start, 1.0, gpu_ids])
                shapes.append([end if end is not None else wall_clock, None, []])
        trials.append({"id": tid, "config": log.config, "iterations": log.iterations,
                       "status": log.status, "metrics": log.metrics, "shapes": shapes})
    return trials


def run_record(args: argparse.Namespace, task: Task, budget: Any, results_dir: Path,
               cpus: tuple[float, float], finished: Any) -> dict[str, Any]:
    """The record of a finished run (``finished``: ``experiments.run.Finished``)."""
    recorder, executor, wall_clock = finished.recorder, finished.executor, finished.wall_clock
    gpus = finished.gpus
    trials = trial_records(recorder, executor, wall_clock)
    points = [(m["t"], m.get(task.metric)) for t in trials for m in t["metrics"]]
    best = best_over_time(points, task.mode)
    if finished.nvml_rows:
        utilization = nvml_utilization(finished.nvml_rows, recorder.wall0)
    else:
        utilization = allocation_utilization({t["id"]: t["shapes"] for t in trials}, gpus,
                                             wall_clock)
    record: dict[str, Any] = {
        "task": task.name, "algorithm": args.algorithm, "executor": args.executor,
        "gpus": gpus, "smoke": bool(args.smoke), "metric": task.metric, "mode": task.mode,
        "target": task.target, "best_metric": best[-1][1] if best else None,
        "time_to_target": time_to_target(points, task.mode, task.target),
        "wall_clock": wall_clock,
        "gpu_seconds": sum(gpu_seconds(t["shapes"], wall_clock) for t in trials),
        "gpu_seconds_available": gpus * wall_clock, "best_over_time": best,
        "trial_count": len(trials),
        "failed_trials": sum(t["status"] == "ERROR" for t in trials),
        "results_dir": str(results_dir), "budget": budget.__dict__,
        "cpus_per_trial": cpus[0], "cpus_per_worker": cpus[1], "mps": bool(args.mps),
        "trials": trials, "utilization": utilization,
    }
    if executor is not None:
        record["fluid"] = {
            "hook_seconds": executor.hook_seconds,
            "groups": [{"name": g.name, "until": dict(g.until)} for g in executor.groups],
            "plan_log": [{**e, "time": e["time"] - recorder.t0} for e in executor.plan_log],
        }
    return record
