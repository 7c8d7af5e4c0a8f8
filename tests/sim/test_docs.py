"""The examples in fluid.sim's docstrings run and give what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "fluid.sim", "fluid.sim.clock", "fluid.sim.cluster", "fluid.sim.controller",
    "fluid.sim.experiment", "fluid.sim.replay", "fluid.sim.paper", "fluid.sim.stats",
    "fluid.sim.workloads",
    "fluid.sim.workloads.base", "fluid.sim.workloads.curves", "fluid.sim.workloads.hardware",
    "fluid.sim.workloads.model_costs", "fluid.sim.workloads.synthetic",
    "fluid.sim.workloads.cifar10", "fluid.sim.workloads.wlm", "fluid.sim.workloads.dcgan",
    "fluid.sim.workloads.spaces",
    "fluid.sim.truth", "fluid.sim.truth.params", "fluid.sim.truth.compute",
    "fluid.sim.truth.sharing", "fluid.sim.truth.comm", "fluid.sim.truth.trial",
    "fluid.sim.profiling", "fluid.sim.validate",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
