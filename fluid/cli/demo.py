"""``fluid demo``: a small tuning job under Fluid on a local Ray instance with logical GPUs.

Seven trials of a grid search, five short and two long (the modeled trainable of
``fluid.train.modeled``: it sleeps for what its shape would take on a GPU), on 4 logical GPUs.
The output shows Fluid's plan as it changes (who is packed, who runs as a gang, who is
resized); then plain Tune runs the same job (the same trainable at one GPU per trial, FIFO);
then a summary: both measured wall-clock times and the measured speedup beside the
simulator's prediction for the same job, the best configuration, and a text timeline of
every trial under Fluid.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import time
from typing import Any

from fluid.cli import ray_instance
from fluid.cli.bench_e2e import mark_elastic, one_gpu_each
from fluid.core.checks import check_number

GPUS = 4
T1 = [0.4, 0.4, 0.4, 0.4, 0.4, 1.6, 4.0]  # seconds per iteration on one GPU
ITERS = 8
# Overheads of the modeled trials; Fluid is told them, as a `fluid profile` would measure them
# (without them Fluid probes a gang only for a trial with 80 x eps of work left).
ALPHA = 1.25  # packing
BETA = 1.0  # scaling
EPS = 1.0  # seconds a resize costs (Fluid is told it; on this machine Ray's is 2-3 s)


def demo_trainable(config: dict) -> None:
    """The modeled trainable with the demo's overhead; longer trials are the better ones."""
    from fluid.train.modeled import modeled_trainable

    modeled_trainable({**config, "alpha": ALPHA, "beta": BETA, "quality": config["t1"] / max(T1)})


def register(subparsers: Any) -> None:
    """Add ``fluid demo``."""
    p = subparsers.add_parser(
        "demo", help="run a small tuning job under Fluid (no GPU needed)",
        description=__doc__.split("\n\n")[1] + " Needs no GPU: Ray runs with logical GPUs. "
        "Fluid's plan changes are printed as they happen (the 'fluid' logger at INFO).")
    p.add_argument("--gpus", type=int, default=GPUS, help="logical GPUs (default %(default)s)")
    p.set_defaults(func=run)


_TRIAL_ID = re.compile(r"(?:demo_trainable_)?([0-9a-f]{5}_(\d{5}))")


def readable(text: str, executor: Any) -> str:
    """Trial ids in Fluid's log lines replaced by ``trial i (t1=...)``."""

    def name(match: re.Match) -> str:
        trial = executor.get_trial(match.group(1))
        if trial is None:
            return match.group(0)
        return f"trial {int(match.group(2))} (t1={trial.config['t1']:g}s)"

    return _TRIAL_ID.sub(name, text)


class _PlanPrinter(logging.Handler):
    """Prints Fluid's plan changes as they happen, with the time since the start."""

    def __init__(self, t0: float, executor: Any) -> None:
        super().__init__(logging.INFO)
        self.t0, self.executor = t0, executor

    def emit(self, record: logging.LogRecord) -> None:
        msg = readable(record.getMessage(), self.executor)
        print(f"  [{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)


def run(args: argparse.Namespace) -> int:
    """Run the demo job; returns the exit code."""
    check_number("--gpus", args.gpus, 1)
    from ray import tune

    from fluid import FluidExecutor

    mark_elastic(demo_trainable)

    print(f"Fluid demo: {len(T1)} trials (grid search), {ITERS} iterations each, on "
          f"{args.gpus} logical GPUs.")
    print("Per-iteration time on one GPU:", ", ".join(f"{t:g}s" for t in T1))
    print("Starting a local Ray instance ...", flush=True)
    with ray_instance(args.gpus):
        # verbose=True: the plan lines are printed although Tune itself is quiet (verbose=0).
        executor = FluidExecutor(alpha=ALPHA, beta=BETA, cpus_per_trial=0.1,
                                 cpus_per_worker=0.05, eps=EPS, verbose=True)
        t0 = time.monotonic()
        handler = _PlanPrinter(t0, executor)
        fluid_log = logging.getLogger("fluid")
        fluid_log.addHandler(handler)
        fluid_log.setLevel(logging.INFO)
        fluid_log.propagate = False

        print("Fluid's plan as it changes:")
        try:
            results, elapsed = _fit(tune, demo_trainable, executor)
            fluid_log.removeHandler(handler)
            print(f"Fluid: done in {elapsed:.1f}s. Now plain Tune on the same job (one trial per "
                  "GPU, FIFO) ...", flush=True)
            _, plain_s = _fit(tune, one_gpu_each(demo_trainable), None)
        finally:
            fluid_log.removeHandler(handler)
    _report(results, executor, t0, elapsed, plain_s, args.gpus)
    return 0


def _report(results: Any, executor: Any, t0: float, elapsed: float, plain_s: float,
            gpus: int) -> None:
    """Measured against simulated times, the best config, each trial's shapes and the plot."""
    from fluid.cli.bench_e2e import predict_modeled
    from fluid.tune import describe

    best = results.get_best_result()
    sim = predict_modeled("grid", T1, ITERS, gpus, start_s=1.0, alpha=ALPHA, beta=BETA,
                          fluid_options={"alpha": ALPHA, "beta": BETA, "eps": EPS})
    fifo, dyn = sim["tune"], sim["fluid"]
    print()
    print("Wall clock of the same job     measured   simulator (fluid.sim, 1 s per trial start)")
    print(f"  plain Tune (1 GPU per trial) {plain_s:7.1f}s   {fifo:7.1f}s")
    print(f"  Fluid                        {elapsed:7.1f}s   {dyn:7.1f}s")
    print(f"  speedup                      {plain_s / elapsed:7.2f}x   {fifo / dyn:7.2f}x")
    print(f"Fluid's hooks took {executor.hook_seconds * 1000:.0f} ms of its run; "
          f"{executor.resizes} resizes. Where measured and simulated times differ, it is Ray's "
          "own overhead on this machine (see fluid bench e2e).")
    print(f"Best config: t1={best.config['t1']:g}s, score {best.metrics['score']:.3f}.")
    print("\nTimeline (time since start: shape):")
    rows = []
    for r in results:
        tid = r.metrics["trial_id"]
        timeline = executor.shape_timeline(tid)
        steps = [f"{at - t0:5.1f}s: {describe(w)}" for at, w, _ in timeline]
        print(f"  {readable(tid, executor):<22} " + " -> ".join(steps))
        rows.append({"id": readable(tid, executor), "iterations": ITERS, "metrics": [],
                     "shapes": [[at - t0, w, list(g)] for at, w, g in timeline]})
    _plot(rows, elapsed, gpus)
    sys.stdout.flush()


def _fit(tune: Any, trainable: Any, scheduler: Any) -> tuple[Any, float]:
    """Run the demo's grid on ``trainable`` under ``scheduler``; the results and seconds."""
    t0 = time.monotonic()
    tuner = tune.Tuner(
        trainable,
        param_space={"t1": tune.grid_search(T1), "iters": ITERS},
        tune_config=tune.TuneConfig(scheduler=scheduler, metric="score", mode="max"),
        # The stop criterion tells Fluid each trial's budget (without one it sees only the
        # next iteration, and no trial looks long enough to be worth a gang).
        run_config=tune.RunConfig(verbose=0, storage_path=_results_dir(),
                                  stop={"training_iteration": ITERS}),
    )
    results = tuner.fit()
    return results, time.monotonic() - t0


def _plot(rows: list[dict[str, Any]], elapsed: float, gpus: int) -> None:
    """The timeline of every trial's shape as a PNG (``fluid report``'s shapes plot)."""
    try:
        from fluid.report import plot_shapes

        path = os.path.join(_results_dir(), "timeline.png")
        run = {"wall_clock": elapsed, "trials": rows, "executor": "fluid",
               "task": "demo (modeled trials)", "algorithm": "grid", "gpus": gpus}
        plot_shapes(run, path, label="fluid demo")
        print(f"\nTimeline plot: {path}")
    except Exception as e:  # matplotlib missing (the 'plot' extra): the text timeline stands
        print(f"\n(no timeline plot: {e})")


def _results_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "fluid-demo")
