"""CovariateRows: the rows of config_covariates over every trial added, kept as trials come."""

from __future__ import annotations

import random

from fluid.core.estimates import config_covariates
from fluid.tune._covariates import CovariateRows


def _config(rng: random.Random) -> dict[str, float]:
    numbers = {"lr": rng.choice([1e-3, 1e-2, 0.1]), "batch": rng.choice([32.0, 64.0, 128.0])}
    if rng.random() < 0.9:  # a key some trials lack: the covariates change when one comes
        numbers["width"] = rng.choice([64.0, 256.0])
    if rng.random() < 0.1:  # a value that is not positive: no log of that key from then on
        numbers["lr"] = 0.0
    return numbers


def test_rows_are_config_covariates_of_all_trials_as_they_come():
    rng = random.Random(3)
    kept, added, shapes = CovariateRows(), {}, set()
    for i in range(60):
        added[f"t{i}"] = _config(rng)
        kept.add(f"t{i}", added[f"t{i}"])
        kept.add(f"t{i}", {"lr": -1.0})  # a trial's config is taken once
        rows = kept.rows(added)
        assert rows == config_covariates(list(added.values()))
        shapes.add((len(rows[0]), rows[0][1] < 0))  # (keys, lr on a log scale)
    # the keys changed as a trial without width came, the scale of lr as one with lr 0 did
    assert {(3, True), (2, False)} <= shapes


def test_rows_follow_the_order_asked():
    kept = CovariateRows()
    kept.add("a", {"batch": 32.0})
    kept.add("b", {"batch": 64.0})
    assert kept.rows(["b", "a"]) == config_covariates([{"batch": 64.0}, {"batch": 32.0}])
    assert kept.rows([]) == []
