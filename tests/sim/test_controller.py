"""The simulated controller against the policy core, plain Tune's order, and determinism."""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace as replaced

import pytest
from ray.tune.schedulers import FIFOScheduler

from fluid.core import PolicyConfig, TrialSpec, Tunables, simulate_group
from fluid.sim import (
    ALGORITHMS,
    Hardware,
    RestartCosts,
    SimClock,
    SimCluster,
    SimController,
    build_executor,
    get_workload,
    run_experiment,
)
from fluid.sim.replay import RecordedTrial, TrialListSearch, replay_workload
from fluid.sim.truth import iteration_time
from tests.tune.base_schedulers import ExploitedWhileSaving

FIG5 = [4.0, 4.0, 12.0, 30.0]
DT = 0.05  # seconds per iteration: resizes happen at iteration boundaries


def _fixed_trials(runtimes, dt=DT, alpha=1.0, beta=1.0):
    records = [RecordedTrial(f"a{i + 1}", {}, [dt] * round(h / dt), [0.0] * round(h / dt), 0.0)
               for i, h in enumerate(runtimes)]
    return replay_workload(records, "m", "max", 1.0, alpha=alpha, beta=beta), [
        round(h / dt) for h in runtimes
    ]


def _run_fixed(runtimes, gpus, executor, costs=None, record=False, **fluid):
    workload, budgets = _fixed_trials(runtimes, **fluid.pop("model", {}))
    clock = SimClock()
    cluster = SimCluster(gpus, clock)
    storage = tempfile.mkdtemp()
    sched = build_executor(executor, FIFOScheduler(), workload, clock, cluster,
                           fluid_options=fluid or None)
    sched.set_search_properties("m", "max")
    ctl = SimController(TrialListSearch(budgets, storage), sched, workload, gpus, clock=clock,
                        cluster=cluster, costs=costs or RestartCosts.zero(),
                        record_results=record)
    return ctl, sched, ctl.run()


def test_figure5_gives_the_makespans_of_the_policy_core():
    specs = [TrialSpec(f"a{i}", h) for i, h in enumerate(FIG5)]
    cfg = PolicyConfig(c=2, d=4)
    core = {p: simulate_group(specs, 5, cfg, p).makespan for p in ("fifo", "static", "dynamic")}
    assert core == {"fifo": 30.0, "static": 12.0, "dynamic": 9.5}
    opts = {"c": 2, "d": 4, "eps": 0.0}
    _, _, tune = _run_fixed(FIG5, 5, "tune")
    _, _, static = _run_fixed(FIG5, 5, "fluid_static", **opts)
    # The core plans with the overheads as given; so does the executor when no spread of beta
    # across configurations makes it judge an unmeasured one slower.
    _, _, dynamic = _run_fixed(FIG5, 5, "fluid", tunables=Tunables(prior_beta_spread=0.0),
                               **opts)
    assert tune.makespan == pytest.approx(core["fifo"])
    assert static.makespan == pytest.approx(core["static"])
    # DynamicFluid acts on a trial's next result: at most one iteration of a4 (on 3 GPUs) late.
    assert core["dynamic"] <= dynamic.makespan <= core["dynamic"] + DT / 3 + 1e-6
    assert static.restarts == 0 and dynamic.restarts == 2  # a3 to 2 GPUs, a4 to 4 GPUs


def test_fifo_executor_reproduces_plain_tune_order():
    runtimes = [5.0, 1.0, 3.0, 2.0, 4.0, 1.5]
    _, _, stats = _run_fixed(runtimes, 2, "tune")
    core = simulate_group([TrialSpec(f"a{i + 1}", h) for i, h in enumerate(runtimes)], 2,
                          PolicyConfig(), "fifo")
    assert stats.makespan == pytest.approx(core.makespan)
    starts = {tid: s for tid, (s, _) in stats.spans.items()}
    core_starts = {seg.trial_id: seg.start for seg in core.segments}
    ordered = sorted(starts, key=lambda t: int(t.split("_")[1]))
    assert [starts[t] for t in ordered] == pytest.approx(
        [core_starts[f"a{i + 1}"] for i in range(len(runtimes))])


def test_packed_and_gang_trials_run_at_the_model_slowdown():
    # 2 trials on 1 GPU with c = 2 pack at 1/2 (alpha**1 slower); 1 trial on 3 GPUs with d = 3
    # becomes a gang of 3 (3 / beta**2 faster).
    alpha, beta = 1.25, 1.1
    ctl, _, _ = _run_fixed([1.0, 1.0], 1, "fluid_static", c=2, eps=0.0, record=True,
                           model={"alpha": alpha, "beta": beta})
    dts = {round(r["time_this_iter_s"], 9) for _, _, r in ctl.results}
    assert dts == {round(DT * alpha, 9)}
    ctl, _, stats = _run_fixed([3.0], 3, "fluid_static", d=3, eps=0.0, record=True,
                               model={"alpha": alpha, "beta": beta})
    assert {r["fluid_width"] for _, _, r in ctl.results} == {3.0}
    assert stats.makespan == pytest.approx(3.0 / 3 * beta**2)


def test_restart_cost_is_what_fluid_measures_as_eps():
    costs = RestartCosts(actor_start_s=2.0, gang_setup_s=0.0, save_fixed_s=0.5,
                         restore_fixed_s=0.5, storage_gbps=math.inf)
    # Figure 5 thirty times longer, so that resizes pay for RESIZE_GAIN (10) x the 5 s Fluid
    # assumes before it measured one.
    _, executor, stats = _run_fixed([30 * h for h in FIG5], 5, "fluid", costs=costs, c=2, d=4,
                                    model={"dt": 0.5})
    assert stats.restarts >= 1
    # save + start + restore; the executor's alpha comes from a noisy simulated profile, so
    # its estimate of the iteration time around the restart is off by a few milliseconds
    assert executor.eps == pytest.approx(3.0, abs=0.01)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_algorithm_completes_deterministically(algorithm):
    w = get_workload("synthetic", iter_time=5.0, spread=0.5, max_t=9, trials=8)
    samples = None if algorithm == "grid" else 10  # a grid runs its 8 points
    for executor in ("tune", "fluid"):
        a = run_experiment(algorithm, w, executor, seed=1, gpus=4, samples=samples)
        b = run_experiment(algorithm, w, executor, seed=1, gpus=4, samples=samples)
        assert not a.stalled
        assert a.trials == (8 if algorithm == "grid" else 10)
        key = ("time_to_target", "makespan", "gpu_seconds", "gpu_utilization", "restarts", "best")
        assert [getattr(a, k) for k in key] == [getattr(b, k) for k in key]
        assert a.makespan > 0 and 0 < a.gpu_utilization <= 1
    c = run_experiment(algorithm, w, "fluid", seed=2, gpus=4, samples=samples)
    assert c.makespan != a.makespan  # another seed is another run


def test_a_simulated_run_writes_nothing(tmp_path, monkeypatch):
    """Its checkpoints are kept in memory: a run leaves no file or folder behind, the
    HyperBand rungs it pauses trials at included."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    w = get_workload("synthetic", iter_time=5.0, spread=0.5, max_t=9)
    result = run_experiment("hyperband", w, "fluid", seed=0, gpus=4, samples=10)
    assert result.trials == 10 and not result.stalled
    assert list(tmp_path.iterdir()) == []


def test_a_scheduler_that_never_resumes_its_trial_is_reported_as_a_hang():
    # Ray's HyperBand only restarts PAUSED trials it paused itself; ResourceChangingScheduler
    # pauses trials to resize them, so they are never resumed (real Tune hangs the same way).
    w = get_workload("synthetic", iter_time=5.0, spread=0.5, max_t=9)
    r = run_experiment("hyperband", w, "resource_changing", seed=0, gpus=8, samples=12)
    assert r.stalled
    ok = run_experiment("asha", w, "resource_changing", seed=0, gpus=8, samples=12)
    assert not ok.stalled


def test_fluid_one_gpu_keeps_every_trial_on_one_gpu(monkeypatch):
    from fluid.sim import cluster as cluster_mod
    from fluid.sim.experiment import run_experiment
    from fluid.sim.workloads import get_workload
    from fluid.tune import width_of

    widths: list[float] = []
    place = cluster_mod.SimCluster.place

    def recording(self, trial_id, pgf, *args, **kwargs):
        widths.append(width_of(pgf))
        return place(self, trial_id, pgf, *args, **kwargs)

    monkeypatch.setattr(cluster_mod.SimCluster, "place", recording)
    # Packing nearly free and gangs nearly perfect, fewer trials than GPUs: Fluid shapes them.
    w = get_workload("synthetic", iter_time=5.0, spread=0.5, alpha=1.02, beta=1.02, max_t=6,
                     trials=3)
    run_experiment("grid", w, "fluid", 0, 8)
    assert any(x != 1.0 for x in widths)
    widths.clear()
    result = run_experiment("grid", w, "fluid_one_gpu", 0, 8)
    assert widths and set(widths) == {1.0}
    assert result.resizes == 0


@pytest.mark.parametrize(("executor", "left"), [("tune", {"STOP"}), ("fluid", set())])
def test_a_stop_cached_for_a_dropped_save_outlives_the_restart_under_tune_only(executor, left):
    # The simulated controller caches the STOP as Tune's does; Fluid drops it at the restart.
    workload, budgets = _fixed_trials([1.0, 1.0])
    clock = SimClock()
    cluster = SimCluster(2, clock)
    base = ExploitedWhileSaving()
    sched = build_executor(executor, base, workload, clock, cluster)
    sched.set_search_properties("m", "max")
    ctl = SimController(TrialListSearch(budgets, tempfile.mkdtemp()), sched, workload, 2,
                        clock=clock, cluster=cluster, costs=RestartCosts.zero())
    ctl.run()
    assert len(base.exploited) == 2
    assert set(ctl._cached_trial_decisions.values()) == left


def test_a_packed_iteration_runs_at_the_pace_of_the_mates_computing_beside_it():
    # Three cifar10 trials (the mechanistic truth, h100) on one GPU, two to it: the first runs
    # beside the second until that one ends, alone until the third starts, then beside it.
    # An iteration over which its mate changes takes the time of each stretch at its own
    # pace: a blend of those paces, not the one at its start.
    cifar = get_workload("cifar10", Hardware.preset("h100"))
    configs = [{**cifar.default_config, "batch_size": b} for b in (256, 128, 256)]
    models = [cifar.trial_model(c) for c in configs]
    records = [RecordedTrial(f"a{i}", {}, [1.0] * 9, [0.0] * 9, 0.0) for i in range(3)]
    workload = replaced(replay_workload(records, "m", "max", 1.0),
                        model=lambda c: models[int(c["_replay"])])
    clock = SimClock()
    cluster = SimCluster(1, clock)
    sched = build_executor("fluid_static", FIFOScheduler(), workload, clock, cluster,
                           fluid_options={"c": 2, "alpha": 1.0})
    sched.set_search_properties("m", "max")
    ctl = SimController(TrialListSearch([9, 2, 2], tempfile.mkdtemp()), sched, workload, 1,
                        clock=clock, cluster=cluster, costs=RestartCosts.zero(),
                        record_results=True)
    ctl.run()
    first = [r["time_this_iter_s"] for _, tid, r in ctl.results if tid.endswith("0")]
    alone = iteration_time(models[0].work, 1.0).seconds
    packed = [iteration_time(models[0].work, 0.5, [m.work]).seconds for m in models[1:]]
    assert min(first) >= alone * 0.999 and max(first) <= max(packed) * 1.001, (first, alone)
    paces = [alone, *packed]
    blended = [t for t in first if all(abs(t / p - 1) > 0.003 for p in paces)]
    assert blended, (first, paces)
