"""Grid search under FluidExecutor on 4 logical GPUs: packing, gangs, resizes, exactly-once."""

from __future__ import annotations

import math

from fluid import FluidExecutor, tune
from tests.tune.trainables import modeled

# Nine trials; three of them much longer per iteration (unequal h_i1).
TIMES = [0.1] * 6 + [0.4, 0.8, 1.2]
ITERS = 6


def test_grid_search_packs_gangs_and_resizes(ray4, tmp_path):
    # A profile that says packing and scaling are free (the trainable's truth): Fluid packs
    # the short trials and gangs the long ones once their one-GPU time is measured.
    ex = FluidExecutor(alpha=1.0, beta=1.0, cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.05)
    analysis = tune.run(
        modeled,
        config={"t": tune.grid_search(TIMES), "iters": ITERS},
        stop={"training_iteration": ITERS},  # Fluid's budgets
        trial_executor=ex,
        storage_path=str(tmp_path),
        verbose=0,
    )
    frames = analysis.trial_dataframes
    static = next(e for e in ex.plan_log if e["kind"] == "static")
    widths_seen = []
    for trial in analysis.trials:
        df = frames[trial.trial_id]
        # Every iteration reported exactly once, in order, with no gap, across resizes.
        assert list(df["it"]) == list(range(1, ITERS + 1)), trial
        assert list(df["training_iteration"]) == list(range(1, ITERS + 1)), trial
        # The shape the trial saw from inside is the one the static plan gave it.
        assert df["gpus"].iloc[0] == static["widths"][trial.trial_id]
        # Fluid wrote the shape of every iteration into its result, as the trial saw it.
        assert list(df["fluid_gpus"]) == list(df["gpus"]), trial
        widths_seen += list(df["gpus"])
    assert any(w < 1 for w in widths_seen), "no trial ran packed"
    assert any(w >= 2 for w in widths_seen), "no trial ran as a gang"
    # DynamicFluid resized at least one trial after the short ones ended.
    dynamic = [e for e in ex.plan_log if e["kind"] == "dynamic"]
    assert dynamic, "DynamicFluid never re-planned"
    resized = [t for t in analysis.trials if frames[t.trial_id]["gpus"].nunique() > 1]
    assert resized, "no trial changed shape"
    assert "resizes" in ex.debug_string()


def test_memory_safe_packing(ray4, tmp_path):
    # c would allow 8 trials on a GPU; 3 GB each on 8 GB GPUs allows only 2.
    ex = FluidExecutor(c=8, cpus_per_trial=0.1, gpu_memory=8.0, trial_memory=3.0, eps=0.5)
    analysis = tune.run(
        modeled,
        config={"t": 0.1, "iters": 3, "peak_gb": 3.0, "n": tune.grid_search(list(range(8)))},
        trial_executor=ex,
        storage_path=str(tmp_path),
        verbose=0,
    )
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    # Replay Fluid's placements: at no time are more than 2 trials on one GPU.
    events = []
    for t in analysis.trials:
        timeline = ex.shape_timeline(t.trial_id)
        for (start, _w, gpus), (end, _, _) in zip(timeline, timeline[1:], strict=False):
            events += [(start, 1, g) for g in gpus] + [(end, -1, g) for g in gpus]
    load: dict[int, int] = {}
    for _, delta, g in sorted(events, key=lambda e: (e[0], e[1])):
        load[g] = load.get(g, 0) + delta
        assert load[g] <= 2, f"GPU {g} holds {load[g]} trials of 3 GB on 8 GB"
    assert max(len(ex.shape_timeline(t.trial_id)) for t in analysis.trials) >= 2


def test_the_long_trial_gets_gpus_and_only_probes_are_packed_unmeasured(ray4, tmp_path):
    # Six trials on 4 GPUs, one eight times longer than the others (under CPU load a result's
    # own overhead, about a second, is added to every iteration: the long trial still has
    # half its work left when the short ones end); a profile says gangs scale (beta 1.0)
    # but nothing is known of packing: no trial is packed but the packing probes
    # that measure it until their measurement packs a fresh trial (it is free here: its
    # estimate moves there, or its interval decides), and once the short trials are done the
    # long one runs on at least 2 GPUs.
    ex = FluidExecutor(beta=1.0, cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.05)
    times = [0.15] * 5 + [1.2]
    analysis = tune.run(
        modeled,
        config={"t": tune.grid_search(times), "iters": 8},
        stop={"training_iteration": 8},
        trial_executor=ex,
        storage_path=str(tmp_path),
        verbose=0,
    )
    frames = analysis.trial_dataframes
    widths = {t.config["t"]: list(frames[t.trial_id]["gpus"]) for t in analysis.trials}
    probes = [t for t in analysis.trials if ex.records[t.trial_id].probe]
    packs = min((e["time"] for e in ex.plan_log if e["kind"] == "packing" and e["c"] > 1),
                default=math.inf)
    packed_before = [(t.config["t"], start) for t in analysis.trials if t not in probes
                     for start, w, _ in ex.shape_timeline(t.trial_id) if w and w < 1
                     and start < packs]
    assert not packed_before, (packed_before, packs, widths)
    assert len(probes) <= 2 * ex.tunables.probe_pairs, probes
    long = next(t for t in analysis.trials if t.config["t"] == 1.2)
    assert max(widths[1.2]) >= 2, (widths[1.2], ex.shape_timeline(long.trial_id), ex.plan_log)
