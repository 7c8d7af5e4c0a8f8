"""Model and data-loader preparation that keeps hyperparameters width-independent."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler

from fluid.train._context import get_context


def prepare_model(model: torch.nn.Module) -> torch.nn.Module:
    """Move ``model`` to this worker's device; wrap it in DDP when world size > 1.

    Checkpoints written by `save_checkpoint` unwrap DDP, so they load at any width.

    Example:
        >>> model = fluid.train.prepare_model(torch.nn.Linear(4, 1))   # doctest: +SKIP
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"prepare_model(model=...) needs a torch.nn.Module, got {type(model)!r}")
    ctx = get_context()
    model = model.to(ctx.device)
    if ctx.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=device_ids)
    return model


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """Return the module inside a DDP wrapper (or ``model`` itself)."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


@dataclass(eq=False)
class _ElasticBatchSampler:
    """Global batches cut from one seeded permutation, split round-robin over ranks.

    Global step ``k`` always covers permutation positions ``[k*B, (k+1)*B)`` whatever the
    world size, so a trial resumed at another width at step ``k`` sees exactly the samples
    it has not seen yet, and one global step means the same thing at every width.
    """

    num_samples: int
    global_batch: int
    rank: int
    world_size: int
    shuffle: bool
    seed: int
    drop_last: bool
    epoch: int = 0
    start_batch: int = 0

    @property
    def steps_per_epoch(self) -> int:
        if self.drop_last:
            return self.num_samples // self.global_batch
        return math.ceil(self.num_samples / self.global_batch)

    def _permutation(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_samples))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.num_samples, generator=g).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        perm = self._permutation()
        b, w = self.global_batch, self.world_size
        for k in range(self.start_batch, self.steps_per_epoch):
            batch = perm[k * b : (k + 1) * b]
            if len(batch) < w:
                # A short last batch must still give every rank a sample, or DDP's
                # all-reduce would wait forever on the rank with nothing to do.
                batch = batch + perm[: w - len(batch)]
            yield batch[self.rank :: w]

    def __len__(self) -> int:
        return max(0, self.steps_per_epoch - self.start_batch)


def _move(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=device.type == "cuda")
    if isinstance(batch, Mapping):
        return type(batch)({k: _move(v, device) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(_move(v, device) for v in batch))
    if isinstance(batch, Sequence) and not isinstance(batch, str | bytes):
        return type(batch)(_move(v, device) for v in batch)
    return batch


class ElasticDataLoader:
    """A data loader whose position (epoch, batch) survives a change of world size.

    Made by `prepare_data_loader`. Iterating yields this rank's share of each global
    batch, moved to the worker's device. After a full pass the epoch advances by one.

    Attributes:
        epoch: epoch of the current (or next) pass.
        batch: global steps already taken in that epoch.
        global_batch_size: the batch size the loader was built with (all ranks together).
    """

    def __init__(self, loader: DataLoader, sampler: _ElasticBatchSampler,
                 device: torch.device | None) -> None:
        self._loader = loader
        self._sampler = sampler
        self._device = device
        self.global_batch_size = sampler.global_batch
        self.epoch = 0
        self.batch = 0

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        """Position the next pass at ``epoch``, skipping its first ``start_batch`` steps."""
        if epoch < 0:
            raise ValueError(f"set_epoch(epoch=...) must be >= 0, got {epoch}")
        if start_batch < 0:
            raise ValueError(f"set_epoch(start_batch=...) must be >= 0, got {start_batch}")
        self.epoch = epoch
        self.batch = start_batch

    @property
    def steps_per_epoch(self) -> int:
        """Global steps in a full epoch (same at every world size)."""
        return self._sampler.steps_per_epoch

    @property
    def dataset(self) -> Any:
        return self._loader.dataset

    def __len__(self) -> int:
        return max(0, self.steps_per_epoch - self.batch)

    def __iter__(self) -> Iterator[Any]:
        self._sampler.epoch, self._sampler.start_batch = self.epoch, self.batch
        for item in self._loader:
            # Count before yielding: the caller trains on the batch and may then save a
            # checkpoint from inside the loop body; the saved position must include it.
            self.batch += 1
            yield item if self._device is None else _move(item, self._device)
        self.epoch += 1
        self.batch = 0


def _shuffles(loader: Any) -> bool:
    """Whether ``loader`` shuffles; a clear error for a loader that cannot be sharded."""
    if not isinstance(loader, DataLoader):
        raise TypeError("prepare_data_loader(loader=...) needs a torch DataLoader, "
                        f"got {type(loader)!r}")
    if isinstance(loader.dataset, IterableDataset):
        raise ValueError("prepare_data_loader(loader=...): iterable-style datasets cannot be "
                         "sharded by position; use a map-style dataset")
    if loader.batch_size is None:
        raise ValueError("prepare_data_loader(loader=...) needs a loader built with "
                         "batch_size=<global batch size>, not with a custom batch_sampler")
    if isinstance(loader.sampler, RandomSampler):
        return True
    if isinstance(loader.sampler, SequentialSampler):
        return False
    raise ValueError(
        "prepare_data_loader(loader=...) replaces the sampler; build the loader with "
        f"shuffle=True or shuffle=False instead of sampler={type(loader.sampler).__name__}"
    )


def prepare_data_loader(loader: DataLoader, *, seed: int = 0,
                        move_to_device: bool = True) -> ElasticDataLoader:
    """Shard ``loader`` over the trial's workers, keeping the *global* batch size.

    ``loader.batch_size`` is read as the global batch size B (what the config says).
    Each of the ``w`` workers gets ``B // w`` samples per step (the first ``B % w`` ranks
    one more), so a step uses B samples at any width and the learning rate and other
    hyperparameters keep their meaning when Fluid resizes the trial. Shuffling follows
    the original loader (``shuffle=True`` -> a permutation seeded by ``seed + epoch``,
    identical on every rank).

    Args:
        loader: a map-style ``DataLoader`` built with ``batch_size=`` and either
            ``shuffle=True`` or ``shuffle=False`` (no custom sampler).
        seed: base seed of the per-epoch permutation.
        move_to_device: move tensors of each batch to ``get_context().device``.

    Raises:
        ValueError: when the global batch size is smaller than the world size.

    Example:
        >>> loader = DataLoader(ds, batch_size=64, shuffle=True)        # doctest: +SKIP
        >>> loader = fluid.train.prepare_data_loader(loader)            # doctest: +SKIP
        >>> for x, y in loader: ...                                     # doctest: +SKIP
    """
    shuffle = _shuffles(loader)
    ctx = get_context()
    global_batch = int(loader.batch_size)
    if global_batch < ctx.world_size:
        raise ValueError(
            f"prepare_data_loader(loader=...): global batch size {global_batch} is smaller "
            f"than the world size {ctx.world_size}; every worker needs at least one sample "
            "per step. Use a larger batch_size or fewer workers."
        )
    sampler = _ElasticBatchSampler(
        num_samples=len(loader.dataset), global_batch=global_batch, rank=ctx.rank,
        world_size=ctx.world_size, shuffle=shuffle, seed=seed, drop_last=loader.drop_last)
    extra: dict[str, Any] = {}
    if loader.num_workers > 0:
        extra = {"prefetch_factor": loader.prefetch_factor,
                 "persistent_workers": loader.persistent_workers}
    inner = DataLoader(
        loader.dataset, batch_sampler=sampler, num_workers=loader.num_workers,
        collate_fn=loader.collate_fn, pin_memory=loader.pin_memory and ctx.device.type == "cuda",
        timeout=loader.timeout, worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context, **extra)
    return ElasticDataLoader(inner, sampler, ctx.device if move_to_device else None)
