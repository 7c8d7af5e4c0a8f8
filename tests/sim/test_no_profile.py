"""``profile=False`` / ``fluid simulate --no-profile``: Fluid with the executor's defaults."""

from __future__ import annotations

import json

import pytest
from ray.tune.schedulers import FIFOScheduler

from fluid.cli import main
from fluid.core import Tunables
from fluid.sim import SimClock, SimCluster, build_executor, get_workload
from fluid.sim.experiment import run_experiment
from fluid.sim.profiling import profile_workload


@pytest.fixture
def workload():
    return get_workload("synthetic", iter_time=2.0, spread=0.5, alpha=1.6, beta=1.4,
                        memory_gb=3.0, max_t=6, trials=6)


def _executor(workload, profile):
    clock = SimClock()
    cluster = SimCluster(4, clock, memory=24.0)
    return build_executor("fluid", FIFOScheduler(), workload, clock, cluster, gpu_memory=24.0,
                          profile=profile)


def test_with_a_profile_fluid_gets_the_profiled_overheads(workload):
    ex = _executor(workload, profile=True)
    alpha, beta, _ = profile_workload(workload)
    assert (ex.alpha, ex.beta) == (alpha, beta) and alpha > 1 and beta > 1
    assert ex.options.policy.gpu_memory == 24.0


def test_without_a_profile_fluid_starts_from_its_defaults(workload):
    ex = _executor(workload, profile=False)
    assert (ex.alpha, ex.beta) == (Tunables.prior_alpha, Tunables.prior_beta)  # never packs
    assert ex.options.policy.c is None and ex.options.policy.d is None and ex.options.policy.gpu_memory is None
    assert ex.options.elastic is True and ex.options.dynamic is True


def test_a_run_without_a_profile_completes(workload):
    r = run_experiment("grid", workload, "fluid", seed=0, gpus=4, profile=False)
    assert r.trials == 6 and r.makespan > 0 and not r.stalled


def test_cli_no_profile(capsys):
    assert main(["simulate", "--algorithm", "grid", "--workload", "synthetic", "--gpus", "4",
                 "--seeds", "2", "--trials", "6", "--max-t", "5", "--alpha", "1.6",
                 "--no-profile", "--json", "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["executor"] for r in data["results"]} >= {"tune", "fluid"}
    assert data["speedup"]["fluid_vs_tune_makespan"] is not None


@pytest.mark.parametrize(("iter_time", "max_t", "beta", "probed", "bound"), [
    # ten iterations of a minute: a probe would cost a tenth of the work, so none is made
    (60.0, 10, 3.0, False, 1.0),
    # a thousand iterations of a second: probed; a gang that scales nearly halves the time,
    # one that does not costs at most 2 / probe_min_eps of the work
    (1.0, 1000, 1.2, True, 0.65),
    (1.0, 1000, 3.0, True, 1.0 + 2 / Tunables.probe_min_eps),
])
def test_a_gang_probe_is_made_only_where_its_cost_is_a_small_share_of_the_work(
        iter_time, max_t, beta, probed, bound) -> None:
    w = get_workload("synthetic", iter_time=iter_time, spread=0.0, alpha=1.6, beta=beta,
                     memory_gb=3.0, max_t=max_t, trials=1)
    tune = run_experiment("grid", w, "tune", seed=0, gpus=8)
    fluid = run_experiment("grid", w, "fluid", seed=0, gpus=8, profile=False)
    assert (fluid.restarts > 0) is probed
    assert fluid.makespan <= bound * tune.makespan
