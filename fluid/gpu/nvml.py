"""GPU utilisation and memory sampling through NVML (package ``nvidia-ml-py``).

Without NVML (no driver, no GPU, e.g. every CI machine) everything here is a silent no-op:
empty records and one debug log line.

Example:
    >>> sampler = GPUSampler(interval_s=0.5)
    >>> sampler.start()
    >>> ...                                   # doctest: +SKIP
    >>> sampler.stop()
    >>> rows = sampler.records()              # [] without NVML
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: The result key of a trial's peak GPU memory (bytes), which ``fluid.train.report`` and the
#: trainables FluidExecutor runs on GPU nodes add, and which packing is checked against.
PEAK_MEMORY_KEY = "fluid_peak_gpu_memory"


@dataclass(frozen=True)
class GPURecord:
    """One sample of one GPU.

    Attributes:
        time: wall-clock time of the sample (``time.time()``).
        node: Ray node id of the sampled node (or a caller-chosen name).
        gpu_index: NVML device index on that node.
        util_percent: GPU (SM) utilisation over the driver's last sample period, 0-100.
        memory_used: bytes in use on the device (all processes).
        memory_total: device memory in bytes.
    """

    time: float
    node: str
    gpu_index: int
    util_percent: float
    memory_used: int
    memory_total: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _init(nvml: Any | None) -> tuple[Any | None, str | None]:
    """Initialise NVML (``pynvml`` unless given); return (module, None) or (None, why not)."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None, "pynvml (nvidia-ml-py) is not installed"
    try:
        nvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 -- NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML is not available ({e})"
    return nvml, None


def gpu_count(nvml: Any | None = None) -> int | None:
    """Number of GPUs NVML sees on this node, or None when NVML is unavailable."""
    mod, _ = _init(nvml)
    if mod is None:
        return None
    try:
        return int(mod.nvmlDeviceGetCount())
    finally:
        _shutdown(mod)


def _per_gpu(read: Callable[[Any, Any], Any], nvml: Any | None = None) -> list[Any] | None:
    """``read(nvml, handle)`` of every GPU NVML sees on this node (``None``: no NVML)."""
    mod, _ = _init(nvml)
    if mod is None:
        return None
    try:
        return [read(mod, mod.nvmlDeviceGetHandleByIndex(i))
                for i in range(int(mod.nvmlDeviceGetCount()))]
    except Exception:  # noqa: BLE001 -- an NVML error: as if NVML were not there
        logger.debug("NVML query failed", exc_info=True)
        return None
    finally:
        _shutdown(mod)


def free_gpu_memory_gb(nvml: Any | None = None) -> float | None:
    """GB free now on the GPU of this node with the least free memory, as NVML reports it
    (``None``: no NVML or no GPU). Free, not total: what other processes (another job, this
    node's driver) hold is not there for trials."""
    free = _per_gpu(lambda mod, h: int(mod.nvmlDeviceGetMemoryInfo(h).free), nvml)
    return min(free) / 2**30 if free else None


def _used_by_pid(mod: Any, handle: Any) -> dict[int, int]:
    """``{pid: bytes}`` of the processes NVML lists on one GPU: its compute processes and,
    where the binding has the call, its MPS clients (a process under MPS may be listed by that
    call only); a process in both counts once, at its larger figure."""
    lists = [mod.nvmlDeviceGetComputeRunningProcesses(handle)]
    mps_call = getattr(mod, "nvmlDeviceGetMPSComputeRunningProcesses", None)
    if mps_call is not None:
        try:
            lists.append(mps_call(handle))
        except Exception:  # noqa: BLE001 -- NVMLError_NotSupported where the driver lacks it
            logger.debug("NVML lists no MPS processes here", exc_info=True)
    used: dict[int, int] = {}
    for proc in (p for procs in lists for p in procs):
        used[proc.pid] = max(used.get(proc.pid, 0), int(proc.usedGpuMemory or 0))
    return used


def process_gpu_memory(pid: int | None = None, nvml: Any | None = None) -> int | None:
    """Bytes of GPU memory that process ``pid`` (default: this one) holds on this node's GPUs,
    as NVML lists its compute processes and MPS clients (``None``: no NVML, or the process is
    not listed, as where a container's process ids are not the host's)."""
    pid = os.getpid() if pid is None else pid
    used = _per_gpu(lambda mod, h: _used_by_pid(mod, h).get(pid, 0), nvml)
    return (sum(used) or None) if used is not None else None


def process_peak_memory() -> int | None:
    """Peak GPU bytes of this process so far, as well as it can be known here: torch's peak
    reserved memory where torch has started CUDA in this process, or what NVML lists for it
    now, whichever is larger (``None``: neither is known)."""
    seen = [process_gpu_memory()]
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        seen.append(int(torch.cuda.max_memory_reserved()))
    return max((b for b in seen if b), default=None)


def on_each_node(read: Callable[..., Any], nodes: list[str], *args: Any) -> list[Any]:
    """``read(*args)`` on each of ``nodes`` (Ray node ids), in order: in this process for its
    own node (the common single-node cluster asks nothing of Ray), in a task pinned to each
    other node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    remote = ray.remote(num_cpus=0)(read)
    refs = {nid: remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node_id=nid, soft=False)).remote(*args) for nid in nodes if nid != here}
    return [read(*args) if nid == here else ray.get(refs[nid]) for nid in nodes]


def _shutdown(mod: Any) -> None:
    try:
        mod.nvmlShutdown()
    except Exception:  # noqa: BLE001
        logger.debug("nvmlShutdown failed", exc_info=True)


def peak_gpu_memory() -> int | None:
    """Peak bytes allocated by torch on the current CUDA device, or None without CUDA.

    Example:
        >>> peak_gpu_memory() is None or peak_gpu_memory() >= 0
        True
    """
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.max_memory_allocated())


class GPUSampler:
    """Samples every GPU of this node on a background thread.

    Args:
        interval_s: seconds between samples.
        node: the ``node`` value of the records (default: this Ray node's id, or "local").
        nvml: an NVML module to use instead of ``pynvml`` (tests pass a fake).

    Example:
        >>> s = GPUSampler(interval_s=1.0); s.start(); s.stop(); s.records()
        []
    """

    def __init__(self, interval_s: float = 1.0, *, node: str | None = None, nvml: Any = None):
        if not interval_s > 0:
            raise ValueError(f"GPUSampler(interval_s=...) must be > 0, got {interval_s}")
        self.interval_s = float(interval_s)
        self.node = node if node is not None else _node_name()
        self._nvml_arg = nvml
        self._nvml: Any | None = None
        self._records: list[GPURecord] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.unavailable_reason: str | None = None

    @property
    def available(self) -> bool:
        """False once `start` found no NVML."""
        return self.unavailable_reason is None

    def start(self) -> None:
        """Start sampling (no-op without NVML, logged once at debug level)."""
        if self._thread is not None:
            return
        self._nvml, self.unavailable_reason = _init(self._nvml_arg)
        if self._nvml is None:
            logger.debug("fluid.gpu.nvml: no GPU sampling on %s: %s", self.node,
                         self.unavailable_reason)
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fluid-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling; the records stay readable."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=max(5.0, 2 * self.interval_s))
        self._thread = None
        if self._nvml is not None:
            _shutdown(self._nvml)
            self._nvml = None

    def records(self) -> list[GPURecord]:
        """All samples so far, oldest first."""
        with self._lock:
            return list(self._records)

    def sample_once(self) -> list[GPURecord]:
        """Take one sample of every GPU now (NVML must be initialised by `start`)."""
        nvml = self._nvml
        if nvml is None:
            return []
        now = time.time()
        rows = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            util = nvml.nvmlDeviceGetUtilizationRates(h)
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            rows.append(GPURecord(time=now, node=self.node, gpu_index=i,
                                  util_percent=float(util.gpu), memory_used=int(mem.used),
                                  memory_total=int(mem.total)))
        with self._lock:
            self._records.extend(rows)
        return rows

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001 -- a GPU falling off the bus must not kill the run
                logger.warning("fluid.gpu.nvml: sampling failed on %s", self.node, exc_info=True)
            self._stop.wait(self.interval_s)


def _node_name() -> str:
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001
        pass
    return "local"


class _SamplerActor:
    def __init__(self, interval_s: float, nvml: Any) -> None:
        self._s = GPUSampler(interval_s, nvml=nvml)
        self._s.start()

    def records(self) -> list[GPURecord]:
        return self._s.records()

    def stop(self) -> list[GPURecord]:
        self._s.stop()
        return self._s.records()

    def reason(self) -> str | None:
        return self._s.unavailable_reason


class ClusterGPUSampler:
    """One `GPUSampler` per Ray node that has GPUs, each in a small pinned actor.

    Args:
        interval_s: seconds between samples on each node.
        nodes: node ids to sample (default: every alive node with a ``GPU`` resource).
        nvml: NVML module to use on the nodes instead of ``pynvml`` (tests pass a fake).

    Example:
        >>> sampler = ClusterGPUSampler(interval_s=2.0)   # doctest: +SKIP
        >>> sampler.start(); ...; sampler.stop()           # doctest: +SKIP
        >>> df = pandas.DataFrame(r.as_dict() for r in sampler.records())  # doctest: +SKIP
    """

    def __init__(self, interval_s: float = 1.0, *, nodes: list[str] | None = None,
                 nvml: Any = None) -> None:
        if not interval_s > 0:
            raise ValueError(f"ClusterGPUSampler(interval_s=...) must be > 0, got {interval_s}")
        self.interval_s = float(interval_s)
        self._nodes = nodes
        self._nvml = nvml
        self._actors: dict[str, Any] = {}
        self._final: list[GPURecord] = []

    def start(self) -> None:
        """Start one sampler actor on each GPU node."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._actors:
            return
        nodes = self._nodes if self._nodes is not None else gpu_nodes()
        remote = ray.remote(num_cpus=0)(_SamplerActor)
        for nid in nodes:
            self._actors[nid] = remote.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False),
                name=None,
            ).remote(self.interval_s, self._nvml)
        reasons = ray.get([a.reason.remote() for a in self._actors.values()])
        missing = [r for r in reasons if r is not None]
        if missing:
            logger.debug("fluid.gpu.nvml: no GPU sampling on %d of %d nodes: %s",
                         len(missing), len(reasons), missing[0])

    def _gather(self, method: str) -> list[GPURecord]:
        """The records ``method`` of every node's actor returns, sorted by time."""
        import ray

        per_node = ray.get([getattr(a, method).remote() for a in self._actors.values()])
        return sorted((r for rs in per_node for r in rs),
                      key=lambda r: (r.time, r.node, r.gpu_index))

    def records(self) -> list[GPURecord]:
        """Samples from all nodes so far, sorted by time."""
        return self._gather("records") if self._actors else list(self._final)

    def stop(self) -> None:
        """Stop the samplers, keep their records, end the actors."""
        import ray

        if not self._actors:
            return
        self._final = self._gather("stop")
        for a in self._actors.values():
            ray.kill(a)
        self._actors = {}


def gpu_nodes() -> list[str]:
    """Ids of alive Ray nodes that advertise a ``GPU`` resource (logical GPUs count)."""
    import ray

    return [n["NodeID"] for n in ray.nodes()
            if n.get("Alive") and float(n.get("Resources", {}).get("GPU", 0)) > 0]


def mig_gpus(nvml: Any | None = None) -> list[int]:
    """Indexes of this node's GPUs in MIG mode (none where NVML or its MIG call is missing)."""
    def mig_on(mod: Any, handle: Any) -> bool:
        try:
            return bool(mod.nvmlDeviceGetMigMode(handle)[0])
        except Exception:  # noqa: BLE001 - a GPU or binding without MIG
            return False

    modes = _per_gpu(mig_on, nvml) or []
    return [i for i, on in enumerate(modes) if on]
