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
    >>> from fluid.core.gpus import GpuPool
    >>> trials = [TrialSpec(f"a{i}", h) for i, h in enumerate([4, 4, 12, 30], start=1)]
    >>> plan = static_fluid(trials, GpuPool(5), PolicyConfig(c=2, d=4))
    >>> plan.widths
    {'a4': 3.0, 'a3': 1.0, 'a1': 0.5, 'a2': 0.5}
    >>> plan.pool.placement()[4]
    [('a1', 0.5), ('a2', 0.5)]
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from fluid.core.config import PolicyConfig
from fluid.core.gpus import GpuPool
from fluid.core.model import TrialSpec, is_packed
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
        if left >= 1:
            slow = (cs > 1) & costly & (h[packed] * alphas > total / n)
            promoted = np.flatnonzero(slow)[:left]
            cs[promoted], costly[promoted] = 1.0, False
            left, k = left - promoted.size, k - promoted.size
        if left >= 1:  # (alpha_i = 1: a narrow share is as fast and leaves room for others)
            cs = np.where(costly, np.minimum(cs, max(1, math.ceil(k / left))), cs)
        shares = (1.0 / cs).tolist()  # the same IEEE quotient as 1.0 / c
        for i, share in zip(packed.tolist(), shares, strict=True):
            widths[i] = share
    for i, t in enumerate(order):
        if t.w_min is not None and widths[i] < t.w_min - WIDTH_TOL:
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
    items: Iterable[tuple[TrialSpec, float]], pool: GpuPool, config: PolicyConfig
) -> tuple[list[Assignment], list[int], int]:
    """``start_in_order`` on ``(trial, width)`` pairs read in order, placing them in ``pool``
    (a working copy): the started, the indices that waited, and the index from which every
    trial waits (the pool was full; no pair past it was read), the number of pairs if none."""
    started: list[Assignment] = []
    skipped: list[int] = []
    # Whether a trial fits depends only on the pool and on (width, c, memory), and the pool
    # changes only when a trial starts: a shape that did not fit since then does not fit now.
    failed: set[tuple[float, int, float | None]] = set()
    k = -1
    for k, (spec, width) in enumerate(items):
        if pool.is_full():
            return started, skipped, k  # 10,000-trial groups on 8 GPUs: the rest all wait
        c = config.c_of(spec)
        shape = (width, c, spec.memory)
        gpus = None if shape in failed else pool.place(spec.id, width, c, spec.memory)
        if gpus is None:
            failed.add(shape)
            skipped.append(k)
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
    queue: Iterable[tuple[TrialSpec, float]], pool: GpuPool, config: PolicyConfig
) -> tuple[list[Assignment], int, GpuPool]:
    """``start_in_order``'s started trials, reading ``queue`` lazily: only as far as the pool
    has room (a long queue on a full cluster is not even built). Also returns how many pairs
    were considered (placed or left waiting; every pair after them waits, in order) and the
    pool with the started trials placed (``pool`` itself when none started)."""
    items = iter(queue)
    first = next(items, None)
    if first is None or pool.is_full():
        return [], 0, pool  # nothing to place, or no room for anything: no copy to make
    work = pool.copy()
    started, _, read = _start(itertools.chain([first], items), work, config)
    return started, read, work if started else pool


def _grows_to(spec: TrialSpec, w: float, cost: float, config: PolicyConfig, whole: int,
              room: int) -> float | None:
    """The width ``hand_out`` would grow a trial to from ``w``: the least one, on at most
    ``room`` more whole GPUs and within ``d_i``, whose runtime beats ``h_i(w)`` by more than
    ``cost`` (``None``: none does). One restart pays for any number of extra GPUs, so a trial
    that one more GPU would not pay a restart for may still grow onto several (a packed
    share as fast as a whole GPU, ``alpha ~ 1``, gains only from a gang, the same way)."""
    if room < 1:
        return None
    packed = is_packed(w)
    lo = 1 if packed else int(w) + 1
    # d_of is at most the trial's own d: past it, no need to ask (most trials, each re-plan);
    # one GPU is always allowed (d_i >= 1), so a packed trial asks only if that is not enough.
    if spec.d is not None and lo > spec.d:
        return None
    d = None if packed else config.d_of(spec, whole)
    if d is not None and lo > d:
        return None
    h_w = spec.runtime_at(w) - WIDTH_TOL
    before = spec.runtime_at(float(lo))
    if before + cost < h_w:
        return float(lo)  # the next width pays (most growths): nothing more to look at
    top = room if packed else int(w) + room
    if top == lo or h_w - spec.runtime / top <= cost:
        return None  # not even a gang of ``top`` scaling perfectly (h_i1 / top) would pay
    top = min(top, config.d_of(spec, whole) if d is None else d)
    for k in range(lo + 1, top + 1):
        h_k = spec.runtime_at(float(k))
        if h_k + cost < h_w:
            return float(k)
        if h_k >= before:
            return None  # past the fastest gang: wider ones are slower still
        before = h_k
    return None


def _hand_out(
    candidates: Sequence[tuple[TrialSpec, float, float]],
    pool: GpuPool,
    config: PolicyConfig,
) -> dict[str, float]:
    """Give idle whole GPUs, one at a time, to the trial that would end last.

    A packed trial alone on its GPU may also grow to that whole GPU (the rest of it is idle).

    ``candidates`` are ``(trial, current width, cost of resizing it)``: ``eps`` for a running
    trial, 0 for one being started or already being resized. A trial grows to the least
    wider shape ``w'`` (whole GPUs: a packed share becomes one GPU or a gang, a gang gets more
    GPUs) with ``h_i(w') + cost < h_i(w)``, never past ``d_i``: one more GPU at a time once
    the cost is paid, several at once where one more alone would not pay for it. Gangs keep
    their GPUs and add the new ones. Updates ``pool``; returns ``{trial id: new width}`` for
    the trials that grew.
    """
    grown: dict[str, float] = {}
    # A packed trial alone on its GPU can take the whole of it in place, without idle GPUs.
    idle, alone = pool.idle_count(), pool.alone_packed()
    if not (idle or alone):
        return grown  # nothing to give (most re-plans of a full cluster): skip the heap
    if not idle:
        # Only a packed trial alone on its GPU can grow (in place: its GPU is the only one to
        # become idle, and it takes it back), so the others are not even looked at.
        candidates = [c for c in candidates if c[0].id in alone and is_packed(c[1])]
    width = {spec.id: w for spec, w, _ in candidates}
    lonely = {t for t in alone if t in width and is_packed(width[t])}
    if not (idle or lonely):
        return grown
    whole = pool.n
    # A trial that cannot gain from its next width, or never find the GPUs for it, is passed
    # over whenever it comes up, with no effect: leave it out of the heap (most trials of a
    # re-plan). Idle GPUs plus its own GPU if alone on it never grow while handing out (a
    # mate that leaves takes an idle GPU), so a width that does not fit now never will.
    heap = [(-spec.runtime_at(w), i) for i, (spec, w, k) in enumerate(candidates)
            if _grows_to(spec, w, k, config, whole, idle + (spec.id in lonely)) is not None]
    heapq.heapify(heap)
    cost = {spec.id: k for spec, _, k in candidates}
    while heap and (pool.idle_count() or lonely):
        _, i = heapq.heappop(heap)
        spec = candidates[i][0]
        w = width[spec.id]
        room = pool.idle_count() + (spec.id in lonely)
        nxt = _grows_to(spec, w, cost[spec.id], config, whole, room)
        if nxt is None:
            continue
        mates = pool.neighbours(spec.id)
        moved = (
            pool.move(spec.id, nxt, config.c_of(spec), spec.memory)
            if is_packed(w)
            else pool.grow_gang(spec.id, int(round(nxt - w)))
        )
        if moved is None:
            continue
        lonely.discard(spec.id)
        if len(mates) == 1 and mates[0] in width and is_packed(width[mates[0]]):
            lonely.add(mates[0])  # its last GPU-mate left
        width[spec.id] = nxt
        cost[spec.id] = 0.0  # one resize covers any number of extra GPUs
        grown[spec.id] = nxt
        heapq.heappush(heap, (-spec.runtime_at(nxt), i))
    return grown


def _widen_shares(packed: Sequence[TrialSpec], pool: GpuPool) -> dict[str, float]:
    """Give the unused share of each packed GPU to the trials on it that pay for packing.

    A trial with ``alpha_i > 1`` runs faster on a wider share ``1/k``; the share a GPU's
    trials leave unused serves nobody. Each of ``packed`` (placed at shares in ``pool``),
    the one that would end last first, takes the widest ``1/k`` that still fits on its GPU.
    Updates ``pool``; returns ``{trial id: new share}`` for the trials that widened.
    """
    wider: dict[str, float] = {}
    roomy = pool.unfilled()
    if not roomy:
        return wider  # every packed GPU is full (most plans of a busy cluster)
    shares = [(spec, pool.share_of(spec.id)) for spec in packed
              if spec.alpha > 1.0 and pool.where(spec.id)[0] in roomy]
    for spec, share in sorted(shares, key=lambda x: -x[0].runtime_at(x[1])):
        for k in range(2, round(1.0 / share)):
            if pool.reshare(spec.id, 1.0 / k):
                wider[spec.id] = 1.0 / k
                break
    return wider


def _grow_alone(candidates: Sequence[tuple[TrialSpec, float, float]], pool: GpuPool,
                config: PolicyConfig) -> dict[str, tuple[int, ...]]:
    """While trials wait that fit nowhere, a packed trial alone on its GPU takes the whole of it
    where that pays for its resize cost: the rest of its GPU serves none of them
    (``start_in_order`` just found no room for any), and it frees the GPU sooner.

    ``candidates`` are ``(trial, width, cost)`` as for ``hand_out``. Updates ``pool``; returns
    ``{trial id: its GPUs}`` for the trials that grew to one GPU."""
    alone = pool.alone_packed()
    grown: dict[str, tuple[int, ...]] = {}
    for spec, w, cost in candidates:
        if (spec.id in alone and is_packed(w)
                and spec.runtime_at(1.0) + cost < spec.runtime_at(w) - WIDTH_TOL):
            gpus = pool.move(spec.id, 1.0, config.c_of(spec), spec.memory)
            if gpus is not None:
                grown[spec.id] = gpus
    return grown


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
        widths.update(dict.fromkeys(_grow_alone(placed, pool, config), 1.0))
    else:
        widths.update(_hand_out(placed, pool, config))
    widths.update(_widen_shares([specs[t] for t, w in widths.items() if is_packed(w)], pool))
    return [Assignment(a.trial_id, widths[a.trial_id], pool.where(a.trial_id)) for a in started]


def static_fluid(trials: Sequence[TrialSpec], pool: GpuPool, config: PolicyConfig) -> StaticPlan:
    """Algorithm 1 on the GPUs of ``pool`` that are free (``pool`` is not changed: the plan
    holds the pool after it)."""
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate trial ids: {dup}")
    if not trials:
        return StaticPlan(widths={}, pool=pool)
    order, fill = _water_fill(trials, pool.free_capacity(), config)
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
