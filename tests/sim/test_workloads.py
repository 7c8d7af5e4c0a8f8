"""Workload models: counted on the real modules, derived from datasheets, targets reachable."""

from __future__ import annotations

import importlib
import itertools
import json

import pytest

from fluid.sim.profiling import profile_config
from fluid.sim.workloads import GPUS, Hardware, PerfParams, get_workload
from fluid.sim.workloads.curves import Curve, luck
from fluid.sim.workloads.profile import ARCH_KEYS, PROFILE_BPTT, TABLE, arch_key, count

# The package exports the workload functions under the module names: import the modules.
cifar_mod = importlib.import_module("fluid.sim.workloads.cifar10")
wlm_mod = importlib.import_module("fluid.sim.workloads.wlm")
MODULES = {n: importlib.import_module(f"fluid.sim.workloads.{n}") for n in ("cifar10", "wlm", "dcgan")}


@pytest.fixture(scope="module")
def tasks():
    from experiments.tasks import TASKS

    return TASKS


@pytest.mark.parametrize("name", sorted(MODULES))
def test_spaces_and_defaults_are_the_experiment_scripts(tasks, name):
    mod, task = MODULES[name], tasks[name]
    assert set(mod.SPACE) == set(task.search_space)
    for key, dom in mod.SPACE.items():
        ref = task.search_space[key]
        assert type(dom) is type(ref), key
        assert getattr(dom, "categories", None) == getattr(ref, "categories", None), key
        assert (getattr(dom, "lower", None), getattr(dom, "upper", None)) == (
            getattr(ref, "lower", None), getattr(ref, "upper", None)), key
    assert {k: task.default_config[k] for k in mod.DEFAULTS} == mod.DEFAULTS
    w = get_workload(name)
    assert (w.metric, w.mode, w.target) == (task.metric, task.mode, task.target)


def test_the_profile_table_covers_every_architecture_of_the_spaces():
    table = json.loads(TABLE.read_text())
    for name, mod in MODULES.items():
        axes = [getattr(mod.SPACE.get(k), "categories", [mod.DEFAULTS[k]]) for k in ARCH_KEYS[name]]
        for combo in itertools.product(*axes):
            cfg = {**mod.DEFAULTS, **dict(zip(ARCH_KEYS[name], combo, strict=True))}
            assert arch_key(name, cfg, mod.DEFAULTS) in table


def test_the_table_is_what_counting_the_real_module_gives(tasks):
    from experiments.tasks import count_flops_and_params

    cfg = {**cifar_mod.DEFAULTS, "num_filters": 32, "kernel_size": 3, "dense_width": 256}
    table = json.loads(TABLE.read_text())[arch_key("cifar10", cfg, cifar_mod.DEFAULTS)]
    flops, params = count_flops_and_params("cifar10", cfg)
    assert table["flops_per_sample"] == pytest.approx(flops)
    assert table["params"] == params
    assert count("cifar10", cfg).activations_per_sample == table["activations_per_sample"]


def test_wlm_flops_are_linear_in_bptt(tasks):
    from experiments.tasks import count_flops_and_params

    cfg = {**wlm_mod.DEFAULTS, "emsize": 128, "nhid": 128, "nlayers": 1, "tied": False}
    f1, _ = count_flops_and_params("wlm", {**cfg, "bptt": PROFILE_BPTT})
    f2, _ = count_flops_and_params("wlm", {**cfg, "bptt": 2 * PROFILE_BPTT})
    assert f2 == pytest.approx(2 * f1, rel=1e-3)  # a few per-window ops besides the tokens


def test_iteration_time_follows_flops_and_the_gpu():
    cfg = dict(cifar_mod.DEFAULTS)
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
