"""Workload models: counted on the real modules, derived from datasheets, targets reachable."""

from __future__ import annotations

import importlib
import itertools
import json

import pytest

from fluid.sim.profiling import profile_config
from fluid.sim.workloads import GPUS, Hardware, PerfParams, get_workload
from fluid.sim.workloads.curves import Curve, luck
from fluid.sim.workloads.model_costs import ARCH_KEYS, TABLE, arch_key, profile
from fluid.sim.workloads.spaces import TASK_SPACES

# The package exports the workload functions under the module names: import the modules.
MODULES = {n: importlib.import_module(f"fluid.sim.workloads.{n}") for n in ("cifar10", "wlm", "dcgan")}
CIFAR10_DEFAULTS = dict(TASK_SPACES["cifar10"].defaults)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_workload_is_its_task_space(name):
    task = TASK_SPACES[name]
    w = get_workload(name)
    assert (w.metric, w.mode, w.target) == (task.metric, task.mode, task.target)
    assert w.space == dict(task.space) and w.grid == dict(task.grid)
    assert w.default_config == dict(task.defaults) and w.mutations == dict(task.mutations)


def test_the_profile_table_covers_every_architecture_of_the_spaces():
    table = json.loads(TABLE.read_text())
    for name in MODULES:
        space, defaults = TASK_SPACES[name].space, TASK_SPACES[name].defaults
        axes = [getattr(space.get(k), "categories", [defaults[k]]) for k in ARCH_KEYS[name]]
        for combo in itertools.product(*axes):
            cfg = {**defaults, **dict(zip(ARCH_KEYS[name], combo, strict=True))}
            assert arch_key(name, cfg, defaults) in table


def test_an_architecture_outside_the_table_is_a_clear_error():
    with pytest.raises(ValueError, match="no model profile for 'cifar10/num_filters=7"):
        profile("cifar10", {**CIFAR10_DEFAULTS, "num_filters": 7})


def test_iteration_time_follows_flops_and_the_gpu():
    cfg = dict(CIFAR10_DEFAULTS)
    rtx = get_workload("cifar10").trial_model(cfg)
    h100 = get_workload("cifar10", Hardware.preset("h100")).trial_model(cfg)
    small = get_workload("cifar10").trial_model({**cfg, "num_filters": 32, "batch_size": 32})
    assert h100.iteration_time < rtx.iteration_time
    assert 0.5 < rtx.memory_gb < GPUS["rtx6000"].memory_gb
    # What a profile measures of the truth: a trial that uses less of the GPU packs better,
    # and NVLink scales a gang far better than 10 GbE.
    p_rtx, p_small, p_h100 = (profile_config(m, noise=0.0) for m in (rtx, small, h100))
    assert small.gpu_share < rtx.gpu_share and p_small.alpha < p_rtx.alpha
    assert p_rtx.alpha > 1 and p_rtx.beta > 1
    assert p_h100.beta < p_rtx.beta
    assert PerfParams().sharing == "mps"


@pytest.mark.parametrize("name", ["cifar10", "wlm", "dcgan"])
def test_targets_are_reachable_by_good_configs_only(name):
    w = get_workload(name)
    assert w.curve(w.default_config).iterations_to(w.target) <= w.max_t
    import random

    rng = random.Random(0)
    reached = 0
    for _ in range(300):
        cfg = {k: v.sample(random_state=rng.randrange(2**31)) for k, v in w.space.items()}
        cfg = {k: v.item() if hasattr(v, "item") else v for k, v in cfg.items()}
        it = w.curve(cfg).iterations_to(w.target)
        reached += it is not None and it <= w.max_t
    assert 0.05 < reached / 300 < 0.5


def test_curves_and_luck():
    c = Curve(1000.0, 100.0, 0.5, log=True)
    assert c.iterations_to(150) is not None and c.value(c.initial) == pytest.approx(1000)
    assert luck({"a": 1}) == luck({"a": 1}) != luck({"a": 2})
    with pytest.raises(ValueError):
        Curve(0, 1, 0.0)


def test_synthetic_parameters():
    w = get_workload("synthetic", iter_time=2.0, spread=0.0, alpha=1.5, beta=1.3, memory_gb=4)
    m = w.trial_model({"x": 0.3, "y": 0.9})
    assert (m.iteration_time, m.alpha, m.beta, m.memory_gb) == (2.0, 1.5, 1.3, 4)
    spread = get_workload("synthetic", iter_time=2.0, spread=1.0)
    assert spread.trial_model({"y": 1.0}).iteration_time > spread.trial_model({"y": 0.0}).iteration_time
    with pytest.raises(ValueError):
        get_workload("synthetic", alpha=0.5)
    with pytest.raises(ValueError):
        get_workload("cifar10", alpha=1.2)


def test_an_unknown_preset_is_named_with_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown GPU 'v100'; known: \['a100', 'h100', 'rtx6000'\]"):
        Hardware.preset("v100")
    with pytest.raises(KeyError, match=r"unknown interconnect 'ib'; known: \["):
        Hardware.preset("a100", link="ib")
