"""``fluid bench gpu``: check Fluid on the GPU this runs on (about 7 minutes on an H100/H200).

Two parts, each with a progress line per step on stderr:

* ``packing``: ``k`` = 1..4 co-located training jobs of ResNet-18 (CIFAR-10 shapes, batch 128),
  the LSTM word LM (batch 20) and DCGAN (batch 64), time-sliced and under MPS, each launch timed
  over ``--repeats`` windows (median and spread), as points of the packing-reference schema
  (``fluid.gpu.colocate``; the command is each point's source). ``fluid simulate --validate
  --references DIR/packing.json`` scores the simulator on them.
* ``tuning``: a real Ray Tune job on this GPU, under plain Tune and under
  ``FluidExecutor()``, with the simulator's prediction for the same job from the
  measured packing (``fluid.cli.bench_gpu_tuning``).

``--smoke`` runs the same pipeline on the CPU in well under a minute (a tiny model, ``k`` up to
2, logical GPUs), so the command is known to work before a GPU is at hand; its figures mean
nothing. Without a CUDA GPU and without ``--smoke`` the command stops with an error. ``--json``
prints one JSON summary; ``--out DIR`` writes ``packing.json`` (a reference file) and
``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fluid.cli import print_result, ray_instance
from fluid.core.checks import check_number

PARTS = ("packing", "tuning")
#: Datasheet FP32 peaks (TFLOPS), matched in order against the GPU's name.
FP32_PEAK_TFLOPS = (("H100 PCIe", 51.2), ("H100", 67.0), ("H200", 67.0), ("A100", 19.5),
                    ("L40S", 91.6), ("L4", 30.3), ("A10", 31.2), ("V100", 15.7))
SMOKE_GPU = ("CPU (fluid bench gpu --smoke)", 0.1)
MPS_PROCESSES = ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server")


def register(subparsers: Any) -> None:
    """Add ``fluid bench gpu``."""
    p = subparsers.add_parser("gpu", help="check Fluid on this GPU: packing under MPS and a real "
                              "tuning run (--smoke: the same on the CPU)", description=__doc__)
    p.add_argument("--smoke", action="store_true", help="the pipeline on the CPU, tiny model")
    p.add_argument("--parts", default=",".join(PARTS),
                   help="which parts, comma-separated (packing,tuning)")
    p.add_argument("--seconds", type=float, default=1.5, help="seconds per timed window and of warm-up (> 0; --smoke: 0.2)")
    p.add_argument("--repeats", type=int, default=3, help="timed windows per launch (3-20)")
    p.add_argument("--gpu-fp32-peak-tflops", type=float, default=None,
                   help="the GPU's datasheet FP32 peak (default: known for H100, H200, A100...)")
    p.add_argument("--out", default=None, metavar="DIR", help="write packing.json, summary.json")
    p.add_argument("--json", action="store_true", help="print one JSON summary")
    p.set_defaults(func=run)


def _parts(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    if not parts or not set(parts) <= set(PARTS):
        raise ValueError(f"--parts must be among {list(PARTS)}, got {text!r}")
    return parts


def _gpu(args: argparse.Namespace) -> tuple[str, float]:
    """The GPU's name and FP32 peak, or ``SMOKE_GPU``; a clear error without a GPU."""
    import torch

    if args.smoke:
        return SMOKE_GPU
    if not torch.cuda.is_available():
        raise ValueError("fluid bench gpu needs a CUDA GPU and torch.cuda.is_available() is "
                         "False here; run it on a GPU node, or add --smoke for the CPU pipeline")
    name = torch.cuda.get_device_name(0)
    if args.gpu_fp32_peak_tflops is not None:
        if not args.gpu_fp32_peak_tflops > 0:
            raise ValueError(f"--gpu-fp32-peak-tflops must be > 0, got "
                             f"{args.gpu_fp32_peak_tflops}")
        return name, args.gpu_fp32_peak_tflops
    for key, peak in FP32_PEAK_TFLOPS:
        if key in name:
            return name, peak
    raise ValueError(f"the FP32 peak of {name!r} is not known: give --gpu-fp32-peak-tflops")


def packing(smoke: bool, gpu: tuple[str, float], seconds: float, repeats: int,
            log: Callable[[str], None]) -> dict[str, Any]:
    """The packing part: the reference document of ``fluid.gpu.colocate.run``."""
    from fluid.gpu.colocate import MODES, Plan, Settings, Source, run
    from fluid.gpu.workloads import DEFAULT_BATCH

    command = "fluid bench gpu" + (" --smoke" if smoke else "")
    if smoke:
        plan, settings = Plan({"resnet18": 2}, (1, 2), MODES), Settings("cpu", 0.05, 0.2, repeats)
    else:
        plan = Plan(dict(DEFAULT_BATCH), (1, 2, 3, 4), MODES)
        settings = Settings("cuda", seconds, seconds, repeats)
    return run(plan, settings, Source(command, *gpu), log=log)


def packing_alpha(points: list[dict[str, Any]], batch: int) -> float | None:
    """``alpha`` of a measured ResNet-18 pair (its iteration time is ``2 / ratio`` of one alone),
    under MPS where measured (as Fluid runs it), at ``batch`` where measured; ``None`` without
    such a point. A pair measured faster than two alone is noise and fits ``alpha`` 1, as the
    profiler's fit does."""
    from fluid.core import fit_alpha
    from fluid.gpu.workloads import WORKLOADS

    pairs = [p for p in points if p["workload"] == WORKLOADS["resnet18"] and p["k"] == 2]
    if not pairs:
        return None
    best = max(pairs, key=lambda p: (p["batch"] == batch, p["mode_inferred"] == "mps"))
    return fit_alpha({1: 1.0, 2: 2.0 / best["throughput_ratio"]})


#: Linux keeps a process's name (``/proc/PID/comm``) to its first 15 characters.
COMM_LEN = 15


def mps_processes_left() -> int:
    """How many MPS control daemons or servers run on this machine now (from ``/proc``, by
    their names as Linux keeps them: ``nvidia-cuda-mps`` for both)."""
    names = {name[:COMM_LEN] for name in MPS_PROCESSES}
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() in names:
                count += 1
        except OSError:
            continue  # the process ended meanwhile, or is not ours to read
    return count


def _print_table(summary: dict[str, Any]) -> None:
    print(f"fluid bench gpu on {summary['gpu']} ({summary['wall_s']:.0f} s)")
    for p in summary.get("packing", {}).get("points", []):
        lo, hi = p["throughput_ratio_spread"]
        print(f"  {p['workload'][:24]:<24} batch {p['batch']:>4} x{p['k']} "
              f"{p['mode_inferred']:<12} ratio {p['throughput_ratio']:.2f} ({lo:.2f}-{hi:.2f})")
    t = summary.get("tuning")
    if t:
        sim = t["simulated_speedup"]
        print(f"  tuning: plain {t['plain']['wall_s']:.1f} s, Fluid {t['fluid']['wall_s']:.1f} s, "
              f"speedup {t['speedup']:.2f}x (simulated "
              f"{'n/a' if sim is None else f'{sim:.2f}x'}); Fluid's resizes "
              f"{t['fluid']['restarts']}, eps {t['fluid']['eps']}")
        print(f"  packed results under MPS: {t['fluid']['packed_results_under_mps']} of "
              f"{t['fluid']['packed_results']}")
    print(f"  MPS processes left after the run: {summary['mps_processes_left']}")


def run(args: argparse.Namespace) -> int:
    """Run the parts asked for; print or write the summary."""
    parts = _parts(args.parts)
    if not args.seconds > 0:
        raise ValueError(f"--seconds must be > 0, got {args.seconds}")
    check_number("--repeats", args.repeats, 3, 20)
    gpu = _gpu(args)
    t0 = time.monotonic()

    def log(line: str) -> None:
        print(f"[{time.monotonic() - t0:5.0f} s] {line}", file=sys.stderr, flush=True)

    summary = {"gpu": gpu[0], "gpu_fp32_peak_tflops": gpu[1], "smoke": args.smoke,
               "command": " ".join(["fluid", *sys.argv[1:]])}
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    points: list[dict[str, Any]] = []
    if "packing" in parts:
        summary["packing"] = packing(args.smoke, gpu, args.seconds, args.repeats, log)
        points = summary["packing"]["points"]
        if out is not None:  # written at once: a run stopped during tuning keeps them
            (out / "packing.json").write_text(json.dumps(summary["packing"], indent=1) + "\n")
    if "tuning" in parts:
        from fluid.cli.bench_gpu_tuning import GPU_JOB, SMOKE_JOB, tuning

        job = SMOKE_JOB if args.smoke else GPU_JOB
        alpha = packing_alpha(points, job.batch)
        with ray_instance(1, 2 if args.smoke else max(2, os.cpu_count() or 2)):
            summary["tuning"] = tuning(job, alpha, log)
    summary["mps_processes_left"] = mps_processes_left()
    summary["wall_s"] = time.monotonic() - t0
    if out is not None:
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        log(f"wrote {out}/summary.json")
    return print_result(args, summary, lambda: _print_table(summary))

