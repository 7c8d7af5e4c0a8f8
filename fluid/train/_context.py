"""Per-process training context: who am I in the gang, where do I report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from ray.tune import Checkpoint


class _Session(Protocol):
    """How `report`/`get_checkpoint` reach Tune from this process."""

    def report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None: ...

    def get_checkpoint(self) -> Checkpoint | None: ...


@dataclass(frozen=True)
class TrainContext:
    """What a training loop knows about its place in the trial.

    Attributes:
        rank: global rank of this worker (0 for in-process trials).
        world_size: number of data-parallel workers in the trial.
        local_rank: rank among the trial's workers on the same node.
        local_world_size: number of the trial's workers on this node.
        node_rank: index of this node among the nodes the gang spans.
        device: torch device the loop should use (``cuda:i`` or ``cpu``).
        gpu_share: fraction of a GPU reserved for this process: < 1 for packed
            trials, 1.0 for a whole GPU (gang workers), 0.0 when no GPU was reserved.
        backend: torch.distributed backend (``"nccl"``/``"gloo"``) or None at world size 1.

    Example:
        >>> ctx = fluid.train.get_context()            # doctest: +SKIP
        >>> if ctx.rank == 0: print(ctx.world_size)    # doctest: +SKIP
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    device: torch.device
    gpu_share: float
    backend: str | None
    _session: _Session | None = field(default=None, repr=False, compare=False)


# Not thread-local: user loops may start their own threads (data prefetch, logging)
# that still belong to the same rank.
_current: TrainContext | None = None


def _set_context(ctx: TrainContext | None) -> None:
    global _current
    _current = ctx


def _get_context_or_none() -> TrainContext | None:
    return _current


def get_context() -> TrainContext:
    """Return the context of the running `fluid.train.elastic` loop.

    Raises:
        RuntimeError: when called outside a loop started by `fluid.train.elastic`.

    Example:
        >>> def loop(config):                       # doctest: +SKIP
        ...     ctx = fluid.train.get_context()
        ...     model = MyNet().to(ctx.device)
    """
    ctx = _current
    if ctx is None:
        raise RuntimeError("fluid.train.get_context() called outside a training loop; wrap the "
                           "loop with fluid.train.elastic(loop) and run it under ray.tune.")
    return ctx
