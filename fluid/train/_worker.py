"""One rank of a gang: a threaded Ray actor in bundle ``rank + 1`` of the trial's placement group
that joins the torch.distributed group and runs the user's loop (``fluid.train._gang`` drives
them).

Rank 0 hands each result to the trial process through its outbox, and every rank waits for the
trial process to acknowledge it before the next iteration, so the gang is never more than the
current iteration ahead of Tune. A failing rank raises a ``TrainingWorkerError`` with its
traceback.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import ray
import torch
from ray.tune import Checkpoint

from fluid.train import _checkpoint as _ck
from fluid.train._context import TrainContext
from fluid.train._process import _ckpt_root, _local_device, _run_loop


class TrainingWorkerError(RuntimeError):
    """A rank of an elastic gang failed (its exception or its process died).

    Attributes:
        rank: the failing rank (-1 when no single rank is to blame, e.g. start-up).
        world_size: the gang's world size.
        details: the rank's formatted traceback or the reason it died.
    """

    def __init__(self, rank: int, world_size: int, details: str,
                 failed_at: float | None = None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.details = details
        # Wall-clock time of the failure on the rank: the earliest of several is the cause.
        self.failed_at = time.time() if failed_at is None else failed_at
        who = f"rank {rank} of {world_size}" if rank >= 0 else f"gang of {world_size}"
        super().__init__(f"{who} failed:\n{details}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.rank, self.world_size, self.details, self.failed_at))


@dataclass(frozen=True)
class _WorkerSpec:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    backend: str
    device_index: int
    gpu_share: float
    timeout_s: float
    trial_id: str


#: What rank 0 hands the trial process per report: sequence number, metrics, checkpoint files.
_Result = tuple[int, dict[str, Any], dict[str, bytes] | None]


class _WorkerSession:
    """Rank r inside a gang: results go to the trial process through rank 0's outbox."""

    def __init__(self, worker: _GangWorker, rank: int, ckpt_dir: str | None) -> None:
        self._worker = worker
        self._rank = rank
        self._ckpt_dir = ckpt_dir
        self._seq = 0

    def report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        self._seq += 1
        if self._rank == 0:
            files = _ck._pack_checkpoint(checkpoint) if checkpoint is not None else None
            self._worker._outbox.put((self._seq, metrics, files))
        _ck._release(checkpoint)
        self._worker._wait_ack(self._seq)

    def get_checkpoint(self) -> Checkpoint | None:
        return Checkpoint.from_directory(self._ckpt_dir) if self._ckpt_dir else None


class _GangWorker:
    """One rank of a gang; a threaded actor so the trial process can poll and ack
    while `run` is busy with the user's loop."""

    def __init__(self) -> None:
        self._outbox: queue.Queue[_Result] = queue.Queue()
        self._cv = threading.Condition()
        self._acked = 0

    def node_info(self) -> dict[str, Any]:
        return {"node_id": ray.get_runtime_context().get_node_id(),
                "ip": ray.util.get_node_ip_address(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    def prepare(self, visible_devices: str | None, share: float) -> dict[str, Any]:
        # Must run before anything initialises CUDA in this process: CUDA reads
        # CUDA_VISIBLE_DEVICES once. All of a node's gang GPUs are made visible so that
        # NCCL can use peer-to-peer paths between them. A gang worker is no MPS client:
        # NCCL under MPS is unsupported (it can hang).
        if visible_devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices
        cuda = share > 0 and torch.cuda.is_available()
        return {"cuda": cuda, "port": _free_port()}

    def poll(self, timeout_s: float) -> _Result | None:
        try:
            return self._outbox.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def ack(self, seq: int) -> None:
        with self._cv:
            self._acked = max(self._acked, seq)
            self._cv.notify_all()

    def _wait_ack(self, seq: int) -> None:
        with self._cv:
            while self._acked < seq:
                self._cv.wait(timeout=1.0)

    def run(self, loop: Callable[..., Any], config: dict[str, Any], spec: _WorkerSpec,
            ckpt_files: dict[str, bytes] | None) -> None:
        import torch.distributed as dist

        try:
            _ck._use_checkpoint_root(_ckpt_root(spec.trial_id, f"rank{spec.rank}"))
            ckpt_dir = _ck._unpack_dir(ckpt_files) if ckpt_files is not None else None
            if spec.backend == "nccl":
                device = torch.device("cuda", spec.device_index)
                torch.cuda.set_device(device)
            else:
                device = _local_device(spec.gpu_share, spec.device_index)
            dist.init_process_group(
                backend=spec.backend,
                init_method=f"tcp://{_url_host(spec.master_addr)}:{spec.master_port}",
                rank=spec.rank, world_size=spec.world_size,
                timeout=timedelta(seconds=spec.timeout_s))
            ctx = TrainContext(rank=spec.rank, world_size=spec.world_size,
                               local_rank=spec.local_rank, local_world_size=spec.local_world_size,
                               node_rank=spec.node_rank, device=device, gpu_share=spec.gpu_share,
                               backend=spec.backend,
                               _session=_WorkerSession(self, spec.rank, ckpt_dir))
            _run_loop(loop, config, ctx)
            dist.destroy_process_group()
        except Exception:
            # The process group is deliberately left open: closing it would make the other
            # ranks fail at once with "connection closed" errors that could be taken for the
            # cause. The trial process kills every rank right after this error arrives.
            raise TrainingWorkerError(spec.rank, spec.world_size, traceback.format_exc()) from None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _url_host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


_RemoteWorker = ray.remote(_GangWorker)
