"""StaticFluid and placement against a straightforward reference, on seeded random groups.

``static_fluid``, ``start_in_order`` and ``GpuPool`` take shortcuts for 10,000-trial groups
(issue 14): numpy water-filling, a sorted index of partially used GPUs, skipping trials that
cannot fit. The reference below does the same decisions the obvious way (every GPU scanned for
every trial, the formula of Algorithm 1 written out), so "same outputs" is checked: the same
widths in the same order, the same started trials on the same GPUs, the same waiting order and
the same final placement.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fluid.core import GpuPool, PolicyConfig, TrialSpec, static_fluid
from fluid.core.growth import hand_out
from fluid.core.model import is_packed
from fluid.core.static import start_in_order

TOL = 1e-9


class NaivePool:
    """GPUs as a list of ``{trial: (share, c, memory)}``; every query scans them all."""

    def __init__(self, n: int, memory: float | None) -> None:
        self.gpus: list[dict[str, tuple[float, int, float | None]]] = [{} for _ in range(n)]
        self.memory = memory
        self.where: dict[str, tuple[int, ...]] = {}

    def used(self, g: int) -> float:
        return sum(s for s, _, _ in self.gpus[g].values())

    def idle(self) -> list[int]:
        return [g for g, on in enumerate(self.gpus) if not on]

    def memory_ok(self, g: int, memory: float | None) -> bool:
        if self.memory is None or memory is None:
            return True
        return sum(m or 0.0 for _, _, m in self.gpus[g].values()) + memory <= self.memory + TOL

    def place(self, tid: str, width: float, c: int, memory: float | None) -> tuple[int, ...] | None:
        if is_packed(width):
            fitting = [
                g
                for g, on in enumerate(self.gpus)
                if on
                and all(is_packed(s) for s, _, _ in on.values())
                and self.used(g) < 1 - TOL
                and len(on) < min(k for _, k, _ in on.values())  # the GPU can take a trial
                and self.used(g) + width <= 1 + TOL
                and len(on) + 1 <= min(c, *(k for _, k, _ in on.values()))
                and self.memory_ok(g, memory)
            ]
            if fitting:
                gpus = (min(fitting, key=lambda g: (-self.used(g), g)),)  # fullest, lowest id
            elif self.idle() and self.memory_ok(self.idle()[0], memory):
                gpus = (self.idle()[0],)
            else:
                return None
            self.gpus[gpus[0]][tid] = (width, c, memory)
        else:
            if self.memory is not None and memory is not None and memory > self.memory + TOL:
                return None
            if len(self.idle()) < round(width):
                return None
            gpus = tuple(self.idle()[: round(width)])
            for g in gpus:
                self.gpus[g][tid] = (1.0, 1, memory)
        self.where[tid] = gpus
        return gpus

    def placement(self) -> dict[int, list[tuple[str, float]]]:
        return {g: [(t, s) for t, (s, _, _) in on.items()] for g, on in enumerate(self.gpus) if on}


def reference_widths(trials: list[TrialSpec], n: float, config: PolicyConfig) -> dict[str, float]:
    """Algorithm 1's formula, in non-increasing order of ``h_i1`` (ties in input order), then
    packed trials with ``alpha_i > 1`` slower at half a GPU than ``total / n`` promoted to one
    GPU while GPUs are left, the other packed shares widened to ``1/min(c_i, ceil(k / GPUs
    left))`` for trials with ``alpha_i > 1`` (``k`` packed trials not promoted; GPUs left:
    ``floor(n - sum of the others' w_i)``), then ``w_min``; a share asked for (``w_min``
    below one) is exactly that share, never promoted."""
    order = sorted(trials, key=lambda t: -t.runtime)
    total = sum(t.runtime for t in order)
    whole = math.floor(n + TOL)
    widths = {
        t.id: float(min(max(math.floor(t.runtime / total * n + TOL), 1 / config.c_of(t)),
                        config.d_of(t, whole)))
        for t in order
    }
    packed = [t for t in order if math.floor(t.runtime / total * n + TOL) < 1]
    left = math.floor(n - sum(widths[t.id] for t in order if t not in packed) + TOL)
    promoted = []
    for t in packed:  # slower at 1/2 than the water level total / n: one GPU, while any left
        if (left >= 1 and config.c_of(t) > 1 and t.alpha > 1.0
                and t.runtime * t.alpha > total / n and not asked_share(t)):
            widths[t.id] = 1.0
            promoted.append(t)
            left -= 1
    for t in packed:
        if left >= 1 and t.alpha > 1.0 and t not in promoted:
            k = len(packed) - len(promoted)
            widths[t.id] = 1 / min(config.c_of(t), max(1, math.ceil(k / left)))
    for t in order:
        if t.w_min is not None and (widths[t.id] < t.w_min - TOL or asked_share(t)):
            widths[t.id] = t.w_min
    return widths


def asked_share(t: TrialSpec) -> bool:
    """Its user asked for a share below one GPU: it keeps exactly that share."""
    return t.w_min is not None and t.w_min < 1 - TOL


def reference_hand_out(
    started: list[tuple[TrialSpec, float]], pool: NaivePool, config: PolicyConfig,
    costs: dict[str, float] | None = None,
) -> dict[str, float]:
    """Idle GPUs one at a time to the trial that would end last while one more GPU pays for
    its resize cost (``costs``, 0 if not given; 0 once it grew)."""
    cost = {s.id: 0.0 for s, _ in started} | (costs or {})
    width = {s.id: w for s, w in started}
    active = list(range(len(started)))  # candidates still considered, by index
    grown: dict[str, float] = {}

    def neighbours(tid: str) -> list[str]:
        return [t for g in pool.where[tid] for t in pool.gpus[g] if t != tid]

    active = [i for i in active if not asked_share(started[i][0])]
    lonely = {s.id for s, w in started if is_packed(w) and not neighbours(s.id)}
    while active and (pool.idle() or lonely):
        i = min(active, key=lambda i: (-started[i][0].runtime_at(width[started[i][0].id]), i))
        spec = started[i][0]
        w = width[spec.id]
        k = cost[spec.id]
        # The least wider whole-GPU shape that pays for the cost, on the GPUs it could take.
        room = len(pool.idle()) + (spec.id in lonely)
        base = 0 if is_packed(w) else round(w)
        paying = [float(g) for g in range(base + 1, base + room + 1)
                  if g <= config.d_of(spec, len(pool.gpus))
                  and spec.runtime_at(float(g)) + k < spec.runtime_at(w) - TOL]
        if not paying:
            active.remove(i)
            continue
        nxt = paying[0]
        mates = neighbours(spec.id)
        if is_packed(w):
            (g,) = pool.where[spec.id]
            old = pool.gpus[g].pop(spec.id)
            del pool.where[spec.id]
            if pool.place(spec.id, nxt, config.c_of(spec), spec.memory) is None:
                pool.gpus[g][spec.id] = old
                pool.where[spec.id] = (g,)
                active.remove(i)
                continue
        else:
            for extra in pool.idle()[: round(nxt - w)]:
                pool.gpus[extra][spec.id] = (1.0, 1, spec.memory)
                pool.where[spec.id] += (extra,)
        lonely.discard(spec.id)
        if len(mates) == 1 and mates[0] in width and is_packed(width[mates[0]]):
            lonely.add(mates[0])
        width[spec.id] = grown[spec.id] = nxt
        cost[spec.id] = 0.0
    return grown


def reference_widen(started: list[tuple[TrialSpec, float]], pool: NaivePool) -> dict[str, float]:
    """Packed trials with ``alpha_i > 1``, the one that would end last first, each to the
    widest ``1/k`` (``k >= 2``) that fits in what its GPU's shares leave."""
    wider: dict[str, float] = {}
    costly = [(s, w) for s, w in started if is_packed(w) and s.alpha > 1.0
              and not asked_share(s)]
    for spec, w in sorted(costly, key=lambda x: -x[0].runtime_at(x[1])):
        (g,) = pool.where[spec.id]
        rest = pool.used(g) - w
        for k in range(2, round(1 / w)):
            if rest + 1 / k <= 1 + TOL:
                pool.gpus[g][spec.id] = (1 / k, *pool.gpus[g][spec.id][1:])
                wider[spec.id] = 1 / k
                break
    return wider


def reference_grow_alone(started: list[tuple[TrialSpec, float]], pool: NaivePool,
                         config: PolicyConfig) -> dict[str, float]:
    """While trials wait: packed trials alone on their GPU that are faster on one GPU move to
    the first idle GPU (their own, released, counts)."""
    grown: dict[str, float] = {}
    alone = [s for s, w in started if is_packed(w) and not asked_share(s)
             and len(pool.gpus[pool.where[s.id][0]]) == 1]
    for spec in alone:
        (g,) = pool.where[spec.id]
        if spec.runtime_at(1.0) < spec.runtime_at(pool.gpus[g][spec.id][0]) - TOL:
            del pool.where[spec.id]
            old = pool.gpus[g].pop(spec.id)
            if pool.place(spec.id, 1.0, config.c_of(spec), spec.memory) is None:
                pool.gpus[g][spec.id], pool.where[spec.id] = old, (g,)
            else:
                grown[spec.id] = 1.0
    return grown


def random_instance(
    rng: np.random.Generator,
) -> tuple[list[TrialSpec], int, float | None, PolicyConfig, list[tuple[str, float, int]]]:
    """A group (ties, own c/d, memories, requests), a GPU count and other groups' trials."""
    count = int(rng.choice([1, 3, 8, 30, 200, 600]))
    gpus = int(rng.choice([1, 2, 5, 8, 64]))
    memory = 16.0 if rng.random() < 0.3 else None
    config = PolicyConfig(
        c=None if rng.random() < 0.6 else int(rng.integers(1, 7)),
        d=None if rng.random() < 0.6 else int(rng.integers(1, 9)),
        gpu_memory=memory,
    )
    extras = rng.random() < 0.4
    trials = []
    for i in range(count):
        runtime = float(rng.integers(1, 20)) if rng.random() < 0.3 else float(rng.uniform(0.5, 1e4))
        trials.append(
            TrialSpec(
                f"t{i}",
                runtime,
                alpha=1.0 if rng.random() < 0.2 else float(rng.uniform(1.0, 2.0)),
                beta=1.0 if rng.random() < 0.2 else float(rng.uniform(1.0, 1.5)),
                c=int(rng.integers(1, 7)) if extras and rng.random() < 0.3 else None,
                d=int(rng.integers(1, 7)) if extras and rng.random() < 0.3 else None,
                memory=float(rng.uniform(1.0, 16.0)) if memory and rng.random() < 0.7 else None,
                w_min=float(rng.choice([0.5, 1.0, 2.0]))
                if extras and rng.random() < 0.05
                else None,
            )
        )
    others = [
        (f"other{i}", float(rng.choice([0.25, 0.5, 1.0, 2.0])), int(rng.integers(1, 5)))
        for i in range(int(rng.integers(0, 4)))
    ]
    return trials, gpus, memory, config, others


def _pools(
    gpus: int, memory: float | None, others: list[tuple[str, float, int]]
) -> tuple[GpuPool, NaivePool]:
    pool, naive = GpuPool(gpus, memory), NaivePool(gpus, memory)
    for tid, w, c in others:
        assert (pool.place(tid, w, c) is None) == (naive.place(tid, w, c, None) is None)
    return pool, naive


@pytest.mark.parametrize("seed", range(300))
def test_static_fluid_matches_the_reference(seed: int) -> None:
    trials, gpus, memory, config, others = random_instance(np.random.default_rng(seed))
    pool, naive = _pools(gpus, memory, others)
    plan = static_fluid(trials, pool, config)
    pool = plan.pool

    n = len(naive.idle()) + sum(
        1 - naive.used(g)
        for g, on in enumerate(naive.gpus)
        if on and all(is_packed(s) for s, _, _ in on.values()) and naive.used(g) < 1 - TOL
    )
    widths = reference_widths(trials, n, config)
    by_id = {t.id: t for t in trials}
    started, waiting = [], []
    for tid, w in widths.items():
        spec = by_id[tid]
        gpus_got = naive.place(tid, w, config.c_of(spec), spec.memory)
        (waiting.append(tid) if gpus_got is None else started.append((spec, w)))
    if not waiting:
        widths.update(reference_hand_out(started, naive, config))
    else:
        widths.update(reference_grow_alone(started, naive, config))
    widths.update(reference_widen([(s, widths[s.id]) for s, _ in started], naive))
    assert [(a.trial_id, a.width, a.gpus) for a in plan.started] == [
        (s.id, widths[s.id], naive.where[s.id]) for s, _ in started
    ]
    assert list(plan.widths.items()) == list(widths.items()) and plan.waiting == waiting
    assert pool.placement() == naive.placement()


@pytest.mark.parametrize("seed", range(100))
def test_start_in_order_matches_the_reference(seed: int) -> None:
    # Any queue order, any widths (a DynamicFluid queue), on a pool other groups partly use.
    rng = np.random.default_rng(10_000 + seed)
    trials, gpus, memory, config, others = random_instance(rng)
    pool, naive = _pools(gpus, memory, others)
    widths = [float(rng.choice([1 / 6, 0.25, 1 / 3, 0.5, 1.0, 2.0, 3.0])) for _ in trials]
    queue = [(t, w) for t, w in zip(trials, widths, strict=True)]
    before = pool.placement()
    started, waiting, after = start_in_order(iter(queue), pool, config)
    assert pool.placement() == before  # the pool given is not changed
    expected = [(t.id, naive.place(t.id, w, config.c_of(t), t.memory)) for t, w in queue]
    assert [(a.trial_id, a.gpus) for a in started] == [(t, g) for t, g in expected if g]
    assert [(s.id, w) for s, w in waiting] == [
        (t.id, w) for (t, w), (_, g) in zip(queue, expected, strict=True) if g is None
    ]
    assert after.placement() == naive.placement()


@pytest.mark.parametrize("seed", range(150))
def test_hand_out_with_resize_costs_matches_the_reference(seed: int) -> None:
    # Running trials at any widths (DynamicFluid's candidates), some gone (idle GPUs, packed
    # trials left alone on theirs), other groups' trials on the pool, a resize cost each.
    rng = np.random.default_rng(20_000 + seed)
    trials, gpus, memory, config, others = random_instance(rng)
    pool, naive = _pools(gpus, memory, others)
    widths = [float(rng.choice([1 / 6, 0.25, 1 / 3, 0.5, 1.0, 2.0])) for _ in trials]
    started, _, pool = start_in_order(iter(zip(trials, widths, strict=True)), pool, config)
    for t, w in zip(trials, widths, strict=True):
        naive.place(t.id, w, config.c_of(t), t.memory)  # the same (the test above)
    gone = {a.trial_id for a in started if rng.random() < 0.3}
    for tid in gone:
        pool.release(tid)
        for g in naive.where.pop(tid):
            del naive.gpus[g][tid]
    if rng.random() < 0.5:  # other groups take the idle GPUs: only lonely trials may grow
        for g in naive.idle():
            assert pool.place(f"filler{g}", 1.0) == naive.place(f"filler{g}", 1.0, 1, None)
    by_id = {t.id: t for t in trials}
    kept = [(by_id[a.trial_id], a.width) for a in started if a.trial_id not in gone]
    # Some costs near half a trial's runtime: one more GPU then rarely pays, several may.
    costs = {s.id: float(rng.choice([0.0, rng.uniform(0.0, 50.0),
                                     s.runtime * rng.uniform(0.3, 0.7)])) for s, _ in kept}
    grown = hand_out([(s, w, costs[s.id]) for s, w in kept], pool, config)
    assert grown == reference_hand_out(kept, naive, config, costs)
    assert pool.placement() == naive.placement()
