"""What the experiment's GPU nodes provide: an MPS daemon each, their GPU memory, and trial
processes that are MPS clients from their start and measure their own peak GPU memory.

``FluidExecutor(mps="auto")`` (the default) runs an ``MPSManager``: a daemon on every GPU node
where ``nvidia-cuda-mps-control`` is on PATH and NVML sees GPUs (no MIG), nodes that join
later included (``follow``), left when the experiment ends (the last experiment using one
stops it).

Each packed trial's actor starts with its node's MPS settings in its environment
(``trial_env``, given through the controller: ``_ray_compat.trial_actor_env``), so the user's
module is a client even if it touches CUDA at import; a trial holding a whole GPU gets none.
Where a node runs a daemon or NVML sees its GPUs, each trial that asks for GPUs gets its
trainable wrapped, once per trainable name (``measured``): each result says whether the
process is a client of a live daemon (``fluid_mps``; where not, why: ``fluid_mps_reason``),
checked in the process itself, and carries its peak GPU memory (``fluid_peak_gpu_memory``,
bytes) unless the trainable reports it (``fluid.train`` does). Elsewhere (no GPU machine)
nothing is wrapped: trials run as under plain Tune.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from ray.tune import Trainable, register_trainable

from fluid.gpu import mps, nvml
from fluid.tune._records import TrialRecord

logger = logging.getLogger("fluid")

#: Set on a trainable class that Fluid wrapped (so it is wrapped once).
MEASURED = "fluid_measured"
#: The result key saying whether the trial's process is a client of a live MPS daemon.
MPS_KEY = "fluid_mps"
#: The result key saying why it is not (absent where it is).
MPS_REASON_KEY = "fluid_mps_reason"


def _share_here() -> float:
    """The GPUs Ray assigned this process."""
    import ray

    return float(ray.get_runtime_context().get_assigned_resources().get("GPU", 0.0))


def measured(cls: type[Trainable]) -> type[Trainable]:
    """``cls`` whose processes report with each result whether they are clients of a live
    MPS daemon (joining their node's first where they were not started with its settings)
    and their peak GPU memory."""

    class Measured(cls):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            share = _share_here()
            if mps.PIPE_ENV not in os.environ:
                mps.join(share)
            self._fluid_mps = mps.client_state(share)
            super().__init__(*args, **kwargs)

        def train(self) -> dict:
            result = super().train()
            client, why = self._fluid_mps
            result.setdefault(MPS_KEY, client)
            if why is not None:
                result.setdefault(MPS_REASON_KEY, why)
            if nvml.PEAK_MEMORY_KEY not in result and (peak := nvml.process_peak_memory()):
                result[nvml.PEAK_MEMORY_KEY] = peak
            return result

    Measured.__name__ = cls.__name__
    setattr(Measured, MEASURED, True)
    return Measured


class GpuNodes:
    """The GPU nodes of one experiment: their MPS daemons (``option``: ``"auto"``,
    ``False``/``None``: off, or an ``MPSManager``), the memory of one GPU, and the trainables
    made to join the daemons and measure their memory.

    ``ray_cluster``: Fluid reads the cluster from Ray (not from a view given to it, as the
    simulator's); only there are daemons started for ``"auto"``.
    """

    def __init__(self, option: Any, ray_cluster: bool) -> None:
        if isinstance(option, str):  # "auto" (FluidOptions allows no other string)
            option = mps.MPSManager() if ray_cluster else None
        self.manager = option or None
        self.running = False  # a daemon runs on some node
        self._why_not: list[str] = []  # why a GPU node runs none
        self.memory_gb: float | None = None  # the GPU memory limit, once NVML read it
        self._trials: dict[str, Any] = {}  # a trial of each trainable name asking for GPUs
        self._wrapped: set[str] = set()

    @property
    def managed(self) -> bool:
        """Whether Fluid manages MPS daemons here (it may start some, to stop at the end)."""
        return self.manager is not None

    def start(self) -> None:
        """Start the daemons on the GPU nodes there are now (``memory_gb`` is set by whoever
        reads the nodes' memory: ``GpuMemory.follow``)."""
        if self.manager is not None:
            self._took(self.manager.start())

    def follow(self, gpus: float | None) -> None:
        """Start daemons on GPU nodes that joined (``gpus``: the pool changed, else ``None``),
        and wrap the trainables once their memory can be read there."""
        if gpus is None:
            return
        if self.manager is not None:
            self._took(self.manager.start())
        else:
            self._wrap()

    def _took(self, status: Any) -> None:
        self.running = any(node.get("running") for node in (status or {}).values())
        self._why_not = sorted({str(node.get("reason")) for node in (status or {}).values()
                                if not node.get("running")})
        self._wrap()

    def trial_env(self, trial: Any, peak_gb: Callable[[Any], float | None],
                  margin: float) -> dict[str, str]:
        """The MPS settings ``trial``'s actor starts with: its node's daemon where its
        process holds a share of a GPU below one (none for a whole GPU), its measured peak
        (``peak_gb``) plus ``margin`` pinned; {} where no daemon runs."""
        if self.manager is None or not self.running:
            return {}
        bundles = trial.placement_group_factory.bundles
        share = float(bundles[0].get("GPU", 0)) if bundles else 0.0
        peak = peak_gb(trial) if 0 < share < 1 else None
        return self.manager.trial_env(share, int(peak * 2**30) if peak else None, margin)

    def sharing(self) -> str:
        """How packed trials share a GPU here: ``"mps"``, or ``"time-sliced (why)"``."""
        if self.running:
            return "mps"
        why = "; ".join(self._why_not) or (
            "mps=False" if self.manager is None else "no GPU node")
        return f"time-sliced ({why})"

    def admit(self, rec: TrialRecord) -> None:
        """Wrap the trainable of ``rec``'s trial (``measured``) once a node runs a daemon or
        reports its GPUs (now, or when such a node joins: Tune looks a trainable up as it
        starts each trial), unless the trial runs without GPU or runs a Ray Train trainer
        (whose own process holds no GPU)."""
        if not (rec.no_gpu or rec.ray_train):
            self._trials.setdefault(rec.trial.trainable_name, rec.trial)
            self._wrap()

    def _wrap(self) -> None:
        if not (self.running or self.memory_gb):
            return
        for name, trial in self._trials.items():
            if name in self._wrapped:
                continue
            self._wrapped.add(name)
            cls = trial.get_trainable_cls()
            if isinstance(cls, type) and not getattr(cls, MEASURED, False):
                register_trainable(name, measured(cls), warn=False)

    def stop(self) -> None:
        """Stop the daemons Fluid started (one that ran before is left running)."""
        if self.manager is not None:
            self.manager.stop()
