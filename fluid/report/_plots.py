"""The three plots of ``fluid report`` (see the package docstring)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from fluid.report._runs import load_runs, run_labels
from fluid.report._tune import ReportError

TIME_LABEL = "wall-clock time since the run started (s)"
#: Colours of shapes: packed, one GPU, then gangs of 2, 3, ... GPUs (cycled).
PACKED_COLOR, ONE_GPU_COLOR = "#6baed6", "#31a354"
GANG_COLORS = ("#fd8d3c", "#e6550d", "#a50f15", "#756bb1", "#54278f", "#8c6d31")


@dataclass(frozen=True)
class Plot:
    """One PNG written by the report.

    Attributes:
        path: the file.
        kind: ``"best_metric"``, ``"utilization"``, ``"gpu_use"`` or ``"shapes"``.
        series: the labels of the plotted series (runs, GPUs or trials).
    """

    path: Path
    kind: str
    series: list[str] = field(default_factory=list)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ReportError(
            "fluid report needs matplotlib, an optional dependency: "
            "pip install matplotlib (or pip install '.[plot]' from a checkout of Fluid)"
        ) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower() or "run"


def _save(fig: Any, path: str | Path, kind: str, series: list[str]) -> Plot:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={
        "Title": f"fluid report: {kind}",
        "fluid:series": str(len(series)),
        "fluid:labels": json.dumps(series),
    })  # fmt: skip
    _pyplot().close(fig)
    return Plot(path, kind, series)


# --------------------------------------------------------------------------- best metric


def plot_best_metric(
    runs: Sequence[dict[str, Any]], path: str | Path, labels: Sequence[str] | None = None
) -> Plot:
    """Best metric so far against wall-clock time: one line per run, one panel per task."""
    plt = _pyplot()
    labels = list(labels or run_labels(runs))
    tasks = list(dict.fromkeys(r["task"] for r in runs))
    fig, axes = plt.subplots(1, len(tasks), figsize=(7.5 * len(tasks), 4.8), squeeze=False)
    series: list[str] = []
    for ax, task in zip(axes[0], tasks, strict=True):
        these = [(r, lab) for r, lab in zip(runs, labels, strict=True) if r["task"] == task]
        first = these[0][0]
        metric, mode, target = first["metric"], first["mode"], first.get("target")
        values: list[float] = []
        for i, (run, label) in enumerate(these):
            color = f"C{i % 10}"
            best = [(float(t), float(v)) for t, v in run.get("best_over_time") or []
                    if v is not None and math.isfinite(float(v))]
            series.append(label)
            if not best:
                ax.plot([], [], color=color, label=f"{label} (no result)")
                continue
            end = max(float(run["wall_clock"]), best[-1][0])
            xs = [t for t, _ in best] + [end]
            ys = [v for _, v in best] + [best[-1][1]]
            values += ys
            ttt = run.get("time_to_target")
            suffix = f", target at {ttt:.0f} s" if ttt is not None else ", target not reached"
            ax.step(xs, ys, where="post", color=color, linewidth=2,
                    label=f"{label}: best {ys[-1]:.4g} in {end:.0f} s{suffix}")
            ax.plot(xs[-1], ys[-1], "|", color=color, markersize=12)  # run end
            if ttt is not None:
                hit = next((v for t, v in best if t >= ttt - 1e-9), ys[-1])
                ax.plot([ttt], [hit], "o", color=color, markersize=7)
        if target is not None:
            sign = ">=" if mode == "max" else "<="
            ax.axhline(target, color="0.4", linestyle="--", linewidth=1,
                       label=f"target ({metric} {sign} {target:g})")
        positive = [v for v in values if v > 0]
        if mode == "min" and positive and max(positive) / min(positive) > 20:
            ax.set_yscale("log")
        better = "higher" if mode == "max" else "lower"
        ax.set_title(f"{task}: best {metric} so far ({better} is better)")
        ax.set_xlabel(TIME_LABEL)
        ax.set_ylabel(f"best {metric}")
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    return _save(fig, path, "best_metric", series)


# --------------------------------------------------------------------------- utilisation


def _step_average(points: Sequence[Sequence[float]], edges: np.ndarray) -> np.ndarray:
    """Time-average of a step function (``[[t, value], ...]``) over each bin of ``edges``."""
    ts = np.array([float(p[0]) for p in points])
    vs = np.array([float(p[1]) if p[1] is not None else 0.0 for p in points])
    order = np.argsort(ts, kind="stable")
    ts, vs = ts[order], vs[order]
    cum = np.concatenate([[0.0], np.cumsum(vs[:-1] * np.diff(ts))])

    def integral(t: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(ts, t, side="right") - 1, 0, len(ts) - 1)
        before = t < ts[0]
        return np.where(before, 0.0, cum[i] + vs[i] * (t - ts[i]))

    widths = np.diff(edges)
    return np.diff(integral(edges)) / np.where(widths > 0, widths, 1.0)


def _sample_average(points: Sequence[Sequence[float]], edges: np.ndarray) -> np.ndarray:
    """Mean of the samples in each bin (NaN where a bin has none)."""
    ts = np.array([float(p[0]) for p in points])
    vs = np.array([float(p[1]) for p in points])
    idx = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, len(edges) - 2)
    sums = np.bincount(idx, weights=vs, minlength=len(edges) - 1)
    counts = np.bincount(idx, minlength=len(edges) - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def plot_utilization(run: dict[str, Any], path: str | Path, label: str = "", bins: int = 240) -> Plot:
    """Heatmap of one run: a row per GPU, colour = utilisation (NVML) or allocated share."""
    plt = _pyplot()
    util = run.get("utilization") or {}
    gpus: dict[str, list] = util.get("gpus") or {}
    source = util.get("source", "allocation")
    end = max(float(run["wall_clock"]), 1e-9)
    edges = np.linspace(0.0, end, bins + 1)
    names = sorted(gpus, key=lambda g: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", g)])
    rows = []
    for g in names:
        pts = [p for p in gpus[g] if p[0] is not None]
        if not pts:
            rows.append(np.full(bins, np.nan))
        elif source == "nvml":
            rows.append(_sample_average(pts, edges))
        else:
            rows.append(_step_average(pts, edges))
    grid = np.clip(np.array(rows) if rows else np.zeros((0, bins)), 0.0, 1.0)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * max(len(names), 2)))
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.85")  # grey: no NVML sample
    image = ax.imshow(
        np.ma.masked_invalid(grid) if len(names) else np.zeros((1, bins)),
        aspect="auto", interpolation="nearest", cmap=cmap, vmin=0.0, vmax=1.0,
        extent=(0.0, end, max(len(names), 1) - 0.5, -0.5),
    )  # fmt: skip
    ax.set_yticks(range(len(names)), [f"GPU {g}" for g in names])
    ax.set_xlabel(TIME_LABEL)
    if source == "nvml":
        what, bar = "GPU utilisation (NVML)", "GPU utilisation (NVML, 0 = idle, 1 = always busy)"
    else:
        what = "GPU share allocated to trials (no NVML: from trial shapes)"
        bar = "share of the GPU allocated to trials\n(0 = idle, 1 = whole GPU)"
    mean = float(np.nanmean(grid)) if grid.size and not np.all(np.isnan(grid)) else 0.0
    head = f"{label}: " if label else ""
    ax.set_title(
        f"{head}{what}\n{run['task']}, {run.get('algorithm', '?')}, {run['executor']} executor, "
        f"{run.get('gpus', len(names))} GPUs; mean {mean:.0%}",
        fontsize=10,
    )
    fig.colorbar(image, ax=ax, pad=0.01).set_label(bar, fontsize=8)
    return _save(fig, path, "utilization", [f"GPU {g}" for g in names])


def gpu_use(run: dict[str, Any]) -> list[tuple[float, float]]:
    """``[(time, GPUs allocated to trials from then on), ...]``: the sum of trials' widths."""
    changes: dict[float, float] = {}
    for trial in run["trials"]:
        shapes = sorted(trial.get("shapes") or [], key=lambda s: float(s[0]))
        before = 0.0
        for t, width, *_ in shapes:
            now = float(width or 0.0)
            changes[float(t)] = changes.get(float(t), 0.0) + now - before
            before = now
    level, out = 0.0, [(0.0, 0.0)]
    for t in sorted(changes):
        level += changes[t]
        out.append((t, max(0.0, round(level, 9))))
    return out


def plot_gpu_use(run: dict[str, Any], path: str | Path, label: str = "") -> Plot:
    """GPUs allocated to trials over time (a step line), from each trial's shapes."""
    plt = _pyplot()
    steps = gpu_use(run)
    end = max(float(run["wall_clock"]), steps[-1][0])
    xs, ys = [t for t, _ in steps] + [end], [v for _, v in steps] + [steps[-1][1]]
    fig, ax = plt.subplots(figsize=(10, 3.6))
    ax.step(xs, ys, where="post", color=ONE_GPU_COLOR, linewidth=2)
    ax.fill_between(xs, ys, step="post", color=ONE_GPU_COLOR, alpha=0.25)
    busy = sum(v * (xs[i + 1] - xs[i]) for i, v in enumerate(ys[:-1]))
    head = f"{label}: " if label else ""
    ax.set_title(f"{head}GPUs allocated to trials (sum of their fluid_gpus)\n{run['task']}, "
                 f"{run['executor']} executor; {busy:.0f} GPU-seconds, peak {max(ys):g} GPUs",
                 fontsize=10)
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel("GPUs allocated")
    ax.set_xlim(0, end * 1.01 if end > 0 else 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    return _save(fig, path, "gpu_use", ["GPUs allocated"])


# --------------------------------------------------------------------------- shapes


def _category(width: float) -> tuple[str, str, str]:
    """``(legend label, colour, text in the bar)`` of a width."""
    if width < 1:
        frac = Fraction(width).limit_denominator(64)
        return "packed (share of one GPU)", PACKED_COLOR, f"{frac.numerator}/{frac.denominator}"
    if width == 1:
        return "1 GPU", ONE_GPU_COLOR, "1"
    w = round(width)
    return f"gang of {w} GPUs", GANG_COLORS[(w - 2) % len(GANG_COLORS)], f"\u00d7{w}"


def plot_shapes(run: dict[str, Any], path: str | Path, label: str = "") -> Plot:
    """Timeline of one run: a row per trial, bars coloured by shape, ticks at iterations."""
    plt = _pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    end = float(run["wall_clock"])
    trials = [t for t in run["trials"] if t.get("shapes")]
    trials.sort(key=lambda t: (min(float(s[0]) for s in t["shapes"]), t["id"]))
    height = min(2.0 + 0.32 * max(len(trials), 1), 60.0)
    fig, ax = plt.subplots(figsize=(11, height))
    used: dict[str, tuple[float, str]] = {}  # legend label: (a width, for the order; colour)
    for row, trial in enumerate(trials):
        shapes = sorted(trial["shapes"], key=lambda s: float(s[0]))
        for i, (t, width, *_rest) in enumerate(shapes):
            if not width:
                continue
            t_next = float(shapes[i + 1][0]) if i + 1 < len(shapes) else end
            name, color, text = _category(float(width))
            used.setdefault(name, (float(width), color))
            ax.broken_barh([(float(t), t_next - float(t))], (row - 0.38, 0.76),
                           facecolors=color, edgecolors="white", linewidth=0.5)
            if (t_next - float(t)) > end / 40:
                ax.text((float(t) + t_next) / 2, row, text, ha="center", va="center",
                        fontsize=7, color="black")
        ticks = [float(m["t"]) for m in trial.get("metrics", []) if m.get("t") is not None]
        ax.plot(ticks, [row] * len(ticks), "|", color="black", markersize=7, markeredgewidth=1)
        if trial.get("status") == "ERROR":
            ax.plot([float(shapes[-1][0])], [row], "x", color="red", markersize=8)
    ax.set_yticks(range(len(trials)),
                  [f"{t['id']} ({t.get('iterations', 0)} it)" for t in trials], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, end * 1.01 if end > 0 else 1)
    ax.set_xlabel(TIME_LABEL)
    ax.set_ylabel("trial (iterations reached)")
    head = f"{label}: " if label else ""
    since = ("bars from Fluid's release of the trial" if run["executor"] == "fluid"
             else "bars from the start of the trial's actor")
    ax.set_title(f"{head}shape of each trial over time\n{run['task']}, "
                 f"{run.get('algorithm', '?')}, {run['executor']} executor, "
                 f"{run.get('gpus', '?')} GPUs; bar text: GPU share, or \u00d7w for a gang of w "
                 f"GPUs; {since}", fontsize=10)
    handles = [Patch(facecolor=color, label=name)
               for name, (_, color) in sorted(used.items(), key=lambda item: item[1][0])]
    handles.append(Line2D([], [], marker="|", color="black", linestyle="none",
                          markersize=8, label="reported iteration"))
    if any(t.get("status") == "ERROR" for t in trials):
        handles.append(Line2D([], [], marker="x", color="red", linestyle="none",
                              label="trial failed"))
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path, "shapes", [t["id"] for t in trials])


# --------------------------------------------------------------------------- all


def write_report(
    paths: Sequence[str | Path], out_dir: str | Path, metric: str | None = None,
    mode: str | None = None,
) -> list[Plot]:
    """Write every plot for the runs in ``paths`` into ``out_dir``; return what was written.

    A Tune experiment directory (no ``run.json``) gets ``gpu_use-<run>.png`` in place of the
    per-GPU heatmap: Tune's files record each trial's width, not which GPUs it ran on.
    """
    runs = load_runs(paths, metric, mode)
    labels = run_labels(runs)
    out = Path(out_dir)
    plots = [plot_best_metric(runs, out / "best_metric.png", labels)]
    for run, label in zip(runs, labels, strict=True):
        slug = _slug(label)
        if run.get("source") == "tune":
            plots.append(plot_gpu_use(run, out / f"gpu_use-{slug}.png", label))
        else:
            plots.append(plot_utilization(run, out / f"utilization-{slug}.png", label))
        plots.append(plot_shapes(run, out / f"shapes-{slug}.png", label))
    return plots
