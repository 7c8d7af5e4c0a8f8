"""Hypothesis strategies and invariant checks shared by the tests of ``fluid.core``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from hypothesis import strategies as st

from fluid.core import GpuPool, GroupSchedule, PolicyConfig, TrialSpec
from fluid.core.model import is_packed
from fluid.core.tolerances import WIDTH_TOL

TOL = 1e-9

runtimes = st.one_of(
    st.integers(1, 40).map(float),  # ties between trials
    st.floats(0.5, 1000.0, allow_nan=False, allow_infinity=False),
)
alphas = st.one_of(st.just(1.0), st.floats(1.0, 2.0))
betas = st.one_of(st.just(1.0), st.floats(1.0, 1.5))


@st.composite
def trial_lists(
    draw: st.DrawFn,
    min_size: int = 1,
    max_size: int = 8,
    overheads: bool = True,
    limits: bool = False,
    memory: bool = False,
) -> list[TrialSpec]:
    """Trials ``t0, t1, ...`` with random runtimes (and overheads, own c/d, memories)."""
    count = draw(st.integers(min_size, max_size))
    out = []
    for i in range(count):
        out.append(
            TrialSpec(
                f"t{i}",
                draw(runtimes),
                alpha=draw(alphas) if overheads else 1.0,
                beta=draw(betas) if overheads else 1.0,
                c=draw(st.one_of(st.none(), st.integers(1, 6))) if limits else None,
                d=draw(st.one_of(st.none(), st.integers(1, 6))) if limits else None,
                memory=draw(st.one_of(st.none(), st.floats(1.0, 16.0))) if memory else None,
            )
        )
    return out


def configs(eps: bool = False, gpu_memory: float | None = None) -> st.SearchStrategy[PolicyConfig]:
    """Group configs: c, d given or derived, eps zero or not."""
    return st.builds(
        PolicyConfig,
        c=st.one_of(st.none(), st.integers(1, 6)),
        d=st.one_of(st.none(), st.integers(1, 8)),
        eps=st.one_of(st.just(0.0), st.floats(0.0, 20.0)) if eps else st.just(0.0),
        gpu_memory=st.just(gpu_memory),
    )


def assert_pool_feasible(
    pool: GpuPool, specs: Mapping[str, TrialSpec], config: PolicyConfig
) -> None:
    """Every GPU of ``pool`` respects shares, packing limits, gangs and memory."""
    placement = pool.placement()
    seen_gangs: dict[str, set[int]] = {}
    for g, items in placement.items():
        assert g in pool.gpu_ids
        shares = [s for _, s in items]
        assert sum(shares) <= 1 + TOL, (g, items)
        if any(not is_packed(s) for s in shares):
            assert len(items) == 1 and shares[0] == 1.0, (g, items)  # a gang GPU is whole
            seen_gangs.setdefault(items[0][0], set()).add(g)
        else:
            limit = min(config.c_of(specs[t]) for t, _ in items)
            assert len(items) <= limit, (g, items, limit)
        if pool.memory is not None:
            used = sum(specs[t].memory or 0.0 for t, _ in items)
            assert used <= pool.memory + TOL, (g, items)
    for tid in pool.trials():
        gpus = pool.where(tid)
        assert len(set(gpus)) == len(gpus)
        w = pool.share_of(tid)
        if is_packed(w):
            assert len(gpus) == 1
        else:
            assert seen_gangs[tid] == set(gpus) and len(gpus) == round(w)
    empty = [g for g in pool.gpu_ids if g not in placement]
    assert pool.idle_count() == len(empty)
    free = len(empty) + sum(1 - sum(s for _, s in items) for items in placement.values())
    assert abs(pool.free_capacity() - free) < 1e-6
    assert pool.has_free() == (pool.free_capacity() > WIDTH_TOL)


def assert_schedule_feasible(
    schedule: GroupSchedule,
    trials: Sequence[TrialSpec],
    n: int,
    config: PolicyConfig,
) -> None:
    """Every trial finishes, does all its work, and no GPU is over capacity at any time."""
    specs = {t.id: t for t in trials}
    assert set(schedule.finish) == set(specs)
    assert abs(schedule.makespan - max(schedule.finish.values())) < TOL
    done: dict[str, float] = {t: 0.0 for t in specs}
    first_start: dict[str, float] = {}
    for seg in schedule.segments:
        assert seg.end >= seg.start - TOL
        assert all(0 <= g < n for g in seg.gpus)
        spec = specs[seg.trial_id]
        stall = config.eps if seg.trial_id in first_start else 0.0
        first_start.setdefault(seg.trial_id, seg.start)
        done[seg.trial_id] += max(0.0, seg.end - seg.start - stall) / spec.slowdown(seg.width)
        if is_packed(seg.width):
            assert len(seg.gpus) == 1
        else:
            assert len(seg.gpus) == round(seg.width) and len(set(seg.gpus)) == len(seg.gpus)
    for tid, spec in specs.items():
        assert abs(done[tid] - spec.runtime) <= 1e-6 * spec.runtime, (tid, done[tid])
        last = max(s.end for s in schedule.segments if s.trial_id == tid)
        assert abs(last - schedule.finish[tid]) < TOL
    # Capacity at every instant: check at every segment's midpoint-free event boundaries.
    times = sorted({s.start for s in schedule.segments} | {s.end for s in schedule.segments})
    for a, b in zip(times, times[1:], strict=False):
        if b - a <= TOL:
            continue
        mid = (a + b) / 2
        live = [s for s in schedule.segments if s.start < mid < s.end]
        per_gpu: dict[int, list[tuple[str, float]]] = {}
        for s in live:
            for g in s.gpus:
                per_gpu.setdefault(g, []).append((s.trial_id, s.width))
        for g, items in per_gpu.items():
            if any(not is_packed(w) for _, w in items):
                assert len(items) == 1, (mid, g, items)
            else:
                assert sum(w for _, w in items) <= 1 + TOL, (mid, g, items)
                assert len(items) <= min(config.c_of(specs[t]) for t, _ in items), (mid, g)
            if config.gpu_memory is not None:
                mem = sum(specs[t].memory or 0.0 for t, _ in items)
                assert mem <= config.gpu_memory + TOL


def ids(items: Iterable[object]) -> list[str]:
    """Trial ids of assignments / resizes."""
    return [x.trial_id for x in items]  # type: ignore[attr-defined]
