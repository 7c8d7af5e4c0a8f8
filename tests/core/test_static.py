"""StaticFluid (Algorithm 1): water-filling widths, list-scheduled placement, hand-out."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluid.core import (
    GpuPool,
    PolicyConfig,
    RunningTrial,
    TrialSpec,
    dynamic_fluid,
    static_fluid,
    water_fill,
)
from fluid.core.groupsim import simulate_group
from fluid.core.growth import hand_out, widen_shares
from fluid.core.instance import figure5
from fluid.core.model import is_packed
from fluid.core.static import start_in_order

from .strategies import assert_pool_feasible, configs, trial_lists
from .test_static_reference import reference_widths


def test_figure5_widths_and_placement() -> None:
    inst = figure5()
    pool = GpuPool(inst.gpus)
    plan = static_fluid(inst.trials, pool, inst.config)
    pool = plan.pool
    assert plan.widths == {"a4": 3.0, "a3": 1.0, "a1": 0.5, "a2": 0.5}
    assert [a.trial_id for a in plan.started] == ["a4", "a3", "a1", "a2"]
    assert plan.waiting == []
    assert pool.placement() == {
        0: [("a4", 1.0)],
        1: [("a4", 1.0)],
        2: [("a4", 1.0)],
        3: [("a3", 1.0)],
        4: [("a1", 0.5), ("a2", 0.5)],
    }
    assert pool.idle_count() == 0


@given(trials=trial_lists(max_size=12, limits=True), n=st.integers(1, 40), config=configs())
@settings(max_examples=150, deadline=None)
def test_water_fill_is_algorithm_1(trials: list[TrialSpec], n: int, config: PolicyConfig) -> None:
    widths = water_fill(trials, n, config)
    assert widths == reference_widths(trials, n, config)
    # In non-increasing order of h_i1, ties in input order.
    assert list(widths) == [t.id for t in sorted(trials, key=lambda t: -t.runtime)]
    for t in trials:
        w = widths[t.id]
        if is_packed(w):
            assert 1 / config.c_of(t) <= w < 1  # 1/c, or wider when fewer share a GPU
        else:
            assert w == int(w) and 1 <= w <= config.d_of(t, n)


def test_water_fill_over_the_capacity_the_group_can_get() -> None:
    # Slip 2: another group holds 3 of 4 GPUs; this group water-fills over 1 GPU.
    pool = GpuPool(4)
    pool.place("other", 3.0)
    trials = [TrialSpec("a", 30.0), TrialSpec("b", 10.0)]
    plan = static_fluid(trials, pool, PolicyConfig(c=2, d=4))
    pool = plan.pool
    assert plan.widths == {"a": 0.5, "b": 0.5}  # not 3 and 1 as over all 4 GPUs
    assert pool.placement()[3] == [("a", 0.5), ("b", 0.5)]


def test_idle_gpus_go_to_the_trial_that_would_end_last() -> None:
    # Slip 3: floor(20/21*4) = 3 and floor(1/21*4) = 0 leave nothing idle, but floor can:
    # 3 trials of 10 s on 4 GPUs get width 1 each; the 4th GPU goes to one of them.
    trials = [TrialSpec(t, 10.0) for t in "abc"]
    pool = GpuPool(4)
    plan = static_fluid(trials, pool, PolicyConfig(c=2, d=4))
    pool = plan.pool
    assert sorted(plan.widths.values()) == [1.0, 1.0, 2.0]
    assert pool.idle_count() == 0
    # No GPU is handed to a trial that cannot use it (d = 1).
    pool = GpuPool(4)
    plan = static_fluid(trials, pool, PolicyConfig(c=2, d=1))
    pool = plan.pool
    assert plan.widths == {"a": 1.0, "b": 1.0, "c": 1.0} and pool.idle_count() == 1


def test_hand_out_only_when_it_pays_for_the_cost() -> None:
    spec = TrialSpec("a", 8.0)
    for cost, grows in ((3.9, True), (4.0, False)):
        pool = GpuPool(2)
        pool.place("a", 1.0)
        grown = hand_out([(spec, 1.0, cost)], pool, PolicyConfig(d=4))
        assert (grown == {"a": 2.0}) == grows  # h(2) + cost < h(1) = 8 iff cost < 4
    # Scaling overhead: a second GPU that slows the trial down is not given.
    slow = TrialSpec("s", 8.0, beta=2.5)
    pool = GpuPool(2)
    pool.place("s", 1.0)
    assert hand_out([(slow, 1.0, 0.0)], pool, PolicyConfig(d=4)) == {}


def test_trials_that_do_not_fit_wait_and_later_ones_still_start() -> None:
    trials = [TrialSpec("big", 100.0, d=3), TrialSpec("mid", 50.0, d=3), TrialSpec("s", 1.0)]
    pool = GpuPool(4)
    pool.place("other", 0.5, c=2)  # 3 whole GPUs and half a GPU left
    plan = static_fluid(trials, pool, PolicyConfig(c=2))
    pool = plan.pool
    # Water-filled over 3.5: big gets floor(2.3) = 2, mid floor(1.15) = 1, s 1/2.
    assert plan.widths == {"big": 2.0, "mid": 1.0, "s": 0.5}
    assert plan.waiting == []
    started, waiting, _ = start_in_order(
        [(TrialSpec("x", 1.0), 2.0), (TrialSpec("y", 1.0), 0.5)], GpuPool(1), PolicyConfig(c=2)
    )
    assert [a.trial_id for a in started] == ["y"] and [s.id for s, _ in waiting] == ["x"]


def test_duplicate_ids_and_empty_groups() -> None:
    with pytest.raises(ValueError, match=r"duplicate trial ids: \['a'\]"):
        static_fluid([TrialSpec("a", 1.0), TrialSpec("a", 2.0)], GpuPool(2), PolicyConfig())
    plan = static_fluid([], GpuPool(2), PolicyConfig())
    assert plan.widths == {} and plan.started == [] and plan.waiting == []


@given(
    trials=trial_lists(max_size=14, limits=True, memory=True),
    n=st.integers(1, 10),
    config=configs(gpu_memory=16.0),
    busy=st.integers(0, 3),
)
@settings(max_examples=150, deadline=None)
def test_placement_is_feasible(
    trials: list[TrialSpec], n: int, config: PolicyConfig, busy: int
) -> None:
    pool = GpuPool(n, config.gpu_memory)
    others = {}
    for i in range(min(busy, n - 1)):  # another group's trials
        other = TrialSpec(f"other{i}", 1.0, c=2)
        others[other.id] = other
        pool.place(other.id, [1.0, 0.5][i % 2], c=2)
    plan = static_fluid(trials, pool, config)
    pool = plan.pool
    specs = {t.id: t for t in trials} | others
    assert_pool_feasible(pool, specs, config)
    # Every trial is either started (on GPUs matching its width) or waiting, never both.
    started = {a.trial_id: a for a in plan.started}
    assert set(started) | set(plan.waiting) == {t.id for t in trials}
    assert not set(started) & set(plan.waiting)
    for tid, a in started.items():
        assert a.width == plan.widths[tid] and a.gpus == pool.where(tid)
        assert math.isclose(pool.share_of(tid), a.width)
    for tid in plan.waiting:
        assert pool.where(tid) == ()
    # Idle GPUs are left only when somebody waits or nobody can use one more GPU.
    if pool.idle_count() and not plan.waiting:
        for t in trials:
            w = plan.widths[t.id]
            nxt = 1.0 if is_packed(w) else w + 1
            assert nxt > config.d_of(t, pool.n) or t.runtime_at(nxt) >= t.runtime_at(w) - 1e-9


def test_a_packed_trial_alone_on_its_gpu_takes_all_of_it() -> None:
    # 3 GPUs, c = 4: t0 gets 2 GPUs, t1 a quarter of the third, alone there; with
    # alpha = 1.95 a quarter GPU is 7.4x slower than the whole one nobody else uses.
    pool = GpuPool(3)
    trials = [TrialSpec("t0", 73.0), TrialSpec("t1", 30.0, alpha=1.95)]
    plan = static_fluid(trials, pool, PolicyConfig(c=4))
    pool = plan.pool
    assert plan.widths == {"t0": 2.0, "t1": 1.0}
    assert pool.where("t1") == (2,)


def test_w_min_is_a_floor_of_every_plan() -> None:
    # Eight short trials would be packed at 1/8; two asked for a whole GPU, one for 2 GPUs.
    trials = [TrialSpec(f"s{i}", 1.0) for i in range(5)]
    trials += [TrialSpec("one", 1.0, w_min=1.0), TrialSpec("one2", 1.0, w_min=1.0)]
    trials.append(TrialSpec("two", 1.0, d=2, w_min=2.0))
    config = PolicyConfig(c=8)
    widths = water_fill(trials, 4, config)
    assert widths["one"] == widths["one2"] == 1.0 and widths["two"] == 2.0
    assert widths["s0"] == 1 / 8
    # Above the free capacity the request still holds: the trial waits instead.
    plan = static_fluid([TrialSpec("big", 1.0, d=4, w_min=4.0)], GpuPool(2), config)
    assert plan.widths == {"big": 4.0} and plan.waiting == ["big"]
    # DynamicFluid never shrinks a trial below its request.
    pool = GpuPool(4)
    long, asked = TrialSpec("long", 100.0), TrialSpec("asked", 1.0, d=2, w_min=2.0)
    pool.place("asked", 2.0)
    pool.place("long", 1.0)
    plan = dynamic_fluid([RunningTrial(long, 1.0), RunningTrial(asked, 2.0)], [], pool, config)
    pool = plan.pool
    assert all(r.new_width >= 2.0 for r in plan.resized if r.trial_id == "asked")
    assert pool.share_of("asked") == 2.0


def test_a_share_asked_for_is_exactly_that_share() -> None:
    # Six trials that asked for half a GPU on four GPUs, packing unmeasured (alpha 2): each on
    # its 0.5, all six at once, as under plain Tune; no idle GPU or unused share widens one.
    trials = [TrialSpec(f"h{i}", 1.0, alpha=2.0, c=2, w_min=0.5) for i in range(6)]
    assert all(t.fixed_share for t in trials)
    assert not TrialSpec("one", 1.0, w_min=1.0).fixed_share
    plan = static_fluid(trials, GpuPool(4), PolicyConfig())
    assert set(plan.widths.values()) == {0.5} and not plan.waiting
    assert {a.width for a in plan.started} == {0.5}
    # Alone on a GPU with three idle ones: not handed out, not grown, not resized later.
    pool = GpuPool(4)
    pool.place("h0", 0.5, c=2)
    assert hand_out([(trials[0], 0.5, 0.0)], pool, PolicyConfig()) == {}
    plan = dynamic_fluid([RunningTrial(trials[0], 0.5)], [], pool, PolicyConfig())
    assert not plan.resized and plan.pool.share_of("h0") == 0.5


def test_a_packed_trial_that_would_end_last_gets_a_whole_gpu() -> None:
    # 2 GPUs, c = 4, d = 1 (a random group of test_bounds, 1.18x behind best found before):
    # water level (276 + 587 + 705 + 7) / 2 = 788 s; t2 at half a GPU would take
    # 705 x 1.795 = 1266 s, so it gets GPU 0 alone; t0 (alpha 1.66: c_i = 2) and t1
    # (alpha 1: free to pack, 1/4) share GPU 1; t3 waits for t0 to end (457 s).
    trials = [TrialSpec("t0", 275.6, alpha=1.66), TrialSpec("t1", 587.3),
              TrialSpec("t2", 705.5, alpha=1.795), TrialSpec("t3", 7.0)]
    config = PolicyConfig(c=4, d=1)
    pool = GpuPool(2)
    plan = static_fluid(trials, pool, config)
    pool = plan.pool
    assert plan.widths == {"t2": 1.0, "t1": 0.25, "t0": 0.5, "t3": 0.25}
    assert pool.placement() == {0: [("t2", 1.0)], 1: [("t1", 0.25), ("t0", 0.5)]}
    assert plan.waiting == ["t3"]
    # Nothing ends after t2's 705.5 s alone: the best list schedule's makespan.
    assert simulate_group(trials, 2, config, "dynamic").makespan == pytest.approx(705.5)


def test_the_unused_share_of_a_gpu_goes_to_the_trial_that_pays_for_packing() -> None:
    # One GPU, c = 6: three trials that pack for free (alpha 1) take 1/6 each; t3 (alpha
    # 1.111) would get 1/4 of it, a quarter of the GPU unused: it takes 1/2 instead.
    trials = [TrialSpec("t0", 17.0), TrialSpec("t1", 34.0), TrialSpec("t2", 34.0),
              TrialSpec("t3", 33.0, alpha=1.111)]
    pool = GpuPool(1)
    plan = static_fluid(trials, pool, PolicyConfig(c=6))
    pool = plan.pool
    assert plan.widths["t3"] == 0.5 and [a.width for a in plan.started if a.trial_id == "t3"] == [0.5]
    assert sum(share for _, share in pool.placement()[0]) == pytest.approx(1.0)
    # widen_shares: the one that would end last widens first, to the widest share that fits.
    pool = GpuPool(1)
    a, b = TrialSpec("a", 10.0, alpha=1.5), TrialSpec("b", 30.0, alpha=1.2)
    for tid in ("a", "b", "free"):
        pool.place(tid, 0.25, c=4)
    # b would end last (30 x 1.2^3 > 10 x 1.5^3): 1/2; nothing is left for a.
    assert widen_shares([a, b, TrialSpec("free", 5.0)], pool) == {"b": 0.5}
    assert pool.placement() == {0: [("a", 0.25), ("b", 0.5), ("free", 0.25)]}
    pool.release("b")
    assert widen_shares([TrialSpec("free", 5.0)], pool) == {}  # alpha 1 gains nothing


def test_a_packed_trial_alone_takes_its_gpu_while_the_others_cannot_fit() -> None:
    # One GPU: t1 (alpha 1.38) is placed at 1/2; t0 packs badly (alpha 1.96: c_i = 1) and needs
    # the whole GPU, so it waits whatever t1 does: t1 runs alone on the whole GPU meanwhile.
    trials = [TrialSpec("t0", 244.4, alpha=1.957), TrialSpec("t1", 261.6, alpha=1.379)]
    config = PolicyConfig(c=3, d=5)
    pool = GpuPool(1)
    plan = static_fluid(trials, pool, config)
    pool = plan.pool
    assert plan.widths["t1"] == 1.0 and plan.waiting == ["t0"]
    assert simulate_group(trials, 1, config, "dynamic").makespan == pytest.approx(506.0)


def test_one_restart_pays_for_several_gpus() -> None:
    # A running trial of 40 s on one GPU, 3 idle GPUs, a restart cost of 20 s: a second GPU
    # alone gains 40 - 21 = 19 s, not enough; four GPUs gain 40 - 11.6 = 28.4 s, so it takes
    # them at once (one restart), not one at a time as long as each step pays (it would stay).
    spec = TrialSpec("long", 40.0, beta=1.05)
    for cost, grows in ((20.0, True), (15.0, True), (30.0, False)):
        pool = GpuPool(4)
        pool.place("long", 1.0)
        grown = hand_out([(spec, 1.0, cost)], pool, PolicyConfig(d=4))
        # 20 s: the least width that pays is 3 GPUs (40 - 14.0 = 26 s), then a fourth GPU
        # gains more at no further cost; 15 s: 2 GPUs pay, then 3 and 4 follow; 30 s: none.
        assert grown == ({"long": 4.0} if grows else {})
        assert len(pool.where("long")) == (4 if grows else 1)
    # A packed share as fast as a whole GPU (alpha 1) gains only from a gang: of 3 GPUs
    # here, where a gang of 2 (40 / 2 x 1.3 = 26 s) does not pay for a cost of 15 s.
    pool = GpuPool(3)
    pool.place("share", 0.5, c=2)
    grown = hand_out([(TrialSpec("share", 40.0, beta=1.3), 0.5, 15.0)], pool, PolicyConfig(d=3))
    assert grown == {"share": 3.0} and len(pool.where("share")) == 3
