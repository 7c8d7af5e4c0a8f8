"""``fluid bench TARGET``: benchmarks. Targets: ``policy`` (here); more register themselves.

A target is a module exposing ``register(subparsers)`` (the ``fluid bench`` sub-subparsers);
adding one is one line in ``TARGETS``.

``fluid bench policy [--json] [--repeat K] [--seed S]`` times the policy core, the part of
Fluid that runs at every arrival and departure: StaticFluid sizing and placing a new group on
a fresh pool, and one DynamicFluid re-plan at the group's first departure (the pool as the
static plan left it, the remaining runtimes of the others advanced to that time).
"""

from __future__ import annotations

import argparse
import importlib
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from fluid.cli import print_json, text_table
from fluid.core.checks import check_number
from fluid.core.config import PolicyConfig
from fluid.core.dynamic import RunningTrial, dynamic_fluid
from fluid.core.model import TrialSpec
from fluid.core.pool import GpuPool
from fluid.core.static import static_fluid

#: Modules with a ``register(subparsers)`` for more ``fluid bench`` targets (sim, e2e, load, gpu,
#: doc).
TARGETS: tuple[str, ...] = ("fluid.cli.bench_sim", "fluid.cli.bench_e2e", "fluid.cli.bench_load",
                            "fluid.cli.bench_gpu", "fluid.cli.bench_doc",
                            "fluid.cli.bench_dropin")

TRIAL_COUNTS = (10, 100, 1000, 10000)
GPU_COUNTS = (8, 64, 512)
#: Acceptance target: StaticFluid plans 1,000 trials on 512 GPUs in under this many ms.
TARGET_MS = 10.0
RUNTIME_RANGE = (60.0, 36_000.0)  # h_i1 log-uniform, 1 minute to 10 hours
ALPHA_RANGE = (1.0, 1.5)
BETA_RANGE = (1.0, 1.2)


@dataclass(frozen=True)
class PolicyTiming:
    """Timings of one (trials, GPUs) cell, in milliseconds."""

    trials: int
    gpus: int
    static_ms: float  # median over the repeats
    static_first_ms: float  # the first run (cold caches)
    dynamic_ms: float  # median over the repeats
    started: int  # trials StaticFluid started at time 0
    resized: int  # trials the DynamicFluid re-plan resized


def random_group(count: int, seed: int) -> list[TrialSpec]:
    """``count`` trials with log-uniform runtimes and uniform ``alpha``, ``beta`` (seeded)."""
    rng = np.random.default_rng(seed)
    lo, hi = RUNTIME_RANGE
    runtimes = np.exp(rng.uniform(math.log(lo), math.log(hi), count))
    alphas = rng.uniform(*ALPHA_RANGE, count)
    betas = rng.uniform(*BETA_RANGE, count)
    return [
        TrialSpec(f"t{i}", float(runtimes[i]), float(alphas[i]), float(betas[i]))
        for i in range(count)
    ]


def _first_departure(
    trials: Sequence[TrialSpec], widths: dict[str, float], started: Sequence[str]
) -> tuple[str, list[RunningTrial]]:
    """The started trial that ends first, and the others advanced to that time."""
    by_id = {t.id: t for t in trials}
    end = {tid: by_id[tid].runtime_at(widths[tid]) for tid in started}
    first = min(end, key=end.__getitem__)
    now = end[first]
    running = []
    for tid in started:
        if tid == first:
            continue
        spec = by_id[tid]
        left = spec.runtime - now / spec.slowdown(widths[tid])
        running.append(RunningTrial(spec.with_runtime(max(left, 1e-6 * spec.runtime)), widths[tid]))
    return first, running


def time_policy(count: int, gpus: int, repeat: int, seed: int) -> PolicyTiming:
    """Time StaticFluid and one DynamicFluid re-plan for ``count`` trials on ``gpus`` GPUs."""
    trials = random_group(count, seed)
    config = PolicyConfig()
    static_times = []
    for _ in range(repeat):
        empty = GpuPool(gpus)
        t0 = time.perf_counter()
        plan = static_fluid(trials, empty, config)
        static_times.append((time.perf_counter() - t0) * 1000)
    started = [a.trial_id for a in plan.started]
    by_id = {t.id: t for t in trials}
    waiting = [(by_id[tid], plan.widths[tid]) for tid in plan.waiting]
    first, running = _first_departure(trials, plan.widths, started)
    pool = plan.pool.copy()
    pool.release(first)
    dynamic_times, resized = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        dplan = dynamic_fluid(running, waiting, pool, config)
        dynamic_times.append((time.perf_counter() - t0) * 1000)
        resized = len(dplan.resized)
    return PolicyTiming(trials=count, gpus=gpus, static_ms=statistics.median(static_times),
                        static_first_ms=static_times[0],
                        dynamic_ms=statistics.median(dynamic_times), started=len(started),
                        resized=resized)


def run_policy(args: argparse.Namespace) -> int:
    """``fluid bench policy``: print the timing table (or ``--json``); 0 on success."""
    check_number("--repeat", args.repeat, 1)
    results = [time_policy(count, gpus, args.repeat, args.seed)
               for count in TRIAL_COUNTS for gpus in GPU_COUNTS]
    if args.json:
        print_json([asdict(r) for r in results])
        return 0
    print(f"fluid bench policy: median of {args.repeat} runs in ms (seed {args.seed}; h_i1 "
          f"log-uniform in [{RUNTIME_RANGE[0]:g}, {RUNTIME_RANGE[1]:g}] s, alpha "
          f"U{list(ALPHA_RANGE)}, beta U{list(BETA_RANGE)}, c and d from the overheads, eps = 0)")
    headers = ["trials", "GPUs", "StaticFluid", "(first run)", "DynamicFluid", "started", "resized"]
    rows = [[f"{r.trials:,}", str(r.gpus), f"{r.static_ms:.3f}", f"{r.static_first_ms:.3f}",
             f"{r.dynamic_ms:.3f}", str(r.started), str(r.resized)] for r in results]
    print(text_table(headers, rows, left=0))
    key = next(r for r in results if (r.trials, r.gpus) == (1000, 512))
    verdict = "ok" if key.static_ms < TARGET_MS else "TOO SLOW"
    print(f"target: StaticFluid, 1,000 trials on 512 GPUs < {TARGET_MS:g} ms: "
          f"{key.static_ms:.3f} ms ({verdict})")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fluid bench`` and its targets to the ``fluid`` parser."""
    p = subparsers.add_parser(
        "bench", help="benchmarks: the policy, the simulator, plain Tune vs Fluid, load",
        description="Benchmarks. policy: how long StaticFluid and DynamicFluid take to plan "
        "10 to 10,000 trials on 8 to 512 GPUs. sim: how fast the simulator runs 1,000 trials. "
        "e2e: the same tuning job under plain Tune and under Fluid on a local Ray instance. "
        "load: many zero-work trials, Fluid's overhead on the driver. "
        "Run fluid bench TARGET --help for a target's options.")
    targets = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    pol = targets.add_parser(
        "policy",
        help="time StaticFluid and DynamicFluid for 10..10,000 trials on 8..512 GPUs",
        description="Time StaticFluid and one DynamicFluid re-plan (median ms) for "
        "10, 100, 1,000, 10,000 trials on 8, 64, 512 GPUs.",
    )
    pol.add_argument("--json", action="store_true", help="print a JSON list of timings")
    pol.add_argument("--repeat", type=int, default=5, metavar="K", help="runs per cell (5)")
    pol.add_argument("--seed", type=int, default=0, help="seed of the random groups (0)")
    pol.set_defaults(func=run_policy)
    for name in TARGETS:
        importlib.import_module(name).register(targets)
