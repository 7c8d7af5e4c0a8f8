"""Fit the truth's three packing constants to the shipped references, with held-out checks.

``python -m experiments.fit_truth [--json]``

The constants (``fluid.sim.truth.params``): ``step_overhead_s`` (GPU-idle seconds per step),
``half_flops`` (the occupancy curve, and the part of a step's kernel time that does not shrink
with the batch) and ``contention`` (slowdown per co-runner). The data: every packing point the
truth can model (``fluid/sim/references/packing.json``) and the strong-scaling points inside
one node (``scaling.json``), which measure the same per-step costs from the other side (a
smaller per-GPU batch runs at lower occupancy). The loss is the mean absolute log error
(``|log(model / reference)|``) over all those points, each point weighted equally; a grid
search minimises it (the median, the acceptance figure, is too flat to fit on).

Held-out checks: the fit is repeated leaving out one source-and-GPU group at a time (Gavel
P100, V100, K80; Lucid RTX 3090; the strong-scaling points), and the left-out group's median
absolute error is reported. ``ppp``, ``mps_overlap``, ``overlap`` and ``straggler_cv`` are
not fitted here (docs/simulator.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fluid.sim import packing_refs
from fluid.sim.truth import PerfParams
from fluid.sim.validate import _strong, load

# The coarse grid; ``fit`` then refines around its best point at a quarter of each step.
OVERHEAD_STEP, HALF_FLOPS_STEP, CONTENTION_STEP = 0.002, 2e10, 0.01
OVERHEADS = [OVERHEAD_STEP * i for i in range(1, 16)]  # 2 .. 30 ms
HALF_FLOPS = [HALF_FLOPS_STEP * i for i in range(0, 13)]  # 0 .. 240 GFLOP
CONTENTION = [CONTENTION_STEP * i for i in range(0, 16)]  # 0 .. 0.15


def _group(point: dict[str, Any]) -> str:
    if point.get("kind") == "strong":
        return "strong, one node"
    for gpu in ("K80", "3090", "V100", "P100"):
        if gpu in point.get("gpu", ""):
            return gpu
    return "other"


def _data() -> list[tuple[str, Callable[[PerfParams], float], float]]:
    """``(group, model(p), reference)`` for every point the fit uses."""
    rows = []
    for pt in load("packing")["points"]:
        if packing_refs.skip_reason(pt) is None:
            rows.append((_group(pt), lambda p, pt=pt: packing_refs.model_ratio(pt, p),
                         float(pt["throughput_ratio"])))
    for pt in load("scaling")["points"]:
        if pt["kind"] == "strong" and pt["nodes"] == 1:
            rows.append((_group(pt), lambda p, pt=pt: _strong(pt, p), float(pt["reference"])))
    return rows


def _loss(rows: Sequence[tuple[str, Callable[[PerfParams], float], float]],
          p: PerfParams) -> float:
    return statistics.fmean(abs(math.log(model(p) / ref)) for _, model, ref in rows)


def _best(rows: Sequence[tuple[str, Callable[[PerfParams], float], float]],
          grid: Any) -> PerfParams:
    base = PerfParams()
    return min((replace(base, step_overhead_s=o, half_flops=h, contention=k) for o, h, k in grid
                if o > 0 and h >= 0 and k >= 0), key=lambda p: _loss(rows, p))


def fit(rows: Sequence[tuple[str, Callable[[PerfParams], float], float]]) -> PerfParams:
    """The grid point of least mean absolute log error over ``rows`` (coarse, then refined)."""
    p = _best(rows, itertools.product(OVERHEADS, HALF_FLOPS, CONTENTION))
    fine = [i / 4 for i in range(-4, 5)]
    return _best(rows, itertools.product(
        [p.step_overhead_s + f * OVERHEAD_STEP for f in fine],
        [p.half_flops + f * HALF_FLOPS_STEP for f in fine],
        [p.contention + f * CONTENTION_STEP for f in fine]))


def _median_abs(rows: Sequence[tuple[str, Callable[[PerfParams], float], float]],
                p: PerfParams) -> float:
    return statistics.median(abs(model(p) - ref) / ref for _, model, ref in rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Fit on everything, then leave each group out; print and return the results."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    rows = _data()
    best = fit(rows)
    out: dict[str, Any] = {"fit": {"step_overhead_s": best.step_overhead_s,
                                   "half_flops": best.half_flops, "contention": best.contention,
                                   "points": len(rows), "median_abs_rel_error":
                                   _median_abs(rows, best)}, "held_out": {}}
    for group in sorted({g for g, _, _ in rows}):
        train = [r for r in rows if r[0] != group]
        test = [r for r in rows if r[0] == group]
        p = fit(train)
        out["held_out"][group] = {"points": len(test), "fit_without": [
            p.step_overhead_s, p.half_flops, p.contention],
            "median_abs_rel_error": _median_abs(test, p)}
    print(json.dumps(out, indent=1) if args.json else "\n".join(
        [f"fit over {len(rows)} points: {out['fit']}"]
        + [f"held out {g}: {v}" for g, v in out["held_out"].items()]))
    return out


if __name__ == "__main__":
    main()
