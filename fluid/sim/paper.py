"""``fluid simulate --paper``: the shape of the paper's evaluation (section 6), our numbers beside.

``render`` returns the ``## Simulator`` section of ``docs/benchmarks.md`` as Markdown (the CLI,
``fluid/cli/simulate.py``, writes it into the file). Every speedup is the geometric mean over
seeds of the per-seed ratios with its bootstrap 95% interval (``fluid.sim.stats``), written
``1.22x [0.95, 1.60]``; absolute times and utilisations are medians over seeds. The section:

* Table 2: successive halving (Ray's ``HyperBandScheduler``) on CIFAR-10 with 2..32 workers,
  utilisation and runtime under plain Tune, and under Fluid;
* Figure 7: time to target of SyncBOHB, HyperBand, BOHB, ASHA, PBT on the three tasks under
  plain Tune, plain Tune with ``max_concurrent_trials`` = GPUs, Fluid at one GPU per trial and
  Fluid, with ``fluid_vs_tune``, ``fluid_vs_tune_tuned`` and ``shape_gain``;
* Figure 11: grid search (9/27/81 configs) on 8 GPUs with packing only, and 1/2/4 configs with
  distribution only;
* Figure 12: runtime variance (synthetic workload, 9 configs on 8 GPUs);
* Figure 13: artificial packing overhead 1.5x/2x/10x (27 configs, 8 GPUs) and scaling of 3
  configs on 4/8/16 GPUs without packing;
* sensitivity of the headline numbers to the model constants that are assumptions.

Example:
    >>> "Figure 7" in " ".join(SECTIONS)
    True
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fluid.sim.baselines import ONE_GPU, SCOREBOARD, TUNE_TUNED
from fluid.sim.controller import RestartCosts
from fluid.sim.experiment import compare
from fluid.sim.results import Comparison
from fluid.sim.stats import summarize
from fluid.sim.validate import load as load_reference
from fluid.sim.workloads import Hardware, PerfParams, get_workload

SECTIONS = ("Table 2", "Figure 7", "Figure 11", "Figure 12", "Figure 13", "Sensitivity")
HEADER = "## Simulator"
PAPER_TABLE2 = {2: (0.812, 2356), 4: (0.630, 1432), 8: (0.458, 1073), 16: (0.470, 475),
                32: (0.252, 432)}
FIGURE7_EXECUTORS = ("tune", TUNE_TUNED, ONE_GPU, "fluid")
PAPER_FIG7 = {"syncbohb": "2x", "hyperband": "1.3-2x (synchronous: 30-100%)",
              "bohb": "1.3x", "asha": "1.3x (asynchronous: 10-30%)", "pbt": "little"}


def speedup_cell(c: Comparison, fast: str, slow: str, what: str = "time_to_target") -> str:
    """``"1.22x [0.95, 1.60]"``: geometric mean over seeds of ``slow / fast`` and its 95% CI.

    ``-`` when no seed has both values; the interval is left out with a single seed.
    """
    mean, ci = summarize(list(c.ratios(fast, slow, what).values()))
    if mean is None:
        return "-"
    return f"{mean:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _med(vals: list[Any]) -> float | None:
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


#: ``run(algorithm, workload, gpus, executors, **options)``: ``compare`` on every seed.
_Runner = Callable[..., Comparison]


def table2(run: _Runner) -> list[str]:
    """Successive halving on 2..32 workers."""
    w = get_workload("cifar10")
    lines = ["### Table 2: successive halving (HyperBand) on CIFAR-10, 2 to 32 workers", "",
             "| workers | paper: Tune util. | paper: Tune runtime s | Tune util. (median) | "
             "Tune makespan s (median) | Fluid util. (median) | Fluid makespan s (median) | "
             "Fluid vs Tune makespan, geo. mean [95% CI] |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    setup = load_reference("table2")["setup_inferred"]
    for n, (pu, pr) in PAPER_TABLE2.items():
        c = run(setup["algorithm"], w, n, ("tune", "fluid"), samples=setup["configs"])
        t, f = c.of("tune"), c.of("fluid")
        lines.append(
            f"| {n} | {pu:.0%} | {pr:,} | {_med([r.gpu_utilization for r in t]):.0%} | "
            f"{_s(_med([r.makespan for r in t]))} | {_med([r.gpu_utilization for r in f]):.0%} | "
            f"{_s(_med([r.makespan for r in f]))} | "
            f"{speedup_cell(c, 'fluid', 'tune', 'makespan')} |")
    lines += ["", f"{setup['configs']} configs (inferred from the paper's numbers: "
              "fluid/sim/references/table2.json), `max_t` 27 epochs, reduction factor 3; "
              "utilisation is GPU utilisation (time with a kernel running). The paper's AlexNet "
              "and epochs are smaller than the experiment script's, so absolute runtimes differ; "
              "the shape to compare is utilisation falling as workers grow under Tune "
              "(`fluid simulate --validate` compares them).", ""]
    return lines


def figure7_rows(c: Comparison, task: str, alg: str) -> str:
    """One row of the Figure 7 table: medians and the three scoreboard speedups."""
    ttt = {ex: _med([r.time_to_target for r in c.of(ex)]) for ex in FIGURE7_EXECUTORS}
    cells = " | ".join(_s(ttt[ex]) for ex in FIGURE7_EXECUTORS)
    ratios = " | ".join(speedup_cell(c, *pair) for pair in SCOREBOARD.values())
    return f"| {task} | {alg} | {cells} | {ratios} | {PAPER_FIG7.get(alg, '')} |"


def figure7_header() -> list[str]:
    """The Figure 7 table's header (``figure7_rows`` fills it)."""
    return ["| task | algorithm | Tune s | Tune, max_concurrent_trials = GPUs s | "
            "Fluid at one GPU per trial s | Fluid s | fluid_vs_tune | fluid_vs_tune_tuned | "
            "shape_gain | paper: Fluid vs Tune |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]


def figure7(run: _Runner) -> list[str]:
    """Time to target, 5 algorithms x 3 tasks, with the scoreboard's baselines."""
    lines = ["### Figure 7: time to target, 8 GPUs", "", *figure7_header()]
    for task in ("cifar10", "wlm", "dcgan"):
        w = get_workload(task)
        for alg in ("syncbohb", "hyperband", "bohb", "asha", "pbt"):
            lines.append(figure7_rows(run(alg, w, 8, FIGURE7_EXECUTORS), task, alg))
    lines += ["", "Times to target are medians over seeds; a speedup is the geometric mean of "
              "the per-seed ratios of times to target, with its bootstrap 95% interval over "
              "seeds in brackets. `-`: the target was not reached. `fluid_vs_tune_tuned` "
              "compares with plain Tune run with `max_concurrent_trials` = GPUs (the same as "
              "plain Tune without a model-based searcher); `shape_gain` is Fluid over Fluid "
              "with every trial on one GPU (`fluid.sim.baselines`).", ""]
    return lines


def figure11(run: _Runner) -> list[str]:
    """Packing only, distribution only."""
    lines = ["### Figure 11: grid search, packing only (a) and distribution only (b), 8 GPUs",
             "", "| task | configs | mechanism | Fluid vs Tune makespan, geo. mean [95% CI] |",
             "|---|---:|---|---:|"]
    mechanisms = (("packing only", (9, 27, 81), {"d": 1}),
                  ("distribution only", (1, 2, 4), {"c": 1}))
    for task in ("cifar10", "wlm", "dcgan"):
        w = get_workload(task)
        for mechanism, sizes, options in mechanisms:
            for n in sizes:
                c = run("random", w, 8, ("tune", "fluid"), samples=n, fluid_options=options)
                lines.append(f"| {task} | {n} | {mechanism} | "
                             f"{speedup_cell(c, 'fluid', 'tune', 'makespan')} |")
    lines += ["", "Paper: packing helps most for many trials of small models; distribution "
              "helps most for few trials of large models. Configs are drawn at random from "
              "the search space (the grid of the paper is not published).", ""]
    return lines


def figure12(run: _Runner) -> list[str]:
    """Runtime variance."""
    lines = ["### Figure 12: runtime variance (synthetic, 9 configs, 8 GPUs)", "",
             "| log-sd of runtimes | Fluid vs Tune makespan, geo. mean [95% CI] | "
             "StaticFluid vs Tune makespan, geo. mean [95% CI] |",
             "|---:|---:|---:|"]
    for spread in (0.0, 0.25, 0.5, 1.0):
        w = get_workload("synthetic", iter_time=10.0, spread=spread, alpha=1.3, beta=1.1,
                         trials=9)
        c = run("grid", w, 8, ("tune", "fluid_static", "fluid"))
        lines.append(f"| {spread:g} | {speedup_cell(c, 'fluid', 'tune', 'makespan')} | "
                     f"{speedup_cell(c, 'fluid_static', 'tune', 'makespan')} |")
    lines += ["", "Paper: the larger the variance, the larger Fluid's gain (DynamicFluid).", ""]
    return lines


def figure13(run: _Runner) -> list[str]:
    """Packing overhead and scaling."""
    lines = ["### Figure 13a: artificial packing overhead (synthetic, 27 configs, 8 GPUs)", "",
             "| packing overhead alpha | Fluid vs Tune makespan, geo. mean [95% CI] |",
             "|---:|---:|"]
    for alpha in (1.5, 2.0, 10.0):
        w = get_workload("synthetic", iter_time=10.0, spread=0.5, alpha=alpha, beta=1.1)
        c = run("grid", w, 8, ("tune", "fluid"))
        lines.append(f"| {alpha:g}x | {speedup_cell(c, 'fluid', 'tune', 'makespan')} |")
    lines += ["", "Paper: small overheads still pay; at 10x packing is off and Fluid equals "
              "Tune.", "", "### Figure 13b: scaling, 3 configs, packing off", "",
              "| task | GPUs | Fluid vs Tune makespan, geo. mean [95% CI] |", "|---|---:|---:|"]
    for task in ("cifar10", "wlm", "dcgan"):
        w = get_workload(task)
        for n in (4, 8, 16):
            c = run("random", w, n, ("tune", "fluid"), samples=3, fluid_options={"c": 1})
            lines.append(f"| {task} | {n} | {speedup_cell(c, 'fluid', 'tune', 'makespan')} |")
    lines += ["", "Paper: 4 to 8 GPUs gains on all three tasks; CIFAR-10 and DCGAN gain nothing "
              "past 8 (Fluid leaves GPUs idle when scaling does not pay). Here gangs are modelled "
              "over 10 GbE (Paleo, no overlap of all-reduce and compute); trials of different "
              "lengths also gain from DynamicFluid handing freed GPUs to the longest one.", ""]
    return lines


def sensitivity(run: _Runner) -> list[str]:
    """How the SyncBOHB / CIFAR-10 speedup moves with the assumed constants."""
    base = PerfParams()
    variants: list[tuple[str, Any, RestartCosts | None]] = [
        ("as modelled", base, None),
        ("half_flops x0.5", replace(base, half_flops=base.half_flops / 2), None),
        ("half_flops x2", replace(base, half_flops=base.half_flops * 2), None),
        ("step_overhead 1 ms", replace(base, step_overhead_s=0.001), None),
        ("step_overhead 10 ms", replace(base, step_overhead_s=0.010), None),
        ("contention x2", replace(base, contention=2 * base.contention), None),
        ("MPS no better than time-slicing", replace(base, mps_overlap=0.0), None),
        ("time-slicing instead of MPS", replace(base, sharing="timeslice"), None),
        ("actor start 10 s", base, RestartCosts(actor_start_s=10.0)),
        ("NVLink instead of 10 GbE", base, None),
    ]
    lines = ["### Sensitivity: SyncBOHB on CIFAR-10, 8 GPUs", "",
             "| model constant | Fluid vs Tune, geo. mean [95% CI] | "
             "Fluid vs ResourceChanging, geo. mean [95% CI] |", "|---|---:|---:|"]
    for label, perf, costs in variants:
        link = "nvlink3" if label.startswith("NVLink") else None
        w = get_workload("cifar10", Hardware.preset("rtx6000", link, perf))
        c = run("syncbohb", w, 8, ("tune", "resource_changing", "fluid"), costs=costs)
        lines.append(f"| {label} | {speedup_cell(c, 'fluid', 'tune')} | "
                     f"{speedup_cell(c, 'fluid', 'resource_changing')} |")
    lines += ["", "Time to target is decided by one trial and varies a lot between seeds; read "
              "these as the direction in which an assumption moves the result, not as precise "
              "values.", ""]
    return lines


RUNS = 5 * 2 + 15 * 4 + 18 * 2 + 4 * 3 + 3 * 2 + 9 * 2 + 10 * 3  # cells x executors


def render(seeds: int = 10, quick: bool = False,
           progress: Callable[[str], None] | None = None) -> str:
    """The whole ``## Simulator`` section as Markdown (``RUNS`` runs per seed)."""
    n = 1 if quick else seeds

    def run(algorithm: str, workload: Any, gpus: int, executors: tuple[str, ...],
            **options: Any) -> Comparison:
        return compare(algorithm, workload, gpus, n, executors, progress=progress, **options)

    flag = "--quick" if quick else f"--seeds {seeds}"
    parts = [HEADER, "",
             f"Generated by `fluid simulate --paper {flag}` ({n} seed(s) per cell; "
             "docs/simulator.md describes the models and the statistics). Times are simulated "
             "seconds on the paper's testbed model (Quadro RTX 6000, 10 GbE) unless stated. "
             "Speedups: geometric mean over seeds of per-seed ratios, [95% bootstrap interval] "
             "over seeds (none with one seed).", ""]
    for f in (table2, figure7, figure11, figure12, figure13, sensitivity):
        parts += f(run)
    return "\n".join(parts) + "\n"
