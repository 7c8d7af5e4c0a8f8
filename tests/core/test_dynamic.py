"""DynamicFluid (Algorithm 2): re-plans on departures and GPU changes, eps, resizability."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fluid.core import (
    GpuPool,
    PolicyConfig,
    RunningTrial,
    TrialSpec,
    dynamic_fluid,
    static_fluid,
)

from .strategies import assert_pool_feasible, configs, trial_lists


def _figure5_at_4s(eps: float) -> tuple[GpuPool, list[RunningTrial], PolicyConfig]:
    pool = GpuPool(5)
    pool.place("a4", 3.0)
    pool.place("a3", 1.0)
    running = [RunningTrial(TrialSpec("a4", 18.0), 3.0), RunningTrial(TrialSpec("a3", 8.0), 1.0)]
    return pool, running, PolicyConfig(c=2, d=4, eps=eps)


def test_figure5_departure_hands_the_idle_gpu_to_the_trial_that_ends_last() -> None:
    pool, running, config = _figure5_at_4s(eps=0.0)
    plan = dynamic_fluid(running, [], pool, config)
    pool = plan.pool
    assert [(r.trial_id, r.old_width, r.new_width) for r in plan.resized] == [("a3", 1.0, 2.0)]
    assert plan.resized[0].gpus == (3, 4)  # keeps its GPU, adds the idle one
    assert pool.where("a4") == (0, 1, 2) and pool.idle_count() == 0


def test_scale_up_only_if_it_pays_for_eps() -> None:
    # a3 at one GPU ends in 8 s; on two in 4 s: worth it iff 4 + eps < 8.
    for eps, resized in ((3.9, True), (4.0, False), (10.0, False)):
        pool, running, config = _figure5_at_4s(eps)
        plan = dynamic_fluid(running, [], pool, config)
        pool = plan.pool
        assert bool(plan.resized) == resized, eps
        assert pool.idle_count() == (0 if resized else 1)


def test_scale_down_only_if_it_pays_for_eps() -> None:
    # "a" holds 4 GPUs with 1 s of one-GPU work left; "b" has 100 s on one GPU.
    # Water-filling over 5 GPUs: a -> 1/2, b -> 4. Scale down iff 1/2 * (1 + eps) < 4 * 1/4.
    for eps, down in ((0.5, True), (0.99, True), (1.0, False), (2.0, False)):
        pool = GpuPool(5)
        pool.place("a", 4.0)
        pool.place("b", 1.0)
        running = [
            RunningTrial(TrialSpec("a", 1.0), 4.0),
            RunningTrial(TrialSpec("b", 100.0), 1.0),
        ]
        plan = dynamic_fluid(running, [], pool, PolicyConfig(c=2, d=4, eps=eps))
        pool = plan.pool
        new = {r.trial_id: r.new_width for r in plan.resized}
        if down:
            # b's scale-up pays (25 + eps < 100) and uses the GPUs a gave back.
            assert new == {"a": 0.5, "b": 4.0}
        else:
            assert new == {}  # b cannot grow: no GPU is free
            assert pool.where("a") == (0, 1, 2, 3)


def test_non_resizable_trials_keep_their_shape() -> None:
    pool, running, config = _figure5_at_4s(eps=0.0)
    fixed = [RunningTrial(r.spec, r.width, resizable=r.spec.id != "a3") for r in running]
    plan = dynamic_fluid(fixed, [], pool, config)
    pool = plan.pool
    # a3 cannot grow; a4 (18 s on 3 GPUs = 6.4 s) gets the idle GPU instead.
    assert [(r.trial_id, r.new_width) for r in plan.resized] == [("a4", 4.0)]
    assert pool.where("a3") == (3,)


def test_no_shrink_into_capacity_nobody_uses() -> None:
    # g (2 GPUs, beta = 1.5) would save area on 1 GPU, but no trial needs the GPU it would
    # free: shrinking it only slows it down, and handing the GPU back would be a restart for
    # nothing (it used to end on GPU 0 instead of 3, a move the caller must hear of).
    pool = GpuPool(4)
    pool.place("z", 1.0)
    pool.place("y", 1.0)
    pool.place("g", 2.0)  # GPUs 2, 3
    pool.release("z")  # GPU 0 idle
    running = [
        RunningTrial(TrialSpec("y", 2.0, d=1), 1.0),
        RunningTrial(TrialSpec("g", 1.0, beta=1.5, d=2), 2.0),
    ]
    plan = dynamic_fluid(running, [], pool, PolicyConfig())
    pool = plan.pool
    assert plan.resized == []
    assert pool.where("y") == (1,) and pool.where("g") == (2, 3)


def test_a_resize_that_does_not_pay_eps_is_not_made() -> None:
    # Found by the property test: t2 (5 GPUs) was water-filled down to 1 GPU and handed
    # GPUs back up to 6: a net 5 -> 6 that saves 0.04 s and costs eps = 1 s.
    pool = GpuPool(7)
    config = PolicyConfig(d=1, eps=1.0)
    t1, t2 = TrialSpec("t1", 6.0), TrialSpec("t2", 2.0, beta=1.125, d=6)
    pool.place("t0", 1.0)
    pool.place("t1", 1.0)
    pool.place("t2", 5.0)
    pool.release("t0")
    plan = dynamic_fluid([RunningTrial(t1, 1.0), RunningTrial(t2, 5.0)], [], pool, config)
    pool = plan.pool
    assert plan.resized == []
    assert pool.where("t2") == (2, 3, 4, 5, 6)


def test_waiting_trials_take_freed_capacity_first() -> None:
    pool = GpuPool(2)
    pool.place("a", 1.0)
    running = [RunningTrial(TrialSpec("a", 50.0), 1.0)]
    waiting = [(TrialSpec("w1", 10.0), 1.0), (TrialSpec("w2", 10.0), 1.0)]
    plan = dynamic_fluid(running, waiting, pool, PolicyConfig(c=2, d=4))
    pool = plan.pool
    assert [a.trial_id for a in plan.started] == ["w1"]
    assert [s.id for s, _ in plan.waiting] == ["w2"]
    assert plan.resized == []  # nobody is resized while trials of the group wait


def test_a_packed_trial_left_alone_takes_its_gpu_while_the_waiting_cannot_fit() -> None:
    # One GPU: t3 (alpha 1.7) at half of it lost its mate; t2 needs the whole GPU and waits
    # whatever t3 does, so t3 runs on the whole GPU (at an eps that the gain pays for) and
    # frees it sooner; with a cost above the gain it stays.
    t3, t2 = TrialSpec("t3", 30.0, alpha=1.7), TrialSpec("t2", 4.0, alpha=2.0)
    for eps, grows in ((1.0, True), (25.0, False)):
        pool = GpuPool(1)
        pool.place("t3", 0.5, c=6)
        plan = dynamic_fluid([RunningTrial(t3, 0.5)], [(t2, 1.0)], pool,
                             PolicyConfig(c=6, eps=eps))
        pool = plan.pool
        assert [s.id for s, _ in plan.waiting] == ["t2"] and plan.started == []
        assert [(z.trial_id, z.new_width) for z in plan.resized] == ([("t3", 1.0)] if grows else [])
        assert pool.share_of("t3") == (1.0 if grows else 0.5)


def test_gpu_removal_evicts_and_the_re_plan_restarts_the_evicted() -> None:
    trials = [TrialSpec("a", 40.0), TrialSpec("b", 20.0), TrialSpec("c", 4.0)]
    config = PolicyConfig(c=2, d=4)
    pool = GpuPool(6)
    plan = static_fluid(trials, pool, config)
    pool = plan.pool
    # floor(3.75) = 3, floor(1.875) = 1, 1/2; the idle GPU goes to b (20 s > 40/3 s).
    assert plan.widths == {"a": 3.0, "b": 2.0, "c": 0.5}
    evicted = pool.remove_gpus([0])  # a node with GPU 0 (part of a's gang) left
    assert evicted == ["a"] and pool.where("a") == () and pool.n == 5
    assert pool.idle_count() == 2  # GPUs 1 and 2, left by a's gang
    by_id = {t.id: t for t in trials}
    running = [RunningTrial(by_id[t], plan.widths[t]) for t in ("b", "c")]
    before = {t: pool.where(t) for t in ("b", "c")}
    replan = dynamic_fluid(running, [(by_id["a"], 3.0)], pool, config)
    pool = replan.pool
    # a waits for 3 GPUs; while it waits nobody is resized or moved.
    assert replan.started == [] and [s.id for s, _ in replan.waiting] == ["a"]
    assert replan.resized == [] and {t: pool.where(t) for t in before} == before
    pool.release("b")  # b ends: its GPUs and the idle ones fit a again
    replan = dynamic_fluid([running[1]], replan.waiting, pool, config)
    pool = replan.pool
    assert [a.trial_id for a in replan.started] == ["a"] and replan.waiting == []
    # a starts on its 3 GPUs and, as StaticFluid would at time 0, takes the fourth idle one
    # (c holds the fifth): 40/4 s against 40/3 s.
    assert 0 not in pool.where("a") and len(pool.where("a")) == 4 and pool.idle_count() == 0
    assert replan.started[0].width == 4.0
    assert_pool_feasible(pool, by_id, config)


def test_gpu_addition_is_handed_out() -> None:
    trials = [TrialSpec("a", 40.0), TrialSpec("b", 10.0)]
    config = PolicyConfig(c=2, d=4)
    pool = GpuPool(2)
    plan = static_fluid(trials, pool, config)
    pool = plan.pool
    assert plan.widths == {"a": 1.0, "b": 0.5}  # floor(1.6), floor(0.4) -> 1/c
    new = pool.add_gpus(2)
    running = [RunningTrial(t, plan.widths[t.id]) for t in trials]
    replan = dynamic_fluid(running, [], pool, config)
    pool = replan.pool
    # Water-filling over 4 GPUs: a -> floor(3.2) = 3, b -> 1/2 (unchanged).
    assert {r.trial_id: r.new_width for r in replan.resized} == {"a": 3.0}
    assert set(new) <= set(pool.where("a")) and pool.idle_count() == 0


@given(
    trials=trial_lists(max_size=10, limits=True),
    n=st.integers(1, 10),
    config=configs(eps=True),
    progress=st.lists(st.floats(0.0, 0.99), min_size=10, max_size=10),
    fixed=st.lists(st.booleans(), min_size=10, max_size=10),
    change=st.sampled_from(["departure", "remove", "add"]),
)
@settings(max_examples=150, deadline=None)
def test_re_plans_keep_the_pool_feasible_and_follow_the_rules(
    trials: list[TrialSpec],
    n: int,
    config: PolicyConfig,
    progress: list[float],
    fixed: list[bool],
    change: str,
) -> None:
    pool = GpuPool(n)
    plan = static_fluid(trials, pool, config)
    pool = plan.pool
    by_id = {t.id: t for t in trials}
    started = [a.trial_id for a in plan.started]
    waiting = [(by_id[t], plan.widths[t]) for t in plan.waiting]
    if change == "departure":
        pool.release(started[0])
        started = started[1:]
    elif change == "remove" and pool.n > 1:
        gone = set(pool.remove_gpus([pool.gpu_ids[-1]]))
        waiting = [(by_id[t], plan.widths[t]) for t in started if t in gone] + waiting
        started = [t for t in started if t not in gone]
    else:
        pool.add_gpus(2)
    running = [
        RunningTrial(
            by_id[t].with_runtime(by_id[t].runtime * (1 - progress[i])),
            plan.widths[t],
            resizable=not fixed[i],
        )
        for i, t in enumerate(started)
    ]
    before = {t: pool.where(t) for t in started}
    alone = pool.alone_packed()
    given = pool.placement()
    replan = dynamic_fluid(running, waiting, pool, config)
    assert pool.placement() == given  # the pool given is not changed
    again = dynamic_fluid(running, waiting, pool, config, target=replan.target)
    pool = replan.pool
    assert_pool_feasible(pool, by_id, config)
    # The widths it aimed at, given back (a second call with another eps): the same plan.
    decisions = lambda p: (p.resized, p.started, p.waiting, p.target)  # noqa: E731
    assert decisions(again) == decisions(replan)
    assert again.pool.placement() == pool.placement()
    if replan.waiting:
        # While trials of the group wait, only a packed trial alone on its GPU is resized: to
        # one GPU, the rest of its GPU being of no use to them.
        assert all(z.trial_id in alone and z.new_width == 1.0 for z in replan.resized)
    assert_resizes_follow_the_rules(running, replan.resized, pool, before, config)


def assert_resizes_follow_the_rules(running: list[RunningTrial], resizes: list, pool: GpuPool,
                                    before: dict, config: PolicyConfig) -> None:
    """Untouched trials keep their GPUs; a resized one was resizable, stays within ``d``,
    and a move, a scale-up or a scale-down each pays for ``eps``."""
    resized = {r.trial_id: r for r in resizes}
    for r in running:
        tid = r.spec.id
        if tid not in resized:
            assert pool.where(tid) == before[tid]  # untouched trials keep their GPUs
            continue
        z = resized[tid]
        assert r.resizable  # non-resizable trials are never resized
        assert z.old_width == r.width and z.gpus == pool.where(tid)
        assert math.isclose(pool.share_of(tid), z.new_width)
        assert z.new_width <= config.d_of(r.spec, pool.n)
        h_old, h_new = r.spec.runtime_at(r.width), r.spec.runtime_at(z.new_width)
        if z.new_width == r.width:
            assert z.gpus != before[tid]  # a move (shrunk, then grown back elsewhere)
        elif z.new_width > r.width:
            assert h_new + config.eps < h_old  # a scale-up pays for eps
        else:
            assert z.new_width * (h_new + config.eps) < r.width * h_old  # so does a scale-down
