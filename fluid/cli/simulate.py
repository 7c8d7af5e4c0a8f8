"""``fluid simulate``: what Fluid saves, simulated, before renting a cluster.

Three modes:

* ``fluid simulate --algorithm A --workload W --gpus N --seeds K [--json]``: every executor
  (``tune``, ``tune_tuned``, ``resource_changing``, ``fluid_static``, ``fluid_one_gpu``,
  ``fluid``; ``--baselines`` picks the ones beside ``fluid``) and the lower bound on seeds
  0..K-1 (K = 10 by default); per executor and seed the time to reach the target, the makespan,
  GPU-seconds and mean GPU utilisation, then medians over seeds and Fluid's speedups. The
  scoreboard (``fluid.sim.baselines``): ``tune_tuned`` is plain Tune as a careful user runs it
  (``max_concurrent_trials`` = GPUs for a model-based searcher; plain Tune otherwise),
  ``fluid_one_gpu`` is Fluid with every trial on exactly one GPU; ``fluid_vs_tune``,
  ``fluid_vs_tune_tuned`` and ``shape_gain`` (Fluid over ``fluid_one_gpu``) say where a gain
  comes from.
* ``fluid simulate --replay RESULTS_DIR --gpus N``: replay a finished Ray Tune experiment
  (its ``result.json`` files) under every executor.
* ``fluid simulate --paper``: the shape of the paper's evaluation with our numbers beside the
  paper's, written into the ``## Simulator`` section of ``docs/benchmarks.md`` (``--out``).
* ``fluid simulate --validate [--json]``: the simulator's ground truth against published
  measurements (``fluid.sim.validate``; docs/simulator.md): ``{"scaling": {"points",
  "median_abs_rel_error", "by_kind", "strong_one_node"}, "packing": {"points",
  "median_abs_rel_error", "by_family", "skipped"}, "table2": {...}}``. With
  ``--references PATH``, only the packing comparison, on the points of any file of the packing
  schema (``fluid.sim.packing_refs``).

Statistics: a speedup ``A_vs_B`` is, per seed, B's time over A's (time to target; keys ending
in ``_makespan``: makespan). Over seeds it is the geometric mean of the per-seed ratios, with a
95% percentile-bootstrap interval over seeds (10,000 resamples, fixed generator seed: the same
ratios give the same interval). Seeds where either side has no value are left out; with one
seed the interval is ``null``. ``--no-profile``: Fluid gets no profile (no ``alpha``, ``beta``,
``c``, ``d``, GPU memory), as a user who never ran ``fluid profile``.

``--json`` prints one object:

* ``results``: one row per executor and seed: ``executor``, ``seed``, ``time_to_target``
  (``null``: target not reached), ``makespan``, ``gpu_seconds``, ``gpu_utilization``,
  ``trials``, ``restarts`` (actor starts beyond each trial's first), ``resizes`` (shape changes
  Fluid made; ``null`` for Tune's executors), ``best`` (best metric reached), ...;
* ``fluid_vs_tune``, ``fluid_vs_tune_tuned``, ``shape_gain``: the scoreboard, each the
  geometric mean over seeds of per-seed ratios of time to target, with ``<name>_ci95``
  (``[low, high]``) and ``<name>_per_seed`` (``{seed: ratio}``); the same numbers are under
  the same names in ``speedup``, ``speedup_ci95`` and ``speedup_per_seed``;
* ``executors``: the executors run (``results`` has their rows);
* ``speedup``: ``{"fluid_vs_tune", "fluid_vs_tune_tuned", "shape_gain",
  "fluid_vs_resource_changing", "fluid_static_vs_tune", "resource_changing_vs_tune",
  "fluid_one_gpu_vs_tune", "tune_tuned_vs_tune", "lower_bound_vs_tune",
  "fluid_vs_tune_makespan", ...}``, each the geometric mean over seeds (``null``: no seed has
  both values, or an executor was not run);
* ``speedup_ci95``: the same keys, each ``[low, high]`` (``null`` with fewer than two seeds);
* ``speedup_per_seed``: the same keys, each ``{seed: ratio}``;
* ``best_metric``: ``{executor: mean over seeds of the best metric reached}``;
* ``restarts_per_trial``, ``resizes_per_trial``: ``{executor: mean over seeds of count/trials}``;
* ``algorithm``, ``workload``, ``gpus``, ``seeds``.

A progress bar goes to stderr (``--no-progress`` turns it off).
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from fluid.algorithms import ALGORITHMS
from fluid.cli import print_json, print_result, text_table
from fluid.core.checks import check_number

WORKLOADS = ("cifar10", "wlm", "dcgan", "synthetic")


class Progress:
    """A one-line progress bar on stderr: ``[#####.....] 5/10 label (12 s)``."""

    def __init__(self, total: int, enabled: bool = True, width: int = 24) -> None:
        self.total, self.enabled, self.width = max(total, 1), enabled, width
        self.done = 0
        self.t0 = time.perf_counter()

    def __call__(self, label: str) -> None:
        """Announce the next unit of work (``label``)."""
        if self.enabled:
            self._draw(self.done, label)
            self.done += 1

    def close(self) -> None:
        """End the line."""
        if self.enabled:
            self._draw(self.total, "done", "\n")

    def _draw(self, done: int, label: str, end: str = "") -> None:
        filled = int(self.width * done / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self.t0
        sys.stderr.write(f"\r[{bar}] {done}/{self.total} {label[:48]:<48} ({elapsed:.0f} s){end}")
        sys.stderr.flush()


def quiet_logs() -> None:
    """Ray's and Fluid's INFO logs would drown the report (every resize is logged)."""
    for name in ("ray", "ray.tune", "fluid"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _workload(args: argparse.Namespace) -> Any:
    from fluid.sim.workloads import Hardware, get_workload

    if args.workload == "synthetic":
        return get_workload(
            "synthetic", iter_time=args.iter_time, spread=args.spread, alpha=args.alpha,
            beta=args.beta, memory_gb=args.memory, max_t=args.max_t or 27, rate=args.rate,
            target=args.target if args.target is not None else 0.9, trials=args.trials)
    hw = Hardware.preset(args.gpu, args.interconnect)
    w = get_workload(args.workload, hw)
    if args.max_t:
        w.max_t = args.max_t
    if args.target is not None:
        w.target = args.target
    return w


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def cell(value: float | None, ci: list[float] | None) -> str:
    """``1.22x [0.95, 1.60]`` (``-``: no value)."""
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _spread(runs: list[Any], what: str) -> str:
    """``median [min, max]`` of the field ``what`` over ``runs`` (``-``: no value)."""
    vals = [getattr(r, what) for r in runs if getattr(r, what) is not None]
    f = "{:.0%}".format if what == "gpu_utilization" else _fmt
    return f"{f(statistics.median(vals))} [{f(min(vals))}, {f(max(vals))}]" if vals else "-"


def print_comparison(comp: Any, workload: Any, out: Any = None) -> None:
    """The human-readable report of a ``Comparison`` (on ``out``, default stdout)."""
    out = out or sys.stdout
    from fluid.sim.results import EXECUTORS, LOWER_BOUND

    print(f"{comp.algorithm} on {workload.description}; {comp.gpus} GPUs; target "
          f"{workload.metric} {'>=' if workload.mode == 'max' else '<='} {workload.target:g}",
          file=out)
    headers = ["executor", "seed", "time to target s", "makespan s", "GPU-s", "util", "trials",
               "restarts"]
    rows = [[r.executor, str(r.seed), _fmt(r.time_to_target),
             _fmt(r.makespan) + (" (hangs)" if r.stalled else ""), _fmt(r.gpu_seconds),
             "-" if r.gpu_utilization is None else f"{r.gpu_utilization:.0%}", str(r.trials),
             str(r.restarts)] for r in comp.results]
    print(text_table(headers, rows), file=out)
    print("\nmedian over seeds [min, max]:", file=out)
    rows = [[ex, *(_spread(comp.of(ex), what) for what in ("time_to_target", "makespan",
                                                             "gpu_seconds", "gpu_utilization"))]
            for ex in (*EXECUTORS, LOWER_BOUND) if comp.of(ex)]
    print(text_table(["executor", "time to target s", "makespan s", "GPU-s", "util"], rows),
          file=out)
    st = comp.speedup_stats()
    print("\nspeedups, geometric mean over seeds of per-seed ratios [bootstrap 95% interval]:",
          file=out)
    rows = []
    for key in ("fluid_vs_tune", "fluid_vs_tune_tuned", "shape_gain",
                "fluid_vs_resource_changing", "fluid_static_vs_tune", "resource_changing_vs_tune",
                "fluid_one_gpu_vs_tune", "tune_tuned_vs_tune", "lower_bound_vs_tune"):
        if st["speedup"].get(key) is None and st["speedup"].get(f"{key}_makespan") is None:
            continue  # an executor that was not run, or no seed with both values
        rows.append([key, *(cell(st["speedup"].get(k), st["speedup_ci95"].get(k))
                            for k in (key, f"{key}_makespan"))])
    print(text_table(["speedup", "time to target", "makespan"], rows), file=out)
    fl = comp.per_trial("resizes").get("fluid")
    if fl is not None:
        print(f"  Fluid resizes per trial (mean over seeds): {fl:.2f}", file=out)
    if any(r.stalled for r in comp.results):
        print("  (hangs): Tune never resumes a trial this scheduler paused (see docs/simulator.md)",
              file=out)


def write_paper(path: str | Path = "docs/benchmarks.md", seeds: int = 10, quick: bool = False,
                progress_enabled: bool = True) -> Path:
    """Render ``fluid.sim.paper`` and put it into ``path``, replacing its ``## Simulator``.

    The rest of the file is left as it is; without such a section it is appended.
    """
    from fluid.sim.paper import HEADER, RUNS, render

    bar = Progress(RUNS * (1 if quick else seeds), progress_enabled)
    section = render(seeds, quick, bar)
    bar.close()
    path = Path(path)
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(HEADER)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else (
        text.rstrip("\n") + "\n\n" + section)
    path.write_text(text)
    return path


def parse_baselines(value: str) -> tuple[str, ...]:
    """The executors ``--baselines`` names, in the report's order, with ``fluid`` always."""
    from fluid.sim.results import EXECUTORS

    allowed = [ex for ex in EXECUTORS if ex != "fluid"]
    names = allowed if value == "all" else [v.strip() for v in value.split(",") if v.strip()]
    bad = sorted(set(names) - set(allowed))
    if bad:
        raise ValueError(f"--baselines: unknown {bad}; allowed: 'all' or a comma-separated "
                         f"list of {allowed}")
    return tuple(ex for ex in EXECUTORS if ex in names or ex == "fluid")


def run(args: argparse.Namespace) -> int:
    """``fluid simulate``; returns the exit code (2, with one line, on a Ray it cannot mirror)."""
    from fluid.tune._ray_versions import simulator_problem

    problem = simulator_problem()
    if problem:
        print(f"fluid simulate: {problem}", file=sys.stderr)
        return 2
    quiet_logs()
    check_number("--gpus", args.gpus, 1, optional=True)
    check_number("--seeds", args.seeds, 1)
    check_number("--samples", args.samples, 1, optional=True)
    if args.references and not args.validate:
        raise ValueError("--references needs --validate (it names a packing reference file)")
    if args.validate:
        from fluid.sim.validate import render, validate

        result = validate(references=args.references)
        return print_result(args, result, lambda: print(render(result)))
    if args.paper:
        path = write_paper(args.out, seeds=args.seeds, quick=args.quick,
                           progress_enabled=not args.no_progress)
        print(f"wrote the Simulator section of {path}")
        return 0
    from fluid.sim.experiment import compare

    gpus = args.gpus or 8
    executors = parse_baselines(args.baselines)
    bar = Progress(args.seeds * len(executors), not args.no_progress)
    if args.replay:
        from fluid.sim.replay import replay

        comp, workload = replay(args.replay, gpus, metric=args.metric, mode=args.mode,
                                target=args.target, alpha=args.alpha, beta=args.beta,
                                seeds=args.seeds, progress=bar, profile=not args.no_profile,
                                executors=executors)
    else:
        if not args.algorithm or not args.workload:
            raise ValueError("give --algorithm and --workload (or --replay DIR, or --paper)")
        workload = _workload(args)
        if args.algorithm == "grid":
            from fluid.sim.experiment import grid_of

            grid_of(workload, args.samples)  # a grid's --samples is checked before any run
        comp = compare(args.algorithm, workload, gpus, args.seeds, executors,
                       samples=args.samples, profile=not args.no_profile, progress=bar)
    bar.close()
    if args.json:
        print_json(comp.to_json())
    else:
        print_comparison(comp, workload)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fluid simulate`` to the ``fluid`` parser."""
    p = subparsers.add_parser(
        "simulate", help="simulate what Fluid saves (algorithms x workloads x executors)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algorithm", choices=ALGORITHMS)
    p.add_argument("--workload", choices=WORKLOADS)
    p.add_argument("--gpus", type=int, default=None, metavar="N", help="GPUs (8)")
    p.add_argument("--seeds", type=int, default=10, metavar="K",
                   help="seeds 0..K-1 (10); speedups are geometric means over them with a "
                   "bootstrap 95%% interval")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys above)")
    p.add_argument("--no-profile", action="store_true",
                   help="Fluid without a profile: the FluidExecutor's defaults, as a user who "
                   "never ran `fluid profile`")
    p.add_argument("--baselines", default="all", metavar="LIST",
                   help="executors to run beside fluid: 'all' (default) or a comma-separated "
                   "list of tune, tune_tuned, resource_changing, fluid_static, fluid_one_gpu "
                   "(the scoreboard needs tune,tune_tuned,fluid_one_gpu)")
    p.add_argument("--samples", type=int, default=None, metavar="N",
                   help="configs the algorithm samples (default by algorithm and GPUs; a grid: "
                   "its first axes or the grid repeated, e.g. 9, 27, 81 for cifar10)")
    p.add_argument("--gpu", default="rtx6000", choices=("rtx6000", "a100", "h100"),
                   help="GPU preset of the task workloads (rtx6000, as in the paper)")
    p.add_argument("--interconnect", default=None,
                   choices=("10gbe", "100gbe", "nvlink3", "nvlink4"),
                   help="between a gang's GPUs (default: the GPU preset's)")
    p.add_argument("--max-t", type=int, default=None, help="iterations of a full budget")
    p.add_argument("--target", type=float, default=None, help="metric target")
    syn = p.add_argument_group("synthetic workload (and --replay overheads)")
    syn.add_argument("--iter-time", type=float, default=10.0, help="s per iteration (10)")
    syn.add_argument("--spread", type=float, default=0.5,
                     help="log-sd of iteration times across configs (0.5)")
    syn.add_argument("--alpha", type=float, default=1.3, help="packing overhead (1.3)")
    syn.add_argument("--beta", type=float, default=1.2, help="scaling overhead (1.2)")
    syn.add_argument("--memory", type=float, default=2.0, help="GB per trial (2)")
    syn.add_argument("--rate", type=float, default=0.15, help="learning rate of the curve")
    syn.add_argument("--trials", type=int, default=27, help="grid size (27)")
    rep = p.add_argument_group("replay")
    rep.add_argument("--replay", metavar="RESULTS_DIR", help="a finished Ray Tune experiment")
    rep.add_argument("--metric", default=None, help="objective (default: first metric found)")
    rep.add_argument("--mode", default="max", choices=("max", "min"))
    pap = p.add_argument_group("paper")
    pap.add_argument("--paper", action="store_true",
                     help="regenerate the Simulator section of docs/benchmarks.md")
    pap.add_argument("--out", default="docs/benchmarks.md", help="file of --paper")
    pap.add_argument("--quick", action="store_true", help="--paper with fewer runs")
    p.add_argument("--validate", action="store_true",
                   help="the simulator's truth against published measurements (with --json: one "
                        "object)")
    p.add_argument("--references", metavar="PATH", default=None,
                   help="with --validate: compare the truth with the points of this packing "
                        "reference file (the schema of fluid/sim/references/packing.json)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)
