"""``fluid simulate --validate``: the ground truth against published measurements.

Three comparisons, each reference shipped with its source in ``fluid/sim/references/``:

* **scaling** (``scaling.json``): data-parallel speedups on ``w`` GPUs, each point labelled
  ``weak`` (per-GPU batch kept) or ``strong`` (global batch kept, as Fluid's gangs run). A weak
  point runs the truth's gang step (``fluid.sim.truth.comm``) on the reference's own model size
  (gradient bytes), per-GPU batch, single-GPU throughput and link:
  ``speedup = w t_1 / t_w``. A strong point runs the truth's step model at both batch sizes:
  one GPU computing the whole batch against ``w`` workers each computing their share, plus the
  all-reduce, compared per sample as the measurement is;
* **packing** (``packing.json``, or any file of its schema with ``--references PATH``):
  ``k`` identical jobs on one GPU (``fluid.sim.packing_refs``), with the median error per
  workload family;
* **table2**: the paper's Table 2, re-run as plain Ray Tune successive halving (Ray's
  ``HyperBandScheduler``: synchronous successive halving inside each bracket) in the
  simulator with the setup inferred from the paper's numbers (``table2.json``: 81 configs);
  utilisation is the simulator's GPU utilisation (share of GPU time with a kernel running,
  as ``nvidia-smi`` reports), beside the range of utilisation each paper row's neighbours
  allow for one work (``paper_consistent_range``): the paper's 8- and 16-worker rows are not
  one run of one work (doubling the workers from 8 to 16 cut the runtime 2.26x), so no
  simulation matches both.

Example:
    >>> rows = scaling_points()
    >>> len(rows) >= 12 and {r["kind"] for r in rows} == {"weak", "strong"}
    True
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from fluid.sim import packing_refs
from fluid.sim.truth import PerfParams, solo_step, step_from_rate
from fluid.sim.truth.comm import gang_step

REFERENCES = Path(__file__).with_name("references")
#: Seeds per Table 2 row (the median is reported).
TABLE2_SEEDS = 5


def load(name: str) -> dict[str, Any]:
    """A reference file of ``fluid/sim/references`` (``scaling``, ``packing``, ``table2``)."""
    return json.loads((REFERENCES / f"{name}.json").read_text())


def _median_abs_rel(points: list[dict[str, Any]]) -> float | None:
    errs = [abs(p["model"] - p["reference"]) / abs(p["reference"]) for p in points
            if p["reference"]]
    return statistics.median(errs) if errs else None


def _weak(ref: dict[str, Any], p: PerfParams) -> float:
    step = step_from_rate(ref["baseline_samples_per_s"], ref["worker_batch"])
    link, w = ref["link"], int(ref["gpus"])
    t_w = gang_step(step, w, 4.0 * ref["params"], link["gbytes_per_s"] * 1e9,
                    link["latency_s"], p)
    return w * step.seconds / t_w


def _strong(ref: dict[str, Any], p: PerfParams) -> float:
    peak, flops, w = ref["gpu_fp32_peak_tflops"] * 1e12, ref["flops_per_sample"], int(ref["gpus"])
    one, share, link = int(ref["one_gpu_batch"]), int(ref["worker_batch"]), ref["link"]
    t_1 = solo_step(flops * one, peak, p).seconds
    t_w = gang_step(solo_step(flops * share, peak, p), w, 4.0 * ref["params"],
                    link["gbytes_per_s"] * 1e9, link["latency_s"], p)
    return (w * share / t_w) / (one / t_1)


def scaling_points(p: PerfParams | None = None) -> list[dict[str, Any]]:
    """Model against reference for every published scaling point (weak and strong)."""
    p = p or PerfParams()
    out = []
    for ref in load("scaling")["points"]:
        model = _strong(ref, p) if ref["kind"] == "strong" else _weak(ref, p)
        out.append({"config": ref["config"], "kind": ref["kind"], "gpus": int(ref["gpus"]),
                    "nodes": int(ref["nodes"]), "reference": ref["reference"], "model": model,
                    "error": (model - ref["reference"]) / ref["reference"]})
    return out


def scaling_summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The scaling object of ``--validate --json``: the points, the median error over all of
    them and per kind, and how many strong points stay inside one node."""
    def group(pts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"points": len(pts), "median_abs_rel_error": _median_abs_rel(pts)}

    return {"points": points, "median_abs_rel_error": _median_abs_rel(points),
            "by_kind": {kind: group([q for q in points if q["kind"] == kind])
                        for kind in ("weak", "strong")},
            "strong_one_node": group([q for q in points if q["kind"] == "strong"
                                      and q["nodes"] == 1])}


def packing_points(p: PerfParams | None = None,
                   references: str | Path | None = None) -> dict[str, Any]:
    """The packing object of ``--validate --json`` for the shipped points or a file's."""
    pts = (packing_refs.load_points(references) if references is not None
           else load("packing")["points"])
    return packing_refs.report(pts, p)


def paper_consistent_range(rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """For each row of the paper's Table 2 (``workers``, ``utilization``, ``runtime_s``), the
    utilisation its neighbouring rows allow, were both one run of the same work.

    A row's busy worker-seconds are ``B = utilization x workers x runtime``. Synchronous
    successive halving whose trials of a rung take equal time runs each rung in waves; pairing
    the workers of a run on ``2n`` workers gives a schedule on ``n`` at most twice as long, so
    ``T_n <= 2 T_2n`` and ``T_n >= T_{n/2} / 2``: ``B / (2 n T_2n) <= utilization <=
    2 B / (n T_{n/2})`` (0 and 1 where the row has no such neighbour). A paper row outside its
    own range did other work or ran its trials at another speed than its neighbour did: no
    simulator running one work on every row can match both.
    """
    by_n = {int(r["workers"]): r for r in rows}
    out = []
    for n, r in by_n.items():
        busy = r["utilization"] * n * r["runtime_s"]
        low = busy / (2 * n * by_n[2 * n]["runtime_s"]) if 2 * n in by_n else 0.0
        high = min(1.0, 2 * busy / (n * by_n[n // 2]["runtime_s"])) if n // 2 in by_n else 1.0
        out.append((low, high))
    return out


def table2_rows(seeds: int = TABLE2_SEEDS) -> list[dict[str, Any]]:
    """The paper's Table 2 re-run: plain Tune successive halving on 2..32 simulated workers,
    beside the range each paper row's neighbours allow (``paper_consistent_range``)."""
    from fluid.sim.experiment import run_experiment
    from fluid.sim.workloads import get_workload

    spec = load("table2")
    setup = spec["setup_inferred"]
    w = get_workload("cifar10")
    rows = []
    ranges = paper_consistent_range(spec["rows"])
    for row, (low, high) in zip(spec["rows"], ranges, strict=True):
        n = int(row["workers"])
        runs = [run_experiment(setup["algorithm"], w, "tune", seed, n, samples=setup["configs"])
                for seed in range(seeds)]
        util = statistics.median(r.gpu_utilization for r in runs)
        rows.append({"workers": n, "paper_utilization": row["utilization"],
                     "paper_consistent_range": [low, high],
                     "utilization": util, "paper_runtime": row["runtime_s"],
                     "makespan": statistics.median(r.makespan for r in runs)})
    return rows


def validate(seeds: int = TABLE2_SEEDS, references: str | Path | None = None) -> dict[str, Any]:
    """The ``--validate --json`` object: scaling, packing and Table 2; with ``references``,
    only the packing comparison on that file's points."""
    if references is not None:
        return {"references": str(references), "packing": packing_points(references=references)}
    rows = table2_rows(seeds)
    return {
        "scaling": scaling_summary(scaling_points()),
        "packing": packing_points(),
        "table2": {"rows": rows, "max_abs_utilization_error": max(
            abs(r["utilization"] - r["paper_utilization"]) for r in rows),
            "paper_rows_outside_their_range": [
                r["workers"] for r in rows
                if not _within(r["paper_utilization"], r["paper_consistent_range"])],
            "rows_outside_paper_range": [
                r["workers"] for r in rows
                if not _within(r["utilization"], r["paper_consistent_range"])]},
    }


def _within(x: float, bounds: list[float]) -> bool:
    return bounds[0] <= x <= bounds[1]


def _workers(ns: list[int]) -> str:
    return ", ".join(f"{n} workers" for n in ns) or "none"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


#: Columns of the text tables: (key, header, width, format); the first is left-aligned.
_SCALING_COLUMNS = [("config", "config", 64, "s"), ("kind", "kind", 6, "s"),
                    ("gpus", "GPUs", 4, "d"), ("nodes", "nodes", 5, "d"),
                    ("reference", "paper", 7, ".2f"), ("model", "model", 7, ".2f"),
                    ("error", "error", 7, "+.0%")]
_PACKING_COLUMNS = [("config", "config", 62, "s"), ("family", "family", 6, "s"),
                    ("k", "k", 2, "d"), ("mode", "mode", 12, "s"), ("inputs", "inputs", 11, "s"),
                    ("reference", "ref", 6, ".2f"), ("model", "model", 6, ".2f"),
                    ("error", "error", 6, "+.0%")]


def _table(title: str, columns: list[tuple[str, str, int, str]],
           rows: list[dict[str, Any]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return " ".join(c[:w].ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, (_, _, w, _)) in enumerate(zip(cells, columns, strict=True)))

    return [title, line([h for _, h, _, _ in columns])] + [
        line([format(r[k], f) for k, _, _, f in columns]) for r in rows]


def _render_scaling(s: dict[str, Any]) -> list[str]:
    lines = _table("Scaling (speedup on w GPUs over one; published measurements)",
                   _SCALING_COLUMNS, s["points"])
    kinds = ", ".join(f"{k} {v['points']} points {_pct(v['median_abs_rel_error'])}"
                      for k, v in s["by_kind"].items())
    one = s["strong_one_node"]
    lines.append(f"median |relative error|: {_pct(s['median_abs_rel_error'])} ({kinds}; strong "
                 f"in one node {one['points']} points {_pct(one['median_abs_rel_error'])})")
    return lines


def _render_packing(s: dict[str, Any]) -> list[str]:
    lines = _table("Packing (k identical jobs on one GPU: aggregate throughput over one alone)",
                   _PACKING_COLUMNS, s["points"])
    fams = "; ".join(f"{f} {v['points']} points, median signed {v['median_signed_error']:+.1%}"
                     for f, v in s["by_family"].items())
    lines.append(f"median |relative error|: {_pct(s['median_abs_rel_error'])} over "
                 f"{len(s['points'])} points ({fams})")
    lines += [f"skipped: {sk['config']} ({sk['reason']})" for sk in s["skipped"]]
    return lines


def render(result: dict[str, Any]) -> str:
    """The validation as plain-text tables."""
    lines: list[str] = []
    if "scaling" in result:
        lines += _render_scaling(result["scaling"]) + [""]
    lines += _render_packing(result["packing"])
    if "table2" not in result:
        return "\n".join(lines)
    lines += ["", "Table 2 (successive halving: Ray's HyperBandScheduler, 81 configs, plain "
              "Tune)", f"{'workers':>7} {'paper util':>10} {'paper rows allow':>16} "
              f"{'sim util':>8} {'paper s':>8} {'sim s':>8}"]
    for r in result["table2"]["rows"]:
        low, high = r["paper_consistent_range"]
        lines.append(f"{r['workers']:>7} {r['paper_utilization']:>10.0%} "
                     f"{f'{low:.0%}-{high:.0%}':>16} {r['utilization']:>8.0%} "
                     f"{r['paper_runtime']:>8,} {r['makespan']:>8,.0f}")
    t2 = result["table2"]
    lines.append(f"max |utilisation error|: {t2['max_abs_utilization_error'] * 100:.1f} points; "
                 "outside the range their neighbours allow: paper rows "
                 f"{_workers(t2['paper_rows_outside_their_range'])}, simulated rows "
                 f"{_workers(t2['rows_outside_paper_range'])}")
    return "\n".join(lines)
