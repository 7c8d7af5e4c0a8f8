"""What the transcriptions of Ray Tune's own test files share: each case runs as Ray wrote it
(``under="tune"``: its scheduler, or none) and with only the scheduler wrapped
(``under="fluid"``: ``FluidExecutor(<its scheduler>)``, ``FluidExecutor()`` where it has none),
on one local Ray per module started with the resources of Ray's own fixture."""

from __future__ import annotations

from typing import Any

import pytest
import ray
from ray import tune
from ray.tune.schedulers import TrialScheduler

from fluid import FluidExecutor

UNDER = ("tune", "fluid")
#: ``UNDER`` with the plain-Tune run in ``make test-slow``: that run checks the transcription
#: against Ray, the Fluid run checks Fluid.
UNDER_TUNE_SLOW = (pytest.param("tune", marks=pytest.mark.slow), "fluid")


def local_ray(**resources: Any):
    """A module-scoped, autouse fixture: one local Ray with ``resources`` (``num_cpus=...``)."""

    @pytest.fixture(scope="module", autouse=True)
    def _local_ray():
        ray.init(address="local", include_dashboard=False, log_to_driver=False, **resources)
        yield
        ray.shutdown()

    return _local_ray


def scheduler(under: str, base: TrialScheduler | None = None) -> TrialScheduler | None:
    """The case's scheduler as Ray wrote it, or wrapped in Fluid."""
    if under == "tune":
        return base
    return FluidExecutor(base) if base is not None else FluidExecutor()


def run(under: str, trainable: Any, tmp_path: Any, base: TrialScheduler | None = None,
        **kwargs: Any) -> tune.ExperimentAnalysis:
    """``tune.run`` with the case's scheduler (wrapped under Fluid), storage in ``tmp_path``."""
    return tune.run(trainable, scheduler=scheduler(under, base), storage_path=str(tmp_path),
                    verbose=0, **kwargs)


class LargeData:
    """Half a million zeros: an object too large to send inside a trainable's closure."""

    def __init__(self) -> None:
        self.data = [0] * 500_000
