"""The model cost table the simulator ships is what counting the real modules gives."""

from __future__ import annotations

import json

import pytest

from experiments.profiles import architectures, count, ensure_profiled
from experiments.tasks import TASKS, count_flops_and_params
from fluid.sim.workloads.model_costs import PROFILE_BPTT, TABLE, arch_key, profile
from fluid.sim.workloads.spaces import TASK_SPACES


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_tasks_search_the_spaces_fluid_ships(name):
    task, space = TASKS[name], TASK_SPACES[name]
    assert task.search_space == dict(space.space)
    assert task.default_config == dict(space.defaults)
    assert (task.metric, task.mode, task.target) == (space.metric, space.mode, space.target)


def test_the_table_holds_every_architecture_the_spaces_draw():
    table = json.loads(TABLE.read_text())
    for name, task in TASKS.items():
        for cfg in architectures(name):
            assert arch_key(name, {**task.default_config, **cfg}) in table


def test_the_table_is_what_counting_the_real_module_gives():
    defaults = TASKS["cifar10"].default_config
    cfg = {**defaults, "num_filters": 32, "kernel_size": 3, "dense_width": 256}
    table = json.loads(TABLE.read_text())[arch_key("cifar10", cfg)]
    flops, params = count_flops_and_params("cifar10", cfg)
    assert table["flops_per_sample"] == pytest.approx(flops)
    assert table["params"] == params
    assert count("cifar10", cfg).activations_per_sample == table["activations_per_sample"]


def test_wlm_flops_are_linear_in_bptt():
    cfg = {**TASKS["wlm"].default_config, "emsize": 128, "nhid": 128, "nlayers": 1, "tied": False}
    f1, _ = count_flops_and_params("wlm", {**cfg, "bptt": PROFILE_BPTT})
    f2, _ = count_flops_and_params("wlm", {**cfg, "bptt": 2 * PROFILE_BPTT})
    assert f2 == pytest.approx(2 * f1, rel=1e-3)  # a few per-window ops besides the tokens


def test_an_architecture_outside_the_table_is_counted_and_registered():
    cfg = {**TASKS["dcgan"].default_config, "ngf": 8, "ndf": 8}
    with pytest.raises(ValueError, match="no model profile"):
        profile("dcgan", cfg)
    counts = ensure_profiled("dcgan", cfg)
    assert profile("dcgan", cfg) == counts and counts.params > 0
