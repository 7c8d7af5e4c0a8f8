"""A run record (the format of ``run.json``) read from a Ray Tune experiment directory.

``fluid report`` plots runs of ``python -m experiments.run``, which write ``run.json``; any
other Tune experiment run under ``FluidExecutor`` has only Tune's own files. Read here:

* each trial's ``result.json`` (one row per iteration): the metric, ``training_iteration``,
  ``fluid_gpus`` (the width the iteration ran at, written by FluidExecutor), the iteration's
  time (``time_this_iter_s``, ``time_since_restore``, ``timestamp``);
* ``experiment_state-*.json``: the experiment's start time, each trial's status and start
  time, Tune's metric;
* ``tuner.pkl`` (``Tuner`` runs): the ``TuneConfig``'s ``metric`` and ``mode``, read by walking
  the pickle's opcodes (nothing is unpickled, no Ray import);
* ``fluid_state.json`` if present: Fluid's resize count per trial.

Times: Tune writes ``timestamp`` in whole seconds; within one run of a trial's actor (between
restores) results are ``time_since_restore`` apart, so the actor's start is pinned to the
interval every row of that run agrees on, and each row's time follows from it.
"""

from __future__ import annotations

import json
import math
import pickletools
from pathlib import Path
from typing import Any

RESULT_FILE = "result.json"
STATE_GLOB = "experiment_state-*.json"
FLUID_STATE = "fluid_state.json"


class ReportError(ValueError):
    """A run directory or record cannot be plotted; the message says why."""


def is_tune_experiment(path: str | Path) -> bool:
    """A directory with Tune's experiment state or trial directories holding ``result.json``."""
    p = Path(path)
    return p.is_dir() and (any(p.glob(STATE_GLOB)) or any(p.glob(f"*/{RESULT_FILE}")))


def _pickle_settings(path: Path) -> dict[str, Any]:
    """``metric``, ``mode`` and the scheduler's class of a ``tuner.pkl``'s TuneConfig.

    Read from the pickle's opcodes (its strings in order), nothing is unpickled.
    """
    try:
        strings = [arg for _, arg, _ in pickletools.genops(path.read_bytes())
                   if isinstance(arg, str)]
    except (OSError, ValueError):
        return {}
    if "TuneConfig" not in strings:
        return {}
    at = strings.index("TuneConfig")
    out: dict[str, Any] = {}
    for key in ("metric", "mode"):
        if key in strings[at:at + 8]:
            i = strings.index(key, at)
            value = strings[i + 1] if i + 1 < len(strings) else None
            if value not in ("metric", "mode", "search_alg", "scheduler", None):
                out[key] = value
    if "scheduler" in strings[at:]:
        i = strings.index("scheduler", at)
        cls = strings[i + 2] if i + 2 < len(strings) else None
        if cls == "FluidExecutor" and "base" in strings[i:]:
            j = strings.index("base", i)
            cls = f"FluidExecutor({strings[j + 2]})" if j + 2 < len(strings) else cls
        out["scheduler"] = cls
    return out


def _experiment_state(path: Path) -> dict[str, Any]:
    files = sorted(path.glob(STATE_GLOB))
    if not files:
        return {}
    try:
        return json.loads(files[-1].read_text())
    except (OSError, ValueError) as e:
        raise ReportError(f"{files[-1]}: not valid JSON ({e})") from None


def _trial_states(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{trial directory name: {"status", "start_time", "trial_id"}}`` from Tune's state."""
    out: dict[str, dict[str, Any]] = {}
    for entry in state.get("trial_data") or []:
        try:
            meta = json.loads(entry[0])
            run = json.loads(entry[1]) if len(entry) > 1 else {}
        except (TypeError, ValueError, IndexError):
            continue
        name = meta.get("relative_logdir")
        if name:
            out[name] = {"status": meta.get("status"), "trial_id": meta.get("trial_id"),
                         "start_time": _float(run.get("start_time"))}
    return out


def _float(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _rows(file: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(file.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise ReportError(f"{file}:{n}: not a JSON result row ({e})") from None
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _segments(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows split where the trial's actor restarted (``iterations_since_restore`` reset)."""
    out: list[list[dict[str, Any]]] = []
    last = math.inf
    for row in rows:
        since = row.get("iterations_since_restore", row.get("training_iteration"))
        if not out or since is None or since <= last:
            out.append([])
        out[-1].append(row)
        last = since if since is not None else math.inf
    return out


def _row_times(segment: list[dict[str, Any]]) -> list[float] | None:
    """Wall-clock (epoch) time of each row: start of the actor's run + ``time_since_restore``.

    ``timestamp`` is whole seconds (``int(time.time())``), so a row at ``since`` seconds after
    the start ``S`` satisfies ``timestamp <= S + since < timestamp + 1``; ``S`` is the middle
    of the interval all rows agree on.
    """
    lo, hi = -math.inf, math.inf
    for row in segment:
        ts, since = _float(row.get("timestamp")), _float(row.get("time_since_restore"))
        if ts is None or since is None:
            return None
        lo, hi = max(lo, ts - since), min(hi, ts + 1 - since)
    start = (lo + hi) / 2 if lo <= hi else lo
    return [start + float(row["time_since_restore"]) for row in segment]


def _fluid_trials(root: Path) -> dict[str, Any]:
    """FluidExecutor's saved measurements by trial id (``fluid_state.json``; none: ``{}``)."""
    try:
        return json.loads((root / FLUID_STATE).read_text()).get("trials", {})
    except (OSError, ValueError, AttributeError):
        return {}


def _timeline(file: Path, rows: list[dict[str, Any]], metric: str,
              ) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """A trial's metric at each result and its shapes (``fluid_gpus``; none under plain Tune),
    from its result rows, restart by restart."""
    metrics: list[dict[str, Any]] = []
    shapes: list[list[Any]] = []
    for segment in _segments(rows):
        times = _row_times(segment)
        if times is None:
            raise ReportError(f"{file}: result rows without timestamp/time_since_restore; "
                              "is it a Ray Tune result file?")
        start = times[0] - float(segment[0].get("time_this_iter_s") or 0.0)
        for row, t in zip(segment, times, strict=True):
            width = _float(row.get("fluid_gpus"))
            if width is not None and (not shapes or shapes[-1][1] != width):
                shapes.append([start if row is segment[0] else t - float(
                    row.get("time_this_iter_s") or 0.0), width, []])
            metrics.append({"t": t, "training_iteration": row.get("training_iteration"),
                            metric: _float(row.get(metric))})
        if shapes and shapes[-1][1] is not None:
            shapes.append([times[-1], None, []])
    return metrics, shapes


def load_tune_experiment(
    path: str | Path, metric: str | None = None, mode: str | None = None
) -> dict[str, Any]:
    """A run record (see ``experiments.record``) of a Tune experiment directory.

    Args:
        path: the experiment directory (``storage_path/name``).
        metric, mode: the objective; default: the experiment's (``tuner.pkl``, Tune's state).

    Raises:
        ReportError: no trial results, or no metric/mode given or recorded, or a bad file.
    """
    root = Path(path)
    state = _experiment_state(root)
    saved = _pickle_settings(root / "tuner.pkl")
    runner = state.get("runner_data") or {}
    metric = metric or saved.get("metric") or runner.get("_metric")
    mode = mode or saved.get("mode")
    if not metric or mode not in ("max", "min"):
        raise ReportError(
            f"{path}: the experiment records no {'metric' if not metric else 'mode'}; "
            "give --metric NAME and --mode max|min")
    trials, points = _trials(root, state, metric)
    if not trials:
        raise ReportError(f"{path}: no trial results (*/{RESULT_FILE}); is it a Ray Tune "
                          "experiment directory?")
    t0 = _float((state.get("stats") or {}).get("start_time"))
    if t0 is None:
        t0 = min(m["t"] for t in trials for m in t["metrics"])
    for trial in trials:
        for m in trial["metrics"]:
            m["t"] -= t0
        for s in trial["shapes"]:
            s[0] = max(0.0, s[0] - t0)
    best, best_over_time = None, []
    for t, v in sorted(points):
        if best is None or (v > best if mode == "max" else v < best):
            best = v
            best_over_time.append([t - t0, v])
    fluid = any(t["shapes"] for t in trials)
    return {
        "task": root.name, "algorithm": saved.get("scheduler") or "?",
        "executor": "fluid" if fluid else "tune", "metric": metric, "mode": mode,
        "target": None, "wall_clock": max(m["t"] for t in trials for m in t["metrics"]),
        "best_metric": best, "time_to_target": None, "best_over_time": best_over_time,
        "trials": trials, "source": "tune",
    }


def _trials(root: Path, state: dict[str, Any], metric: str) -> tuple[list[dict], list[tuple]]:
    """Each trial's record (its metrics and shapes over time, from its result file) and every
    ``(time, value)`` of ``metric``; times as the files have them."""
    trial_states = _trial_states(state)
    fluid_state = _fluid_trials(root)
    trials, points = [], []
    for file in sorted(root.glob(f"*/{RESULT_FILE}")):
        rows = _rows(file)
        if not rows:
            continue
        info = trial_states.get(file.parent.name, {})
        metrics, shapes = _timeline(file, rows, metric)
        points += [(m["t"], m[metric]) for m in metrics if m[metric] is not None]
        tid = str(rows[-1].get("trial_id") or info.get("trial_id") or file.parent.name)
        trials.append({
            "id": tid, "config": rows[-1].get("config", {}),
            "iterations": max(int(r.get("training_iteration") or 0) for r in rows),
            "status": info.get("status") or ("TERMINATED" if rows[-1].get("done") else "?"),
            "resizes": (fluid_state.get(tid) or {}).get("resizes"),
            "metrics": metrics, "shapes": shapes,
        })
    return trials, points
