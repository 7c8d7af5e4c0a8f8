"""What a simulated run measured (``RunResult``) and every executor compared on the same seeds
(``Comparison``): the rows and speedups of ``fluid simulate --json``.

A speedup ``A_vs_B`` is, per seed, ``B / A`` in time to target (``..._makespan``: in makespan);
over seeds it is the geometric mean of those ratios with a bootstrap 95% interval
(``fluid.sim.stats``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from fluid.sim import baselines
from fluid.sim.controller import RunStats
from fluid.sim.stats import summarize

#: The executors ``fluid.sim.experiment`` runs (see its docstring), in the order rows appear.
EXECUTORS = ("tune", baselines.TUNE_TUNED, "resource_changing", "fluid_static",
             baselines.ONE_GPU, "fluid")
#: The row computed from plain Tune's work rather than run.
LOWER_BOUND = "lower_bound"


@dataclass(frozen=True)
class RunResult:
    """One executor on one seed (the fields of ``fluid simulate --json``, and more).

    ``time_to_target`` is ``None`` when no trial reached the target; ``stats`` is everything the
    simulation measured (``None`` for the ``lower_bound`` row, which is not run).
    """

    executor: str
    seed: int
    time_to_target: float | None
    makespan: float
    gpu_seconds: float
    gpu_utilization: float | None
    trials: int = 0
    restarts: int = 0  # actor starts beyond each trial's first (pauses, resizes, PBT)
    resizes: int | None = None  # shape changes Fluid made (None: the executor does not resize)
    best: float | None = None
    sim_seconds: float = 0.0  # wall-clock seconds the simulation took
    hook_seconds: float | None = None  # of them, in Fluid's hooks (None: not a FluidExecutor)
    stalled: bool = False  # Tune would hang here (makespan: when it stalled)
    stats: RunStats | None = field(default=None, repr=False, compare=False)

    def public(self) -> dict[str, Any]:
        """The fields of ``fluid simulate --json``'s rows (all but ``stats``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "stats"}


@dataclass
class Comparison:
    """Every executor on every seed of one algorithm x workload x GPU count.

    A speedup ``A_vs_B`` is, per seed, ``B / A`` in time to target (``..._makespan``: in
    makespan); over seeds it is the geometric mean of those ratios with a bootstrap 95%
    interval (``fluid.sim.stats``). Seeds where either side has no value are left out.
    """

    algorithm: str
    workload: str
    gpus: int
    results: list[RunResult] = field(default_factory=list)

    def of(self, executor: str) -> list[RunResult]:
        """The results of one executor, by seed."""
        return [r for r in self.results if r.executor == executor]

    def ratios(self, fast: str, slow: str, what: str = "time_to_target") -> dict[int, float]:
        """``{seed: slow / fast}`` in ``what`` (seeds where both are known)."""
        by_seed = {r.seed: r for r in self.of(slow)}
        out = {}
        for r in self.of(fast):
            other = by_seed.get(r.seed)
            if other is None:
                continue
            a, b = getattr(r, what), getattr(other, what)
            if a and b and not (what == "makespan" and (r.stalled or other.stalled)):
                out[r.seed] = b / a
        return out

    def _pairs(self) -> dict[str, tuple[str, str, str]]:
        out = {}
        for fast in ("fluid", "fluid_static"):
            for slow in ("tune", "resource_changing"):
                out[f"{fast}_vs_{slow}"] = (fast, slow, "time_to_target")
                out[f"{fast}_vs_{slow}_makespan"] = (fast, slow, "makespan")
        out["resource_changing_vs_tune"] = ("resource_changing", "tune", "time_to_target")
        out["lower_bound_vs_tune"] = (LOWER_BOUND, "tune", "time_to_target")
        for name, (fast, slow) in baselines.SCOREBOARD.items():
            out[name] = (fast, slow, "time_to_target")
            out[f"{name}_makespan"] = (fast, slow, "makespan")
        out["fluid_one_gpu_vs_tune"] = (baselines.ONE_GPU, "tune", "time_to_target")
        out["tune_tuned_vs_tune"] = (baselines.TUNE_TUNED, "tune", "time_to_target")
        return out

    def speedups(self) -> dict[str, float | None]:
        """``fluid_vs_tune``, ``fluid_vs_resource_changing`` and friends (geometric means)."""
        return self.speedup_stats()["speedup"]

    def speedup_stats(self) -> dict[str, dict[str, Any]]:
        """``{"speedup", "speedup_ci95", "speedup_per_seed"}``, each keyed like ``speedups``.

        ``speedup_ci95[k]`` is ``[low, high]``, or ``None`` with fewer than two seeds;
        ``speedup_per_seed[k]`` is ``{seed: ratio}``.
        """
        mean: dict[str, float | None] = {}
        ci: dict[str, list[float] | None] = {}
        per_seed: dict[str, dict[int, float]] = {}
        for key, pair in self._pairs().items():
            ratios = self.ratios(*pair)
            m, interval = summarize(list(ratios.values()))
            mean[key], ci[key], per_seed[key] = m, list(interval) if interval else None, ratios
        return {"speedup": mean, "speedup_ci95": ci, "speedup_per_seed": per_seed}

    def _mean_by_executor(
        self, value: Callable[[RunResult], float | None]
    ) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for ex in EXECUTORS:
            if self.of(ex):
                vals = [v for v in map(value, self.of(ex)) if v is not None]
                out[ex] = statistics.fmean(vals) if vals else None
        return out

    def per_trial(self, what: str) -> dict[str, float | None]:
        """Per executor, the mean over seeds of ``what`` (``restarts``, ``resizes``) per trial."""
        def rate(r: RunResult) -> float | None:
            n = getattr(r, what)
            return None if not r.trials or n is None else n / r.trials

        return self._mean_by_executor(rate)

    def best_metric(self) -> dict[str, float | None]:
        """Per executor, the mean over seeds of the best metric value any trial reported."""
        return self._mean_by_executor(lambda r: r.best)

    def to_json(self) -> dict[str, Any]:
        """The object ``fluid simulate --json`` prints (keys documented in its help)."""
        stats = self.speedup_stats()
        return {
            "algorithm": self.algorithm,
            "workload": self.workload,
            "gpus": self.gpus,
            "seeds": sorted({r.seed for r in self.results}),
            "executors": [ex for ex in EXECUTORS if self.of(ex)],
            "results": [r.public() for r in self.results],
            **stats,
            **baselines.scoreboard(stats),
            "best_metric": self.best_metric(),
            "restarts_per_trial": self.per_trial("restarts"),
            "resizes_per_trial": self.per_trial("resizes"),
        }
