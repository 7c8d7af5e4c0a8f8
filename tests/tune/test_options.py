"""FluidExecutor's options (no Ray instance): a bad value is named with its range; the options
build the policy and set the tunables."""

from __future__ import annotations

import pytest

from fluid.core import Tunables
from fluid.tune._options import FluidConfigError, FluidOptions


@pytest.mark.parametrize("bad, says", [
    ({"beta": 0.9}, "beta must be >= 1, got 0.9"),
    ({"trial_memory": 0}, "trial_memory must be > 0 GB, got 0"),
    ({"cpus_per_worker": -1}, "cpus_per_worker must be >= 0, got -1"),
    ({"default_iteration_time": 0}, "default_iteration_time must be > 0 seconds, got 0"),
    ({"mps": object()}, "mps must be .auto., False or a fluid.gpu.MPSManager"),
])


def test_options_name_the_parameter_and_range(bad, says):
    with pytest.raises(FluidConfigError, match=says):
        FluidOptions(**bad)


def test_options_build_the_policy_and_map_onto_the_tunables():
    opts = FluidOptions(c=3, d=2, gpu_memory=16.0)
    assert (opts.policy.c, opts.policy.d, opts.policy.gpu_memory) == (3, 2, 16.0)
    assert (opts.policy.o_th, opts.policy.c_max) == (Tunables.o_th, Tunables.c_max)
    mine = Tunables(c_max=4, resize_gain=6.0)
    opts = FluidOptions(o_th=0.2, tunables=mine)
    assert (opts.tunables.o_th, opts.tunables.c_max, opts.tunables.resize_gain) == (0.2, 4, 6.0)
    assert (opts.policy.o_th, opts.policy.c_max) == (0.2, 4)
    with pytest.raises(FluidConfigError, match="tunables must be a fluid.core.Tunables"):
        FluidOptions(tunables={"resize_gain": 6.0})  # type: ignore[arg-type]
