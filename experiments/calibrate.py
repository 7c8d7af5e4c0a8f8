"""Calibration: measured per-iteration time of each task on this CPU vs. FLOP-based predictions.

``python -m experiments.calibrate [--configs 8] [--seed 0] [--json]``

For a spread of configs per task (sampled from the task's search space; for ``dcgan``, whose
search space holds only learning rates, ``ngf``/``ndf``/``batch_size`` are varied instead), it
measures one training step of the real model at full size on one CPU thread, and compares the
per-iteration time with two predictions for the same config:

* **FLOP model**: ``flops_per_sample x samples_per_iteration / R``, FLOPs counted on the real
  model (``experiments.tasks.count_flops_and_params``) and ``R`` one CPU throughput (FLOP/s)
  fitted over all configs of all tasks (the median measured FLOP rate);
* **simulator**: ``fluid.sim.workloads.get_workload(task).trial_model(config).iteration_time``,
  the simulator's Paleo-style model for its default GPU (RTX 6000); a constant factor between
  a GPU and this CPU does not matter for the figures below.

For each task and model: Spearman rank correlation between measured and predicted times (does
the model order configs right?) and the spread of ``measured / predicted`` (max/min and the
geometric standard deviation; a single scale factor changes neither).

Measurement: a step is timed in CPU seconds of this process (``time.process_time``, one torch
thread), so other load on the machine does not inflate it; one warm-up step, then the median
of ``--steps`` timed steps. A step runs ``b = min(batch_size, --max-batch)`` samples (by
default the config's own batch size), and the per-iteration time is
``step_time x samples_per_iteration / b``. The default run takes ~4 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from experiments.tasks import TASKS, Task, count_flops_and_params

__all__ = ["calibrate", "geometric_std", "main", "markdown", "spearman", "summarize"]


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share their average rank
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation of two equal-length sequences (NaN if one is constant)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("spearman needs two sequences of the same length >= 2")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else math.nan


def geometric_std(values: Sequence[float]) -> float:
    """Geometric standard deviation (1.0 = all equal; 1.2 = typically 20% apart)."""
    logs = [math.log(v) for v in values]
    return math.exp(statistics.pstdev(logs)) if len(logs) > 1 else 1.0


def _samples_per_iteration(task: Task, config: dict[str, Any]) -> int:
    """Samples one iteration (an epoch) trains on: images, or bptt-token windows (wlm)."""
    if task.name == "wlm":
        return task.train_samples // int(config["bptt"])
    return task.train_samples


def _configs(task: Task, n: int, seed: int) -> list[dict[str, Any]]:
    if task.name != "dcgan":
        return [task.sample_config(seed + i) for i in range(n)]
    # The DCGAN search space only has learning rates: vary the network widths and batch.
    grid = [(w, b) for w in (32, 64, 96) for b in (32, 64, 128)]
    return [{**task.default_config, "ngf": w, "ndf": w, "batch_size": b}
            for w, b in grid[:n]]


def _step_seconds(task: Task, config: dict[str, Any], batch: int, steps: int) -> float:
    torch.manual_seed(0)
    model = task.build_model(config)
    optimizer = task.build_optimizer(model, config)
    example = task.example_batch(config, batch)
    times = []
    for i in range(steps + 1):
        t0 = time.process_time()
        task.train_one_iteration(model, optimizer, [example], "cpu", config)
        if i:  # the first step warms up allocators and kernels
            times.append(time.process_time() - t0)
    return statistics.median(times)


def measure(task: Task, config: dict[str, Any], max_batch: int, steps: int) -> dict[str, Any]:
    """One config: FLOPs, measured seconds per iteration, simulator prediction."""
    flops, params = count_flops_and_params(task, config)
    batch = min(int(config.get("batch_size", 64)), max_batch)
    samples = _samples_per_iteration(task, config)
    step = _step_seconds(task, config, batch, steps)
    row: dict[str, Any] = {
        "config": {k: config[k] for k in config if k not in ("is_samples",)},
        "flops_per_sample": flops,
        "params": params,
        "measured_batch": batch,
        "samples_per_iteration": samples,
        "measured_s": step * samples / batch,
        "flops_per_iteration": flops * samples,
    }
    try:
        from experiments.profiles import ensure_profiled
        from fluid.sim.workloads import get_workload

        ensure_profiled(task.name, config)  # configs outside the spaces are counted here
        row["simulator_s"] = get_workload(task.name).trial_model(config).iteration_time
    except Exception as e:  # noqa: BLE001 -- the simulator is optional for this script
        row["simulator_s"] = None
        row["simulator_error"] = f"{type(e).__name__}: {e}"
    return row


def _agreement(measured: list[float], predicted: list[float]) -> dict[str, float]:
    ratios = [m / p for m, p in zip(measured, predicted, strict=True)]
    return {
        "spearman": spearman(measured, predicted),
        "ratio_max_over_min": max(ratios) / min(ratios),
        "ratio_geometric_std": geometric_std(ratios),
    }


def calibrate(
    tasks: Sequence[str] = tuple(TASKS), configs: int = 8, seed: int = 0,
    max_batch: int = 256, steps: int = 2, progress: Any = sys.stderr,
) -> dict[str, Any]:
    """Measure every task; fit the CPU throughput; return rows and agreement figures."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*TF32.*")  # oneDNN's note, once per FLOP count
    rows: dict[str, list[dict[str, Any]]] = {}
    for name in tasks:
        task = TASKS[name]
        rows[name] = []
        for config in _configs(task, configs, seed):
            row = measure(task, config, max_batch, steps)
            rows[name].append(row)
            if progress is not None:
                print(f"{name}: {row['flops_per_sample'] / 1e9:.3g} GFLOP/sample, "
                      f"measured {row['measured_s']:.4g} s/iteration", file=progress, flush=True)
    return {"threads": torch.get_num_threads(), "max_batch": max_batch, "steps": steps,
            **summarize(rows)}


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Fit the CPU throughput over all rows; agreement per task and over all tasks pooled."""
    rates = [r["flops_per_iteration"] / r["measured_s"] for rs in rows.values() for r in rs]
    throughput = statistics.median(rates)
    summary: dict[str, Any] = {}
    groups = {**rows, "all": [r for rs in rows.values() for r in rs]} if len(rows) > 1 else rows
    for name, rs in groups.items():
        measured = [r["measured_s"] for r in rs]
        for r in rs:
            r["flop_model_s"] = r["flops_per_iteration"] / throughput
        flop = _agreement(measured, [r["flop_model_s"] for r in rs])
        flop["median_ratio"] = statistics.median(
            m / r["flop_model_s"] for m, r in zip(measured, rs, strict=True))
        summary[name] = {"flop_model": flop}
        sim = [r.get("simulator_s") for r in rs]
        if all(s is not None and s > 0 for s in sim):
            summary[name]["simulator"] = _agreement(measured, sim)
    return {"cpu_throughput_flops": throughput, "rows": rows, "summary": summary}


def markdown(result: dict[str, Any]) -> str:
    """The tables of ``docs/benchmarks.md``'s Calibration section."""
    lines = [
        f"Fitted CPU throughput (one thread): **{result['cpu_throughput_flops'] / 1e9:.1f} "
        "GFLOP/s** (median over all configs).",
        "",
        "| task | configs | FLOP model: Spearman | ratio max/min | ratio geo. std | "
        "median measured/predicted | simulator: Spearman | ratio max/min | ratio geo. std |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in result["summary"].items():
        f, sim = s["flop_model"], s.get("simulator")
        sim_cells = (f"{sim['spearman']:.2f} | {sim['ratio_max_over_min']:.2f} | "
                     f"{sim['ratio_geometric_std']:.2f}" if sim else "n/a | n/a | n/a")
        count = len(result["rows"].get(name, [])) or sum(map(len, result["rows"].values()))
        lines.append(
            f"| {name} | {count} | {f['spearman']:.2f} | {f['ratio_max_over_min']:.2f} | "
            f"{f['ratio_geometric_std']:.2f} | {f['median_ratio']:.2f} | {sim_cells} |"
        )
    lines += ["", "| task | config | GFLOP/sample | measured s/iter (CPU) | FLOP model s/iter | "
              "simulator s/iter (GPU) |", "|---|---|---|---|---|---|"]
    for name, rs in result["rows"].items():
        for r in rs:
            c = r["config"]
            keys = {"cifar10": ("num_filters", "kernel_size", "dense_width", "batch_size"),
                    "wlm": ("cell", "emsize", "nhid", "nlayers", "batch_size", "bptt", "tied"),
                    "dcgan": ("ngf", "ndf", "batch_size")}.get(name, tuple(c))
            desc = ", ".join(f"{k}={c[k]}" for k in keys if k in c)
            sim = f"{r['simulator_s']:.3g}" if r.get("simulator_s") else "n/a"
            lines.append(f"| {name} | {desc} | {r['flops_per_sample'] / 1e9:.3g} | "
                         f"{r['measured_s']:.4g} | {r['flop_model_s']:.4g} | {sim} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m experiments.calibrate``."""
    p = argparse.ArgumentParser(prog="python -m experiments.calibrate", description=__doc__)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=sorted(TASKS))
    p.add_argument("--configs", type=int, default=8, help="configs per task")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-batch", type=int, default=256,
                   help="most samples per timed step (default 256: every real batch size)")
    p.add_argument("--steps", type=int, default=2, help="timed steps per config")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    result = calibrate(args.tasks, args.configs, args.seed, args.max_batch, args.steps)
    print(json.dumps(result, default=str, indent=1) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
