"""``fluid bench sim``: how fast the simulator runs a large experiment.

Random search over the synthetic workload (``--trials`` configs, 20 iterations each, iteration
times log-normal around 10 s) on ``--gpus`` GPUs, once per executor (``--executors``, e.g.
``tune,fluid``), timing the wall clock of the simulation (imports and Ray's first-use costs
excluded). Acceptance targets on this machine: 1,000 trials on 512 GPUs in under 60 s, 10,000
in under 120 s, and Fluid at most 1.5 x plain Tune's time.

``--json`` prints a list, one object per executor: ``executor``, ``trials``, ``gpus``,
``iterations``, ``wall_s``, ``vs_tune`` (``wall_s`` over Tune's; ``null`` without a ``tune``
run), ``makespan_s`` (simulated), ``restarts`` and ``restarts_per_trial``, ``resizes``,
``hook_seconds`` and ``hook_ms_per_trial`` (wall clock in Fluid's hooks; ``null`` for Tune's
executors), ``target_s`` and ``ok`` (``null``: no target for this many trials).

``--profile N`` runs each executor under ``cProfile`` (its times are then the profiler's, not
the figures above) and adds ``profile``: the ``N`` functions of ``fluid`` with the most time of
their own, each ``function``, ``calls``, ``own_s`` and ``cumulative_s``; where a hook's time
goes at this many trials.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

from fluid.cli import print_json
from fluid.core.checks import check_number

#: Acceptance targets: up to this many trials on 512 GPUs simulated in under this many seconds.
TARGETS_S = ((1000, 60.0), (10000, 120.0))
#: Acceptance target: a Fluid executor's time at most this many times plain Tune's.
TARGET_VS_TUNE = 1.5
ITERATIONS = 20


def target_s(trials: int) -> float | None:
    """The wall-clock target for ``trials`` trials (``None`` above the largest one)."""
    return next((s for n, s in TARGETS_S if trials <= n), None)


def parse_executors(text: str | None) -> list[str]:
    """``--executors``: comma-separated names of ``fluid.sim.results.EXECUTORS``."""
    from fluid.sim.results import EXECUTORS

    if not text:
        return list(EXECUTORS)
    names = [name.strip() for name in text.split(",")]
    for name in names:
        if name not in EXECUTORS:
            raise ValueError(f"unknown executor {name!r}; known: {list(EXECUTORS)}")
    return names


def profiled(run: Callable[[], Any], top: int) -> tuple[Any, list[dict[str, Any]]]:
    """``run()`` under ``cProfile``: its value and the ``top`` functions of ``fluid`` by
    their own time."""
    profile = cProfile.Profile()
    value = profile.runcall(run)
    stats = pstats.Stats(profile).stats  # (file, line, name) -> (prims, calls, own, cum, _)
    rows = [{"function": f"fluid/{path.split('/fluid/', 1)[-1]}:{line}({name})", "calls": calls,
             "own_s": own, "cumulative_s": cum}
            for (path, line, name), (_, calls, own, cum, _) in stats.items()
            if "/fluid/" in path and "site-packages" not in path]
    rows.sort(key=lambda r: -r["own_s"])
    return value, rows[:top]


def _row(ex: str, r: Any, wall: float, args: argparse.Namespace, target: float | None,
         top: list[dict[str, Any]] | None) -> dict[str, Any]:
    """One executor's JSON object (``vs_tune`` filled in once every executor ran)."""
    hooks = r.hook_seconds
    return {"executor": ex, "trials": r.trials, "gpus": args.gpus,
            "iterations": args.trials * ITERATIONS, "wall_s": wall, "vs_tune": None,
            "makespan_s": r.makespan, "restarts": r.restarts,
            "restarts_per_trial": r.restarts / max(r.trials, 1), "resizes": r.resizes,
            "hook_seconds": hooks,
            "hook_ms_per_trial": None if hooks is None else 1000 * hooks / max(r.trials, 1),
            "target_s": target, "ok": None if target is None else wall < target,
            } | ({} if top is None else {"profile": top})


def _print_row(row: dict[str, Any]) -> None:
    target, wall, hooks = row["target_s"], row["wall_s"], row["hook_seconds"]
    verdict = "" if target is None else ("ok" if wall < target else "TOO SLOW")
    hook_text = "" if hooks is None else f", {hooks:.1f} s in Fluid's hooks"
    print(f"{row['executor']:<18} {row['trials']:>6,} trials on {row['gpus']} GPUs: simulated "
          f"in {wall:7.1f} s (simulated makespan {row['makespan_s']:,.0f} s, "
          f"{row['restarts']} restarts{hook_text}) {verdict}")
    for fn in row.get("profile") or ():
        print(f"    {fn['own_s']:8.2f} s own {fn['cumulative_s']:8.2f} s cum "
              f"{fn['calls']:>9,} calls  {fn['function']}")
    sys.stdout.flush()


def run_sim(args: argparse.Namespace) -> int:
    """``fluid bench sim``: print the timings (or ``--json``); 0 on success."""
    from fluid.cli.simulate import quiet_logs
    from fluid.sim.experiment import run_experiment
    from fluid.sim.workloads import get_workload

    quiet_logs()
    for name, value in (("--trials", args.trials), ("--gpus", args.gpus)):
        check_number(name, value, 1)
    if args.profile is not None:
        check_number("--profile", args.profile, 1)
    executors = parse_executors(args.executors)
    workload = get_workload("synthetic", iter_time=10.0, spread=0.5, max_t=ITERATIONS)
    # Warm up Ray's lazy imports and the searcher once, outside the timings.
    run_experiment("random", workload, "tune", 0, 2, samples=2)
    target = target_s(args.trials)
    rows = []
    for ex in executors:
        def one(ex: str = ex) -> Any:
            return run_experiment("random", workload, ex, args.seed, args.gpus,
                                  samples=args.trials)

        gc.collect()  # each executor starts from a collected heap, not the last one's garbage
        t0 = time.perf_counter()
        r, top = (one(), None) if args.profile is None else profiled(one, args.profile)
        rows.append(_row(ex, r, time.perf_counter() - t0, args, target, top))
        if not args.json:
            _print_row(rows[-1])
    tune_wall = next((row["wall_s"] for row in rows if row["executor"] == "tune"), None)
    if tune_wall:
        for row in rows:
            row["vs_tune"] = row["wall_s"] / tune_wall
    if args.json:
        print_json(rows)
        return 0
    if target is not None:
        print(f"target: {args.trials:,} trials on {args.gpus} GPUs in < {target:g} s "
              "per executor")
    for row in rows:
        if row["vs_tune"] is not None and row["executor"] != "tune":
            verdict = "ok" if row["vs_tune"] <= TARGET_VS_TUNE else "TOO SLOW"
            print(f"{row['executor']}: {row['vs_tune']:.2f} x plain Tune's time "
                  f"(target <= {TARGET_VS_TUNE:g} x) {verdict}")
    return 0


def register(targets: argparse._SubParsersAction) -> None:
    """Add ``fluid bench sim``."""
    p = targets.add_parser("sim", help="time the simulator: 1,000 trials on 512 GPUs",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=1000, help="configs, 1 to 10,000 or more (1000)")
    p.add_argument("--gpus", type=int, default=512, help="GPUs (512)")
    p.add_argument("--executors", default=None,
                   help="comma-separated (default: tune,resource_changing,fluid_static,fluid)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", type=int, default=None, metavar="N",
                   help="profile each run: its N functions of fluid with most own time")
    p.add_argument("--json", action="store_true", help="print a JSON list (keys above)")
    p.set_defaults(func=run_sim)
