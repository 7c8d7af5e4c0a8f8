"""Planning instances: a GPU count, a TrialGroup and the policy knobs, read from JSON.

The file format (``fluid plan INSTANCE.json``)::

    {"gpus": 8, "c": 4, "d": 4, "eps": 0.0, "gpu_memory": 80,
     "trials": [{"id": "t0", "runtime": 30.0, "alpha": 1.1, "beta": 1.05}, ...]}

Top level: ``gpus`` (integer >= 1) and ``trials`` (non-empty list) are required; ``c``, ``d``
(integers >= 1), ``eps`` (seconds >= 0), ``gpu_memory`` (GB > 0), ``o_th``, ``s_th`` (in
[0, 1)) and ``c_max`` (integer >= 1) are optional. ``c`` and ``d`` when absent (or ``null``) are
derived per trial from ``alpha`` and ``beta`` under the runtime model (``fluid.core.overheads``).

Per trial: ``id`` (non-empty string, unique) and ``runtime`` (``h_i1``, seconds > 0) are
required; ``alpha``, ``beta`` (>= 1, default 1), ``c``, ``d`` (integers >= 1, override the
group's) and ``memory`` (GB > 0, at most ``gpu_memory``) are optional. Unknown keys are errors.

Every error is an ``InstanceError`` whose message names the field and the allowed range.

Example:
    >>> inst = parse_instance({"gpus": 2, "trials": [{"id": "a", "runtime": 3}]})
    >>> inst.gpus, inst.trials[0].runtime, inst.config.c
    (2, 3.0, None)
    >>> parse_instance({"gpus": 2, "trials": [{"id": "a", "runtime": 3, "alpha": 0.5}]})
    Traceback (most recent call last):
    ...
    fluid.core.instance.InstanceError: trials[0].alpha must be >= 1, got 0.5
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fluid.core.config import PolicyConfig
from fluid.core.model import TrialSpec

TOP_KEYS = ("gpus", "trials", "c", "d", "eps", "gpu_memory", "o_th", "s_th", "c_max")
TRIAL_KEYS = ("id", "runtime", "alpha", "beta", "c", "d", "memory")
#: The thresholds an instance file may leave out (a group's makespan: ``PolicyConfig``'s).
_DEFAULT = PolicyConfig()


class InstanceError(ValueError):
    """A malformed instance; the message names the offending field and what is allowed.

    Attributes:
        field: the field's path, e.g. ``trials[2].alpha`` (``None`` for file-level errors).
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Instance:
    """A TrialGroup to plan on ``gpus`` GPUs with ``config``.

    Attributes:
        gpus: number of GPUs (>= 1).
        trials: the group's trials, in file order.
        config: policy parameters (``c``, ``d``, ``eps``, ``gpu_memory``, thresholds).
    """

    gpus: int
    trials: list[TrialSpec]
    config: PolicyConfig


def _show(value: Any) -> str:
    """A value as it would appear in the JSON file."""
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)


def _number(value: Any, field: str, low: float, strict: bool, unit: str = "") -> float:
    """A finite JSON number ``>= low`` (``> low`` when ``strict``)."""
    rng = f"{'>' if strict else '>='} {low:g}{unit}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InstanceError(f"{field} must be a number {rng}, got {_show(value)}", field)
    if not math.isfinite(value) or (value <= low if strict else value < low):
        raise InstanceError(f"{field} must be {rng}, got {_show(value)}", field)
    return float(value)


def _integer(value: Any, field: str, low: int) -> int:
    """A JSON integer ``>= low`` (``8.0`` counts as ``8``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InstanceError(f"{field} must be an integer >= {low}, got {_show(value)}", field)
    if value < low:
        raise InstanceError(f"{field} must be >= {low}, got {value}", field)
    return value


def _fraction(value: Any, field: str) -> float:
    """A threshold in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise InstanceError(f"{field} must be a number in [0, 1), got {_show(value)}", field)
    return float(value)


def _check_keys(obj: dict[str, Any], allowed: tuple[str, ...], required: tuple[str, str],
                where: str) -> None:
    """No key outside ``allowed`` and both ``required`` keys there (``where``: the object)."""
    prefix = f"{where}." if where else ""
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        field = f"{prefix}{unknown[0]}"
        raise InstanceError(
            f"unknown field {field!r}; allowed fields{' of ' + where if where else ''}: "
            + ", ".join(allowed),
            field,
        )
    for key in required:
        if key not in obj:
            raise InstanceError(f"{prefix}{key} is missing (required)", prefix + key)


def _parse_trial(raw: Any, i: int, gpu_memory: float | None) -> TrialSpec:
    where = f"trials[{i}]"
    if not isinstance(raw, dict):
        raise InstanceError(
            f"{where} must be an object with id and runtime, got {_show(raw)}", where
        )
    _check_keys(raw, TRIAL_KEYS, ("id", "runtime"), where)
    tid = raw["id"]
    if not isinstance(tid, str) or not tid:
        raise InstanceError(
            f"{where}.id must be a non-empty string, got {_show(tid)}", f"{where}.id"
        )
    runtime = _number(raw["runtime"], f"{where}.runtime", 0, strict=True, unit=" seconds")
    alpha = 1.0 if raw.get("alpha") is None else _number(raw["alpha"], f"{where}.alpha", 1, False)
    beta = 1.0 if raw.get("beta") is None else _number(raw["beta"], f"{where}.beta", 1, False)
    c = None if raw.get("c") is None else _integer(raw["c"], f"{where}.c", 1)
    d = None if raw.get("d") is None else _integer(raw["d"], f"{where}.d", 1)
    memory = None
    if raw.get("memory") is not None:
        memory = _number(raw["memory"], f"{where}.memory", 0, strict=True, unit=" GB")
        if gpu_memory is not None and memory > gpu_memory:
            raise InstanceError(
                f"{where}.memory must be <= gpu_memory ({gpu_memory:g} GB), got {memory:g}",
                f"{where}.memory",
            )
    return TrialSpec(tid, runtime, alpha, beta, c, d, memory)


def parse_instance(obj: Any) -> Instance:
    """Validate a decoded JSON object and build the ``Instance``; raises ``InstanceError``."""
    if not isinstance(obj, dict):
        raise InstanceError(f"an instance must be a JSON object, got {type(obj).__name__}")
    _check_keys(obj, TOP_KEYS, ("gpus", "trials"), "")
    gpus = _integer(obj["gpus"], "gpus", 1)
    c = None if obj.get("c") is None else _integer(obj["c"], "c", 1)
    d = None if obj.get("d") is None else _integer(obj["d"], "d", 1)
    eps = 0.0 if obj.get("eps") is None else _number(obj["eps"], "eps", 0, False, " seconds")
    gpu_memory = None
    if obj.get("gpu_memory") is not None:
        gpu_memory = _number(obj["gpu_memory"], "gpu_memory", 0, strict=True, unit=" GB")
    o_th = _DEFAULT.o_th if obj.get("o_th") is None else _fraction(obj["o_th"], "o_th")
    s_th = _DEFAULT.s_th if obj.get("s_th") is None else _fraction(obj["s_th"], "s_th")
    c_max = _DEFAULT.c_max if obj.get("c_max") is None else _integer(obj["c_max"], "c_max", 1)
    raw_trials = obj["trials"]
    if not isinstance(raw_trials, list) or not raw_trials:
        raise InstanceError(
            f"trials must be a non-empty list of trial objects, got {_show(raw_trials)}", "trials"
        )
    trials: list[TrialSpec] = []
    first: dict[str, int] = {}
    for i, raw in enumerate(raw_trials):
        spec = _parse_trial(raw, i, gpu_memory)
        if spec.id in first:
            raise InstanceError(
                f"trials[{i}].id {spec.id!r} duplicates trials[{first[spec.id]}].id; "
                "trial ids must be unique",
                f"trials[{i}].id",
            )
        first[spec.id] = i
        trials.append(spec)
    config = PolicyConfig(
        c=c, d=d, eps=eps, o_th=o_th, s_th=s_th, c_max=c_max, gpu_memory=gpu_memory
    )
    return Instance(gpus=gpus, trials=trials, config=config)


def load_instance(path: str | Path) -> Instance:
    """Read and validate an instance file; every problem is an ``InstanceError``.

    Messages start with the path: ``plan.json: trials[2].alpha must be >= 1, got 0.5``.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InstanceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InstanceError(f"{path}: is a directory, not an instance file") from None
    except UnicodeDecodeError:
        raise InstanceError(f"{path}: not a JSON file (not UTF-8 text)") from None
    except OSError as e:
        raise InstanceError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise InstanceError(
            f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    try:
        return parse_instance(obj)
    except InstanceError as e:
        raise InstanceError(f"{path}: {e}", e.field) from None


def figure5() -> Instance:
    """The paper's Figure 5: 5 GPUs, trials a1..a4 of 4, 4, 12, 30 s, no overheads, c=2, d=4.

    Example:
        >>> inst = figure5()
        >>> inst.gpus, [t.runtime for t in inst.trials], (inst.config.c, inst.config.d)
        (5, [4.0, 4.0, 12.0, 30.0], (2, 4))
    """
    trials = [TrialSpec(f"a{i}", h) for i, h in enumerate([4.0, 4.0, 12.0, 30.0], start=1)]
    return Instance(gpus=5, trials=trials, config=PolicyConfig(c=2, d=4, eps=0.0))
