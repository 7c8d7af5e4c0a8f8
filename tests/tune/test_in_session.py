"""Packing measured in session on 4 logical GPUs: no profile, trials of one iteration each (a
SyncBOHB-like first bracket: the algorithm decides on each after its first iteration), whose
packing costs what their modeled work says. Where it is cheap, packing starts with the first
wave; where it is costly, the estimate decides against packing after only the probes packed
(or, where noise keeps its interval wide, does not decide: fresh trials then run alone). Plain
Tune runs the same grid beside it (``tests.tune.grid_run``), with the same trials and results;
``fluid bench e2e`` times such jobs side by side."""

from __future__ import annotations

import pytest

from tests.tune.grid_run import run_both


# Cheap packing saves a third of the waves: 24 trials of 4 s run in 6 waves alone, about 4
# packed. Costly packing costs the probes' pairs, which the grid's throughput packing
# (once trials end) makes up.
@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "trials", "t1"), [(1.05, 24, 4.0), (1.6, 16, 3.0)])
def test_packing_follows_what_the_first_wave_measures(tmp_path, alpha, trials, t1) -> None:
    runs = run_both(tmp_path, {"trainable": "modeled_trainable", "trials": trials,
                               "config": {"t1": t1, "iters": 1, "alpha": alpha}})
    for run in runs.values():
        assert run["status"] == ["TERMINATED"] * trials
        assert run["rows"] == [1] * trials
    fluid = runs["fluid"]
    est = fluid["estimates"]
    assert est, "no iteration measured packing"
    decided = [e for e in est if e["decided"]]
    # What decided packing, else what all the trials' first iterations say. (A trial the
    # grid packs once another ended may find itself alone: the modeled trainable still
    # runs it at its share's speed, where a real GPU would run it as a whole one, which
    # pulls later estimates below alpha.)
    deciding = decided[0] if decided else est[-1]
    low, high = deciding["ci95"]
    assert low <= alpha * 1.1 and high >= alpha / 1.1, deciding
    start, packed, end = fluid["start"], fluid["packed"], fluid["end"]
    if alpha < 1.2:
        assert packed is not None and packed - start <= (end - start) / 3, (start, packed, end)
    else:
        # Never decided for packing a trial that may reach a target, and at most the probe
        # pairs ran packed before a decision. Undecided (under load a first iteration's time
        # varies by a second or more, which may keep the interval across what packs), fresh
        # trials run alone: the prior's decision. A grid's later trials may still pack for
        # throughput once one ended (a pair at 1.6x still runs 1.25x one trial's throughput).
        assert all(e["alpha"] > 1.2 for e in decided), decided
        assert fluid["probes"] <= 2 * fluid["probe_pairs"], fluid["probes"]
