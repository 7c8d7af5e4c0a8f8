"""Each iteration once in a trial's result files, across crash restarts and driver restores.

Why rows can repeat in plain Tune: a function trainable reports a result and its checkpoint in
two steps. The driver's loggers write the result row first (``result.json``,
``progress.csv``); the checkpoint becomes the trial's only when the separate ``save`` call on
the trial's actor returns (Ray 2.60, ``FunctionTrainable.step``: "result/checkpoint reporting
is separate"). A trial process that dies between the two, or a driver killed after an
experiment snapshot taken between them, restarts the trial from the checkpoint before: it runs
and reports that iteration again, and Tune's loggers, which restore the result files from
storage on every restart, append it to a file that already holds it.

``RestartTrim`` is a Tune callback that runs after the loggers when a trial starts: it drops
from both copies of the result files (the driver's and the one in storage, which Tune restores
from later) every row of an iteration after the one the trial restarts from (its own
checkpoint's; all rows when it restarts from scratch; none when it restarts from another
trial's checkpoint, as after PBT's exploit). The re-run then reports those iterations once.
Rows Tune cannot parse (a line torn by a killed driver) are kept. TensorBoard event files are
not trimmed.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from typing import Any

from ray.tune.callback import Callback

from fluid.tune import _ray_compat as compat
from fluid.tune._result_files import (
    PROGRESS_CSV,
    RESULT_JSON,
    restart_iteration,
    result_file_copies,
)

logger = logging.getLogger("fluid")

#: The result entry that numbers a trial's iterations.
ITERATION = "training_iteration"


def _iteration(value: Any) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def trim_result_json(text: str, last: int) -> str | None:
    """``result.json`` (one JSON object a line) without rows of iterations after ``last``.

    Returns ``None`` when no row is dropped (the file is left as it is).
    """
    kept, dropped = [], False
    for line in text.splitlines(keepends=True):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        it = _iteration(row.get(ITERATION)) if isinstance(row, dict) else None
        if it is not None and it > last:
            dropped = True
        else:
            kept.append(line)
    return "".join(kept) if dropped else None


def trim_progress_csv(text: str, last: int) -> str | None:
    """``progress.csv`` (a header, then a row a result) without rows after ``last``.

    Returns ``None`` when no row is dropped or the file has no ``training_iteration`` column.
    """
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or ITERATION not in rows[0]:
        return None
    col = rows[0].index(ITERATION)
    kept = [rows[0]] + [
        r for r in rows[1:]
        if len(r) <= col or (it := _iteration(r[col])) is None or it <= last
    ]
    if len(kept) == len(rows):
        return None
    out = io.StringIO(newline="")
    csv.writer(out).writerows(kept)  # Tune's CSV logger writes with the same default dialect
    return out.getvalue()


TRIMMERS = {RESULT_JSON: trim_result_json, PROGRESS_CSV: trim_progress_csv}


def _read(path: str, fs: Any) -> str:
    try:
        if fs is None:
            with open(path, newline="") as f:
                return f.read()
        with fs.open_input_stream(path) as f:
            return f.read().decode()
    except FileNotFoundError:
        return ""


def last_iteration_stored(trial: Any) -> int:
    """The last iteration in either copy of the trial's ``result.json`` (0: none)."""
    last = 0
    for name, path, fs in result_file_copies(trial):
        if name != RESULT_JSON:
            continue
        for line in _read(path, fs).splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            it = _iteration(row.get(ITERATION)) if isinstance(row, dict) else None
            last = max(last, it or 0)
    return last


def _write(path: str, fs: Any, text: str) -> None:
    if fs is None:  # in place: Tune's loggers keep appending to their open handle
        with open(path, "w", newline="") as f:
            f.write(text)
    else:
        with fs.open_output_stream(path) as f:
            f.write(text.encode())


def _trimmed(name: str, path: str, fs: Any, last: int) -> str | None:
    text = _read(path, fs)
    return TRIMMERS[name](text, last) if text else None


class RestartTrim(Callback):
    """When a trial starts, drop result rows of iterations it is about to run again.

    Installed after Tune's loggers, so the driver's copy has already been restored from
    storage; both copies are rewritten.
    """

    def __init__(self, controller: Any) -> None:
        self._controller = controller
        #: ``(trial id, iteration restarted from, files trimmed)`` for each trim, oldest first.
        self.trims: list[tuple[str, int, tuple[str, ...]]] = []

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        last = restart_iteration(trial)
        if last is None:  # another trial's checkpoint (PBT): its own rows stay
            return
        copies = result_file_copies(trial)
        if all(_trimmed(*copy, last) is None for copy in copies):
            return
        # A sync still uploading the driver's copy must not put the dropped rows back.
        compat.wait_for_storage_sync(self._controller)
        names = set()
        for name, path, fs in copies:
            new = _trimmed(name, path, fs, last)
            if new is not None:
                _write(path, fs, new)
                names.add(name)
        self.trims.append((trial.trial_id, last, tuple(sorted(names))))
        logger.info("Fluid: trial %s restarts after iteration %d; dropped the later rows "
                    "of its %s", trial, last, " and ".join(sorted(names)))


def install_restart_trim(controller: Any) -> RestartTrim | None:
    """Append a ``RestartTrim`` after the experiment's loggers (``None``: no callback list)."""
    callbacks = compat.callback_list(controller)
    if callbacks is None:
        return None
    trim = RestartTrim(controller)
    callbacks.append(trim)
    return trim
