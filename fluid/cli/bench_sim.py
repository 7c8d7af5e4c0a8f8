"""``fluid bench sim``: how fast the simulator runs a large experiment, and what Fluid's restarts
buy there.

Random search over the synthetic workload (``--trials`` configs, 20 iterations each, iteration
times log-normal around 10 s) on ``--gpus`` GPUs, once per executor (``--executors``, e.g.
``tune,fluid``) and seed (``--seeds N``: seeds ``--seed`` to ``--seed`` + N - 1), timing the
wall clock of the simulation (imports and Ray's first-use costs excluded). Acceptance targets on
this machine: 1,000 trials on 512 GPUs in under 60 s, 10,000 in under 120 s, and Fluid at most
1.5 x plain Tune's time.

``--json`` prints a list, one object per executor: ``executor``, ``seeds`` (the list),
``trials``, ``gpus``, ``iterations``, ``wall_s`` (over all its seeds), ``vs_tune`` (``wall_s``
over Tune's; ``null`` without a ``tune`` run), ``makespan_s`` and ``time_to_target_s``
(simulated; ``null``: no trial reached the target), ``restarts`` and ``restarts_per_trial``
(over ``trials``), ``resizes``, ``hook_seconds`` (over all its seeds) and ``hook_ms_per_trial`` (wall clock in
Fluid's hooks; ``null`` for Tune's executors), ``target_s`` and ``ok`` (the mean wall clock
of a seed under the target; ``null``: no target for this many trials). With one seed these are
that run's; with more, ``trials``, ``makespan_s``, ``restarts`` and ``resizes`` are means over
the seeds and ``time_to_target_s`` the mean over those that reached the target.

``fluid``'s object (Fluid with resizes) also has ``bought``: its restarts beside what they bought
against ``fluid_static`` (Fluid with resizes off) on the same seeds, run after the timed rows
and given a row of its own only when ``--executors`` names it: ``against``, ``seeds``,
``restarts_per_trial`` (Fluid's minus ``fluid_static``'s, mean over seeds), ``makespan_ratio``
(``fluid_static``'s makespan over Fluid's: above 1, the restarts bought a shorter makespan)
and ``time_to_target_ratio`` (the same in time to target), each the geometric mean over seeds
with its bootstrap 95% interval (``..._ci``: ``[low, high]``, ``null`` with one seed) and the
number of seeds it is over (``..._seeds``: those where both have the value, a run that hangs
having no makespan; the ratio is ``null`` where no seed has).

``--profile N`` runs each executor under ``cProfile`` (its times are then the profiler's, not
the figures above) and adds ``profile``: the ``N`` functions of ``fluid`` with the most time of
their own over its seeds, each ``function``, ``calls``, ``own_s`` and ``cumulative_s``; where a
hook's time goes at this many trials.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
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


def top_functions(profile: cProfile.Profile, top: int) -> list[dict[str, Any]]:
    """The ``top`` functions of ``fluid`` by their own time in ``profile``."""
    stats = pstats.Stats(profile).stats  # (file, line, name) -> (prims, calls, own, cum, _)
    rows = [{"function": f"fluid/{path.split('/fluid/', 1)[-1]}:{line}({name})", "calls": calls,
             "own_s": own, "cumulative_s": cum}
            for (path, line, name), (_, calls, own, cum, _) in stats.items()
            if "/fluid/" in path and "site-packages" not in path]
    rows.sort(key=lambda r: -r["own_s"])
    return rows[:top]


def run_seeds(run: Callable[[int], Any], seeds: Sequence[int],
              profile: cProfile.Profile | None = None) -> tuple[list[Any], float]:
    """``run(seed)`` on each seed (under ``profile``, which adds up the runs, if given): the
    values, and the wall clock of the runs alone."""
    values, wall = [], 0.0
    for seed in seeds:
        gc.collect()  # each run starts from a collected heap, not the last one's garbage
        t0 = time.perf_counter()
        values.append(run(seed) if profile is None else profile.runcall(run, seed))
        wall += time.perf_counter() - t0
    return values, wall


def _row(ex: str, runs: list[Any], wall: float, args: argparse.Namespace,
         target: float | None) -> dict[str, Any]:
    """One executor's JSON object (``vs_tune`` filled in once every executor ran)."""
    trials = sum(r.trials for r in runs)
    hooks = None if runs[0].hook_seconds is None else sum(r.hook_seconds for r in runs)
    reached = [r.time_to_target for r in runs if r.time_to_target is not None]
    # statistics.mean keeps one seed's values as they are (an int stays an int)
    return {"executor": ex, "seeds": [r.seed for r in runs],
            "trials": statistics.mean(r.trials for r in runs), "gpus": args.gpus,
            "iterations": args.trials * ITERATIONS, "wall_s": wall, "vs_tune": None,
            "makespan_s": statistics.mean(r.makespan for r in runs),
            "time_to_target_s": statistics.mean(reached) if reached else None,
            "restarts": statistics.mean(r.restarts for r in runs),
            "restarts_per_trial": sum(r.restarts for r in runs) / max(trials, 1),
            "resizes": None if runs[0].resizes is None else statistics.mean(
                r.resizes for r in runs),
            "hook_seconds": hooks,
            "hook_ms_per_trial": None if hooks is None else 1000 * hooks / max(trials, 1),
            "target_s": target, "ok": None if target is None else wall / len(runs) < target}


def _print_row(row: dict[str, Any]) -> None:
    target, wall, hooks = row["target_s"], row["wall_s"], row["hook_seconds"]
    verdict = "" if target is None else ("ok" if row["ok"] else "TOO SLOW")
    hook_text = "" if hooks is None else f", {hooks:.1f} s in Fluid's hooks"
    seeds = len(row["seeds"])
    over, means = ("", "") if seeds == 1 else (f" for {seeds} seeds", "means: ")
    print(f"{row['executor']:<18} {row['trials']:>6,} trials on {row['gpus']} GPUs: simulated "
          f"in {wall:7.1f} s{over} ({means}simulated makespan {row['makespan_s']:,.0f} s, "
          f"{row['restarts']:g} restarts{hook_text}) {verdict}")
    for fn in row.get("profile") or ():
        print(f"    {fn['own_s']:8.2f} s own {fn['cumulative_s']:8.2f} s cum "
              f"{fn['calls']:>9,} calls  {fn['function']}")
    sys.stdout.flush()


def _timed_rows(args: argparse.Namespace, executors: list[str],
                sim: Callable[[str], Callable[[int], Any]],
                seeds: Sequence[int]) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """Each of ``executors`` on ``seeds``, timed: the rows (printed as they come without
    ``--json``), and each executor's runs."""
    target = target_s(args.trials)
    rows, runs = [], {}
    for ex in executors:
        profile = None if args.profile is None else cProfile.Profile()
        runs[ex], wall = run_seeds(sim(ex), seeds, profile)
        rows.append(_row(ex, runs[ex], wall, args, target)
                    | ({} if profile is None else {"profile": top_functions(profile, args.profile)}))
        if not args.json:
            _print_row(rows[-1])
    tune_wall = next((row["wall_s"] for row in rows if row["executor"] == "tune"), None)
    if tune_wall:
        for row in rows:
            row["vs_tune"] = row["wall_s"] / tune_wall
    return rows, runs


def run_sim(args: argparse.Namespace) -> int:
    """``fluid bench sim``: print the timings (or ``--json``); 0 on success."""
    from fluid.cli.bench_sim_restarts import AGAINST, bought
    from fluid.cli.simulate import quiet_logs
    from fluid.sim.experiment import run_experiment
    from fluid.sim.results import Comparison
    from fluid.sim.workloads import get_workload

    quiet_logs()
    for name, value in (("--trials", args.trials), ("--gpus", args.gpus), ("--seeds", args.seeds)):
        check_number(name, value, 1)
    if args.profile is not None:
        check_number("--profile", args.profile, 1)
    executors = parse_executors(args.executors)
    workload = get_workload("synthetic", iter_time=10.0, spread=0.5, max_t=ITERATIONS)
    # Warm up Ray's lazy imports and the searcher once, outside the timings.
    run_experiment("random", workload, "tune", 0, 2, samples=2)
    seeds = range(args.seed, args.seed + args.seeds)

    def sim(ex: str) -> Callable[[int], Any]:
        return partial(run_experiment, "random", workload, ex, gpus=args.gpus,
                       samples=args.trials)

    rows, runs = _timed_rows(args, executors, sim, seeds)
    if "fluid" in runs:
        # Resizes off, when not asked for, runs after the timed rows: they time as without it.
        static = runs.get(AGAINST) or run_seeds(sim(AGAINST), seeds)[0]
        comp = Comparison("random", workload.name, args.gpus, [*runs["fluid"], *static])
        next(row for row in rows if row["executor"] == "fluid")["bought"] = bought(comp)
    if args.json:
        print_json(rows)
        return 0
    _print_summary(rows, args.trials, args.gpus)
    return 0


def _print_summary(rows: list[dict[str, Any]], trials: int, gpus: int) -> None:
    from fluid.cli.bench_sim_restarts import bought_line

    target = target_s(trials)
    if target is not None:
        print(f"target: {trials:,} trials on {gpus} GPUs in < {target:g} s per executor")
    for row in rows:
        if row["vs_tune"] is not None and row["executor"] != "tune":
            verdict = "ok" if row["vs_tune"] <= TARGET_VS_TUNE else "TOO SLOW"
            print(f"{row['executor']}: {row['vs_tune']:.2f} x plain Tune's time "
                  f"(target <= {TARGET_VS_TUNE:g} x) {verdict}")
        if "bought" in row:
            print(bought_line(row["bought"]))


def register(targets: argparse._SubParsersAction) -> None:
    """Add ``fluid bench sim``."""
    p = targets.add_parser("sim", help="time the simulator: 1,000 trials on 512 GPUs",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=1000, help="configs, 1 to 10,000 or more (1000)")
    p.add_argument("--gpus", type=int, default=512, help="GPUs (512)")
    p.add_argument("--executors", default=None,
                   help="comma-separated (default: all of fluid.sim.results.EXECUTORS)")
    p.add_argument("--seed", type=int, default=0, help="the first seed (0)")
    p.add_argument("--seeds", type=int, default=1, metavar="N",
                   help="run each executor on N seeds from --seed on (1)")
    p.add_argument("--profile", type=int, default=None, metavar="N",
                   help="profile each run: its N functions of fluid with most own time")
    p.add_argument("--json", action="store_true", help="print a JSON list (keys above)")
    p.set_defaults(func=run_sim)
