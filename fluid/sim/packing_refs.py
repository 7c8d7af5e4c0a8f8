"""Published packing measurements against the ground truth (``fluid simulate --validate``).

A packing reference file holds points of one schema (``fluid/sim/references/packing.json``;
``--references PATH`` reads any file of it): ``k`` identical training jobs sharing one GPU,
their aggregate throughput over one job alone (``throughput_ratio``). Fields:

* ``gpu``, ``gpu_fp32_peak_tflops``: the GPU and its datasheet FP32 peak;
* ``workload``, ``flops_per_sample`` (forward + backward), ``batch``: what one job runs;
* ``k``: jobs on the GPU; ``mode_inferred``: ``time-slicing``, ``mps`` or ``other`` (other
  sharing, e.g. Salus lanes, is modelled as time-slicing: kernels of different jobs do not
  overlap);
* ``throughput_ratio``; optional ``solo_utilization`` (one job's ``nvidia-smi`` utilisation
  alone, 0..1) and ``family`` (``CNN``, ``RNN``, ``GAN``, ``other``; otherwise inferred from
  ``workload``).

The model is the truth itself (``fluid.sim.truth``): one job's step alone from its FLOPs per
step and the GPU's peak (``solo_step``), or, when ``solo_utilization`` is given, a step that
keeps a kernel running that share of the time; then ``k`` copies packed under the point's
sharing mode (``sharing.packed_steps``): ``model = k t_1 / t_k``. A point without ``k``, or
with neither ``solo_utilization`` nor ``flops_per_sample`` and ``batch``, is listed as skipped
with the reason.

Example:
    >>> pt = {"gpu": "Tesla V100", "gpu_fp32_peak_tflops": 15.7, "workload": "ResNet-18",
    ...       "flops_per_sample": 3.34e9, "batch": 16, "k": 2,
    ...       "mode_inferred": "time-slicing", "throughput_ratio": 1.435}
    >>> family(pt), 1.0 < model_ratio(pt) < 2.0
    ('CNN', True)
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fluid.sim.truth import PerfParams, solo_step, step_from_rate
from fluid.sim.truth.sharing import packed_steps

FAMILIES = ("CNN", "RNN", "GAN", "other")
MODES = {"time-slicing": "timeslice", "mps": "mps", "other": "timeslice"}
# Words that name a model family in a reference's ``workload`` (lower case).
_FAMILY_WORDS = {
    "GAN": ("gan",),
    "RNN": ("lstm", "gru", "rnn", "language model", "word lm", "deepspeech"),
    "CNN": ("resnet", "vgg", "alexnet", "mobilenet", "efficientnet", "inception", "densenet",
            "lenet", "shufflenet", "squeezenet", "googlenet", "cnn", "conv", "yolo"),
}


def family(point: Mapping[str, Any]) -> str:
    """``CNN``, ``RNN``, ``GAN`` or ``other``: the point's ``family``, else by its workload."""
    given = point.get("family")
    if given is not None:
        if given not in FAMILIES:
            raise ValueError(f"family must be one of {list(FAMILIES)}, got {given!r}")
        return str(given)
    name = str(point.get("workload", "")).lower()
    for fam in ("GAN", "RNN", "CNN"):
        if any(word in name for word in _FAMILY_WORDS[fam]):
            return fam
    return "other"


def _number(point: Mapping[str, Any], key: str, i: int, low: float, high: float | None,
            integer: bool = False) -> float | None:
    v = point.get(key)
    if v is None:
        return None
    bad = isinstance(v, bool) or not isinstance(v, int | float) or (integer and v != int(v))
    if bad or not (v >= low and (high is None or v <= high)):
        kind = "an integer" if integer else "a number"
        rng = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"point {i}: {key} must be {kind} {rng} or null, got {v!r}")
    return float(v)


def check_point(point: Mapping[str, Any], i: int = 0) -> None:
    """Raise ``ValueError`` naming the field and its allowed range if ``point`` is malformed."""
    if not isinstance(point, Mapping):
        raise ValueError(f"point {i}: must be an object, got {type(point).__name__}")
    if point.get("throughput_ratio") is None:
        raise ValueError(f"point {i}: throughput_ratio is required (a number > 0)")
    _number(point, "throughput_ratio", i, 1e-9, None)
    _number(point, "gpu_fp32_peak_tflops", i, 1e-9, None)
    _number(point, "flops_per_sample", i, 1e-9, None)
    _number(point, "batch", i, 1, None, integer=True)
    _number(point, "k", i, 1, None, integer=True)
    _number(point, "solo_utilization", i, 1e-9, 1.0)
    mode = point.get("mode_inferred", "time-slicing")
    if mode not in MODES:
        raise ValueError(f"point {i}: mode_inferred must be one of {list(MODES)}, got {mode!r}")
    family(point)


def skip_reason(point: Mapping[str, Any]) -> str | None:
    """Why the truth cannot be run on ``point`` (``None``: it can)."""
    if point.get("k") is None:
        return "k (jobs per GPU) not stated"
    if point.get("solo_utilization") is not None:
        return None
    if point.get("flops_per_sample") is None or point.get("batch") is None:
        return "neither solo_utilization nor flops_per_sample and batch"
    if point.get("gpu_fp32_peak_tflops") is None:
        return "gpu_fp32_peak_tflops missing"
    return None


def model_ratio(point: Mapping[str, Any], p: PerfParams | None = None) -> float:
    """The truth's ``k t_1 / t_k`` for ``point`` (see the module docstring)."""
    p = replace(p or PerfParams(), sharing=MODES[point.get("mode_inferred", "time-slicing")])
    flops = (point.get("flops_per_sample") or 0.0) * (point.get("batch") or 0)
    occupancy = flops / (flops + p.half_flops) if flops > 0 else 1.0
    util = point.get("solo_utilization")
    if util is not None:
        # A measured utilisation is the share of a step with a kernel running: no need to
        # model the step's length, only its busy share.
        step = step_from_rate(1.0, 1, occupancy, overhead_share=1.0 - float(util))
    else:
        step = solo_step(flops, float(point["gpu_fp32_peak_tflops"]) * 1e12, p)
    k = int(point["k"])
    return k * step.seconds / packed_steps([step] * k, p)[0]


def load_points(path: str | Path) -> list[dict[str, Any]]:
    """The points of a packing reference file (``{"points": [...]}`` or a list), checked."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"--references {path}: cannot read a JSON file ({e})") from None
    points = data.get("points") if isinstance(data, Mapping) else data
    if not isinstance(points, list) or not points:
        raise ValueError(f"--references {path}: expected a non-empty list of points "
                         "(or an object with one under 'points')")
    for i, pt in enumerate(points):
        check_point(pt, i)
    return points


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def report(points: Sequence[Mapping[str, Any]], p: PerfParams | None = None) -> dict[str, Any]:
    """Per point model against reference, the median absolute relative error, and per family
    the number of points and their median signed and absolute errors."""
    rows, skipped = [], []
    for i, pt in enumerate(points):
        check_point(pt, i)
        why = skip_reason(pt)
        label = f"{str(pt.get('workload', '?'))[:34]} | {pt.get('gpu', '?')} | b={pt.get('batch')}"
        if why:
            skipped.append({"index": i, "config": label, "reason": why})
            continue
        model, ref = model_ratio(pt, p), float(pt["throughput_ratio"])
        rows.append({"index": i, "config": label, "gpu": pt.get("gpu"), "batch": pt.get("batch"),
                     "k": int(pt["k"]), "mode": pt.get("mode_inferred", "time-slicing"),
                     "family": family(pt), "inputs": "utilization" if pt.get(
                         "solo_utilization") is not None else "flops",
                     "reference": ref, "model": model, "error": (model - ref) / ref})
    by_family = {}
    for fam in FAMILIES:
        errs = [r["error"] for r in rows if r["family"] == fam]
        if errs:
            by_family[fam] = {"points": len(errs), "median_signed_error": _median(errs),
                              "median_abs_rel_error": _median([abs(e) for e in errs])}
    return {"points": rows, "median_abs_rel_error": _median([abs(r["error"]) for r in rows]),
            "by_family": by_family, "skipped": skipped}
