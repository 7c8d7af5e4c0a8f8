"""GpuPool: packing limits, best fit, gangs, memory, GPU removal and addition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluid.core import GpuPool, PolicyConfig, TrialSpec

from .strategies import assert_pool_feasible


def _norm(placement: dict[int, list[tuple[str, float]]]) -> dict[int, list[tuple[str, float]]]:
    """A placement with each GPU's trials sorted (the order on a GPU carries no meaning)."""
    return {g: sorted(items) for g, items in placement.items()}


def test_packed_shares_fill_the_fullest_gpu_first() -> None:
    pool = GpuPool(3)
    assert pool.place("a", 0.5, c=4) == (0,)
    assert pool.place("b", 0.25, c=4) == (0,)  # best fit: GPU 0 already used
    assert pool.place("g", 1.0) == (1,)
    assert pool.place("c", 0.5, c=4) == (2,)  # 0.75 + 0.5 > 1: next idle GPU
    assert pool.place("d", 0.25, c=4) == (0,)  # the fullest GPU it fits on
    assert pool.placement() == {
        0: [("a", 0.5), ("b", 0.25), ("d", 0.25)],
        1: [("g", 1.0)],
        2: [("c", 0.5)],
    }
    assert pool.idle_count() == 0 and pool.free_capacity() == pytest.approx(0.5)


def test_packing_limit_is_the_min_c_of_the_trials_on_the_gpu() -> None:
    pool = GpuPool(2)
    pool.place("a", 0.25, c=2)  # at most 2 trials wherever "a" is
    pool.place("b", 0.25, c=4)
    assert pool.place("c", 0.25, c=4) == (1,)  # GPU 0 has room in shares, not in count
    assert pool.place("d", 0.25, c=1) is None  # alone only: GPU 1 holds "c", none idle
    pool.release("a")
    assert pool.place("e", 0.25, c=4) == (0,)  # limit of GPU 0 is back to 4


def test_gangs_take_whole_idle_gpus_and_keep_them() -> None:
    pool = GpuPool(4)
    pool.place("p", 0.5, c=2)
    assert pool.place("g", 3.0) == (1, 2, 3)
    assert pool.place("h", 1.0) is None  # GPU 0 is not whole
    assert pool.shrink_gang("g", 1) == (1,)
    assert pool.grow_gang("g", 1) == (1, 2)
    assert pool.grow_gang("g", 5) is None
    assert pool.share_of("g") == 2.0 and pool.share_of("p") == 0.5
    with pytest.raises(ValueError, match="cannot shrink"):
        pool.shrink_gang("g", 3)
    with pytest.raises(ValueError, match="already placed"):
        pool.place("g", 1.0)


def test_memory_safe_packing() -> None:
    pool = GpuPool(2, memory=16.0)
    assert pool.place("a", 0.5, c=2, memory=10.0) == (0,)
    assert pool.place("b", 0.5, c=2, memory=10.0) == (1,)  # 20 GB would not fit on GPU 0
    assert pool.place("c", 0.5, c=2, memory=7.0) is None  # 17 GB on either GPU
    assert pool.place("d", 0.5, c=2, memory=6.0) == (0,)
    assert not GpuPool(1, memory=8.0).fits(1.0, memory=9.0)
    with pytest.raises(ValueError, match="gpu_memory must be > 0"):
        GpuPool(1, memory=0.0)


def test_move_changes_shape_or_changes_nothing() -> None:
    pool = GpuPool(2)
    pool.place("a", 0.5, c=2)
    pool.place("b", 0.5, c=2)
    pool.place("g", 1.0)
    before = _norm(pool.placement())
    assert pool.move("a", 2.0) is None  # no two whole GPUs free
    assert _norm(pool.placement()) == before
    pool.release("g")
    assert pool.move("a", 1.0) == (1,)
    assert pool.placement() == {0: [("b", 0.5)], 1: [("a", 1.0)]}


def test_remove_gpus_evicts_whole_gangs_and_add_gpus_uses_fresh_ids() -> None:
    pool = GpuPool(4)
    pool.place("g", 2.0)  # GPUs 0, 1
    pool.place("a", 0.5, c=2)  # GPU 2
    pool.place("b", 0.5, c=2)  # GPU 2
    pool.place("h", 1.0)  # GPU 3
    assert pool.remove_gpus([1, 2]) == ["a", "b", "g"]
    assert pool.gpu_ids == [0, 3] and pool.trials() == ["h"]
    assert pool.idle_count() == 1  # GPU 0, left by the evicted gang
    assert pool.add_gpus(2) == [4, 5]  # ids are never reused
    assert pool.n == 4 and pool.idle_count() == 3
    assert pool.place("g", 3.0) == (0, 4, 5)
    with pytest.raises(ValueError, match="unknown GPU ids"):
        pool.remove_gpus([1])


def test_copy_is_independent() -> None:
    pool = GpuPool(2)
    pool.place("a", 0.5, c=2)
    other = pool.copy()
    other.place("b", 0.5, c=2)
    other.place("g", 1.0)
    assert pool.placement() == {0: [("a", 0.5)]}
    assert pool.place("c", 0.5, c=2) == (0,)
    assert other.placement() == {0: [("a", 0.5), ("b", 0.5)], 1: [("g", 1.0)]}


WIDTHS = [1 / 8, 1 / 5, 1 / 4, 1 / 3, 1 / 2, 1.0, 2.0, 3.0]
ops = st.lists(
    st.tuples(
        st.sampled_from(["place", "release", "move", "shrink", "grow", "remove", "add"]),
        st.integers(0, 11),  # trial
        st.sampled_from(WIDTHS),
        st.integers(1, 6),  # c
        st.one_of(st.none(), st.floats(1.0, 12.0)),  # memory
    ),
    max_size=60,
)


@given(n=st.integers(1, 8), memory=st.sampled_from([None, 16.0]), steps=ops)
@settings(max_examples=150, deadline=None)
def test_random_operations_keep_the_pool_feasible(
    n: int, memory: float | None, steps: list[tuple[str, int, float, int, float | None]]
) -> None:
    pool = GpuPool(n, memory)
    specs: dict[str, TrialSpec] = {}
    cs: dict[str, int] = {}
    for op, i, w, c, mem in steps:
        tid = f"t{i}"
        placed = tid in pool.trials()
        before = _norm(pool.placement())
        held = pool.where(tid)
        if op == "place" and not placed:
            spec = TrialSpec(tid, 1.0, c=c, memory=mem)
            got = pool.place(tid, w, c, mem)
            if got is None:
                assert _norm(pool.placement()) == before
            else:
                specs[tid], cs[tid] = spec, c
                assert pool.where(tid) == got
        elif op == "release":
            assert pool.release(tid) == held
            assert tid not in pool.trials()
        elif op == "move" and placed:
            got = pool.move(tid, w, cs[tid], specs[tid].memory)
            if got is None:
                assert _norm(pool.placement()) == before and pool.where(tid) == held
        elif op == "shrink" and placed and pool.share_of(tid) >= 2:
            assert len(pool.shrink_gang(tid, 1)) == 1
        elif op == "grow" and placed and pool.share_of(tid) >= 1:
            idle = pool.idle_count()
            got = pool.grow_gang(tid, 1)
            assert (got is None) == (idle == 0)
        elif op == "remove" and pool.n:
            g = pool.gpu_ids[i % pool.n]
            on = {t for t, _ in before.get(g, [])}
            evicted = pool.remove_gpus([g])
            assert set(evicted) == on and not on & set(pool.trials())
        elif op == "add":
            new = pool.add_gpus(i % 3)
            assert all(g in pool.gpu_ids for g in new)
        assert_pool_feasible(pool, specs, PolicyConfig())
        assert all(pool.alone(f"t{k}") == (not pool.neighbours(f"t{k}")) for k in range(12))
        assert pool.alone_packed() == {t for t in pool.trials()
                                       if pool.share_of(t) < 1 and pool.alone(t)}


def _state(pool: GpuPool) -> tuple:
    """Everything a pool's decisions read, for comparing a pool with a reference."""
    gpus = {g: (dict(x.shares), dict(x.limits), dict(x.memory), x.used, x.limit)
            for g, x in pool._gpus.items()}
    return (gpus, pool._idle, pool._partial, pool._open, pool._by_used, pool._where,
            pool.free_capacity())


def _apply(pool: GpuPool, op: str, i: int, w: float, c: int, mem: float | None) -> None:
    tid = f"t{i}"
    placed = tid in pool.trials()
    if op == "place" and not placed:
        pool.place(tid, w, c, mem)
    elif op == "release":
        pool.release(tid)
    elif op == "move" and placed:
        pool.move(tid, w, c, mem)
    elif op == "shrink" and placed and pool.share_of(tid) >= 2:
        pool.shrink_gang(tid, 1)
    elif op == "grow" and placed and pool.share_of(tid) >= 1:
        pool.grow_gang(tid, 1)
    elif op == "remove" and pool.n:
        pool.remove_gpus([pool.gpu_ids[i % pool.n]])
    elif op == "add":
        pool.add_gpus(i % 3)


@given(n=st.integers(1, 8), memory=st.sampled_from([None, 16.0]), steps=ops,
       forks=st.lists(st.integers(0, 60), max_size=4), sides=st.lists(st.booleans(), max_size=60))
@settings(max_examples=150, deadline=None)
def test_copies_share_gpus_until_either_changes_one(
    n: int, memory: float | None, steps: list[tuple[str, int, float, int, float | None]],
    forks: list[int], sides: list[bool],
) -> None:
    """``copy`` shares the GPUs' records until one side changes them: every pool, original or
    copy, must behave as a fully independent deep copy taken at the same moment would."""
    import copy as copying

    pools = [GpuPool(n, memory)]
    refs = [copying.deepcopy(pools[0])]
    for k, step in enumerate(steps):
        if k in forks:  # fork the last pool; both sides go on changing
            pools.append(pools[-1].copy())
            refs.append(copying.deepcopy(refs[-1]))
        which = -1 if (sides[k] if k < len(sides) else False) else 0
        _apply(pools[which], *step)
        _apply(refs[which], *step)
        for pool, ref in zip(pools, refs, strict=True):
            assert _state(pool) == _state(ref)
