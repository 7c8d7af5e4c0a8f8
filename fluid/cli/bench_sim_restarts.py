"""What Fluid's restarts buy in ``fluid bench sim``: Fluid against ``fluid_static`` (Fluid with
resizes off) on the same seeds, as the ``bought`` object of its JSON, the line it prints and the
section of docs/benchmarks.md (keys and meanings in ``fluid.cli.bench_sim``'s docstring).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fluid.cli.simulate import cell
from fluid.sim.stats import summarize

if TYPE_CHECKING:
    from fluid.sim.results import Comparison

#: The executor Fluid's restarts are weighed against: Fluid with resizes off.
AGAINST = "fluid_static"


def bought(comp: Comparison) -> dict[str, Any]:
    """``bought`` of ``fluid bench sim --json`` from ``comp``'s ``fluid`` and ``fluid_static``
    runs on the same seeds."""
    per_trial = comp.per_trial("restarts")
    out: dict[str, Any] = {
        "against": AGAINST, "seeds": [r.seed for r in comp.of("fluid")],
        "restarts_per_trial": per_trial["fluid"] - per_trial[AGAINST]}
    for what in ("makespan", "time_to_target"):
        ratios = comp.ratios("fluid", AGAINST, what)  # {seed: fluid_static's / Fluid's}
        mean, ci = summarize(list(ratios.values()))
        out |= {f"{what}_ratio": mean, f"{what}_ratio_ci": list(ci) if ci else None,
                f"{what}_seeds": len(ratios)}
    return out


def _ratio(b: dict[str, Any], what: str) -> str:
    """``1.04x [0.99, 1.08]``, with its seeds where fewer than the run's."""
    text = cell(b[f"{what}_ratio"], b[f"{what}_ratio_ci"])
    seeds = b[f"{what}_seeds"]
    return text if seeds == len(b["seeds"]) else f"{text} (over {seeds} seeds)"


def bought_line(b: dict[str, Any]) -> str:
    """The line ``fluid bench sim`` prints for a ``bought`` object."""
    seeds = len(b["seeds"])
    return (f"fluid: {b['restarts_per_trial']:.2f} restarts per trial more than with resizes off "
            f"bought {_ratio(b, 'makespan')} makespan and {_ratio(b, 'time_to_target')} time "
            f"to target over {seeds} seed{'s' if seeds > 1 else ''}")


def page_section(res: Any) -> list[str]:
    """docs/benchmarks.md's section of the ``sim-restarts`` benchmark (``res``:
    ``benchmarks_page.Results``)."""
    lines = ["## Restarts and what they bought", "",
             "The random search of the simulator speed section under Fluid, against Fluid with "
             "resizes off (`fluid_static`) on the same seeds: the restarts per trial Fluid's "
             "resizes cost beside the ratios of `fluid_static`'s makespan and time to target "
             "over Fluid's (above 1: the restarts bought a shorter one), geometric means over "
             "seeds with a bootstrap 95% interval.", "", *res.provenance(["sim-restarts"]), ""]
    out = res.get("sim-restarts")
    if out is None:
        return lines
    lines += ["| trials | GPUs | seeds | Fluid's restarts per trial | more than resizes off | "
              "makespan ratio | time to target ratio |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in out:
        b = r.get("bought")
        if b is not None:
            lines.append(f"| {r['trials']:,} | {r['gpus']} | {len(b['seeds'])} | "
                         f"{r['restarts_per_trial']:.3f} | {b['restarts_per_trial']:.3f} | "
                         f"{_ratio(b, 'makespan')} | {_ratio(b, 'time_to_target')} |")
    return lines + [""]
