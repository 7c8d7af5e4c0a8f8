"""Run one tuning experiment of the paper: a task, a tuning algorithm, under Fluid or plain Tune.

Usage::

    python -m experiments.run --task {cifar10,wlm,dcgan} \\
        --algorithm {grid,random,hyperband,syncbohb,bohb,asha,pbt,hyperopt} \\
        --executor {fluid,tune} --gpus N [--smoke] [--json]

``--executor fluid`` wraps the algorithm's scheduler in ``FluidExecutor`` (trials packed, on one
GPU or on elastic gangs); ``--executor tune`` is plain Ray Tune with the same algorithm objects
and one whole GPU per trial. The run's record goes to ``RESULTS_DIR/run.json`` (see
:mod:`experiments.record`); ``fluid report RESULTS_DIR ...`` plots it. ``--json`` prints a
summary object on stdout (everything else goes to stderr), one progress line per finished trial
goes to stderr.

Without ``--address`` a local Ray instance is started; on a machine without GPUs it gets ``--gpus``
*logical* GPUs (torch then trains on the CPU), which is how smoke runs work on any laptop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.tasks import TASKS, Task
from fluid import algorithms
from fluid.algorithms import ALGORITHMS
from fluid.shapes.bundles import label
from fluid.sim.workloads.spaces import TASK_SPACES

__all__ = ["ALGORITHMS", "EXECUTORS", "Budget", "build_parser", "main", "run_experiment"]

EXECUTORS = ("fluid", "tune")

@dataclass(frozen=True)
class Budget:
    """How much a run trains: trials, iterations per trial, and the algorithms' knobs."""

    samples: int  # trials (random, hyperopt, model-based), or population size (pbt)
    max_t: int  # iterations of the longest trial (stop criterion and the schedulers' max_t)
    reduction_factor: int = 3
    grace_period: int = 1  # ASHA's first rung
    perturbation_interval: int = 2  # PBT
    grid_values: int = 3  # values per axis of the task's grid (grid)
    max_batches: int | None = None  # batches per iteration (None: an epoch)


#: Budgets of a full run (a GPU cluster) and of ``--smoke`` (a few minutes on 2 CPU cores).
FULL = Budget(samples=32, max_t=27, reduction_factor=3, perturbation_interval=3)
SMOKE = Budget(samples=4, max_t=4, reduction_factor=2, grace_period=1, perturbation_interval=2,
               grid_values=2, max_batches=4)  # fmt: skip


def _json_object(text: str) -> dict[str, Any]:
    """``--fluid-options``: a JSON object (argparse turns the ValueError into a usage error)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m experiments.run``."""
    p = argparse.ArgumentParser(
        prog="python -m experiments.run",
        description="Run one tuning experiment (task x algorithm x executor) and record it.",
    )
    p.add_argument("--task", required=True, choices=sorted(TASKS))
    p.add_argument("--algorithm", choices=ALGORITHMS, default="hyperband",
                   help="tuning algorithm (default: hyperband)")
    p.add_argument("--executor", choices=EXECUTORS, default="fluid",
                   help="fluid: FluidExecutor; tune: plain Tune, one GPU per trial (default: fluid)")
    p.add_argument("--gpus", type=int, default=None,
                   help="GPUs to use; logical GPUs when the machine has none "
                   "(default: the GPUs of the cluster, or 4 logical GPUs without any)")
    p.add_argument("--smoke", action="store_true",
                   help="tiny models, synthetic data, few trials and iterations (CPU friendly)")
    p.add_argument("--json", action="store_true", help="print a summary object on stdout")
    p.add_argument("--results-dir", default=None,
                   help="where the record goes (default: results/<task>-<algorithm>-<executor>-<time>)")
    p.add_argument("--data-dir", default="data", help="dataset root (ignored with --smoke)")
    p.add_argument("--samples", type=int, default=None, help="override the number of trials")
    p.add_argument("--max-t", type=int, default=None, help="override iterations per trial")
    p.add_argument("--max-batches", type=int, default=None,
                   help="batches per iteration (default: an epoch; 4 with --smoke)")
    p.add_argument("--cpus-per-trial", type=float, default=None,
                   help="CPUs of each trial's own bundle (default 1; 0.25 with --smoke)")
    p.add_argument("--cpus-per-worker", type=float, default=None,
                   help="CPUs of each gang worker (default 1; 0.25 with --smoke)")
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs of the local Ray instance (default: all cores)")
    p.add_argument("--address", default=None,
                   help="Ray cluster to join (e.g. 'auto'); default: start a local instance")
    p.add_argument("--seed", type=int, default=0, help="seed of the searchers")
    p.add_argument("--mps", action="store_true",
                   help="run an NVIDIA MPS daemon per GPU node for packed trials (no-op without GPUs)")
    p.add_argument("--nvml-interval", type=float, default=1.0, help="seconds between NVML samples")
    p.add_argument("--fluid-options", type=_json_object, default={},
                   help="FluidExecutor keyword options as a JSON object, e.g. a measured "
                        "profile: '{\"alpha\": 1.1, \"beta\": 1.0, \"d\": 2}'")
    return p


# --------------------------------------------------------------------------- algorithms


def _space(task: Task, algorithm: str, budget: Budget) -> dict[str, Any]:
    from ray import tune

    if algorithm == "grid":
        axes = TASK_SPACES[task.name].grid
        grid = {k: tune.grid_search(v["grid_search"][: budget.grid_values]) for k, v in axes.items()}
        return {**task.default_config, **grid}
    return {**task.default_config, **task.search_space}


def build_algorithm(
    task: Task, algorithm: str, budget: Budget, seed: int = 0
) -> tuple[Any, Any, int]:
    """``(scheduler or None, search_alg or None, num_samples)`` of ``algorithm`` for ``task``:
    ``fluid.algorithms`` with the budget's knobs (Fluid's adapted schedulers)."""
    options = algorithms.AlgorithmOptions(
        max_t=budget.max_t, reduction_factor=budget.reduction_factor,
        grace_period=budget.grace_period, perturbation_interval=budget.perturbation_interval,
        mutations=TASK_SPACES[task.name].mutations,
    )  # fmt: skip
    return (
        algorithms.build_scheduler(algorithm, options),
        algorithms.build_searcher(algorithm, seed),
        algorithms.num_samples(algorithm, budget.samples),
    )


# --------------------------------------------------------------------------- the run


def _shape_history(executor: Any) -> Any:
    """``trial_id -> "1 GPU -> gang of 2 GPU"``: the widths a trial ran at, for progress lines."""

    def history(trial_id: str) -> str:
        if executor is None:
            return "1 GPU"
        widths: list[float] = []
        for _t, width, _ids in executor.shape_timeline(trial_id):
            if width and (not widths or widths[-1] != width):
                widths.append(width)
        return " -> ".join(label(w) for w in widths) or "never started"

    return history


def _detect_gpus() -> int:
    from fluid.gpu.nvml import gpu_count

    return gpu_count() or 0


def _default_results_dir(task: str, algorithm: str, executor: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{task}-{algorithm}-{executor}-{stamp}"


def run_experiment(args: argparse.Namespace) -> dict[str, Any]:
    """Run the experiment ``args`` describe; return its record (also written to run.json)."""
    import ray

    from experiments.outcome import run_record
    from experiments.record import write_run

    task = TASKS[args.task]
    budget = _budget(args)
    smoke_cpus = 0.25 if args.smoke else 1.0
    cpus = (args.cpus_per_trial if args.cpus_per_trial is not None else smoke_cpus,
            args.cpus_per_worker if args.cpus_per_worker is not None else smoke_cpus)
    results_dir = Path(
        args.results_dir or _default_results_dir(args.task, args.algorithm, args.executor)
    ).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    # Tune warns on every forced experiment snapshot (each checkpoint with num_to_keep, each
    # Fluid resize); in these runs they are expected.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    started_ray = _start_ray(args)
    try:
        finished = _fit(args, task, budget, results_dir, cpus)
    finally:
        if started_ray:
            ray.shutdown()
    record = run_record(args, task, budget, results_dir, cpus, finished)
    write_run(record, results_dir)
    return record


def _budget(args: argparse.Namespace) -> Budget:
    """The run's budget: ``--smoke``'s or the full one, with what the options override."""
    base = SMOKE if args.smoke else FULL
    budget = Budget(
        samples=args.samples or base.samples,
        max_t=args.max_t or base.max_t,
        reduction_factor=base.reduction_factor,
        grace_period=base.grace_period,
        perturbation_interval=base.perturbation_interval,
        grid_values=base.grid_values,
        max_batches=args.max_batches if args.max_batches is not None else base.max_batches,
    )
    for name, value in (("samples", budget.samples), ("max_t", budget.max_t)):
        if value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    return budget


def _start_ray(args: argparse.Namespace) -> bool:
    """Connect to ``--address``, or start a local Ray (``--gpus`` logical GPUs where the
    machine has none); whether this run started it."""
    import ray

    if args.address:
        ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
        return False
    gpus = args.gpus if args.gpus is not None else (_detect_gpus() or 4)
    if gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {gpus}")
    ray.init(address="local", num_cpus=args.num_cpus or os.cpu_count() or 1, num_gpus=gpus,
             include_dashboard=False, log_to_driver=False)
    return True


@dataclass
class Finished:
    """What a run's fit leaves: its recorder, the executor (None: plain Tune), the wall
    clock, NVML's samples and the cluster's GPUs."""

    recorder: Any
    executor: Any
    wall_clock: float
    nvml_rows: list
    gpus: int


def _fit(args: argparse.Namespace, task: Task, budget: Budget, results_dir: Path,
         cpus: tuple[float, float]) -> Finished:
    """Build the algorithm, the trainable and the executor, and run the tuner."""
    import ray

    from experiments.record import RunRecorder
    from experiments.trainable import make_trainable
    from fluid import FluidExecutor
    from fluid.gpu import MPSManager
    from fluid.gpu.nvml import ClusterGPUSampler

    gpus = int(ray.cluster_resources().get("GPU", 0))
    if args.gpus is not None and args.address and gpus != args.gpus:
        print(f"experiments.run: the cluster has {gpus} GPUs (--gpus {args.gpus})",
              file=sys.stderr)
    scheduler, search_alg, num_samples = build_algorithm(task, args.algorithm, budget,
                                                         seed=args.seed)
    # Absolute: trials run in their own working directories (and on other nodes).
    data_dir = None if args.smoke else str(Path(args.data_dir).resolve())
    trainable = make_trainable(task, data_dir=data_dir, smoke=args.smoke,
                               max_iterations=budget.max_t, max_batches=budget.max_batches)
    executor = None
    if args.executor == "fluid":
        executor = scheduler = FluidExecutor(scheduler, cpus_per_trial=cpus[0],
                                             cpus_per_worker=cpus[1], **args.fluid_options)
    else:
        from ray import tune

        trainable = tune.with_resources(trainable, {"cpu": cpus[0], "gpu": 1})
    recorder = RunRecorder(task.metric, task.mode, shape_of=_shape_history(executor))
    tuner = _tuner(trainable, task, args.algorithm, budget, results_dir, recorder,
                   scheduler=scheduler, search_alg=search_alg, num_samples=num_samples)
    sampler = ClusterGPUSampler(interval_s=args.nvml_interval)
    mps = MPSManager(enable_thread_percentage=True) if args.mps else None
    with mps or contextlib.nullcontext():
        sampler.start()
        recorder.start()
        try:
            tuner.fit()
        finally:
            wall_clock = recorder.now()
            sampler.stop()
    return Finished(recorder, executor, wall_clock, sampler.records(), gpus)


def _tuner(trainable: Any, task: Task, algorithm: str, budget: Budget, results_dir: Path,
           recorder: Any, **tune_config: Any) -> Any:
    """The run's ``tune.Tuner``: the algorithm's search space, its stop, the recorder."""
    from ray import tune

    return tune.Tuner(
        trainable,
        param_space=_space(task, algorithm, budget),
        tune_config=tune.TuneConfig(metric=task.metric, mode=task.mode, reuse_actors=False,
                                    **tune_config),
        run_config=tune.RunConfig(
            name="tune", storage_path=str(results_dir),
            stop={"training_iteration": budget.max_t}, callbacks=[recorder], verbose=0,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2)),
    )


SUMMARY_KEYS = (
    "task", "algorithm", "executor", "gpus", "best_metric", "time_to_target", "trials",
    "failed_trials", "wall_clock", "gpu_seconds", "results_dir",
)  # fmt: skip


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The ``--json`` object: the headline fields, ``trials`` as a count."""
    out = {k: record.get(k) for k in SUMMARY_KEYS}
    out["trials"] = record["trial_count"]
    out["metric"], out["mode"], out["target"] = record["metric"], record["mode"], record["target"]
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m experiments.run``.

    Exit code: 0, or 1 when a trial failed (the record and the summary are still written),
    2 for invalid arguments.
    """
    args = build_parser().parse_args(argv)
    real_stdout = sys.stdout
    # With --json, stdout carries exactly one JSON object: everything else goes to stderr.
    redirect = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with redirect:
            record = run_experiment(args)
    except ValueError as e:
        print(f"experiments.run: error: {e}", file=sys.stderr)
        return 2
    head = summary(record)
    if args.json:
        print(json.dumps(head), file=real_stdout, flush=True)
    else:
        print(
            f"{head['task']} / {head['algorithm']} / {head['executor']} on {head['gpus']} GPUs: "
            f"best {record['metric']} {head['best_metric']}, time to target "
            f"{head['time_to_target']}, {head['trials']} trials ({head['failed_trials']} failed), "
            f"{head['wall_clock']:.1f} s; record in {head['results_dir']}/run.json"
        )
    # The record is complete either way; a failed trial still fails the command (and CI).
    return 1 if head["failed_trials"] else 0


if __name__ == "__main__":
    sys.exit(main())
