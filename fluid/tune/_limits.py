"""What the user's Tune set-up already limits or decides, and how FluidExecutor takes it.

* ``max_concurrent_trials`` (Tune gives it to the search algorithm: ``BasicVariantGenerator``
  makes no trial while that many are unfinished, a ``ConcurrencyLimiter`` suggests none) caps
  the trials Fluid holds or runs at once, below its own bound for model-based searchers
  (``max_outstanding``). Fluid plans within it and says so once (``announce_cap``).
* A ``ResourceChangingScheduler`` resizes trials itself (``trial.update_resources``), as
  Fluid does: as the base scheduler it is refused (``check_base``).
"""

from __future__ import annotations

import logging
from typing import Any

from ray.tune.schedulers import ResourceChangingScheduler
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter

from fluid.tune._options import FluidConfigError

logger = logging.getLogger("fluid")


def check_base(base: Any) -> None:
    """Refuse a base scheduler that resizes trials too."""
    if isinstance(base, ResourceChangingScheduler):
        raise FluidConfigError(
            "base_scheduler cannot be a ResourceChangingScheduler: it resizes trials "
            "(update_resources) and so does FluidExecutor; give FluidExecutor the scheduler "
            "it wraps instead: FluidExecutor(base_scheduler=<that scheduler>)")


def concurrency_cap(search_alg: Any) -> int | None:
    """Most trials the search algorithm lets be unfinished at once (``None``: no cap).

    ``max_concurrent_trials`` sets ``BasicVariantGenerator.max_concurrent`` (0: none), or wraps
    a searcher in a ``ConcurrencyLimiter``; a user may also wrap one themselves, at any depth.
    """
    if isinstance(search_alg, BasicVariantGenerator):
        return search_alg.max_concurrent or None
    caps = []
    searcher = getattr(search_alg, "searcher", None)
    for _ in range(8):  # wrappers of wrappers (Fluid's own OutstandingLimit among them)
        if searcher is None:
            break
        if isinstance(searcher, ConcurrencyLimiter):
            caps.append(searcher.max_concurrent)
        searcher = getattr(searcher, "searcher", None) or getattr(searcher, "_searcher", None)
    return min(caps) if caps else None


def announce_cap(search_alg: Any, gpus: float) -> int | None:
    """Say once that the search algorithm caps the trials in flight (returns the cap)."""
    cap = concurrency_cap(search_alg)
    if cap is not None:
        logger.info("Fluid: max_concurrent_trials / ConcurrencyLimiter caps the trials held or "
                    "running at once at %d; Fluid plans those on the %g GPUs", cap, gpus)
    return cap
