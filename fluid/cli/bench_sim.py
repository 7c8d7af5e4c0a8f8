"""``fluid bench sim``: how fast the simulator runs a large experiment.

Random search over the synthetic workload (``--trials`` configs, 20 iterations each, iteration
times log-normal around 10 s) on ``--gpus`` GPUs, once per executor, timing the wall clock of
the simulation (imports and Ray's first-use costs excluded). The acceptance target is 1,000
trials on 512 GPUs in under 60 s on this machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

#: Acceptance target: 1,000 trials on 512 GPUs simulated in under this many seconds.
TARGET_S = 60.0
ITERATIONS = 20


def run_sim(args: argparse.Namespace) -> int:
    """``fluid bench sim``: print the timings (or ``--json``); 0 on success."""
    from fluid.cli.simulate import quiet_logs
    from fluid.sim.experiment import EXECUTORS, run_experiment
    from fluid.sim.workloads import get_workload

    quiet_logs()
    for name, value in (("--trials", args.trials), ("--gpus", args.gpus)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    executors = args.executors.split(",") if args.executors else list(EXECUTORS)
    for ex in executors:
        if ex not in EXECUTORS:
            raise ValueError(f"unknown executor {ex!r}; known: {list(EXECUTORS)}")
    workload = get_workload("synthetic", iter_time=10.0, spread=0.5, max_t=ITERATIONS)
    # Warm up Ray's lazy imports and the searcher once, outside the timings.
    run_experiment("random", workload, "tune", 0, 2, samples=2)
    rows = []
    for ex in executors:
        t0 = time.perf_counter()
        r = run_experiment("random", workload, ex, args.seed, args.gpus, samples=args.trials)
        wall = time.perf_counter() - t0
        rows.append({"executor": ex, "trials": r.trials, "gpus": args.gpus,
                     "iterations": args.trials * ITERATIONS, "wall_s": wall,
                     "makespan_s": r.makespan, "restarts": r.restarts,
                     "ok": wall < TARGET_S})
        if not args.json:
            print(f"{ex:<18} {r.trials:>6,} trials on {args.gpus} GPUs: simulated in "
                  f"{wall:7.1f} s (simulated makespan {r.makespan:,.0f} s, "
                  f"{r.restarts} restarts) {'ok' if wall < TARGET_S else 'TOO SLOW'}")
            sys.stdout.flush()
    if args.json:
        json.dump(rows, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"target: {args.trials:,} trials on {args.gpus} GPUs in < {TARGET_S:g} s "
              "per executor")
    return 0


def register(targets: argparse._SubParsersAction) -> None:
    """Add ``fluid bench sim``."""
    p = targets.add_parser("sim", help="time the simulator: 1,000 trials on 512 GPUs",
                           description=__doc__)
    p.add_argument("--trials", type=int, default=1000, help="configs (1000)")
    p.add_argument("--gpus", type=int, default=512, help="GPUs (512)")
    p.add_argument("--executors", default=None,
                   help="comma-separated (default: tune,resource_changing,fluid_static,fluid)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=run_sim)
