"""``fluid simulate --validate``: the ground truth against published measurements.

Three comparisons, each reference shipped with its source in ``fluid/sim/references/``:

* **scaling**: data-parallel speedups on ``w`` GPUs. Each point is run through the truth's gang
  model (``fluid.sim.truth.comm``) with the reference's own model size (gradient bytes),
  per-GPU batch, single-GPU throughput and link: ``speedup = w * t_1 / t_w`` per step;
* **packing**: published facts about sharing one GPU, compared with the truth on the CIFAR-10
  workload;
* **table2**: the paper's Table 2, re-run as plain Ray Tune successive halving (Ray's
  ``HyperBandScheduler``: synchronous successive halving inside each bracket) in the
  simulator with the setup inferred from the paper's numbers (``table2.json``: 81 configs);
  utilisation is the simulator's GPU utilisation (share of GPU time with a kernel running,
  as ``nvidia-smi`` reports).

Example:
    >>> rows = scaling_points()
    >>> len(rows) >= 8 and all(r["model"] > 0 for r in rows)
    True
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from fluid.sim.truth import PerfParams, iteration_time, step_from_rate
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


def scaling_points(p: PerfParams | None = None) -> list[dict[str, Any]]:
    """Model against reference for every published scaling point."""
    p = p or PerfParams()
    out = []
    for ref in load("scaling")["points"]:
        step = step_from_rate(ref["baseline_samples_per_s"], ref["worker_batch"])
        link = ref["link"]
        w = int(ref["gpus"])
        t_w = gang_step(step, w, 4.0 * ref["params"], link["gbytes_per_s"] * 1e9,
                        link["latency_s"], p)
        out.append({"config": ref["config"], "gpus": w, "reference": ref["reference"],
                    "model": w * step.seconds / t_w})
    return out


def packing_points(p: PerfParams | None = None, n: int = 64) -> list[dict[str, Any]]:
    """Model against reference for the packing facts (the CIFAR-10 workload's truth)."""
    from fluid.sim.workloads import Hardware, get_workload
    from fluid.sim.workloads.base import Workload

    w: Workload = get_workload("cifar10", Hardware.preset("rtx6000", perf=p or PerfParams()))
    rng = np.random.default_rng(0)
    duties = []
    for _ in range(n):
        cfg = {k: v.sample(random_state=int(rng.integers(2**31))) if hasattr(v, "sample") else v
               for k, v in w.space.items()}
        duties.append(iteration_time(w.trial_model(cfg).truth, 1.0).busy)
    ref = load("packing")["points"][0]
    return [{"config": ref["config"], "gpus": ref["gpus"], "reference": ref["reference"],
             "model": statistics.median(duties)}]


def table2_rows(seeds: int = TABLE2_SEEDS) -> list[dict[str, Any]]:
    """The paper's Table 2 re-run: plain Tune successive halving on 2..32 simulated workers."""
    from fluid.sim.experiment import run_experiment
    from fluid.sim.workloads import get_workload

    spec = load("table2")
    setup = spec["setup_inferred"]
    w = get_workload("cifar10")
    rows = []
    for row in spec["rows"]:
        n = int(row["workers"])
        runs = [run_experiment(setup["algorithm"], w, "tune", seed, n, samples=setup["configs"])
                for seed in range(seeds)]
        util = statistics.median(r.gpu_utilization for r in runs)
        rows.append({"workers": n, "paper_utilization": row["utilization"],
                     "utilization": util, "paper_runtime": row["runtime_s"],
                     "makespan": statistics.median(r.makespan for r in runs)})
    return rows


def validate(seeds: int = TABLE2_SEEDS) -> dict[str, Any]:
    """The ``--validate --json`` object (see the module docstring)."""
    scaling, packing, rows = scaling_points(), packing_points(), table2_rows(seeds)
    return {
        "scaling": {"points": scaling, "median_abs_rel_error": _median_abs_rel(scaling)},
        "packing": {"points": packing, "median_abs_rel_error": _median_abs_rel(packing)},
        "table2": {"rows": rows, "max_abs_utilization_error": max(
            abs(r["utilization"] - r["paper_utilization"]) for r in rows)},
    }


def render(result: dict[str, Any]) -> str:
    """The validation as plain-text tables."""
    lines = ["Scaling (speedup on w GPUs over one; published measurements)",
             f"{'config':<60} {'GPUs':>4} {'paper':>7} {'model':>7} {'error':>7}"]
    for key in ("scaling", "packing"):
        if key == "packing":
            lines += ["", "Packing / sharing one GPU",
                      f"{'config':<60} {'GPUs':>4} {'ref':>7} {'model':>7} {'error':>7}"]
        for pt in result[key]["points"]:
            err = (pt["model"] - pt["reference"]) / pt["reference"]
            lines.append(f"{pt['config'][:60]:<60} {pt['gpus']:>4} {pt['reference']:>7.2f} "
                         f"{pt['model']:>7.2f} {err:>+7.0%}")
        med = result[key]["median_abs_rel_error"]
        lines.append(f"median |relative error|: {med:.1%}" if med is not None else "")
    lines += ["", "Table 2 (successive halving: Ray's HyperBandScheduler, 81 configs, plain "
              "Tune)", f"{'workers':>7} {'paper util':>10} {'sim util':>8} "
              f"{'paper s':>8} {'sim s':>8}"]
    for r in result["table2"]["rows"]:
        lines.append(f"{r['workers']:>7} {r['paper_utilization']:>10.0%} "
                     f"{r['utilization']:>8.0%} {r['paper_runtime']:>8,} {r['makespan']:>8,.0f}")
    lines.append(f"max |utilisation error|: "
                 f"{result['table2']['max_abs_utilization_error'] * 100:.1f} points")
    return "\n".join(lines)
