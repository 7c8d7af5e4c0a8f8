"""``fluid bench e2e``: the same tuning job under plain Tune and under Fluid, side by side.

On one local Ray instance with logical GPUs, a grid search and a HyperBand job of *modeled*
trials (``fluid.train.modeled``: they sleep for what their shape would take on a GPU, so the
result is about scheduling, not GPU speed) run twice each: plain Tune (one trial per GPU) and
``FluidExecutor``. The simulator (``fluid.sim``) predicts both runs of each job with the same
configs; its cost per (re)start of a trial is what Fluid measured its resizes to cost in
this run (``restart_s``; without a resize, a trial's life beyond its training in the plain Tune
run), and each run's own measured experiment set-up and tear-down are added, so the
prediction includes Ray's own costs. The simulated Fluid is told the resize cost the real one's
decisions rested on (``eps_s``: its resizes', else its least contended trial start's; on a
loaded machine a start takes tens of seconds, and the real Fluid then resizes nothing), so it
takes the run's decisions. ``speedup_without_setup`` leaves set-up and tear-down out of both
runs (on this machine a plain Tune run's first trial starts several seconds later than
Fluid's, which would otherwise count for Fluid). Printed: wall-clock makespan of each run, the
measured and the predicted speedup, and Fluid's own overhead (time in its hooks, resizes).
``--load N`` runs everything beside N busy processes (one core each), as on a machine shared
with other work: Ray's start and restart costs grow, and Fluid must not lose to plain Tune.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from fluid.cli import print_result, ray_instance
from fluid.core.checks import check_number

ALPHA = 1.25  # packing overhead of the modeled trials (Fluid is told it, as if profiled)
BETA = 1.05
# Many short trials and a few long ones (the shape of the paper's Figure 5). The long trials
# take about a minute on one GPU: on real GPUs trials run minutes to hours, and a job whose
# longest trial is worth only a few restarts (eps ~ 2-5 s on Ray) leaves a scheduler nothing.
FULL = {"t1": [0.5] * 8 + [4.0, 6.0], "iters": 12, "gpus": 4}
QUICK = {"t1": [0.5] * 6 + [5.0], "iters": 12, "gpus": 4}
MAX_LOAD = 64
# A busy process: pure Python arithmetic on one core until its parent (this bench) is gone, so
# a bench killed without clean-up leaves no process spinning.
BUSY = "import os\nparent = {parent}\nwhile os.getppid() == parent:\n    sum(range(100_000))\n"


def register(subparsers: Any) -> None:
    """Add ``fluid bench e2e``."""
    p = subparsers.add_parser("e2e", help="plain Tune vs Fluid on a real local Ray instance",
                          description=__doc__)
    p.add_argument("--quick", action="store_true", help="a smaller job (under 10 minutes)")
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="only the job's first N trials (default: all; 10, or 7 with --quick)")
    p.add_argument("--load", type=int, default=0, metavar="N",
                   help=f"run beside N busy processes, one core each (0 to {MAX_LOAD}; default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[list[subprocess.Popen]]:
    """``n`` processes that each keep one core busy while the block runs, stopped after it."""
    code = BUSY.format(parent=os.getpid())
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
             for _ in range(n)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()


def bench_trainable(config: dict) -> None:
    """The modeled trainable with the bench's overheads."""
    from fluid.train.modeled import modeled_trainable

    # quality: the longer trials are the better ones, so HyperBand keeps some of them.
    modeled_trainable({**config, "alpha": ALPHA, "beta": BETA, "quality": config["t1"] / 10})


def mark_elastic(trainable: Any) -> None:
    """Mark the function ``trainable`` an ``ElasticTrainable`` (Fluid may pack or resize it)."""
    from fluid.tune import ElasticTrainable

    trainable.__mixins__ = (ElasticTrainable,)


def one_gpu_each(trainable: Any) -> Any:
    """``trainable`` as plain Tune runs it, one GPU per trial (a new function: ``with_resources``
    marks the function itself)."""
    from ray import tune

    def plain_trainable(config: dict) -> None:
        trainable(config)

    return tune.with_resources(plain_trainable, {"cpu": 0.1, "gpu": 1})


def _run(job: str, executor: str, t1: list[float], iters: int, storage: str) -> dict[str, Any]:
    from ray import tune

    from fluid import FluidExecutor
    from fluid.algorithms import REDUCTION_FACTOR
    from fluid.schedulers import HyperBandScheduler

    base = (HyperBandScheduler(max_t=iters, reduction_factor=REDUCTION_FACTOR)
            if job == "hyperband" else None)
    fluid = None
    if executor == "fluid":
        fluid = FluidExecutor(base, alpha=ALPHA, beta=BETA, cpus_per_trial=0.1,
                              cpus_per_worker=0.05)
        trainable, scheduler = bench_trainable, fluid
    else:
        trainable, scheduler = one_gpu_each(bench_trainable), base
    wall0, t0 = time.time(), time.monotonic()
    analysis = tune.run(
        trainable, config={"t1": tune.grid_search(t1), "iters": iters}, scheduler=scheduler,
        metric="score", mode="max", stop={"training_iteration": iters}, storage_path=storage,
        verbose=0,
    )
    makespan = time.monotonic() - t0
    out: dict[str, Any] = {"makespan": makespan, "trials": len(analysis.trials),
                           **ray_costs(analysis, wall0, makespan)}
    if fluid is not None:
        out.update(hook_seconds=fluid.hook_seconds, resizes=fluid.resizes,
                   restart_s=fluid.eps if fluid.estimator.eps_samples else None,
                   eps_s=fluid.eps)
    return out


def ray_costs(analysis: Any, wall0: float, makespan: float) -> dict[str, float]:
    """Ray's costs in a finished ``tune.run`` (``analysis``) started at ``wall0`` (wall clock)
    that took ``makespan`` seconds, measured from the driver: a trial's life beyond its
    training time (actor start, reports, checkpoints; the median over trials), and the
    experiment's set-up before the first trial starts and tear-down after the last result."""
    trials = analysis.trials
    starts = [t.run_metadata.start_time for t in trials if t.run_metadata.start_time]
    ends = [t.run_metadata.last_result_time for t in trials if t.run_metadata.last_result_time]
    lives = [t.run_metadata.last_result_time - t.run_metadata.start_time
             - t.last_result.get("time_total_s", 0.0) for t in trials
             if t.run_metadata.start_time and t.run_metadata.last_result_time]
    return {
        "trial_overhead_s": max(0.0, statistics.median(lives)) if lives else 0.0,
        "setup_s": (min(starts) - wall0) if starts else 0.0,
        "teardown_s": (wall0 + makespan - max(ends)) if ends else 0.0,
    }


def predict_modeled(job: str, t1: list[float], iters: int, gpus: int, start_s: float,
                    alpha: float = ALPHA, beta: float = BETA,
                    fluid_options: dict[str, Any] | None = None) -> dict[str, float]:
    """Simulated makespans (``fluid.sim``) of a job of modeled trials under plain Tune and
    Fluid, from the first trial start to the last result; ``start_s`` per (re)start of a
    trial; the trials' overheads ``alpha``, ``beta``; ``fluid_options`` of the simulated
    ``FluidExecutor`` (default: told ``alpha`` and ``beta``, as this bench's runs are)."""
    from ray import tune

    from fluid.sim import RestartCosts, TrialModel, Workload, run_experiment
    from fluid.sim.workloads.curves import Curve

    workload = Workload(
        name="bench-e2e", metric="score", mode="max", target=float("inf"),
        space={"t1": tune.grid_search(t1)}, grid={"t1": tune.grid_search(t1)}, max_t=iters,
        default_config={},
        model=lambda c: TrialModel(float(c["t1"]), alpha, beta, 0.1, 1.0 / alpha, 0.0),
        curve_of=lambda c: Curve(0.0, float(c["t1"]) / 10.0, 0.3, noise=0.0),
        configs=[{"t1": t} for t in t1],
    )
    costs = RestartCosts(actor_start_s=max(0.0, start_s), gang_setup_s=0.0)
    algorithm = "hyperband" if job == "hyperband" else "grid"
    opts = {"alpha": alpha, "beta": beta} if fluid_options is None else fluid_options
    # each t1 once: the whole grid, or HyperBand's one sample of the grid_search space
    samples = len(t1) if algorithm == "grid" else 1
    return {
        ex: run_experiment(algorithm, workload, ex, 0, gpus, samples=samples, costs=costs,
                           time_noise=0.0, fluid_options=opts).makespan
        for ex in ("tune", "fluid")
    }


def _job(job: str, t1: list[float], iters: int, gpus: int, storage: str) -> dict[str, Any]:
    """One job under both executors, and what the simulator predicts for it."""
    runs = {}
    for executor in ("tune", "fluid"):
        print(f"{job}: {executor} ...", file=sys.stderr, flush=True)
        runs[executor] = _run(job, executor, t1, iters, storage)
    return compare_runs(job, runs, t1, iters, gpus)


def compare_runs(job: str, runs: dict[str, dict[str, Any]], t1: list[float], iters: int,
                 gpus: int) -> dict[str, Any]:
    """A job's two measured ``runs`` (``"tune"``, ``"fluid"``: what ``_run`` returns) beside
    what the simulator predicts of each, given the costs the runs measured."""
    plain, restart = runs["tune"], runs["fluid"]["restart_s"]
    start_s = plain["trial_overhead_s"] if restart is None else restart
    # The simulator predicts from the first trial start to the last result; each run's own
    # measured set-up and tear-down (Ray's, not modelled) are added to it.
    told = {"alpha": ALPHA, "beta": BETA, "eps": runs["fluid"]["eps_s"]}
    predicted = {ex: t + runs[ex]["setup_s"] + runs[ex]["teardown_s"]
                 for ex, t in predict_modeled(job, t1, iters, gpus, start_s, fluid_options=told)
                 .items()}
    trained = {ex: r["makespan"] - r["setup_s"] - r["teardown_s"] for ex, r in runs.items()}
    return {
        "tune": runs["tune"], "fluid": runs["fluid"],
        "speedup": runs["tune"]["makespan"] / runs["fluid"]["makespan"],
        "speedup_without_setup": trained["tune"] / trained["fluid"],
        "simulated": predicted,
        "simulated_speedup": predicted["tune"] / predicted["fluid"],
        "simulated_restart_s": start_s,
        "simulated_eps_s": told["eps"],
    }


def _print_table(jobs: dict[str, Any], t1: list[float], iters: int, gpus: int,
                 load: int) -> None:
    print(f"{len(t1)} modeled trials x {iters} iterations on {gpus} logical GPUs "
          f"(alpha {ALPHA}, beta {BETA}); one-GPU iteration times {t1}; "
          f"{load} busy processes beside")
    print(f"{'job':<10} {'tune s':>8} {'fluid s':>8} {'speedup':>8} {'sim tune':>9} "
          f"{'sim fluid':>9} {'sim speedup':>11} {'hooks s':>8} {'resizes':>8}")
    for job, j in jobs.items():
        print(f"{job:<10} {j['tune']['makespan']:8.1f} {j['fluid']['makespan']:8.1f} "
              f"{j['speedup']:7.2f}x {j['simulated']['tune']:9.1f} {j['simulated']['fluid']:9.1f} "
              f"{j['simulated_speedup']:10.2f}x {j['fluid']['hook_seconds']:8.2f} "
              f"{j['fluid']['resizes']:8d}")
    grid = jobs["grid"]
    g, f = grid["tune"], grid["fluid"]
    print(f"Ray costs given to the simulator (grid job): {grid['simulated_restart_s']:.2f} s per "
          f"trial (re)start; experiment set-up and tear-down {g['setup_s'] + g['teardown_s']:.1f} s "
          f"(plain Tune), {f['setup_s'] + f['teardown_s']:.1f} s (Fluid); speedup without them "
          f"{grid['speedup_without_setup']:.2f}x")


def run(args: argparse.Namespace) -> int:
    """Run both jobs under both executors and the simulator; print the figures."""
    spec = QUICK if args.quick else FULL
    t1, iters, gpus = spec["t1"], spec["iters"], spec["gpus"]
    if args.trials is not None:
        check_number("--trials", args.trials, 1, len(t1))
        t1 = t1[:args.trials]
    check_number("--load", args.load, 0, MAX_LOAD)
    mark_elastic(bench_trainable)
    with (ray_instance(gpus), busy_processes(args.load),
          tempfile.TemporaryDirectory(prefix="fluid-bench-e2e-",
                                      ignore_cleanup_errors=True) as storage):
        jobs = {job: _job(job, t1, iters, gpus, storage) for job in ("grid", "hyperband")}
    grid = jobs["grid"]
    out = {"tune": grid["tune"], "fluid": grid["fluid"], "speedup": grid["speedup"],
           "simulated_speedup": grid["simulated_speedup"], "jobs": jobs,
           "trials": len(t1), "iterations": iters, "gpus": gpus, "load": args.load}
    return print_result(args, out, lambda: _print_table(jobs, t1, iters, gpus, args.load))
