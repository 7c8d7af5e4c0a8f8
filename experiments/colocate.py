"""Co-located training throughput on one GPU, written as packing-reference points.

The command line of `fluid.gpu.colocate` (which ``fluid bench gpu`` runs too): ``k`` identical
training processes of a published workload (`fluid.gpu.workloads`: ``resnet18``, ``lstm``,
``dcgan``) on one GPU, time-sliced and under NVIDIA MPS, each ``(workload, k >= 2, mode)``
written as a point of the schema of ``fluid/sim/references/packing.json``;
``fluid simulate --validate --references OUT`` then scores the simulator's packing model on a
GPU, and at ``k`` per GPU, that no shipped reference covers.

Example (on a GPU node; needs torch, not Ray)::

    python -m experiments.colocate --gpu-name "NVIDIA H200" --gpu-fp32-peak-tflops 67 \\
        --out h200.json
    fluid simulate --validate --references h200.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from fluid.gpu.colocate import MODES, Plan, Settings, Source, run
from fluid.gpu.workloads import DEFAULT_BATCH, WORKLOADS


def _ints(text: str, name: str, low: int, high: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise SystemExit(
            f"colocate: {name} must be integers separated by commas, got {text!r}") from None
    if not values or any(not low <= v <= high for v in values):
        raise SystemExit(f"colocate: each of {name} must be in [{low}, {high}], got {text!r}")
    return values


def _choices(text: str, name: str, allowed: Sequence[str]) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(","))
    bad = [v for v in values if v not in allowed]
    if bad:
        raise SystemExit(f"colocate: {name} must be among {list(allowed)}, got {bad}")
    return values


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m experiments.colocate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu-name", required=True, help="the GPU's name, written into each point")
    ap.add_argument("--gpu-fp32-peak-tflops", type=float, required=True,
                    help="the GPU's datasheet FP32 peak (H100/H200 SXM: 67)")
    ap.add_argument("--out", required=True, help="reference file to write (JSON)")
    ap.add_argument("--workloads", default="resnet18,lstm,dcgan")
    ap.add_argument("--batches", default="", help="e.g. resnet18=32,lstm=20 (defaults: "
                    + ", ".join(f"{w}={b}" for w, b in DEFAULT_BATCH.items()) + ")")
    ap.add_argument("--k", default="2,3,4", help="jobs per GPU (1-8), comma-separated")
    ap.add_argument("--modes", default="time-slicing,mps")
    ap.add_argument("--seconds", type=float, default=6.0, help="timed seconds per run (> 0)")
    ap.add_argument("--warmup", type=float, default=3.0, help="untimed seconds first (>= 0)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="timed windows per launch (1-100); a point is their median")
    ap.add_argument("--device", default="cuda")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: measure, write ``--out``, print one line per run."""
    args = _parser().parse_args(argv)
    if not args.gpu_fp32_peak_tflops > 0 or not args.seconds > 0 or not args.warmup >= 0:
        raise SystemExit("colocate: --gpu-fp32-peak-tflops and --seconds must be > 0, "
                         "--warmup >= 0")
    workloads = _choices(args.workloads, "--workloads", sorted(WORKLOADS))
    batches = {w: DEFAULT_BATCH[w] for w in workloads}
    for item in filter(None, args.batches.split(",")):
        name, _, value = item.partition("=")
        batches[_choices(name, "--batches", workloads)[0]] = _ints(value, "--batches", 1, 65536)[0]
    plan = Plan(batches, _ints(args.k, "--k", 1, 8), _choices(args.modes, "--modes", MODES))
    if not 1 <= args.repeats <= 100:
        raise SystemExit(f"colocate: --repeats must be in [1, 100], got {args.repeats}")
    settings = Settings(args.device, args.warmup, args.seconds, args.repeats)
    words = sys.argv[1:] if argv is None else list(argv)
    source = Source(" ".join(["python -m experiments.colocate", *words]), args.gpu_name,
                    args.gpu_fp32_peak_tflops)
    doc = run(plan, settings, source, log=lambda line: print(line, file=sys.stderr, flush=True))
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"colocate: {len(doc['points'])} points written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
