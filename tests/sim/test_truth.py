"""The simulator's ground truth: a mechanism that never uses the policy's model."""

from __future__ import annotations

import ast
import itertools
import math
from dataclasses import replace
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


def _work(flops=1e8, batch=100, grad=4e7, bw=1.25e9, mem=2.0, **kw):
    return Work(50_000, batch, flops, 16.3e12, grad, bw, 5e-5, mem, PerfParams(**kw))


def test_solo_step_saturates_with_flops():
    p = PerfParams()
    small, big = solo_step(1e9, 16.3e12, p), solo_step(1e13, 16.3e12, p)
    assert small.occupancy < 0.1 < 0.9 < big.occupancy
    # Per FLOP, big steps are cheaper: the GPU is better used.
    assert big.compute_s / 1e13 < small.compute_s / 1e9


def _gain(step, k, p):
    return k * step.seconds / packed_steps([step] * k, p)[0]


def test_packing_pays_for_idle_gpus_and_not_for_full_ones():
    half_idle = StepCost(0.01, 0.01, 0.3)
    full = StepCost(0.05, 0.0, 1.0)
    ts = PerfParams(sharing="timeslice", contention=0.0)
    # Time-slicing fills the idle half of the GPU: two such trials run as fast as one.
    assert _gain(half_idle, 2, ts) == pytest.approx(2.0)
    # ...and no more: a third waits for the GPU.
    assert _gain(half_idle, 3, ts) == pytest.approx(2.0)
    # A trial that fills the GPU alone gains nothing: k of them take k times as long.
    for mode in ("mps", "timeslice"):
        assert _gain(full, 4, PerfParams(sharing=mode, contention=0.0)) == pytest.approx(1.0)
    # Contention makes a saturated pair slower than one trial alone.
    assert _gain(full, 2, PerfParams(contention=0.05)) == pytest.approx(1 / 1.05)


@pytest.mark.parametrize("mode", ["mps", "timeslice"])
def test_beyond_two_per_gpu_no_more_than_a_pair(mode):
    p = PerfParams(sharing=mode)
    light = StepCost(0.002, 0.02, 0.1)  # a kernel 9% of the time: three would fit
    pair = _gain(light, 2, p)
    assert pair > 1.9
    for k in (3, 4, 8):
        assert _gain(light, k, p) == pytest.approx(pair)
    # Mixed co-runners: together never more work per second than the mean of their pairs.
    mixed = [light, StepCost(0.01, 0.01, 0.5), StepCost(0.03, 0.002, 0.9)]
    times = packed_steps(mixed, p)
    rate = sum(s.seconds / t for s, t in zip(mixed, times, strict=True))
    pairs = sum(_gain(s, 2, p) for s in mixed) / 3
    assert rate <= pairs + 1e-9


@pytest.mark.parametrize("k", [2, 3, 4, 8])
def test_mps_gains_over_time_slicing_at_most_what_was_measured(k):
    p = PerfParams()
    bound = 1.0 / (1.0 - p.mps_overlap)
    ratios = []
    for duty, occ in itertools.product((0.1, 0.3, 0.5, 0.8, 0.99), (0.05, 0.3, 0.6, 1.0)):
        s = StepCost(duty, 1.0 - duty, occ)
        mps = _gain(s, k, replace(p, sharing="mps"))
        ts = _gain(s, k, replace(p, sharing="timeslice"))
        ratios.append(mps / ts)
        # Each co-runner slows a trial's kernels, and no share of the GPU is created: k
        # trials never beat k / (1 + contention (k - 1) duty).
        assert mps <= k / (1.0 + p.contention * (k - 1) * duty) + 1e-9
    assert max(ratios) <= bound + 1e-9
    assert max(ratios) > 1.1  # small kernels do overlap under MPS
    assert min(ratios) == pytest.approx(1.0)  # full occupancy: nothing to overlap


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


@pytest.mark.parametrize("w", [2, 3, 4, 8])
def test_a_gang_keeps_the_trials_global_batch(w):
    work = _work(flops=3e9, batch=128, bw=300e9, overlap=0.0, straggler_cv=0.0)
    alone = iteration_time(work, 1.0).seconds
    gang = iteration_time(work, float(w)).seconds
    steps = math.ceil(50_000 / 128)
    # As many optimizer steps per epoch as the trial alone: each processes the global batch,
    # ceil(B / w) samples on each GPU, at the occupancy and overhead of that smaller step.
    assert work.steps() == steps
    assert work.worker_batch(w) == math.ceil(128 / w)
    assert w * work.worker_batch(w) >= 128 > w * (work.worker_batch(w) - 1)
    share = solo_step(3e9 * math.ceil(128 / w), 16.3e12, work.params)
    allreduce = ring_allreduce_s(4e7, w, 300e9, 5e-5, work.params.link_efficiency)
    assert gang == pytest.approx(steps * (share.seconds + allreduce))
    assert alone == pytest.approx(steps * solo_step(3e9 * 128, 16.3e12, work.params).seconds)
    # So a gang of w is less than w times faster: the per-step overhead does not shrink.
    assert 1.0 < alone / gang < w


def test_strong_scaling_emerges_from_the_batch_and_the_link():
    # A small step (100 samples of 0.1 GFLOP) is mostly fixed cost: splitting it gains nothing,
    # and 40 MB of gradients over 10 GbE make the gang slower than one GPU.
    small = _work(bw=1.25e9)
    t1 = iteration_time(small, 1.0).seconds
    assert t1 == pytest.approx(500 * small.step.seconds)
    assert t1 / iteration_time(small, 2.0).seconds < 0.5
    assert t1 / iteration_time(_work(bw=300e9), 2.0).seconds < 1.0
    # A big step over NVLink scales, with diminishing returns as each share shrinks.
    big = _work(flops=1e10, batch=512, bw=300e9)
    t1 = iteration_time(big, 1.0).seconds
    speed = {w: t1 / iteration_time(big, float(w)).seconds for w in (2, 4, 8)}
    assert 1.5 < speed[2] < speed[4] < speed[8] < 8
    assert speed[8] / speed[4] < speed[4] / speed[2]


def test_packed_trial_without_co_runners_runs_alone():
    w = _work()
    assert iteration_time(w, 0.5).seconds == iteration_time(w, 1.0).seconds
    assert iteration_time(w, 0.5, (w,)).seconds > iteration_time(w, 1.0).seconds
    assert iteration_time(w, 1.0).busy == pytest.approx(w.step.duty)


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
    with pytest.raises(ValueError, match="mps_overlap"):
        PerfParams(mps_overlap=1.0)
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
