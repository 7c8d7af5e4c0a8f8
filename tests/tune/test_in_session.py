"""Packing measured in session on 4 logical GPUs: no profile, trials of one iteration each (a
SyncBOHB-like first bracket: the algorithm decides on each after its first iteration), whose
packing costs what their modeled work says. Where it is cheap, packing starts with the first
wave and the job ends sooner than under plain Tune; where it is costly, the estimate decides
against packing after only the probes packed."""

from __future__ import annotations

import time

import pytest
import ray

from fluid import FluidExecutor, tune
from fluid.train.modeled import modeled_trainable


def _packed_from(ex: FluidExecutor, trials) -> tuple[float, float, float]:
    """When the job's first trial started, its first packed trial started, and its last ended
    (from Fluid's shape timelines)."""
    shapes = [s for t in trials for s in ex.shape_timeline(t.trial_id)]
    packed = [at for at, width, _ in shapes if width and width < 1]
    return (min(at for at, _, _ in shapes), min(packed, default=float("inf")),
            max(at for at, _, _ in shapes))


# Cheap packing saves a third of the waves: 24 trials of 4 s run in 6 waves alone, about 4
# packed (16 trials of 3 s saved one wave, 3 s, and lost it once to Ray's start-up noise on the
# oldest Ray: 27.1 s against 26.9 s). Costly packing costs the probes' pairs.
@pytest.mark.parametrize(("alpha", "trials", "t1"), [(1.05, 24, 4.0), (1.6, 16, 3.0)])
def test_packing_follows_what_the_first_wave_measures(ray4x4, tmp_path, alpha, trials,
                                                      t1) -> None:
    trainable = ray.tune.with_resources(modeled_trainable, {"cpu": 0.1, "gpu": 1})
    config = {"t1": t1, "iters": 1, "alpha": alpha, "n": tune.grid_search(list(range(trials)))}
    walls, runs = {}, {}
    for name, ex in (("tune", None), ("fluid", FluidExecutor(cpus_per_trial=0.1))):
        t0 = time.monotonic()
        runs[name] = (tune.run(trainable, config=config, trial_executor=ex,
                               storage_path=str(tmp_path / name), verbose=0), ex)
        walls[name] = time.monotonic() - t0
    for analysis, _ in runs.values():
        assert all(t.status == "TERMINATED" for t in analysis.trials)
        assert [len(analysis.trial_dataframes[t.trial_id]) for t in analysis.trials] == [1] * trials
    analysis, ex = runs["fluid"]
    est = [e for e in ex.plan_log if e["kind"] == "estimate" and e["decided"]]
    assert est, "the first wave's iterations never decided packing"
    low, high = est[0]["ci95"]
    assert low <= alpha * 1.1 and high >= alpha / 1.1, est[0]
    start, packed, end = _packed_from(ex, analysis.trials)
    if alpha < 1.2:
        assert packed - start <= (end - start) / 3, (start, packed, end)
        assert walls["fluid"] < walls["tune"], walls
    else:
        # Decided against packing a trial that may reach a target, after at most the probe
        # pairs ran packed (a grid's later trials may still pack for throughput once one
        # ended). No wall-clock bound: on 16 trials of one wave each the probes delay a wave,
        # and Fluid's extra actor starts weigh what 2 shared cores allow; plain Tune's time is
        # not met here (the acceptance), and how far is a benchmark's question.
        probes = {t for t, r in ex.records.items() if r.probe}
        assert est[0]["alpha"] > 1.2 and len(probes) <= 2 * ex.tunables.probe_pairs, est[0]
