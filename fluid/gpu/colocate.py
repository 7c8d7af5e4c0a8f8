"""Co-located training throughput on one GPU, as packing-reference points.

Runs ``k`` identical training processes of a published workload (`fluid.gpu.workloads`) on
one GPU, time-sliced (separate CUDA contexts) and under NVIDIA MPS (`fluid.gpu.mps.MPSDaemon`,
no Ray needed), and returns every ``(workload, k >= 2, mode)`` as a point of the schema of
``fluid/sim/references/packing.json``: ``fluid simulate --validate --references FILE`` then
scores the simulator's packing model on that GPU. The ratio's denominator is one job alone
without MPS (how it runs without Fluid). Each launch of ``k`` processes warms up once, then
times ``Settings.repeats`` windows, the processes starting each window together: a point's
``throughput_ratio`` is the median over the windows, ``throughput_ratio_spread`` their least
and greatest. ``flops_per_sample`` (forward + backward) comes from the shipped references of
the same workload. ``solo_utilization`` is left null on purpose: NVML's busy share of one job
alone is kept as ``nvml_solo_utilization`` (informational; renamed ``solo_utilization`` it
would make the validator score the sharing model alone instead of the step-length model).

Used by ``python -m experiments.colocate`` and ``fluid bench gpu``.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fluid.gpu.mps_daemon import CONTROL_BINARY, MPSDaemon
from fluid.gpu.nvml import GPUSampler
from fluid.gpu.workloads import WORKLOADS, training_step

MODES = ("time-slicing", "mps")
_REFERENCES = Path(__file__).resolve().parent.parent / "sim" / "references"


@dataclass(frozen=True)
class Settings:
    """What one measurement runs: ``repeats`` windows of ``seconds`` each, timed after
    ``warmup_s`` on ``device``."""

    device: str
    warmup_s: float
    seconds: float
    repeats: int = 1

    def __post_init__(self) -> None:
        if not self.seconds > 0 or not self.warmup_s >= 0:
            raise ValueError(f"Settings: seconds must be > 0 and warmup_s >= 0, got "
                             f"{self.seconds} and {self.warmup_s}")
        if not 1 <= self.repeats <= 100:
            raise ValueError(f"Settings: repeats must be in [1, 100], got {self.repeats}")


def _worker(workload: str, batch: int, settings: Settings, barrier: Any, results: Any) -> None:
    try:
        if settings.device == "cpu":
            torch.set_num_threads(1)
        step = training_step(workload, batch, settings.device)
        end = time.perf_counter() + settings.warmup_s
        while time.perf_counter() < end:
            step()
        rates = []
        for _ in range(settings.repeats):
            barrier.wait(timeout=600)
            start, n = time.perf_counter(), 0
            while time.perf_counter() - start < settings.seconds:
                step()
                n += 1
            rates.append(n * batch / (time.perf_counter() - start))
        results.put(("ok", rates))
    except BaseException as e:  # noqa: BLE001 -- reported to the parent, which raises it
        barrier.abort()
        results.put(("error", f"{type(e).__name__}: {e}"))


def measure(workload: str, batch: int, k: int, settings: Settings,
            env: dict[str, str] | None = None) -> list[list[float]]:
    """Samples per second of each of ``k`` processes training ``workload`` together, in each
    timed window: ``rates[process][window]``.

    ``env`` is added to the processes' environment (the MPS client variables)."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(k), ctx.Queue()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        procs = [ctx.Process(target=_worker, args=(workload, batch, settings, barrier, results))
                 for _ in range(k)]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    timeout = settings.warmup_s + settings.seconds * settings.repeats + 300
    try:
        out = [results.get(timeout=timeout) for _ in procs]
    except Exception as e:  # noqa: BLE001 -- queue.Empty: a process died without a word
        raise RuntimeError(f"{workload} x{k}: a process gave no result ({e!r})") from e
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    errors = [msg for status, msg in out if status == "error"]
    if errors:
        raise RuntimeError(f"{workload} x{k}: {errors[0]}")
    return [[float(v) for v in rates] for _, rates in out]


def flops_per_sample(workload: str) -> float:
    """Forward + backward FLOPs per sample of ``workload``, from the shipped references."""
    points = json.loads((_REFERENCES / "packing.json").read_text())["points"]
    for pt in points:
        if pt["workload"] == WORKLOADS[workload] and pt.get("flops_per_sample"):
            return float(pt["flops_per_sample"])
    raise LookupError(f"no shipped reference states flops_per_sample for {WORKLOADS[workload]!r}")


def _alone(workload: str, batch: int, settings: Settings) -> dict[str, Any]:
    """One job alone, without MPS (median over the windows), and NVML's utilisation over
    its timed windows."""
    sampler = GPUSampler(interval_s=0.2, node="colocate")
    sampler.start()
    start = time.time()
    rates = measure(workload, batch, 1, settings)[0]
    end = time.time()
    sampler.stop()
    index = int(settings.device.split(":")[1]) if ":" in settings.device else 0
    timed = settings.seconds * settings.repeats
    util = [r.util_percent for r in sampler.records()
            if r.gpu_index == index and max(start, end - timed) <= r.time <= end - 0.2]
    return {"samples_per_s": statistics.median(rates), "windows": rates,
            "nvml_utilization": statistics.fmean(util) / 100 if util else None}


@contextlib.contextmanager
def sharing(mode: str) -> Iterator[tuple[dict[str, str] | None, str | None]]:
    """While the block runs: the environment the jobs of ``mode`` need (an MPS daemon runs
    for ``mps``), or ``None`` and why there is no such sharing here."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if mode != "mps":
        yield {}, None
        return
    with tempfile.TemporaryDirectory(prefix="mps-", dir="/tmp") as directory:
        daemon = MPSDaemon("local", directory, CONTROL_BINARY, True, False)
        status = daemon.start()
        try:
            if status["running"]:
                yield daemon.client_env(1.0), None
            else:
                yield None, str(status["reason"])
        finally:
            daemon.stop()


@dataclass(frozen=True)
class Plan:
    """What `run` measures: workloads with their batch, jobs per GPU, sharing modes."""

    batches: dict[str, int]
    ks: tuple[int, ...]
    modes: tuple[str, ...]


@dataclass(frozen=True)
class Source:
    """Where the points come from: the command that measured them, and the GPU (its name as
    written into each point, and its datasheet FP32 peak in TFLOPS)."""

    command: str
    gpu: str
    fp32_peak_tflops: float


def _point(source: Source, workload: str, batch: int, k: int, mode: str, ratios: list[float],
           alone: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": f"{source.command} on {source.gpu} (torch {torch.__version__}, "
                  f"{time.strftime('%Y-%m-%d')}): k processes, synthetic data, FP32",
        "gpu": source.gpu, "gpu_fp32_peak_tflops": source.fp32_peak_tflops,
        "workload": WORKLOADS[workload], "flops_per_sample": flops_per_sample(workload),
        "batch": batch, "k": k, "mode_inferred": mode,
        "throughput_ratio": round(statistics.median(ratios), 4),
        "throughput_ratio_spread": [round(min(ratios), 4), round(max(ratios), 4)],
        "repeats": len(ratios), "solo_utilization": None,
        "nvml_solo_utilization": alone["nvml_utilization"],
    }


def _measure_mode(plan: Plan, mode: str, env: dict[str, str], settings: Settings,
                  alone: dict[str, dict[str, Any]], log: Callable[[str], None]
                  ) -> list[dict[str, Any]]:
    """Every (workload, k) of ``plan`` under ``mode``: what each window measured."""
    measured = []
    for w, b in plan.batches.items():
        for k in plan.ks:
            if k == 1 and mode == "time-slicing":
                continue  # that is the denominator, measured alone
            rates = measure(w, b, k, settings, env)
            ratios = [sum(r[i] for r in rates) / alone[w]["samples_per_s"]
                      for i in range(settings.repeats)]
            measured.append({"workload": w, "batch": b, "k": k, "mode": mode,
                             "samples_per_s": rates, "ratios": ratios})
            log(f"colocate: {w} batch {b} x{k} {mode}: ratio {statistics.median(ratios):.3f} "
                f"({min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} windows)")
    return measured


def run(plan: Plan, settings: Settings, source: Source,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure ``plan`` as ``source`` says; return the reference document (``points``, and
    in ``context`` every measurement and the modes skipped, with why)."""
    alone = {w: _alone(w, b, settings) for w, b in plan.batches.items()}
    for w, a in alone.items():
        log(f"colocate: {w} batch {plan.batches[w]} alone: {a['samples_per_s']:.0f} samples/s")
    measured: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for mode in plan.modes:
        with sharing(mode) as (env, why_not):
            if env is None:
                log(f"colocate: no MPS ({why_not}); its points are skipped")
                skipped.append({"mode": mode, "reason": str(why_not)})
                continue
            measured += _measure_mode(plan, mode, env, settings, alone, log)
    points = [_point(source, m["workload"], m["batch"], m["k"], m["mode"], m["ratios"],
                     alone[m["workload"]]) for m in measured if m["k"] >= 2]
    return {
        "description": "Aggregate throughput of k co-located training processes over one alone "
                       "(no MPS), measured by fluid.gpu.colocate; median over the timed windows. "
                       "nvml_solo_utilization is informational: renamed solo_utilization, the "
                       "validator scores the sharing model alone instead of the step-length model.",
        "context": {"command": source.command, "torch": torch.__version__,
                    "device": settings.device, "seconds": settings.seconds,
                    "warmup_s": settings.warmup_s, "repeats": settings.repeats,
                    "alone": alone, "measured": measured, "skipped": skipped},
        "points": points,
    }
