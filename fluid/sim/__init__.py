"""``fluid.sim``: a discrete-event simulator that runs the code users run.

A simulated Tune controller (``SimController``) drives Ray Tune's real schedulers and searchers
and the real ``FluidExecutor`` with real ``Trial`` objects through the hooks Tune calls, on a
simulated clock and simulated GPUs, with workload models derived from the experiment models'
FLOPs and GPU datasheets. See ``docs/simulator.md``.

Example:
    >>> from fluid.sim import compare, get_workload
    >>> w = get_workload("synthetic", iter_time=2.0, max_t=4, trials=4)
    >>> c = compare("grid", w, gpus=2, seeds=1, executors=("tune", "fluid"))
    >>> sorted({r.executor for r in c.results})
    ['fluid', 'lower_bound', 'tune']
"""

from fluid.algorithms import ALGORITHMS
from fluid.sim.clock import SimClock
from fluid.sim.cluster import SimCluster
from fluid.sim.controller import RestartCosts, RunStats, SimController, SimulationStalled
from fluid.sim.experiment import (
    build_executor,
    build_scheduler,
    build_search,
    compare,
    run_experiment,
)
from fluid.sim.replay import read_results, replay
from fluid.sim.results import EXECUTORS, LOWER_BOUND, Comparison, RunResult
from fluid.sim.workloads import WORKLOADS, Hardware, TrialModel, Workload, get_workload

__all__ = [
    "ALGORITHMS",
    "EXECUTORS",
    "LOWER_BOUND",
    "WORKLOADS",
    "Comparison",
    "Hardware",
    "RestartCosts",
    "RunResult",
    "RunStats",
    "SimClock",
    "SimCluster",
    "SimController",
    "SimulationStalled",
    "TrialModel",
    "Workload",
    "build_executor",
    "build_scheduler",
    "build_search",
    "compare",
    "get_workload",
    "read_results",
    "replay",
    "run_experiment",
]
