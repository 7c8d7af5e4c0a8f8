"""Simulated GPUs: placement of Ray shapes and GPU-time accounting."""

from __future__ import annotations

import pytest
from ray.tune import PlacementGroupFactory

from fluid.sim import SimClock, SimCluster


def _pgf(gpu, bundles=1):
    return PlacementGroupFactory([{"CPU": 1, "GPU": gpu}] * bundles)


def test_shapes_fill_gpus_and_accounting_integrates():
    clock = SimClock()
    c = SimCluster(3, clock)
    assert c.place("a", _pgf(0.5)) == 0.5
    assert c.place("b", _pgf(0.5)) == 0.5
    assert c.place("g", _pgf(1, 2)) == 2.0
    assert c.place("x", _pgf(1)) is None  # all three GPUs are held
    c.set_active("a", 0.4)
    c.set_active("b", 0.8)  # the shared GPU is saturated: busy 1, not 1.2
    c.set_active("g", 0.5)
    clock.advance_to(10.0)
    c.release("g")
    clock.advance_to(20.0)
    c.release("a")
    c.release("b")
    c.close()
    assert c.gpu_seconds == pytest.approx(3 * 10 + 1 * 10)
    assert c.busy_gpu_seconds == pytest.approx((1.0 + 2 * 0.5) * 10 + 1.0 * 10)
    assert c.place("x", _pgf(1)) == 1.0
