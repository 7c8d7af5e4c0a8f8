"""Growing trials into what a plan leaves unused: idle GPUs, the rest of a GPU a packed trial
has to itself, the share a GPU's packed trials leave free (StaticFluid at time 0, DynamicFluid
when trials leave; docs/design.md, "The paper's slips" 3, 6 and 7).

* ``hand_out``: idle whole GPUs, one at a time, to the trial that would end last, while one
  more GPU makes it faster by more than its resize cost;
* ``grow_alone``: while trials wait that fit nowhere, a packed trial alone on its GPU takes
  the whole of it;
* ``widen_shares``: packed trials with ``alpha_i > 1`` widen into the share their GPU's trials
  leave unused.

Each takes the working copy of a pool and changes it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from fluid.core.config import PolicyConfig
from fluid.core.model import TrialSpec, is_packed
from fluid.core.pool import GpuPool
from fluid.core.tolerances import WIDTH_TOL


def grows_to(spec: TrialSpec, w: float, cost: float, config: PolicyConfig, whole: int,
              room: int) -> float | None:
    """The width ``hand_out`` would grow a trial to from ``w``: the least one, on at most
    ``room`` more whole GPUs and within ``d_i``, whose runtime beats ``h_i(w)`` by more than
    ``cost`` (``None``: none does). One restart pays for any number of extra GPUs, so a trial
    that one more GPU would not pay a restart for may still grow onto several (a packed
    share as fast as a whole GPU, ``alpha ~ 1``, gains only from a gang, the same way)."""
    if room < 1 or spec.fixed_share:
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


def hand_out(
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
            if grows_to(spec, w, k, config, whole, idle + (spec.id in lonely)) is not None]
    heapq.heapify(heap)
    cost = {spec.id: k for spec, _, k in candidates}
    while heap and (pool.idle_count() or lonely):
        _, i = heapq.heappop(heap)
        spec = candidates[i][0]
        w = width[spec.id]
        room = pool.idle_count() + (spec.id in lonely)
        nxt = grows_to(spec, w, cost[spec.id], config, whole, room)
        if nxt is None:
            continue
        mates = pool.neighbours(spec.id)
        if not _grow(spec, w, nxt, pool, config):
            continue
        lonely.discard(spec.id)
        if len(mates) == 1 and mates[0] in width and is_packed(width[mates[0]]):
            lonely.add(mates[0])  # its last GPU-mate left
        width[spec.id] = nxt
        cost[spec.id] = 0.0  # one resize covers any number of extra GPUs
        grown[spec.id] = nxt
        heapq.heappush(heap, (-spec.runtime_at(nxt), i))
    return grown


def _grow(spec: TrialSpec, w: float, nxt: float, pool: GpuPool, config: PolicyConfig) -> bool:
    """Widen ``spec`` in ``pool`` from ``w`` to ``nxt`` (a packed share moves to its new
    GPUs, a gang adds GPUs to those it holds); whether the GPUs were there."""
    if is_packed(w):
        return pool.move(spec.id, nxt, config.c_of(spec), spec.memory) is not None
    return pool.grow_gang(spec.id, int(round(nxt - w))) is not None


def widen_shares(packed: Sequence[TrialSpec], pool: GpuPool) -> dict[str, float]:
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
              if spec.alpha > 1.0 and not spec.fixed_share and pool.where(spec.id)[0] in roomy]
    for spec, share in sorted(shares, key=lambda x: -x[0].runtime_at(x[1])):
        for k in range(2, round(1.0 / share)):
            if pool.reshare(spec.id, 1.0 / k):
                wider[spec.id] = 1.0 / k
                break
    return wider


def grow_alone(candidates: Sequence[tuple[TrialSpec, float, float]], pool: GpuPool,
                config: PolicyConfig) -> dict[str, tuple[int, ...]]:
    """While trials wait that fit nowhere, a packed trial alone on its GPU takes the whole of it
    where that pays for its resize cost: the rest of its GPU serves none of them
    (``start_in_order`` just found no room for any), and it frees the GPU sooner.

    ``candidates`` are ``(trial, width, cost)`` as for ``hand_out``. Updates ``pool``; returns
    ``{trial id: its GPUs}`` for the trials that grew to one GPU."""
    alone = pool.alone_packed()
    grown: dict[str, tuple[int, ...]] = {}
    for spec, w, cost in candidates:
        if (spec.id in alone and is_packed(w) and not spec.fixed_share
                and spec.runtime_at(1.0) + cost < spec.runtime_at(w) - WIDTH_TOL):
            gpus = pool.move(spec.id, 1.0, config.c_of(spec), spec.memory)
            if gpus is not None:
                grown[spec.id] = gpus
    return grown
