"""Fluid's overhead on the driver: the wall-clock time of each of FluidExecutor's hooks, summed
in the executor's ``hook_seconds``."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

_Hook = TypeVar("_Hook", bound=Callable[..., Any])


def timed(hook: _Hook) -> _Hook:
    """Count the hook's wall-clock time in its executor's ``hook_seconds``."""

    @functools.wraps(hook)
    def counted(executor: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return hook(executor, *args)
        finally:
            executor.hook_seconds += time.perf_counter() - t0

    return counted  # type: ignore[return-value]
