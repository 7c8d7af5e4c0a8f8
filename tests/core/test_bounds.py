"""lower_bound and best_found."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluid.core import PolicyConfig, TrialSpec, best_found, lower_bound
from fluid.core.bounds import BEST_MAX_GPUS, BEST_MAX_TRIALS
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
