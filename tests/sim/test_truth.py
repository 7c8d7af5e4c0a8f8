"""The simulator's ground truth: a mechanism that never uses the policy's model."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import fluid.sim.truth as truth_pkg
from fluid.sim.truth import (
    DeclaredLaw,
    PerfParams,
    StepCost,
    Work,
    fits_memory,
    iteration_time,
    solo_step,
)
from fluid.sim.truth.comm import gang_step, ring_allreduce_s
from fluid.sim.truth.sharing import packed_steps

TRUTH_DIR = Path(truth_pkg.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_truth_module_imports_the_policy_core():
    files = sorted(TRUTH_DIR.glob("*.py"))
    assert len(files) >= 5
    for f in files:
        bad = {m for m in _imports(f) if m == "fluid.core" or m.startswith("fluid.core.")
               or m.startswith("fluid.tune")}
        assert not bad, f"{f.name} imports {sorted(bad)}"
        assert len(f.read_text().splitlines()) < 500


def _work(compute=0.02, overhead=0.005, occ=0.5, grad=4e7, bw=1.25e9, mem=2.0, **kw):
    return Work(50_000, 100, StepCost(compute, overhead, occ), grad, bw, 5e-5, mem,
                PerfParams(**kw))


def test_solo_step_saturates_with_flops():
    p = PerfParams()
    small, big = solo_step(1e9, 16.3e12, p), solo_step(1e12, 16.3e12, p)
    assert small.occupancy < 0.1 < 0.9 < big.occupancy
    # Per FLOP, big steps are cheaper: the GPU is better used.
    assert big.compute_s / 1e12 < small.compute_s / 1e9


def test_packing_emerges_from_occupancy_and_idle_time():
    light = StepCost(0.01, 0.01, 0.3)
    heavy = StepCost(0.05, 0.001, 1.0)
    p = PerfParams(mps_interference=0.0)
    # Light trials leave most of the GPU free: 4 of them run almost as fast as one.
    assert packed_steps([light] * 4, p)[0] == pytest.approx(light.seconds, rel=0.05)
    # A trial that fills the GPU alone gains nothing: k of them take k times as long.
    assert packed_steps([heavy] * 4, p)[0] == pytest.approx(4 * heavy.seconds, rel=0.05)
    # Interference slows co-runners even when SMs are free.
    assert packed_steps([light] * 4, PerfParams(mps_interference=0.2))[0] > light.seconds


def test_mps_and_time_slicing_differ():
    s = StepCost(0.01, 0.002, 0.3)
    mps = packed_steps([s, s], PerfParams(sharing="mps"))[0]
    ts = packed_steps([s, s], PerfParams(sharing="timeslice"))[0]
    # Time-slicing cannot overlap kernels: two trials that each keep the GPU busy 83% of the
    # time share it turn by turn; MPS runs their small kernels side by side.
    assert mps < ts
    assert ts >= 2 * s.compute_s


def test_gang_all_reduce_overlap_and_stragglers():
    assert ring_allreduce_s(1e8, 1, 1e9, 1e-5, 1.0) == 0.0
    assert ring_allreduce_s(1e8, 4, 1e9, 0.0, 1.0) == pytest.approx(0.15)
    p = PerfParams(overlap=0.0, straggler_cv=0.0, link_efficiency=1.0)
    step = StepCost(0.1, 0.0, 1.0)
    assert gang_step(step, 2, 1e8, 1e9, 0.0, p) == pytest.approx(0.1 + 0.1)
    # Overlap hides communication behind the backward pass.
    hidden = PerfParams(overlap=1.0, straggler_cv=0.0, link_efficiency=1.0)
    assert gang_step(step, 2, 1e7, 1e9, 0.0, hidden) == pytest.approx(0.1)
    # Stragglers grow with the gang.
    slow = PerfParams(overlap=1.0, straggler_cv=0.1)
    assert gang_step(step, 8, 0.0, 1e9, 0.0, slow) > gang_step(step, 2, 0.0, 1e9, 0.0, slow)


def test_scaling_curve_emerges_from_the_link():
    ten_gbe, nvlink = _work(bw=1.25e9), _work(bw=300e9)
    t1 = iteration_time(ten_gbe, 1.0).seconds
    assert t1 == pytest.approx(500 * 0.025)
    speed = {w: t1 / iteration_time(ten_gbe, float(w)).seconds for w in (2, 4, 8)}
    fast = {w: t1 / iteration_time(nvlink, float(w)).seconds for w in (2, 4, 8)}
    assert speed[2] < 1.0  # 40 MB of gradients over 10 GbE cost more than they save
    assert fast[2] > 1.7 and fast[8] > fast[4] > fast[2]


def test_packed_trial_without_co_runners_runs_alone():
    w = _work()
    assert iteration_time(w, 0.5).seconds == iteration_time(w, 1.0).seconds
    assert iteration_time(w, 0.5, (w,)).seconds > iteration_time(w, 1.0).seconds
    assert iteration_time(w, 1.0).busy == pytest.approx(0.8)


def test_declared_law_is_the_paper_law_without_the_policy_code():
    law = DeclaredLaw(10.0, 1.25, 1.1)
    assert iteration_time(law, 0.5).seconds == pytest.approx(12.5)
    assert iteration_time(law, 3.0).seconds == pytest.approx(10.0 / 3 * 1.1**2)
    assert iteration_time(law, 500.0).seconds == pytest.approx(10.0 / 8 * 1.1**7)
    assert iteration_time(law, 0.5).busy == 0.5 and iteration_time(law, 3.0).busy == 1.0
    with pytest.raises(ValueError, match="width"):
        iteration_time(law, 0.0)


def test_memory_and_bad_constants():
    assert fits_memory([10.0, 10.0], 24.0) and not fits_memory([10.0, 10.0, 10.0], 24.0)
    assert fits_memory([1e9], None)
    with pytest.raises(ValueError, match="sharing"):
        PerfParams(sharing="mig")
    with pytest.raises(ValueError, match="ppp"):
        PerfParams(ppp=0.0)
    assert math.isfinite(solo_step(1.0, 1.0, PerfParams()).compute_s)


def test_an_overfull_gpu_fails_as_out_of_memory():
    from fluid.sim.experiment import run_experiment
    from fluid.sim.workloads import get_workload

    # 4 trials to a GPU of 16 GB: 6 GB trials fail (the trial that does not fit errors out,
    # as CUDA would), 2 GB trials run.
    def run(memory):
        w = get_workload("synthetic", iter_time=1.0, spread=0.0, max_t=2, trials=8,
                         memory_gb=memory)
        return run_experiment("grid", w, "fluid_static", 0, 2, gpu_memory=16.0,
                              fluid_options={"c": 4, "gpu_memory": None}).stats

    stats = run(6.0)
    assert stats.oom_errors > 0 and stats.trials == 8
    ok_stats = run(2.0)
    assert ok_stats.oom_errors == 0
