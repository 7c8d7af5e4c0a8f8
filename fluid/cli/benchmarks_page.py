"""docs/benchmarks.md (``fluid bench doc``): the benchmarks it shows, each the ``fluid`` command
that makes its JSON, and its sections, each from those results."""

from __future__ import annotations

import json
import statistics
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fluid.cli.simulate import cell
from fluid.sim.stats import summarize

SIM = ("--seeds", "10", "--json", "--no-progress")
SCOREBOARD = ("--baselines", "tune,tune_tuned,fluid_one_gpu")
PATTERN = "fluid simulate --algorithm A --workload W"
SCORE = "--baselines tune,tune_tuned,fluid_one_gpu --seeds 10 --json"
FIGURE7 = [(w, a) for w in ("cifar10", "wlm", "dcgan")
           for a in ("syncbohb", "hyperband", "bohb", "asha", "pbt")]
PRESET_ALGS = ("syncbohb", "hyperband", "bohb", "asha")
#: The paper's grid microbenchmark: (trials, GPU preset), cifar10 on 8 GPUs.
GRIDS = [(n, g) for g in ("rtx6000", "h100") for n in (9, 27, 81)]
#: The scoreboard's other cells: (result name, label, algorithm, workload, extra options, GPUs).
PRESETS = ([(f"cifar10-{a}-{n}gpus", f"cifar10 {a}, {n} GPUs", a, "cifar10", (), n)
            for n in (4, 16) for a in PRESET_ALGS]
           + [(f"cifar10-{a}-{g}", f"cifar10 {a}, {g}", a, "cifar10", ("--gpu", g), 8)
              for g in ("a100", "h100") for a in PRESET_ALGS]
           + [(f"{w}-{a}-h100", f"{w} {a}, h100", a, w, ("--gpu", "h100"), 8)
              for w in ("wlm", "dcgan") for a in ("syncbohb", "hyperband")])


def _sim(name: str, alg: str, work: str, *extra: str, gpus: int = 8,
         ) -> tuple[str, tuple[str, ...]]:
    return name, ("simulate", "--algorithm", alg, "--workload", work, "--gpus", str(gpus),
                  *extra, *SIM)


def _benchmarks() -> dict[str, tuple[str, ...]]:
    cells = [_sim(f"fig7-{w}-{a}", a, w, *SCOREBOARD) for w, a in FIGURE7]
    cells += [_sim(name, a, w, *SCOREBOARD, *extra, gpus=n)
              for name, _, a, w, extra, n in PRESETS]
    cells += [_sim(f"ceiling-{a}-{g}", a, "cifar10", "--baselines", "fluid_one_gpu", "--gpu", g,
                   gpus=16) for g in ("h100", "a100") for a in PRESET_ALGS]
    cells += [_sim(f"noprofile-{a}-{g}", a, "cifar10", "--baselines", "tune,fluid_one_gpu",
                   "--gpu", g, "--no-profile") for g in ("h100", "a100") for a in PRESET_ALGS]
    cells += [_sim(f"noprofile-fig7-{w}-{a}", a, w, "--baselines", "tune", "--no-profile")
              for w, a in FIGURE7]
    cells += [_sim(f"grid-{n}-{g}", "grid", "cifar10", "--samples", str(n), "--gpu", g,
                   "--baselines", "tune,fluid_one_gpu") for n, g in GRIDS]
    return dict(cells) | {
        "policy": ("bench", "policy", "--json"),
        "sim": ("bench", "sim", "--executors", "tune,fluid", "--json"),
        "sim-10000": ("bench", "sim", "--executors", "fluid", "--trials", "10000", "--json"),
        "sim-restarts": ("bench", "sim", "--executors", "fluid", "--seeds", "10", "--json"),
        "validate": ("simulate", "--validate", "--json"),
        "e2e": ("bench", "e2e", "--quick", "--json"),
        "e2e-load2": ("bench", "e2e", "--quick", "--load", "2", "--json"),
        "load": ("bench", "load", "--trials", "500", "--json"),
        "load-nodes4": ("bench", "load", "--trials", "500", "--nodes", "4", "--json"),
        "dropin": ("bench", "dropin", "--json"),
        "paper": ("simulate", "--paper", "--seeds", "10"),
    }


#: Every benchmark of the page: result name -> the ``fluid`` command's arguments.
BENCHMARKS: dict[str, tuple[str, ...]] = _benchmarks()


class Results:
    """The results in a directory, and the commands of those not there."""

    def __init__(self, directory: Path) -> None:
        self._records = {p.stem: json.loads(p.read_text()) for p in directory.glob("*.json")}

    def get(self, name: str) -> dict[str, Any] | None:
        """The command's JSON of result ``name`` (``None``: not run)."""
        record = self._records.get(name)
        return None if record is None else record["output"]

    def provenance(self, names: Iterable[str], command: str | None = None) -> list[str]:
        """The command (``command``: its pattern, for many cells) and the commits the results
        ``names`` ran on, and those not run yet."""
        names = list(dict.fromkeys(names))
        ran = [n for n in names if n in self._records]
        commits = Counter(self._records[n]["commit"] for n in ran)
        shown = command or (self._records[ran[0]]["command"] if ran
                            else "fluid " + " ".join(BENCHMARKS[names[0]]))
        at = ", ".join(f"`{c}`" + (f" ({k} of {len(names)})" if len(commits) > 1 else "")
                       for c, k in commits.items())
        lines = [f"`{shown}`" + (f", at {at}." if ran else ".")]
        missing = [n for n in names if n not in self._records]
        if missing:
            lines.append("Not run yet: " + ", ".join(missing) + ".")
        return lines


def median_time(out: dict[str, Any], executor: str, key: str = "time_to_target") -> str:
    """Median over seeds of ``executor``'s time to target (or other time ``key``, such as
    ``makespan``), in simulated seconds."""
    times = list(per_seed_times(out, executor, key).values())
    return f"{statistics.median(times):,.0f}" if times else "-"


def per_seed_times(out: dict[str, Any], executor: str,
                   key: str = "time_to_target") -> dict[int, float]:
    """Time to target (or other time ``key``) of ``executor`` by seed."""
    return {r["seed"]: r[key] for r in out["results"]
            if r["executor"] == executor and r[key] is not None}


def ratio_cell(slow: dict[int, float], fast: dict[int, float]) -> str:
    """Geometric mean over the seeds of both of ``slow / fast``, with its interval."""
    mean, ci = summarize([slow[s] / fast[s] for s in sorted(slow.keys() & fast.keys())])
    return cell(mean, list(ci) if ci else None)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table, numbers right-aligned (every column but the first)."""
    align = ["---"] + ["---:"] * (len(header) - 1)
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


INTRO = """# Benchmarks

Written by `fluid bench doc results/benchmarks --run` from the JSON the benchmark commands
print; each table names the command that made it and the commit it ran on. The machine is the
development one: 2 vCPUs, no GPU (Ray runs with logical GPUs), shared with other jobs, so
wall-clock figures are upper bounds. Simulated speedups are geometric means over seeds of
per-seed ratios with a bootstrap 95% interval in brackets; simulated times are medians over
seeds (simulated seconds). The simulated trials ask for one GPU each, which Fluid sizes."""

SCORE_HEADER = ["cell", "Tune s", "Tune, max_concurrent_trials = GPUs s",
                "Fluid, one GPU per trial s", "Fluid s", "fluid_vs_tune", "fluid_vs_tune_tuned",
                "shape_gain"]


def _score_row(label: str, out: dict | None) -> list[str]:
    if out is None:
        return [label] + ["(not run)"] + [""] * 6
    times = [median_time(out, ex) for ex in ("tune", "tune_tuned", "fluid_one_gpu", "fluid")]
    scores = [cell(out.get(k), out.get(f"{k}_ci95"))
              for k in ("fluid_vs_tune", "fluid_vs_tune_tuned", "shape_gain")]
    return [label, *times, *scores]


def figure7(res: Results) -> list[str]:
    """Figure 7 and the other presets: the scoreboard of each cell."""
    names = [f"fig7-{w}-{a}" for w, a in FIGURE7]
    presets = [(name, label) for name, label, *_ in PRESETS]
    return [
        "## Time to target in the simulator", "",
        "Columns: medians over seeds of the time to target under plain Tune (`tune`), plain "
        "Tune with `max_concurrent_trials` = GPUs (`tune_tuned`: the same as `tune` without a "
        "model-based searcher), Fluid with every trial on exactly one GPU (`fluid_one_gpu`) and "
        "Fluid; then `fluid_vs_tune`, `fluid_vs_tune_tuned` and `shape_gain` (Fluid over "
        "`fluid_one_gpu`), the JSON fields of the same names. The paper's testbed model "
        "(Quadro RTX 6000, 10 GbE) unless a preset is named.", "",
        "### Figure 7: 8 GPUs", "", *res.provenance(names, f"{PATTERN} --gpus 8 {SCORE}"), "",
        *table(SCORE_HEADER, [_score_row(n.removeprefix("fig7-").replace("-", " "), res.get(n))
                              for n in names]), "",
        "### Other cluster sizes and GPU presets", "",
        *res.provenance((n for n, _ in presets), f"{PATTERN} --gpus N [--gpu G] {SCORE}"), "",
        *table(SCORE_HEADER, [_score_row(label, res.get(n)) for n, label in presets]), "",
    ]


def _paired(res: Results, prefix: str, width: int,
            row: Callable[[dict, dict], list[str]]) -> tuple[list[list[str]], list[str]]:
    """A row per cifar10 preset cell from its result ``prefix-A-G`` and the 8-GPU cell beside
    it (``row(result, base)``), and the names of both."""
    rows, names = [], []
    for g in ("h100", "a100"):
        for a in PRESET_ALGS:
            names += [f"{prefix}-{a}-{g}", f"cifar10-{a}-{g}"]
            out, base = res.get(names[-2]), res.get(names[-1])
            rows.append([f"cifar10 {a}, {g}"] + (["(not run)", *[""] * (width - 1)]
                                                   if out is None or base is None
                                                   else row(out, base)))
    return rows, names


def _ceiling_row(wide: dict, base: dict) -> list[str]:
    one8, one16 = per_seed_times(base, "fluid_one_gpu"), per_seed_times(wide, "fluid_one_gpu")
    return [median_time(base, "fluid_one_gpu"), median_time(wide, "fluid_one_gpu"),
            median_time(base, "lower_bound"), ratio_cell(one8, one16),
            ratio_cell(one8, per_seed_times(base, "lower_bound")),
            cell(base.get("shape_gain"), base.get("shape_gain_ci95"))]


def ceiling(res: Results) -> list[str]:
    """How much room shapes leave: one GPU per trial on twice the GPUs, and the oracle."""
    rows, names = _paired(res, "ceiling", 6, _ceiling_row)
    return [
        "### The ceiling: how much room shapes leave", "",
        "Fluid at one GPU per trial on twice the GPUs (what free packing at two per GPU could "
        "give at most), and the oracle (`lower_bound`: the winner alone from t = 0 at its best "
        "shape), each as a geometric mean over seeds against `fluid_one_gpu` on 8 GPUs.", "",
        *res.provenance(names, f"{PATTERN} --gpus 16 --gpu G --baselines fluid_one_gpu (beside "
                        "the 8-GPU cells above)"), "",
        *table(["cell", "Fluid, one GPU per trial s", "the same on 16 GPUs s", "oracle s",
                "ceiling: one GPU per trial on twice the GPUs", "oracle over one GPU per trial",
                "shape_gain"], rows), "",
    ]


def _no_profile_row(bare: dict, prof: dict) -> list[str]:
    return [median_time(prof, "fluid"), median_time(bare, "fluid"),
            ratio_cell(per_seed_times(bare, "fluid"), per_seed_times(prof, "fluid")),
            cell(prof.get("fluid_vs_tune"), prof.get("fluid_vs_tune_ci95")),
            cell(bare.get("fluid_vs_tune"), bare.get("fluid_vs_tune_ci95")),
            cell(bare.get("shape_gain"), bare.get("shape_gain_ci95"))]


def no_profile(res: Results) -> list[str]:
    """Fluid without a profile beside Fluid profiled."""
    header = ["cell", "Fluid, profiled s", "Fluid, no profile s",
              "no profile over profiled (time)", "fluid_vs_tune profiled",
              "fluid_vs_tune no profile", "shape_gain no profile"]
    fig7 = []
    for w, a in FIGURE7:
        bare, prof = res.get(f"noprofile-fig7-{w}-{a}"), res.get(f"fig7-{w}-{a}")
        fig7.append([f"{w} {a}"] + (["(not run)", *[""] * 5] if bare is None or prof is None
                                    else _no_profile_row(bare, prof)[:5] + ["-"]))
    rows, names = _paired(res, "noprofile", 6, _no_profile_row)
    return [
        "### Without a profile", "",
        "`--no-profile`: Fluid as a user who never ran `fluid profile` gets it. \"No profile "
        "over profiled\" is the geometric mean of per-seed ratios of the unprofiled time to "
        "target over the profiled one (above 1: no profile is slower).", "",
        *res.provenance([f"noprofile-fig7-{w}-{a}" for w, a in FIGURE7],
                        f"{PATTERN} --gpus 8 --no-profile --baselines tune --seeds 10 --json "
                        "(beside Figure 7 above)"), "",
        *table(header, fig7), "",
        *res.provenance(names, f"{PATTERN} --gpus 8 --gpu G --no-profile --baselines "
                        "tune,fluid_one_gpu (beside the profiled cells above)"), "",
        *table(header, rows), "",
    ]


def grids(res: Results) -> list[str]:
    """The paper's grid microbenchmark: a grid's answer comes with its last trial."""
    names = [f"grid-{n}-{g}" for n, g in GRIDS]
    rows = []
    for (n, g), name in zip(GRIDS, names, strict=True):
        out = res.get(name)
        if out is None:
            rows.append([f"{n} trials, {g}", "(not run)", *[""] * 6])
            continue
        speed, ci = out["speedup"], out["speedup_ci95"]
        rows.append([f"{n} trials, {g}",
                     *(median_time(out, ex, "makespan") for ex in ("tune", "fluid", "lower_bound")),
                     *(cell(speed.get(k), ci.get(k)) for k in (
                         "fluid_vs_tune_makespan", "fluid_vs_tune", "shape_gain_makespan",
                         "shape_gain"))])
    return [
        "### Grid search: the answer comes with the last trial", "",
        "The paper's microbenchmark: a cifar10 grid of 9 (learning rate x batch size), 27 (x "
        "filters) and 81 (the 27 three times) trials on 8 GPUs. Every trial runs its whole "
        "budget, so its makespan is when the user has the answer; `fluid_vs_tune` is the time "
        "to the accuracy target. Makespans are medians over seeds; the oracle is "
        "`lower_bound`'s.", "",
        *res.provenance(names, "fluid simulate --algorithm grid --workload cifar10 --gpus 8 "
                        "--samples N --gpu G --baselines tune,fluid_one_gpu --seeds 10 --json"),
        "",
        *table(["cell", "Tune makespan s", "Fluid makespan s", "oracle makespan s",
                "fluid_vs_tune_makespan", "fluid_vs_tune", "shape_gain_makespan", "shape_gain"],
               rows), "",
    ]


def policy_and_simulator(res: Results) -> list[str]:
    """How long Fluid takes to decide, and how fast the simulator runs."""
    lines = ["## Policy cost: how long Fluid takes to decide", "",
             "StaticFluid sizing and placing a new random group on a fresh pool, and one "
             "DynamicFluid re-plan at its first departure; medians of the runs in ms.", "",
             *res.provenance(["policy"]), ""]
    pol = res.get("policy")
    if pol is not None:
        lines += table(["trials", "GPUs", "StaticFluid ms", "StaticFluid ms, first run",
                        "DynamicFluid ms", "started at t=0"],
                       [[f"{r['trials']:,}", str(r["gpus"]), f"{r['static_ms']:.2f}",
                         f"{r['static_first_ms']:.2f}", f"{r['dynamic_ms']:.3f}",
                         f"{r['started']:,}"] for r in pol]) + [""]
    lines += ["## Simulator speed", "",
              "A random search of synthetic trials (20 iterations each) on 512 simulated GPUs, "
              "the simulation's own wall clock.", "", *res.provenance(["sim"]),
              *res.provenance(["sim-10000"]), ""]
    rows = [r for n in ("sim", "sim-10000") for r in (res.get(n) or [])]
    if rows:
        lines += table(["executor", "trials", "wall s", "vs_tune", "Fluid's hooks s",
                        "restarts per trial", "simulated makespan s"],
                       [[r["executor"], f"{r['trials']:,}", f"{r['wall_s']:.1f}",
                         "-" if r["vs_tune"] is None else f"{r['vs_tune']:.2f}",
                         "-" if r["hook_seconds"] is None else f"{r['hook_seconds']:.2f}",
                         f"{r['restarts_per_trial']:.3f}", f"{r['makespan_s']:,.1f}"]
                        for r in rows]) + [""]
    return lines


def validation(res: Results) -> list[str]:
    """The simulator's ground truth against published measurements."""
    lines = ["## Simulator validation", "",
             "The ground truth (`fluid/sim/truth`) against the measurements shipped in "
             "`fluid/sim/references/` (docs/simulator.md: what is fitted to what).", "",
             *res.provenance(["validate"]), ""]
    out = res.get("validate")
    if out is None:
        return lines
    pack, scale = out["packing"], out["scaling"]
    fams = "; ".join(f"{f} ({v['points']}) {v['median_signed_error']:+.1%}"
                     for f, v in pack["by_family"].items())
    kinds = ", ".join(f"{k} {v['median_abs_rel_error']:.1%}" for k, v in scale["by_kind"].items())
    one = scale["strong_one_node"]
    util = "/".join(f"{r['utilization']:.0%}" for r in out["table2"]["rows"])
    paper = "/".join(f"{r['paper_utilization']:.0%}" for r in out["table2"]["rows"])
    return lines + table(["check", "points", "result"], [
        ["packing: k jobs on one GPU, aggregate throughput over one alone",
         str(len(pack["points"])), f"median abs. relative error {pack['median_abs_rel_error']:.1%};"
         f" median signed error by family: {fams}"],
        ["data-parallel scaling", str(len(scale["points"])),
         f"median abs. relative error {scale['median_abs_rel_error']:.1%} ({kinds}; strong in "
         f"one node {one['median_abs_rel_error']:.1%} over {one['points']})"],
        ["Table 2 utilisation, 2 to 32 workers", str(len(out["table2"]["rows"])),
         f"model {util}, paper {paper}"]]) + [""]


def real_runs(res: Results) -> list[str]:
    """Plain Tune against Fluid on a local Ray instance, idle and under load."""
    lines = ["## Real runs: plain Tune against Fluid on a local Ray instance", "",
             "Modeled trials (`fluid.train.modeled`) on logical GPUs, a grid and a HyperBand "
             "job under both executors, beside what the simulator predicts for each; "
             "`--load 2` runs two busy processes beside. Fluid's eps is the resize cost its "
             "decisions rested on (its resizes', else its least contended trial start's); the "
             "simulated Fluid is told it.", "",
             *res.provenance(["e2e", "e2e-load2"], "fluid bench e2e --quick [--load 2] --json"),
             ""]
    rows = []
    for name, load in (("e2e", "idle"), ("e2e-load2", "load 2")):
        out = res.get(name)
        for job, j in (out or {}).get("jobs", {}).items():
            rows.append([f"{job}, {load}", f"{j['tune']['makespan']:.1f}",
                         f"{j['fluid']['makespan']:.1f}", f"{j['speedup']:.2f}x",
                         f"{j['simulated_speedup']:.2f}x", str(j["fluid"].get("resizes", "-")),
                         f"{j['fluid']['eps_s']:.1f}" if "eps_s" in j["fluid"] else "-"])
    if rows:
        lines += table(["job", "plain Tune s", "Fluid s", "speedup", "simulated speedup",
                        "resizes", "Fluid's eps s"], rows) + [""]
    loads = [out for out in map(res.get, ("load", "load-nodes4")) if out is not None]
    lines += ["## Load: many short trials", "",
              "Zero-work trials on logical GPUs: Fluid's overhead on the driver, on one local "
              "Ray instance and on a cluster of several raylets on this machine.", "",
              *res.provenance(["load"]), *res.provenance(["load-nodes4"]), ""]
    if loads:
        lines += table(["trials", "nodes", "plain Tune s", "Fluid s", "vs_tune", "Fluid's hooks "
                        "ms per trial", "resizes per trial", "driver peak RSS MB after Fluid"],
                       [[f"{out['trials']:,}", str(out.get("nodes", 1)),
                         f"{out['tune']['wall_clock']:.1f}", f"{out['fluid']['wall_clock']:.1f}",
                         f"{out['fluid']['vs_tune']:.2f}",
                         f"{out['fluid']['hook_ms_per_trial']:.2f}",
                         f"{out['fluid']['resizes_per_trial']:.3f}",
                         f"{out['driver_peak_rss_mb']['after_fluid']:,.0f}"] for out in loads]
                       ) + [""]
    return lines


def paper(res: Results) -> list[str]:
    """The paper's evaluation, simulated: the section ``fluid simulate --paper`` writes."""
    lines = ["## The paper's evaluation, simulated", "", *res.provenance(["paper"]), ""]
    out = res.get("paper")
    if out is None:
        return lines
    kept, skip = [], False
    for line in out["markdown"].splitlines():
        if line.startswith("### "):  # its Figure 7 is the one above, from the same seeds
            skip = line.startswith("### Figure 7")
        if not skip and not line.startswith(("# ", "## ")):
            kept.append(line)
    return lines + kept + [""]


def page(res: Results) -> str:
    """docs/benchmarks.md from ``res``."""
    from fluid.cli.bench_dropin import page_section as dropin
    from fluid.cli.bench_sim_restarts import page_section as restarts

    parts = [*INTRO.splitlines(), ""]
    for section in (figure7, ceiling, no_profile, grids, paper, policy_and_simulator, restarts,
                    validation, real_runs, dropin):
        parts += section(res)
    wrapped = [line if line.startswith("|") else textwrap.fill(line, 96, break_long_words=False,
                                                                 break_on_hyphens=False)
               for line in parts]
    return "\n".join(wrapped).rstrip() + "\n"
