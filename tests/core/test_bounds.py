"""lower_bound and best_found."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluid.core import PolicyConfig, TrialSpec, lower_bound, policy_lower_bound
from fluid.core.bounds import BEST_MAX_GPUS, BEST_MAX_TRIALS, best_found
from fluid.core.groupsim import simulate_group
from fluid.core.instance import figure5

from .strategies import configs, trial_lists


def test_figure5_bounds() -> None:
    inst = figure5()
    assert lower_bound(inst.trials, inst.gpus, inst.config) == 7.5  # 30 s on d = 4 GPUs
    best = best_found(inst.trials, inst.gpus, inst.config)
    assert best is not None and 7.5 <= best <= 12.0
    assert best == pytest.approx(10.0)  # a4 on 3 GPUs, a3 on 2 would need 6: 10 s is best


def test_lower_bound_area_and_longest_trial() -> None:
    # Area: 4 trials of 10 s on 2 GPUs, packing costs (alpha = 2): min w*h(w) = 10 -> 20 s.
    trials = [TrialSpec(f"t{i}", 10.0, alpha=2.0) for i in range(4)]
    assert lower_bound(trials, 2, PolicyConfig(c=2, d=1)) == 20.0
    # Longest: one 100 s trial on d = 2 GPUs with beta = 1.25 -> 62.5 s.
    assert lower_bound([TrialSpec("t", 100.0, beta=1.25)], 8, PolicyConfig(d=2)) == 62.5
    assert lower_bound([], 4, PolicyConfig()) == 0.0


def test_the_lower_bound_is_over_every_width_the_instance_allows() -> None:
    # 16 GPUs, the group's d = 8; beta 1.096 gives d_i = 7 (an 8th worker adds less than
    # s_th), yet 8 GPUs are allowed and end the trial sooner: 3.199 s, not 3.335 s.
    trials = [TrialSpec("t", 13.47, beta=1.096), TrialSpec("u", 1.0), TrialSpec("v", 1.0)]
    config = PolicyConfig(d=8)
    assert config.d_of(trials[0], 16) == 7
    assert lower_bound(trials, 16, config) == pytest.approx(13.47 / 8 * 1.096**7)
    assert policy_lower_bound(trials, 16, config) == pytest.approx(13.47 / 7 * 1.096**6)
    # Packing: c_max trials per GPU are allowed whatever alpha_i says: 4 trials at half a GPU,
    # 0.5 x 5 x 1.25 GPU-seconds each, on 4 GPUs (the policy's c_i = 1 gives 5 s).
    packed = [TrialSpec(f"p{i}", 5.0, alpha=1.25) for i in range(4)]
    assert lower_bound(packed, 4, PolicyConfig(c_max=2, o_th=0.4)) == pytest.approx(
        4 * 0.5 * 5.0 * 1.25 / 4)
    assert policy_lower_bound(packed, 4, PolicyConfig(c_max=2, o_th=0.4)) == 5.0


@given(trials=trial_lists(max_size=4, limits=True), n=st.integers(1, 5), config=configs())
@settings(max_examples=60, deadline=None)
def test_the_lower_bound_is_never_above_the_policys_own(
    trials: list[TrialSpec], n: int, config: PolicyConfig
) -> None:
    assert lower_bound(trials, n, config) <= policy_lower_bound(trials, n, config) * (1 + 1e-12)


def test_best_found_is_none_beyond_its_limits() -> None:
    small = [TrialSpec(f"t{i}", float(i + 1)) for i in range(BEST_MAX_TRIALS)]
    config = PolicyConfig(c=2, d=2)
    assert best_found(small, BEST_MAX_GPUS, config, max_schedules=100) is not None
    big = small + [TrialSpec("extra", 1.0)]
    assert best_found(big, 4, config) is None
    assert best_found(small, BEST_MAX_GPUS + 1, config) is None
    assert best_found([], 4, config) is None


def test_best_found_beats_fixed_order_fifo() -> None:
    # 1 GPU, packing free and c = 2: two trials share it; FIFO would run them back to back.
    trials = [TrialSpec("a", 5.0), TrialSpec("b", 5.0)]
    assert best_found(trials, 1, PolicyConfig(c=2, d=1)) == 5.0


@given(trials=trial_lists(max_size=4, limits=True), n=st.integers(1, 5), config=configs())
@settings(max_examples=60, deadline=None)
def test_best_found_is_never_below_the_lower_bound(
    trials: list[TrialSpec], n: int, config: PolicyConfig
) -> None:
    lb = lower_bound(trials, n, config)
    best = best_found(trials, n, config, max_schedules=1_000)
    assert best is not None and best >= lb * (1 - 1e-9)
    # More search never finds worse.
    assert best_found(trials, n, config, max_schedules=50) >= best * (1 - 1e-9)


@pytest.mark.parametrize("alpha", [1.1, 1.2])
@pytest.mark.parametrize("c", [None, 2, 4])
def test_equal_packed_trials_fill_their_gpus(alpha: float, c: int | None) -> None:
    # 4 trials of 10 s on 2 GPUs: two to a GPU at share 1/2, not 1/c_i each with part of
    # every GPU unused (what the paper's 1/c gave: 28.35 s and 31.98 s against 22 and 24).
    trials = [TrialSpec(f"t{i}", 10.0, alpha=alpha) for i in range(4)]
    config = PolicyConfig(c=c)
    best = best_found(trials, 2, config)
    assert best == pytest.approx(10.0 * alpha)
    for policy in ("static", "dynamic"):
        assert simulate_group(trials, 2, config, policy).makespan == pytest.approx(best)


def test_the_plan_is_near_its_best_found_schedule_on_random_groups() -> None:
    # Seeded random groups like the strategies': up to 4 trials, 1-5 GPUs, alpha in [1, 2],
    # beta in [1, 1.5], c and d given or derived. Issue 12: no plan more than 5% behind the
    # best schedule found (measured with this seed: the worst 1.02x; 5 of 300 were more than
    # 5% behind, the worst 1.18x, before packed stragglers got a whole GPU, shares widened into
    # unused capacity and packed trials alone took their GPU while others waited).
    rng = random.Random(0)
    ratios = []
    for _ in range(300):
        n, m = rng.randint(1, 5), rng.randint(1, 4)
        trials = [
            TrialSpec(f"t{i}", float(rng.choice([rng.randint(1, 40), rng.uniform(0.5, 1000)])),
                      alpha=rng.choice([1.0, rng.uniform(1, 2)]),
                      beta=rng.choice([1.0, rng.uniform(1, 1.5)]))
            for i in range(m)
        ]
        config = PolicyConfig(c=rng.choice([None, *range(1, 7)]),
                              d=rng.choice([None, *range(1, 9)]))
        best = best_found(trials, n, config, max_schedules=2_000)
        ratios.append(simulate_group(trials, n, config, "dynamic").makespan / best)
    assert max(ratios) <= 1.05
