"""What one simulated experiment measured (`RunStats`), and how it ends when it cannot go on
(`SimulationStalled`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunStats:
    """What one simulated experiment measured.

    Attributes:
        makespan: simulated seconds until every trial finished.
        time_to_target: first simulated time a reported metric met the target (``None``: never).
        best: best metric value reported.
        gpu_seconds: GPU time held by trials (``SimCluster``).
        gpu_utilization: mean busy fraction of the cluster's GPUs over the makespan.
        trials: number of trials.
        results: number of training results.
        restarts: actor starts beyond each trial's first.
        steps: controller steps.
        work: per trial, ``(iterations trained, mean one-GPU iteration time, alpha, beta,
            iteration at which it met the target or None)``; ``alpha``, ``beta`` from a
            noise-free simulated profile (``fluid.sim.profiling``).
        spans: per trial id, ``(first start of training, end)`` in simulated seconds.
    """

    makespan: float
    time_to_target: float | None
    best: float | None
    gpu_seconds: float
    gpu_utilization: float
    trials: int
    results: int
    restarts: int
    steps: int
    work: list[tuple[int, float, float, float, int | None]] = field(default_factory=list)
    spans: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    oom_errors: int = 0


class SimulationStalled(RuntimeError):
    """Nothing can happen any more but the experiment is not finished (a searcher that never
    suggests, a shape that never fits, a paused trial its scheduler never resumes).

    Real Tune hangs in the same state. ``stats`` holds what was measured until then.
    """

    def __init__(self, message: str, stats: RunStats | None = None) -> None:
        super().__init__(message)
        self.stats = stats
