"""One way to check a number and say what was wrong: the parameter, the allowed range, the value.

Every option of the policy (and of the layers above, which call these) is checked here, so a
bad value fails where it is given, with a one-line message, instead of deep inside a plan
(``alpha = inf`` once divided by zero in ``c_from_alpha``).

Example:
    >>> check_number("alpha", 1.2, low=1)
    1.2
    >>> check_number("alpha", float("inf"), low=1)
    Traceback (most recent call last):
    ...
    ValueError: alpha must be a finite number >= 1, got inf
    >>> check_number("alpha", 0.5, low=1)
    Traceback (most recent call last):
    ...
    ValueError: alpha must be >= 1, got 0.5
    >>> check_number("c", 2.5, low=1, integer=True)
    Traceback (most recent call last):
    ...
    ValueError: c must be an integer >= 1, got 2.5
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def allowed(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    kind: str = "",
    unit: str = "",
) -> str:
    """The allowed range in words: ``">= 1"``, ``"a finite number in [0, 1)"``, ``"> 0 GB"``.

    ``kind`` (``"a number"``, ``"an integer"``, ...) goes first when the value was of the
    wrong kind; a value of the right kind but out of range gets the range alone.
    """
    if low is not None and high is not None:
        text = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    elif low is not None:
        text = f"{'>' if low_open else '>='} {low:g}"
    elif high is not None:
        text = f"{'<' if high_open else '<='} {high:g}"
    else:
        text = ""
    text = " ".join(x for x in (kind, text, unit) if x)
    return text or "a number"


def check_number(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
    optional: bool = False,
    unit: str = "",
) -> Any:
    """Return ``value`` if it is a finite number in range, else raise ``ValueError``.

    The message is one line: ``"<name> must be <range>, got <value>"``, with the kind of
    value first where that was wrong (``"an integer >= 1"``, ``"a finite number >= 1"``).

    Args:
        name: the parameter, as the user wrote it (the message starts with it).
        value: what was given.
        low, high: the bounds (``None``: unbounded); inclusive unless ``low_open`` /
            ``high_open``.
        integer: only whole numbers (``3`` or ``3.0``, not ``2.5`` or ``True``).
        optional: ``None`` is allowed.
        unit: appended to the range in the message (``"seconds"``, ``"GB"``).
    """
    if value is None and optional:
        return value
    kind = ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = "an integer" if integer else "a finite number"
    elif not math.isfinite(value):
        kind = "a finite integer" if integer else "a finite number"
    elif integer and not float(value).is_integer():
        kind = "an integer"
    elif (low is not None and not (value > low if low_open else value >= low)) or (
        high is not None and not (value < high if high_open else value <= high)
    ):
        kind = "an integer" if integer and isinstance(value, float) else ""
    else:
        return value
    words = allowed(low, high, low_open=low_open, high_open=high_open, kind=kind, unit=unit)
    if optional and kind:
        words = f"None or {words}"
    raise ValueError(f"{name} must be {words}, got {value!r}")
