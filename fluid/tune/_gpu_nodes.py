"""What the experiment's GPU nodes provide: an MPS daemon each, their GPU memory, and trial
processes that join the daemon and measure their own peak GPU memory.

``FluidExecutor(mps="auto")`` (the default) runs an ``MPSManager``: a daemon on every GPU node
where ``nvidia-cuda-mps-control`` is on PATH and NVML sees GPUs, nodes that join later included
(``follow``), stopped when the experiment ends (at the latest when the driver exits). The
memory of one GPU (the smallest NVML reports on the GPU nodes there are when the experiment
starts) bounds packing unless ``gpu_memory`` is given.

Where a node runs a daemon or NVML sees its GPUs, each trial that asks for GPUs gets its
trainable wrapped, once per trainable name (``measured``): the process Tune starts joins its
node's daemon before the user's code runs (its ``__init__`` calls the user's ``setup``; a
function trainable's function starts there), with the share of GPU Ray assigned it; each
result carries whether it did (``fluid_mps``) and the process's peak GPU memory
(``fluid_peak_gpu_memory``, bytes) unless the trainable reports it (``fluid.train`` does).
``fluid.train.elastic`` gang workers join in their own processes, Ray Train's workers through
``fluid.train.run_config``. Elsewhere (no GPU machine) nothing is wrapped: trials run as under
plain Tune.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.tune import Trainable, register_trainable

from fluid.gpu import mps, nvml
from fluid.tune._records import TrialRecord

logger = logging.getLogger("fluid")

#: Set on a trainable class that Fluid wrapped (so it is wrapped once).
MEASURED = "fluid_measured"
#: The result key saying whether the trial's process joined its node's MPS daemon.
MPS_KEY = "fluid_mps"


def measured(cls: type[Trainable]) -> type[Trainable]:
    """``cls`` whose processes join their node's MPS daemon before ``cls`` runs and report
    with each result whether they did and their peak GPU memory."""

    class Measured(cls):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._fluid_joined = bool(mps.join())
            super().__init__(*args, **kwargs)

        def train(self) -> dict:
            result = super().train()
            result.setdefault(MPS_KEY, self._fluid_joined)
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
    simulator's); only there are daemons started for ``"auto"`` and GPU memory read.
    """

    def __init__(self, option: Any, ray_cluster: bool) -> None:
        if isinstance(option, str):  # "auto" (FluidOptions allows no other string)
            option = mps.MPSManager() if ray_cluster else None
        self.manager = option or None
        self._ray = ray_cluster
        self.running = False  # a daemon runs on some node
        self._why_not: list[str] = []  # why a GPU node runs none
        self.memory_gb: float | None = None  # one GPU's, as NVML reports it
        self._trials: dict[str, Any] = {}  # a trial of each trainable name asking for GPUs
        self._wrapped: set[str] = set()

    @property
    def managed(self) -> bool:
        """Whether Fluid manages MPS daemons here (it may start some, to stop at the end)."""
        return self.manager is not None

    def start(self) -> float | None:
        """Start the daemons on the GPU nodes there are now; returns one GPU's memory in GB
        (the smallest NVML reports; ``None``: unknown)."""
        if self._ray:
            self.memory_gb = nvml.cluster_gpu_memory_gb(nvml.gpu_nodes())
        if self.manager is not None:
            self._took(self.manager.start())
        return self.memory_gb

    def follow(self, gpus: float | None) -> None:
        """Start daemons on GPU nodes that joined (``gpus``: the pool changed, else ``None``)."""
        if gpus is not None and self.manager is not None:
            self._took(self.manager.start())

    def _took(self, status: Any) -> None:
        self.running = any(node.get("running") for node in (status or {}).values())
        self._why_not = sorted({str(node.get("reason")) for node in (status or {}).values()
                                if not node.get("running")})
        self._wrap()

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
