"""The covariates of ``packing_estimate``'s fit (``fluid.core.estimates.config_covariates``)
kept as trials are sampled, so that a result costs the same whatever the trials before it.

The covariates are the numbers every sampled trial's config has, on a log scale where all are
positive. Each trial's row is computed once while they stay the same; a trial that lacks one
or brings a value that is not positive changes them, and every row is computed again (rare: a
search space's keys and signs are fixed early). The rows are ``config_covariates``'s, in the
order asked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from fluid.core.estimates import covariate_row


class CovariateRows:
    """``config_covariates`` of the trials added, kept up to date (module docstring)."""

    def __init__(self) -> None:
        self._numbers: dict[str, dict[str, float]] = {}
        self._have: Counter[str] = Counter()  # key -> trials whose config has it
        self._positive: Counter[str] = Counter()  # key -> trials whose value of it is > 0
        self._rows: dict[str, list[float]] = {}
        self._shape: tuple[tuple[str, ...], frozenset[str]] = ((), frozenset())

    def add(self, trial_id: str, numbers: dict[str, float]) -> None:
        """A sampled trial and its config's numbers (``config_numbers``); once per trial."""
        if trial_id in self._numbers:
            return
        self._numbers[trial_id] = numbers
        self._have.update(numbers.keys())
        self._positive.update(k for k, v in numbers.items() if v > 0)

    def rows(self, trial_ids: Iterable[str]) -> list[list[float]]:
        """The rows of ``trial_ids`` (each added), as ``config_covariates`` gives them for
        every trial added."""
        ids, n = list(trial_ids), len(self._numbers)
        keys = tuple(sorted(k for k, have in self._have.items() if have == n))
        shape = keys, frozenset(k for k in keys if self._positive[k] == n)
        if shape != self._shape:
            self._shape, self._rows = shape, {}
        rows = self._rows
        for tid in ids:
            if tid not in rows:
                rows[tid] = covariate_row(self._numbers[tid], *shape)
        return [rows[tid] for tid in ids]
