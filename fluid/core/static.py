"""StaticFluid (paper Algorithm 1): size and place a newly arrived TrialGroup.

Widths follow water-filling: GPUs in proportion to each trial's one-GPU runtime ``h_i1``::

    w_i = min(max(floor(h_i1 / sum_j h_j1 * n), 1/c_i), d_i)

A packed trial's ``1/c_i`` is the narrowest share: when the GPUs the others leave hold the
``k`` packed trials fewer to a GPU, each gets ``1/min(c_i, ceil(k / free GPUs))``. Packing has a
price when ``alpha_i > 1``, which the formula does not see, so three rules keep it from making a
packed trial the group's straggler:

* a trial slower even at half a GPU than the water level, ``h_i1 * alpha_i > sum_j h_j1 / n``,
  gets a whole GPU while one is left (``floor`` alone would have it end after everyone else);
* once placed, the share a GPU's trials leave unused goes to those on it with
  ``alpha_i > 1``, the one that would end last first (``widen_shares``);
* while trials wait that fit nowhere, a packed trial alone on its GPU takes the whole of it
  (``grow_alone``): the rest of that GPU serves none of them.
Trials are placed in non-increasing order of ``h_i1``; a trial that does not fit waits, and later
trials that fit still start (list scheduling). Two deliberate departures from the paper's text
(docs/design.md, "The paper's slips" 2 and 3):

* ``n`` is the capacity this group can actually use (idle GPUs and free packed shares), not
  every GPU of the cluster.
* the floor can leave whole GPUs idle; when nobody waits, they are handed out one at a time to
  the trial that would end last, as long as one more GPU makes it faster (``hand_out``).

The functions here take a ``GpuPool`` and return the pool after their decisions; the pool given
is never changed (the helpers that place trials work on the copy they are handed).

Example (the paper's Figure 5: 5 GPUs, ``h_1`` = 4, 4, 12, 30 s, c = 2, d = 4):
    >>> from fluid.core.pool import GpuPool
    >>> trials = [TrialSpec(f"a{i}", h) for i, h in enumerate([4, 4, 12, 30], start=1)]
    >>> plan = static_fluid(trials, GpuPool(5), PolicyConfig(c=2, d=4))
    >>> plan.widths
    {'a4': 3.0, 'a3': 1.0, 'a1': 0.5, 'a2': 0.5}
    >>> plan.pool.placement()[4]
    [('a1', 0.5), ('a2', 0.5)]
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from fluid.core.config import PolicyConfig
from fluid.core.growth import grow_alone, hand_out, widen_shares
from fluid.core.model import TrialSpec, is_packed
from fluid.core.pool import GpuPool
from fluid.core.tolerances import WIDTH_TOL

_RUNTIME = operator.attrgetter("runtime")


@dataclass(frozen=True)
class Assignment:
    """A trial started (or restarted) at ``width`` on ``gpus``."""

    trial_id: str
    width: float
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class StaticPlan:
    """What StaticFluid decided for a group.

    Attributes:
        widths: planned width of every trial of the group (started or waiting).
        pool: the GPUs after the plan: the started trials placed.
        started: trials placed now, in placement order.
        waiting: trials that did not fit, in the order they should start.
    """

    widths: dict[str, float]
    pool: GpuPool
    started: list[Assignment] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)


def _water_fill(
    trials: Sequence[TrialSpec], n: float, config: PolicyConfig
) -> tuple[list[TrialSpec], list[float]]:
    """``water_fill`` as the trials in order and their widths (static_fluid needs both)."""
    order = sorted(trials, key=_RUNTIME, reverse=True)  # stable: ties keep the input order
    runtimes = [t.runtime for t in order]
    if not order:
        return order, []
    total = sum(runtimes)  # the same additions, in the same order, as the formula's sum
    whole = int(math.floor(n + WIDTH_TOL))
    # floor(h_i1 / total * n): elementwise IEEE division and product, the same bits as in
    # Python floats; only the trials that need c_i or d_i are visited one by one.
    h = np.array(runtimes, dtype=float)
    floors = np.floor(h / total * n + WIDTH_TOL)
    # min(max(floor(share), 1/c), d) with c >= 1, d >= 1: c only matters below one GPU
    # and d only above (asking for them is the costly part with 10,000 trials).
    fill = np.minimum(floors, 1.0)  # 1 for f >= 1; packed and gangs below
    packed = np.flatnonzero(floors < 1)
    widths = fill.tolist()
    for i in np.flatnonzero(floors >= 2).tolist():
        widths[i] = float(min(int(floors[i]), config.d_of(order[i], whole)))
    if packed.size:
        # 1/c_i is the narrowest share; k trials sharing a GPU each get 1/k of it, so when the
        # GPUs left over by the others hold the packed trials fewer than c_i to a GPU, the
        # share widens to 1/k (the paper's 1/c alone leaves part of every shared GPU unused).
        sharing = [order[i] for i in packed.tolist()]
        cs = np.array(config.c_of_all(sharing), dtype=float)
        left = int(math.floor(n - sum(widths) + WIDTH_TOL))  # packed: 0 so far
        # A packed trial slower even at half a GPU than the water level ``sum_j h_j1 / n``
        # (when water-filling means every trial to end) would end after all the others: it
        # gets a whole GPU while one is left, longest first (alpha_i = 1: never slower).
        alphas = np.array([t.alpha for t in sharing], dtype=float)
        costly = alphas > 1.0
        k = packed.size
        fixed = np.array([t.fixed_share for t in sharing], dtype=bool)
        if left >= 1:
            slow = (cs > 1) & costly & ~fixed & (h[packed] * alphas > total / n)
            promoted = np.flatnonzero(slow)[:left]
            cs[promoted], costly[promoted] = 1.0, False
            left, k = left - promoted.size, k - promoted.size
        if left >= 1:  # (alpha_i = 1: a narrow share is as fast and leaves room for others)
            cs = np.where(costly, np.minimum(cs, max(1, math.ceil(k / left))), cs)
        shares = (1.0 / cs).tolist()  # the same IEEE quotient as 1.0 / c
        for i, share in zip(packed.tolist(), shares, strict=True):
            widths[i] = share
    for i, t in enumerate(order):
        if t.w_min is not None and (widths[i] < t.w_min - WIDTH_TOL or t.fixed_share):
            widths[i] = t.w_min  # what the user asked for, even beyond the free capacity
    return order, widths


def water_fill(trials: Sequence[TrialSpec], n: float, config: PolicyConfig) -> dict[str, float]:
    """The widths of Algorithm 1, in non-increasing order of ``h_i1`` (ties: input order).

    ``n`` is the capacity the group may use; gang widths are also capped at ``floor(n)``.
    A trial's ``w_min`` (what its user asked for) is a floor, even above ``n``: it then waits.
    """
    order, widths = _water_fill(trials, n, config)
    return dict(zip([t.id for t in order], widths, strict=True))


def _start(
    items: Iterable[tuple[TrialSpec, float]], pool: GpuPool, config: PolicyConfig,
    priority: Callable[[str], int] | None = None,
) -> tuple[list[Assignment], list[int], int]:
    """``start_in_order`` on ``(trial, width)`` pairs read in order, placing them in ``pool``
    (a working copy): the started, the indices that waited, and the index from which every
    trial waits (the pool was full, or a trial of lower ``priority`` came after one that
    waited; no pair past it was read), the number of pairs if none."""
    started: list[Assignment] = []
    skipped: list[int] = []
    # Whether a trial fits depends only on the pool and on (width, c, memory), and the pool
    # changes only when a trial starts: a shape that did not fit since then does not fit now.
    failed: set[tuple[float, int, float | None]] = set()
    blocked: int | None = None  # priority of the first trial that waited
    k = -1
    for k, (spec, width) in enumerate(items):
        if pool.is_full() or (blocked is not None and priority(spec.id) < blocked):
            return started, skipped, k  # 10,000-trial groups on 8 GPUs: the rest all wait
        c = config.c_of(spec)
        shape = (width, c, spec.memory)
        gpus = None if shape in failed else pool.place(spec.id, width, c, spec.memory)
        if gpus is None:
            failed.add(shape)
            skipped.append(k)
            if priority is not None and blocked is None:
                blocked = priority(spec.id)
        else:
            failed.clear()
            started.append(Assignment(spec.id, width, gpus))
    return started, skipped, k + 1


def _start_in_order(
    queue: Iterable[tuple[TrialSpec, float]], pool: GpuPool, config: PolicyConfig
) -> tuple[list[Assignment], list[tuple[TrialSpec, float]]]:
    """``start_in_order`` placing the trials in ``pool`` itself (a working copy)."""
    items = list(queue)
    started, skipped, rest = _start(items, pool, config)
    return started, [items[k] for k in skipped] + items[rest:]


def start_in_order(
    queue: Iterable[tuple[TrialSpec, float]], pool: GpuPool, config: PolicyConfig
) -> tuple[list[Assignment], list[tuple[TrialSpec, float]], GpuPool]:
    """List scheduling: place each ``(trial, width)`` that fits, in order; the rest wait.

    Returns the started assignments, the still-waiting queue and the pool with the started
    trials placed (``pool`` itself when none started; it is never changed).
    """
    work = pool.copy()
    started, waiting = _start_in_order(queue, work, config)
    return started, waiting, work if started else pool


def start_while_room(
    queue: Iterable[tuple[TrialSpec, float]], pool: GpuPool, config: PolicyConfig,
    priority: Callable[[str], int] | None = None,
) -> tuple[list[Assignment], int, GpuPool]:
    """``start_in_order``'s started trials, reading ``queue`` lazily: only as far as the pool
    has room (a long queue on a full cluster is not even built). Also returns how many pairs
    were considered (placed or left waiting; every pair after them waits, in order) and the
    pool with the started trials placed (``pool`` itself when none started).

    ``priority`` (of a trial id; the queue in non-increasing order of it): no trial starts
    while one of higher priority waits, so the GPUs that free up go to it first (smaller
    trials of lower priority would otherwise take every share that frees and starve it)."""
    items = iter(queue)
    first = next(items, None)
    if first is None or pool.is_full():
        return [], 0, pool  # nothing to place, or no room for anything: no copy to make
    work = pool.copy()
    started, _, read = _start(itertools.chain([first], items), work, config, priority)
    return started, read, work if started else pool


def _size_started(started: list[Assignment], specs: Mapping[str, TrialSpec], pool: GpuPool,
                 config: PolicyConfig, waits: bool) -> list[Assignment]:
    """The trials just placed, fitted to what their placement left (nothing to restart yet).

    If nobody ``waits``, idle GPUs go to them (``hand_out``); else a packed one alone on its
    GPU takes the whole of it (``grow_alone``). Then packed ones widen into the unused share
    of their GPU (``widen_shares``). ``specs`` holds at least the started trials' specs.
    Updates ``pool``; returns the assignments at their new widths, in the same order.
    """
    widths = {a.trial_id: a.width for a in started}
    placed = [(specs[a.trial_id], a.width, 0.0) for a in started]
    if waits:
        widths.update(dict.fromkeys(grow_alone(placed, pool, config), 1.0))
    else:
        widths.update(hand_out(placed, pool, config))
    widths.update(widen_shares([specs[t] for t, w in widths.items() if is_packed(w)], pool))
    return [Assignment(a.trial_id, widths[a.trial_id], pool.where(a.trial_id)) for a in started]


def static_fluid(trials: Sequence[TrialSpec], pool: GpuPool, config: PolicyConfig,
                 rank: Mapping[str, int] | None = None) -> StaticPlan:
    """Algorithm 1 on the GPUs of ``pool`` that are free (``pool`` is not changed: the plan
    holds the pool after it). ``rank``: trials are placed by rank first (the order their
    algorithm would start them in), then by ``h_i1`` descending; widths are water-filled over
    all of them together either way."""
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate trial ids: {dup}")
    if not trials:
        return StaticPlan(widths={}, pool=pool)
    order, fill = _water_fill(trials, pool.free_capacity(), config)
    if rank is not None:  # a stable sort: h_i1 descending within a rank
        order, fill = map(list, zip(*sorted(zip(order, fill, strict=True),
                                            key=lambda x: rank[x[0].id]), strict=True))
    pool = pool.copy()
    ids = [t.id for t in order]
    widths = dict(zip(ids, fill, strict=True))
    started, skipped, rest = _start(zip(order, fill, strict=True), pool, config)
    specs = {t.id: t for t in order[:rest]}  # every trial started (none after ``rest`` did)
    started = _size_started(started, specs, pool, config,
                           waits=bool(skipped) or rest < len(order))
    widths.update((a.trial_id, a.width) for a in started)
    waiting = [ids[k] for k in skipped] + ids[rest:]
    return StaticPlan(widths=widths, pool=pool, started=started, waiting=waiting)
