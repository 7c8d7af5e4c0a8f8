"""The time-to-target rules (``fluid.core.policy``) on frozen trials and pools, without Ray:
limits, the gains a resize must beat, the guard, resizes per rung, failed gangs, gang probes,
re-plans in rounds; and that no rule changes what it is given."""

from __future__ import annotations

import doctest
import importlib
import math
import pkgutil
from dataclasses import replace

import pytest

import fluid.core
from fluid.core import (
    GpuPool,
    LiveTrial,
    PolicyConfig,
    TrialFacts,
    TrialSpec,
    Tunables,
    resize_group,
    trial_limits,
)
from fluid.core.policy import (
    first_result_due,
    group_load,
    is_probe_candidate,
    judged_beta,
    may_probe,
    probe_gangs,
    replan_due,
    undo_slow_gangs,
)

T = Tunables()
CONFIG = PolicyConfig(o_th=T.o_th, c_max=T.c_max)


def _live(pool: GpuPool, specs: list[TrialSpec], widths: list[float], **facts) -> list[LiveTrial]:
    """Running trials placed in ``pool`` at ``widths`` (pausable, elastic, measured)."""
    out = []
    for spec, w in zip(specs, widths, strict=True):
        assert pool.place(spec.id, w) is not None
        values = {"pausable": True, "elastic": True, "measured": True, **facts}
        out.append(LiveTrial.of(spec, w, T, **values))
    return out


def test_every_core_module_runs_its_examples() -> None:
    for info in pkgutil.iter_modules(fluid.core.__path__):
        module = importlib.import_module(f"fluid.core.{info.name}")
        assert doctest.testmod(module).failed == 0, info.name


def test_tunables_name_the_field_and_range() -> None:
    with pytest.raises(ValueError, match="resize_gain must be >= 0, got -1"):
        Tunables(resize_gain=-1)
    with pytest.raises(ValueError, match="c_max must be an integer >= 1, got 1.5"):
        Tunables(c_max=1.5)  # type: ignore[arg-type]
    assert replace(T, idle_gain=3.0).idle_gain == 3.0


@pytest.mark.parametrize(("facts", "limits"), [
    (TrialFacts(2.0, 2.0, elastic=True), (1, 1, None)),  # unmeasured: one GPU, alone
    (TrialFacts(2.0, 1.05, elastic=True, measured=True), (1, 2, None)),  # then a probe of 2
    (TrialFacts(2.0, 1.05, elastic=True, measured=True, beta_measured=True), (1, 8, None)),
    (TrialFacts(1.05, 2.0, alpha_measured=True), (2, 1, None)),  # packs when measured cheap
    (TrialFacts(1.05, 2.0, priority=1), (1, 1, None)),  # promoted, its alpha not measured
    (TrialFacts(1.04, 2.0, priority=1, alpha_measured=True), (2, 1, None)),
    (TrialFacts(1.06, 2.0, priority=1, alpha_measured=True), (1, 1, None)),
    # the experiment's packing measured (a profile, or probes) on hardware where it is free
    (TrialFacts(1.04, 2.0, priority=1, packing_measured=True), (2, 1, None)),
    (TrialFacts(1.3, 2.0, priority=1, packing_measured=True), (1, 1, None)),
    (TrialFacts(1.04, 2.0, runs_to_end=True), (1, 1, None)),  # its budget is its stop: leads
    (TrialFacts(1.04, 2.0, runs_to_end=True, packing_measured=True), (2, 1, None)),
    (TrialFacts(2.0, 2.0, probe=True), (2, 1, None)),  # a packing probe shares its GPU
    # every trial runs its whole budget: a pair packs wherever it adds throughput
    (TrialFacts(1.4, 2.0, packing_measured=True), (1, 1, None)),
    (TrialFacts(1.4, 2.0, packing_measured=True, throughput_only=True), (2, 1, None)),
    (TrialFacts(1.85, 2.0, packing_measured=True, throughput_only=True), (1, 1, None)),
    (TrialFacts(2.0, 2.0, probe=True, priority=1), (1, 1, None)),  # never a leader
    (TrialFacts(1.0, 2.0, min_share=0.5), (2, 1, None)),  # ran out of memory below 1/2
    (TrialFacts(1.0, 1.0, w_min=2.0), (2, 2, 2.0)),  # rigid, asked for 2 GPUs
    (TrialFacts(1.0, 1.0, elastic=True, keeps_shape=True, asked=2.0), (1, 2, 2.0)),
    (TrialFacts(1.0, 1.0, keeps_shape=True, asked=0.5), (1, 1, 1.0)),  # PBT: one GPU at least
])
def test_limits(facts: TrialFacts, limits: tuple) -> None:
    assert trial_limits(facts, CONFIG, T, gpus=8) == limits


def test_a_users_c_and_d_apply_as_given_and_a_profiles_only_cap() -> None:
    facts = TrialFacts(1.0, 1.0, elastic=True, beta_measured=True)
    user = replace(CONFIG, c=4, d=3)
    assert trial_limits(facts, user, T, gpus=8) == (4, 3, None)
    assert trial_limits(replace(facts, alpha=1.5), user, T, 8, exact=False) == (1, 3, None)


@pytest.mark.parametrize(("eps", "search_done", "width"), [
    (4.4 / T.idle_gain, True, 2.0),  # gains 4.5 s > idle_gain x eps: grows into idle GPUs
    (4.6 / T.idle_gain, True, None),  # not enough
    (4.4 / T.idle_gain, False, None),  # a new trial may still come: resize_gain x eps needed
])
def test_idle_gpus_go_to_the_straggler_when_its_gain_beats_idle_gain_eps(eps, search_done,
                                                                          width) -> None:
    # One straggler on 4 GPUs, 10 s of one-GPU work, beta 1.1, d = 2: a gang of two gains
    # 10 - 5.5 = 4.5 s, less than resize_gain x eps.
    assert T.resize_gain * eps > 4.5
    pool = GpuPool(4)
    live = _live(pool, [TrialSpec("t", 10.0, beta=1.1, d=2)], [1.0])
    plan = resize_group(live, pool, CONFIG, T, eps, search_done)
    assert (plan and [z.new_width for z in plan.resized]) == ([width] if width else None)
    assert pool.where("t") == (0,)  # the pool given is not changed
    if plan:
        assert plan.pool.where("t") == (0, 1)


def test_a_resize_must_gain_resize_gain_eps() -> None:
    # Two trials of 100 s on 4 GPUs at one GPU each, perfect scaling: each gains 50 s as a gang
    # of two; made at eps < 50 / resize_gain, not above.
    for eps, resized in ((40 / T.resize_gain, True), (60 / T.resize_gain, False)):
        pool = GpuPool(4)
        specs = [TrialSpec("a", 100.0, d=2), TrialSpec("b", 100.0, d=2)]
        plan = resize_group(_live(pool, specs, [1.0, 1.0]), pool, CONFIG, T, eps, False)
        assert (plan is not None) is resized


def test_a_resize_judges_an_unmeasured_beta_at_the_slow_end_of_its_spread() -> None:
    # A straggler of 100 s on 4 GPUs whose experiment's beta is 1.5: a gang of two gains
    # 100 - 75 = 25 s. Its own beta_i unmeasured and spread 0.1 (x1.22 at 95%), it gains
    # 100 - 91 = 9 s: not the 15 s of idle_gain x eps.
    eps = 15.0 / T.idle_gain
    spec = TrialSpec("t", 100.0, beta=1.5, d=2)
    for measured, spread, grows in ((False, 0.1, False), (True, 0.1, True), (False, 0.0, True)):
        pool = GpuPool(4)
        live = _live(pool, [spec], [1.0], beta_measured=measured)
        plan = resize_group(live, pool, CONFIG, T, eps, True, spread)
        assert (plan is not None) is grows, (measured, spread)


def test_resizes_per_trial_per_rung_are_bounded() -> None:
    pool = GpuPool(4)
    spec = TrialSpec("t", 100.0, d=2)
    assert resize_group(_live(pool, [spec], [1.0], resizes=T.max_resizes), pool, CONFIG, T,
                        0.01, True) is None
    pool = GpuPool(4)
    assert resize_group(_live(pool, [spec], [1.0], resizes=T.max_resizes - 1), pool, CONFIG,
                        T, 0.01, True) is not None


def test_the_guard_keeps_the_leaders_no_later() -> None:
    # 3 GPUs: a gang of 2 with 40 s of one-GPU work (20 s left) and a trial of 100 s on one
    # GPU. DynamicFluid packs the first (h_i1 below the water level) to give the second two
    # GPUs: the group ends sooner (50 s), the first later (40 s). Refused when the first is
    # what the algorithm waits on (the leader); applied when both lead.
    for priority, applied in ((1, False), (0, True)):
        pool = GpuPool(3)
        first = _live(pool, [TrialSpec("first", 40.0)], [2.0], priority=priority)
        second = _live(pool, [TrialSpec("second", 100.0)], [1.0])
        plan = resize_group(first + second, pool, CONFIG, T, 0.01, False)
        assert (plan is not None) is applied
        if plan:
            assert {z.trial_id: z.new_width for z in plan.resized} == {"first": 0.5,
                                                                      "second": 2.0}


def test_a_failed_gang_goes_back_to_one_gpu_once_more_than_the_allowance() -> None:
    spec = TrialSpec("g", 100.0, beta=2.5)  # a gang of two is slower than one GPU
    for resizes, undone in ((T.max_resizes, True), (T.max_resizes + 1, False)):
        pool = GpuPool(4)
        live = _live(pool, [spec], [2.0], beta_measured=True, resizes=resizes)
        decisions, after = undo_slow_gangs(live, pool, 1.0, T)
        assert bool(decisions) is undone
        assert pool.where("g") == (0, 1)
        if undone:
            assert decisions[0].new_width == 1.0 and after.where("g") == (0,)
    pool = GpuPool(4)  # unmeasured beta: left alone (the model cannot tell yet)
    assert undo_slow_gangs(_live(pool, [spec], [2.0]), pool, 1.0, T)[0] == []


@pytest.mark.parametrize(("runtime", "iteration", "probed"), [
    (1.5 * T.probe_min_eps, None, True),  # 1.5 x probe_min_eps restarts of 1 s left
    (0.75 * T.probe_min_eps, None, False),
    (1.5 * T.probe_min_eps, 0.8, True),  # a probe costs 2 s of restarts + 0.8 s: 2.3% of it
    (1.5 * T.probe_min_eps, 1.2, False),  # 3.2 s: 2.7%, over 2 / probe_min_eps of what is left
])
def test_an_unmeasured_straggler_is_probed_when_its_cost_is_a_small_share_of_its_work(
        runtime: float, iteration: float | None, probed: bool) -> None:
    pool = GpuPool(4)
    live = _live(pool, [TrialSpec("t", runtime)], [1.0])
    probes, after = probe_gangs(live, pool, CONFIG, T, 1.0, None,
                                iteration_times=None if iteration is None else {"t": iteration})
    assert [(z.trial_id, z.new_width) for z in probes] == (
        [("t", float(T.probe_d))] if probed else [])
    assert pool.where("t") == (0,) and len(after.where("t")) == (2 if probed else 1)


@pytest.mark.parametrize("facts", [{"elastic": False}, {"beta_measured": True},
                                   {"keeps_shape": True}, {"measured": False},
                                   {"pausable": False}])
def test_no_probe_for_a_rigid_measured_unmeasured_kept_or_restarting_trial(facts) -> None:
    pool = GpuPool(4)
    (t,) = _live(pool, [TrialSpec("t", 500.0)], [1.0], **facts)
    assert not is_probe_candidate(t)
    assert probe_gangs([t], pool, CONFIG, T, 1.0, None)[0] == []


def test_probes_need_idle_gpus_a_users_d_that_allows_gangs_and_gangs_that_gain() -> None:
    pool = GpuPool(4)
    assert may_probe(pool, CONFIG, T, None)
    assert not may_probe(pool, replace(CONFIG, d=1), T, None)
    assert not may_probe(pool, CONFIG, T, measured_beta=2.5)  # a gang of two slower than one
    assert may_probe(pool, CONFIG, T, measured_beta=1.2)  # 0.6 of one GPU's time
    _live(pool, [TrialSpec(f"t{i}", 1.0) for i in range(4)], [1.0] * 4)
    assert not may_probe(pool, CONFIG, T, None)


def test_the_probe_goes_to_what_the_algorithm_waits_on_then_the_longest() -> None:
    pool = GpuPool(3)
    specs = [TrialSpec("long", 300.0), TrialSpec("waited", 200.0), TrialSpec("short", 100.0)]
    live = [*_live(pool, specs[:1], [1.0]), *_live(pool, specs[1:2], [1.0], priority=1),
            *_live(pool, specs[2:], [1.0])]
    probes, _ = probe_gangs(live, pool, CONFIG, T, 1.0, None)
    assert [z.trial_id for z in probes] == []  # no idle GPU: 3 trials on 3 GPUs
    pool = GpuPool(4)
    live = [*_live(pool, specs[:1], [1.0]), *_live(pool, specs[1:2], [1.0], priority=1)]
    assert [z.trial_id for z in probe_gangs(live, pool, CONFIG, T, 1.0, None)[0]] == ["waited",
                                                                                      "long"]


def test_a_probe_needs_the_cpus_of_its_gang() -> None:
    pool = GpuPool(4)
    live = _live(pool, [TrialSpec("a", 300.0), TrialSpec("b", 200.0)], [1.0, 1.0])
    probes, _ = probe_gangs(live, pool, CONFIG, T, 1.0, None, free_cpus=1.0,
                            extra_cpus={"a": 2.0, "b": 1.0})
    assert [z.trial_id for z in probes] == ["b"]


def test_rounds() -> None:
    # Small changes re-plan a group of 30 running trials at the 3rd; a small group at each.
    assert not replan_due(2, 30, T) and replan_due(3, 30, T) and replan_due(1, 5, T)
    # A first result re-plans at once with a GPU idle, before any load is known, or when the
    # trial's h_i1 reaches the group's load per GPU.
    assert first_result_due(1.0, None, 0) and first_result_due(1.0, 5.0, 1)
    assert first_result_due(5.0, 5.0, 0) and not first_result_due(4.9, 5.0, 0)
    pool = GpuPool(4)
    live = _live(pool, [TrialSpec("a", 30.0), TrialSpec("b", 10.0)], [1.0, 1.0])
    assert group_load(live, pool) == pytest.approx(40.0 / 4)


def test_an_unmeasured_beta_is_judged_at_the_slow_end_of_the_spread_it_is_asked_at() -> None:
    # The view keeps its judged trial; asked at another spread it is judged again.
    (t,) = _live(GpuPool(2), [TrialSpec("t", 100.0, beta=1.2, d=2)], [1.0])
    wide, narrow = judged_beta(t, 0.5), judged_beta(t, 0.1)
    assert wide.spec.beta == pytest.approx(1.2 * math.exp(1.96 * 0.5))
    assert narrow.spec.beta == pytest.approx(1.2 * math.exp(1.96 * 0.1))
    assert judged_beta(t, 0.1) is narrow and judged_beta(t, 0.0) is t.trial
    (measured,) = _live(GpuPool(2), [TrialSpec("m", 100.0, beta=1.2, d=2)], [1.0],
                        beta_measured=True)
    assert judged_beta(measured, 0.5) is measured.trial
