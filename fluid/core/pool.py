"""Concrete GPUs and what runs on each: the state that placement decisions read and change.

A packed trial takes a share ``1/k`` of one GPU; a GPU's shares sum to at most 1, it holds at
most ``min(c_i)`` trials over the trials on it, and (when memories are known) their peak
memories sum to at most the GPU's memory (Salus-style memory-safe packing: MPS isolates no
memory). A gang of width ``w`` takes ``w`` whole, otherwise empty GPUs.

Example:
    >>> pool = GpuPool(2)
    >>> pool.place("a", 0.5, c=2)
    (0,)
    >>> pool.place("b", 0.5, c=2)
    (0,)
    >>> pool.place("g", 1.0)
    (1,)
    >>> pool.placement()
    {0: [('a', 0.5), ('b', 0.5)], 1: [('g', 1.0)]}
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from fluid.core.model import gpus_of, is_packed
from fluid.core.tolerances import WIDTH_TOL


@dataclass
class _Gpu:
    shares: dict[str, float] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    # Derived: ``refresh`` after a removal, updated in place when a trial is added.
    used: float = 0.0
    limit: int | None = None  # min(limits), None when empty

    def refresh(self) -> None:
        self.used = sum(self.shares.values())
        self.limit = min(self.limits.values()) if self.limits else None


class GpuPool:
    """GPUs with stable integer ids and the trials placed on them.

    Args:
        n: number of GPUs (ids ``0 .. n-1``).
        memory: memory of one GPU in GB; ``None`` disables memory checks.
    """

    def __init__(self, n: int, memory: float | None = None) -> None:
        if n < 0:
            raise ValueError(f"gpus must be >= 0, got {n}")
        if memory is not None and not memory > 0:
            raise ValueError(f"gpu_memory must be > 0 GB, got {memory}")
        self.memory = memory
        self._gpus: dict[int, _Gpu] = {g: _Gpu() for g in range(n)}
        self._idle: list[int] = list(range(n))  # sorted ids of empty GPUs
        self._partial: set[int] = set()  # GPUs holding packed trials with room left
        # The partial GPUs that can still take a trial (fewer trials than their limit) -> their
        # key in ``_by_used``: ``(-used, id)`` ascending, fullest first, ties lowest id.
        self._open: dict[int, tuple[float, int]] = {}
        self._by_used: list[tuple[float, int]] = []
        self._where: dict[str, tuple[int, ...]] = {}
        self._next_id = n
        # GPUs whose ``_Gpu`` this pool may change in place; the others it shares with copies
        # (``copy`` is made at every re-plan of hundreds of GPUs, most of them left as they are).
        self._own: set[int] = set(self._gpus)

    # -- reading -------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of GPUs in the pool."""
        return len(self._gpus)

    @property
    def gpu_ids(self) -> list[int]:
        """Ids of the GPUs in the pool, ascending."""
        return sorted(self._gpus)

    def idle_count(self) -> int:
        """Number of GPUs with nothing on them."""
        return len(self._idle)

    def free_capacity(self) -> float:
        """Unused GPU capacity: idle GPUs plus the unused shares of packed GPUs."""
        return len(self._idle) + sum(1.0 - self._gpus[g].used for g in self._partial)

    def has_free(self) -> bool:
        """Whether any capacity is unused (``free_capacity() > 0``), in O(1)."""
        return bool(self._idle or self._partial)

    def is_full(self) -> bool:
        """Whether no trial of any width can be placed now, in O(1).

        True when no GPU is idle and every partly used GPU holds as many trials as its
        limit allows; ``place`` then returns ``None`` whatever it is asked.
        """
        return not (self._idle or self._by_used)

    def where(self, trial_id: str) -> tuple[int, ...]:
        """GPUs a trial is on (empty tuple when it is not placed)."""
        return self._where.get(trial_id, ())

    def placements(self) -> dict[str, tuple[int, ...]]:
        """``{trial id: its GPUs}`` of every placed trial, a copy (one call, not one per trial)."""
        return dict(self._where)

    def trials(self) -> list[str]:
        """Ids of the placed trials."""
        return list(self._where)

    def share_of(self, trial_id: str) -> float:
        """Width of a placed trial: its share, or its GPU count for a gang."""
        gpus = self._where[trial_id]
        share = self._gpus[gpus[0]].shares[trial_id]
        return share if is_packed(share) else float(len(gpus))

    def neighbours(self, trial_id: str) -> list[str]:
        """Other trials on the GPUs of a placed trial."""
        return [
            t for g in self._where.get(trial_id, ()) for t in self._gpus[g].shares if t != trial_id
        ]

    def alone(self, trial_id: str) -> bool:
        """Whether no other trial is on the GPUs of ``trial_id`` (``not neighbours``, faster)."""
        gpus = self._gpus
        return all(len(gpus[g].shares) == 1 for g in self._where.get(trial_id, ()))

    def alone_packed(self) -> set[str]:
        """Packed trials alone on their GPU (the rest of it unused): one pass over the partly
        used GPUs instead of ``alone`` asked of every trial."""
        gpus = self._gpus
        return {next(iter(gpus[g].shares)) for g in self._partial if len(gpus[g].shares) == 1}

    def unfilled(self) -> set[int]:
        """GPUs holding packed trials whose shares sum to less than 1 (a copy)."""
        return set(self._partial)

    def placement(self) -> dict[int, list[tuple[str, float]]]:
        """``{gpu id: [(trial id, share), ...]}`` for every non-empty GPU."""
        return {
            g: list(gpu.shares.items()) for g, gpu in sorted(self._gpus.items()) if gpu.shares
        }

    def copy(self) -> GpuPool:
        """An independent copy (plans are made on copies when only proposed)."""
        other = GpuPool(0, self.memory)
        other._gpus = dict(self._gpus)  # shared until either pool changes one (``_mine``)
        self._own.clear()
        other._idle = list(self._idle)
        other._partial = set(self._partial)
        other._open = dict(self._open)
        other._by_used = list(self._by_used)
        other._where = dict(self._where)
        other._next_id = self._next_id
        return other

    def _mine(self, g: int) -> _Gpu:
        """GPU ``g``, to be changed: copied first if a copy of the pool shares it."""
        gpu = self._gpus[g]
        if g not in self._own:
            gpu = _Gpu(dict(gpu.shares), dict(gpu.limits), dict(gpu.memory), gpu.used, gpu.limit)
            self._gpus[g] = gpu
            self._own.add(g)
        return gpu

    # -- fitting -------------------------------------------------------------------------
    def _memory_ok(self, gpu: _Gpu, memory: float | None) -> bool:
        if self.memory is None or memory is None:
            return True
        return sum(gpu.memory.values()) + memory <= self.memory + WIDTH_TOL

    def _packed_target(self, share: float, c: int, memory: float | None) -> int | None:
        # Best fit: the fullest partial GPU the share fits on (ties: lowest id). ``_by_used``
        # holds the partial GPUs below their trial limit (no trial fits on the others) in that
        # order; GPUs before ``start`` are too full by more than round-off.
        by_used = self._by_used
        start = bisect.bisect_left(by_used, (share - 1.0 - WIDTH_TOL - 1e-12, -1))
        for i in range(start, len(by_used)):
            g = by_used[i][1]
            gpu = self._gpus[g]
            if (
                gpu.used + share <= 1.0 + WIDTH_TOL
                and len(gpu.shares) + 1 <= (c if gpu.limit is None else min(c, gpu.limit))
                and self._memory_ok(gpu, memory)
            ):
                return g
        if self._idle and self._memory_ok(self._gpus[self._idle[0]], memory):
            return self._idle[0]
        return None

    def fits(self, width: float, c: int = 1, memory: float | None = None) -> bool:
        """Whether a trial of this width could be placed now."""
        if is_packed(width):
            return self._packed_target(width, c, memory) is not None
        if self.memory is not None and memory is not None and memory > self.memory + WIDTH_TOL:
            return False
        return len(self._idle) >= gpus_of(width)

    # -- changing ------------------------------------------------------------------------
    def place(
        self, trial_id: str, width: float, c: int = 1, memory: float | None = None
    ) -> tuple[int, ...] | None:
        """Place a trial; returns its GPUs, or ``None`` (and changes nothing) if it does not fit.

        Packed shares go to the fullest GPU they fit on (best fit keeps whole GPUs free for
        gangs); gangs take the lowest-numbered idle GPUs.
        """
        if trial_id in self._where:
            raise ValueError(f"trial {trial_id!r} is already placed on {self._where[trial_id]}")
        if is_packed(width):
            g = self._packed_target(width, c, memory)
            if g is None:
                return None
            self._take(g, trial_id, width, c, memory)
            gpus: tuple[int, ...] = (g,)
        else:
            if not self.fits(width, c, memory):
                return None
            gpus = tuple(self._idle[: gpus_of(width)])
            for g in gpus:
                self._take(g, trial_id, 1.0, 1, memory)
        self._where[trial_id] = gpus
        return gpus

    def _set_partial(self, g: int, partial: bool) -> None:
        key = self._open.pop(g, None)
        if key is not None:
            del self._by_used[bisect.bisect_left(self._by_used, key)]
        if not partial:
            self._partial.discard(g)
            return
        self._partial.add(g)
        gpu = self._gpus[g]
        if gpu.limit is None or len(gpu.shares) < gpu.limit:
            key = (-gpu.used, g)
            self._open[g] = key
            bisect.insort(self._by_used, key)

    def _take(self, g: int, trial_id: str, share: float, c: int, memory: float | None) -> None:
        gpu = self._mine(g)
        if not gpu.shares:
            del self._idle[bisect.bisect_left(self._idle, g)]
        gpu.shares[trial_id] = share
        gpu.limits[trial_id] = c
        if memory is not None:
            gpu.memory[trial_id] = memory
        # What ``refresh`` would compute: the new share is the last one summed.
        gpu.used += share
        gpu.limit = c if gpu.limit is None else min(gpu.limit, c)
        self._set_partial(g, is_packed(share) and gpu.used < 1.0 - WIDTH_TOL)

    def _drop(self, g: int, trial_id: str) -> None:
        gpu = self._mine(g)
        del gpu.shares[trial_id]
        del gpu.limits[trial_id]
        gpu.memory.pop(trial_id, None)
        gpu.refresh()
        if not gpu.shares:
            self._set_partial(g, False)
            bisect.insort(self._idle, g)
        elif gpu.used < 1.0 - WIDTH_TOL:
            self._set_partial(g, True)

    def release(self, trial_id: str) -> tuple[int, ...]:
        """Remove a trial from its GPUs; returns the GPUs it held (empty if not placed)."""
        gpus = self._where.pop(trial_id, ())
        for g in gpus:
            self._drop(g, trial_id)
        return gpus

    def move(
        self, trial_id: str, width: float, c: int = 1, memory: float | None = None
    ) -> tuple[int, ...] | None:
        """Re-place a trial at another width; ``None`` (and nothing changed) if it does not fit.

        Used when a packed share becomes a whole GPU or a gang becomes a share; gangs that
        only grow or shrink use ``grow_gang`` / ``shrink_gang`` and keep their GPUs.
        """
        held = self._where[trial_id]
        old = [(g, self._gpus[g].shares[trial_id], self._gpus[g].limits[trial_id]) for g in held]
        old_memory = self._gpus[held[0]].memory.get(trial_id)
        self.release(trial_id)
        gpus = self.place(trial_id, width, c, memory)
        if gpus is None:
            for g, share, limit in old:
                self._take(g, trial_id, share, limit, old_memory)
            self._where[trial_id] = held
        return gpus

    def reshare(self, trial_id: str, share: float) -> bool:
        """Give a packed trial another share of the GPU it is on; False (nothing changed) if
        the GPU's shares would sum to more than 1. Neither its GPU nor its mates change."""
        g = self._where[trial_id][0]
        gpu = self._gpus[g]
        if not (is_packed(share) and is_packed(gpu.shares[trial_id])):
            raise ValueError(f"reshare is for packed trials and shares, got {trial_id!r} "
                             f"at {gpu.shares[trial_id]:g} -> {share:g}")
        if gpu.used - gpu.shares[trial_id] + share > 1.0 + WIDTH_TOL:
            return False
        gpu = self._mine(g)
        gpu.shares[trial_id] = share
        gpu.refresh()
        self._set_partial(g, gpu.used < 1.0 - WIDTH_TOL)
        return True

    def join(self, trial_id: str, host: str, share: float, c: int,
             memory: float | None = None) -> tuple[int, ...] | None:
        """Place a trial at a ``share`` on the GPU of ``host`` (a packed trial), that GPU now
        allowing ``c`` trials; ``None`` (nothing changed) if it does not fit there."""
        if trial_id in self._where:
            raise ValueError(f"trial {trial_id!r} is already placed on {self._where[trial_id]}")
        g = self._where[host][0]
        gpu = self._gpus[g]
        if (not is_packed(share) or not is_packed(gpu.shares[host])
                or gpu.used + share > 1.0 + WIDTH_TOL or len(gpu.shares) + 1 > c
                or not self._memory_ok(gpu, memory)):
            return None
        gpu = self._mine(g)
        gpu.limits[host] = max(gpu.limits[host], c)
        gpu.refresh()
        self._take(g, trial_id, share, c, memory)
        self._where[trial_id] = (g,)
        return (g,)

    def shrink_gang(self, trial_id: str, width: int) -> tuple[int, ...]:
        """Shrink a gang in place to its first ``width`` GPUs (the others become idle)."""
        gpus = self._where[trial_id]
        if width < 1 or width > len(gpus):
            raise ValueError(f"cannot shrink {trial_id!r} from {len(gpus)} to {width} GPUs")
        for g in gpus[width:]:
            self._drop(g, trial_id)
        self._where[trial_id] = gpus[:width]
        return gpus[:width]

    def grow_gang(self, trial_id: str, extra: int) -> tuple[int, ...] | None:
        """Add ``extra`` idle GPUs to a gang, keeping the ones it has; ``None`` if too few."""
        gpus = self._where[trial_id]
        if len(self._idle) < extra:
            return None
        memory = self._gpus[gpus[0]].memory.get(trial_id)
        added = tuple(self._idle[:extra])
        for g in added:
            self._take(g, trial_id, 1.0, 1, memory)
        self._where[trial_id] = gpus + added
        return self._where[trial_id]

    def add_gpus(self, count: int) -> list[int]:
        """Add ``count`` idle GPUs (a node joined); returns their ids."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        ids = list(range(self._next_id, self._next_id + count))
        self._next_id += count
        for g in ids:
            self._gpus[g] = _Gpu()
            self._own.add(g)
            bisect.insort(self._idle, g)
        return ids

    def remove_gpus(self, gpu_ids: list[int]) -> list[str]:
        """Remove GPUs (a node left); returns the trials evicted from them (whole gangs too)."""
        unknown = [g for g in gpu_ids if g not in self._gpus]
        if unknown:
            raise ValueError(f"unknown GPU ids {unknown}; pool has {self.gpu_ids}")
        evicted = sorted({t for g in gpu_ids for t in self._gpus[g].shares})
        for t in evicted:
            self.release(t)
        for g in gpu_ids:
            del self._gpus[g]
            self._own.discard(g)
            del self._idle[bisect.bisect_left(self._idle, g)]
        return evicted
