"""The GPU memory that packing is checked against in one experiment, read node by node.

A GPU node's memory is what NVML reports *free* there (on its GPU with the least free memory,
``fluid.gpu.nvml.free_gpu_memory_gb``) when the experiment first uses the node: at its start
for the GPU nodes there are then, and for a node that joins later when the plan's pool takes
its GPUs, before the step that may place trials on them plans (``FluidExecutor``). What another
job or the driver holds on a GPU is no room for trials. The limit is the smallest over the
nodes read, less ``Tunables.gpu_memory_headroom``; the user's ``gpu_memory`` replaces it.

With no GPU node known yet (an autoscaling cluster whose head has none) the pool has no GPU,
so nothing is packed before a GPU node is read. Where NVML sees no GPU on any node read
(logical GPUs, no driver) there is no limit: packing is not checked against memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fluid.core import Tunables
from fluid.gpu import nvml

if TYPE_CHECKING:
    from fluid.tune._estimator import OverheadEstimator
    from fluid.tune._gpu_nodes import GpuNodes
    from fluid.tune._lifecycle import Lifecycle

#: Reads the given Ray nodes' free GPU memory: one figure per node, in order (GB; ``None``:
#: NVML sees no GPU there).
NodeReader = Callable[[list[str]], Sequence[float | None]]

#: Least GB a node read counts for: a GPU with nothing free still bounds packing (a limit of
#: 0 GB is refused by the pool, and 0 would read as "NVML sees no GPU").
_LEAST_GB = 2**-10


def read_free_memory(nodes: list[str]) -> list[float | None]:
    """``free_gpu_memory_gb`` on each of ``nodes`` (Ray node ids), in order."""
    return nvml.on_each_node(nvml.free_gpu_memory_gb, nodes)


class GpuMemory:
    """The GPU memory limit of one experiment (GB of one GPU; ``None``: unchecked).

    Args:
        given: the user's ``gpu_memory`` (``None``: from NVML). Nodes are read all the same:
            whether NVML sees GPUs decides whether trainables are measured.
        tunables: ``gpu_memory_headroom``, the share of a GPU's free memory that packed trials'
            peaks leave free.
        ray_cluster: the experiment runs on Ray's nodes (``follow`` reads them; a simulator's
            view has none to read).
        reader: how nodes are read (tests pass a fake).

    Example:
        >>> memory = GpuMemory(None, Tunables(), reader=lambda nodes: [20.0 for _ in nodes])
        >>> memory.read(["a"]), memory.limit
        (True, 18.0)
        >>> memory.read(["a"])  # read once
        False
    """

    def __init__(self, given: float | None, tunables: Tunables, ray_cluster: bool = True,
                 reader: NodeReader = read_free_memory) -> None:
        self.given = given
        self.headroom = tunables.gpu_memory_headroom
        self._ray = ray_cluster
        self._reader = reader
        self._read: set[str] = set()  # node ids read (with or without a GPU NVML sees)
        self.nvml_gb: float | None = None  # least free GB NVML reported on a node read

    @property
    def limit(self) -> float | None:
        """GB of one GPU that packed trials' peaks must fit in (``None``: unchecked)."""
        if self.given is not None:
            return self.given
        return None if self.nvml_gb is None else self.nvml_gb * (1 - self.headroom)

    def read(self, nodes: list[str]) -> bool:
        """Read those of ``nodes`` (Ray node ids) not read yet; returns whether ``nvml_gb``
        changed (and with it ``limit``, unless given)."""
        new = [nid for nid in dict.fromkeys(nodes) if nid not in self._read]
        if not new:
            return False
        self._read.update(new)
        seen = [max(gb, _LEAST_GB) for gb in self._reader(new) if gb is not None]
        if not seen or (self.nvml_gb is not None and min(seen) >= self.nvml_gb):
            return False
        self.nvml_gb = min(seen)
        return True

    def follow(self, gpus: float | None, estimator: OverheadEstimator, life: Lifecycle,
               nodes: GpuNodes) -> None:
        """Read the GPU nodes not read yet when the pool has ``gpus`` GPUs now (``None``: as
        before, nothing to read), and hand what changed to what checks it: the need of a
        trial of unknown peak (``estimator.gpu_memory``), the pool's packing
        (``Lifecycle.gpu_memory_changed``) and whether trainables are measured
        (``nodes.memory_gb``: NVML sees GPUs)."""
        if gpus is None or not self._ray or not self.read(nvml.gpu_nodes()):
            return
        estimator.gpu_memory = self.limit
        life.gpu_memory_changed(self.limit)
        nodes.memory_gb = self.nvml_gb
