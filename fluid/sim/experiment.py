"""Run one algorithm x workload x executor x seed, and compare executors on the same seeds.

Algorithms: those of ``fluid.algorithms`` (Ray Tune's objects; Fluid's adapted schedulers
under Fluid) with the workload's ``max_t``, ``reduction_factor=3``, ASHA's ``grace_period=1``,
PBT's ``perturbation_interval=max_t // 9`` and the workload's mutations; ``grid`` runs the
workload's grid (sized by ``samples``: ``grid_of``), the others ``samples`` configs of its space.

Executors, each on the same workload and seed:

* ``tune``: plain Tune, one GPU per trial, trials started FIFO as GPUs free up (Ray's own
  scheduler classes; SyncBOHB has no Ray class and uses Fluid's, which outside Fluid is plain);
* ``resource_changing``: Tune's ``ResourceChangingScheduler`` with
  ``DistributeResources(add_bundles=True)`` around the algorithm's scheduler: idle GPUs are
  spread over running trials as extra one-GPU bundles (a gang, modelled like Fluid's);
* ``fluid_static``: ``FluidExecutor(dynamic=False)``: StaticFluid only;
* ``fluid``: ``FluidExecutor``: StaticFluid + DynamicFluid;
* ``tune_tuned`` and ``fluid_one_gpu``: the scoreboard's baselines (``fluid.sim.baselines``):
  plain Tune with ``max_concurrent_trials`` = GPUs for a model-based searcher, and Fluid with
  every trial on exactly one GPU;
* ``lower_bound`` (not run): ``fluid.core.policy_lower_bound`` of the work plain Tune did (every
  trial's iterations at its best width among those the policy allows it, no restart costs, no
  waiting for other trials).

Fluid gets what its profiling would measure, not the simulator's truth: ``alpha`` and ``beta``
are the medians over a sample of the search space (Fluid takes one value per experiment),
iteration times are measured by Fluid from the results, and ``eps`` is measured from the
resizes it does (``eps=None``). With ``profile=False`` (``fluid simulate --no-profile``) Fluid
gets no profile at all and starts from the executor's defaults.

Example:
    >>> from fluid.sim.workloads import get_workload
    >>> w = get_workload("synthetic", iter_time=1.0, spread=0.0, max_t=4, trials=4)
    >>> r = run_experiment("grid", w, "tune", seed=0, gpus=2)
    >>> r.makespan > 0, r.executor
    (True, 'tune')
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

from ray.tune.experiment import Experiment
from ray.tune.registry import TRAINABLE_CLASS, register_trainable
from ray.tune.schedulers import FIFOScheduler, TrialScheduler
from ray.tune.search import BasicVariantGenerator, SearchAlgorithm, SearchGenerator
from ray.tune.trainable import Trainable

from fluid.algorithms import ALGORITHMS, AlgorithmOptions, build_searcher, check_algorithm
from fluid.algorithms import build_scheduler as build_algorithm_scheduler
from fluid.core import PolicyConfig, TrialSpec, policy_lower_bound
from fluid.core.model import allowed_widths
from fluid.sim import baselines
from fluid.sim.clock import SimClock
from fluid.sim.cluster import SimCluster
from fluid.sim.controller import RestartCosts, RunStats, SimController, SimulationStalled
from fluid.sim.profiling import profile_workload
from fluid.sim.results import EXECUTORS, LOWER_BOUND, Comparison, RunResult
from fluid.sim.workloads.base import Workload
from fluid.tune import _ray_compat as compat

FLUID_EXECUTORS = ("fluid", "fluid_static", baselines.ONE_GPU)
TRAINABLE = "fluid_sim"


class _SimTrainable(Trainable):
    """The trainable every simulated trial names; it never runs (the simulator trains)."""

    def step(self) -> dict:  # pragma: no cover - never called
        raise RuntimeError("simulated trials are trained by fluid.sim, not by Ray")


def ensure_trainable() -> None:
    """Register the simulated trainable (again: ``ray.shutdown`` empties Tune's registry)."""
    if not compat._global_registry.contains(TRAINABLE_CLASS, TRAINABLE):
        register_trainable(TRAINABLE, _SimTrainable)


ensure_trainable()


# ---------------------------------------------------------------------- building blocks
def default_samples(algorithm: str, gpus: int) -> int:
    """Configs an algorithm samples by default (a grid runs its points: ``grid_of``)."""
    if algorithm == "pbt":
        return max(8, gpus)
    if algorithm in ("random", "hyperopt"):
        return max(16, 2 * gpus)
    return max(64, 4 * gpus)


def grid_of(workload: Workload, samples: int | None = None) -> tuple[dict[str, Any], int]:
    """The workload's grid sized to ``samples`` trials, as the experiment's ``config`` and
    ``num_samples``: its first axes (the others at the workload's defaults), or the whole grid
    repeated, as Tune's ``num_samples`` repeats a grid (``None``: the whole grid once).

    Example:
        >>> from fluid.sim.workloads import get_workload
        >>> config, repeats = grid_of(get_workload("cifar10"), 9)
        >>> list(config), repeats
        (['lr', 'batch_size'], 1)
        >>> grid_of(get_workload("cifar10"), 81)[1]
        3
    """
    axes = list(workload.grid.items())
    sizes = [math.prod(len(v["grid_search"]) for _, v in axes[:k]) for k in range(1, len(axes) + 1)]
    whole = sizes[-1] if sizes else 0
    if samples is None:
        return dict(axes), 1
    if samples in sizes:
        return dict(axes[:sizes.index(samples) + 1]), 1
    if whole and samples > 0 and samples % whole == 0:
        return dict(axes), samples // whole
    firsts = ", ".join(str(n) for n in sizes[:-1])
    raise ValueError(
        f"samples (--samples) of a grid: the {workload.name} grid has {whole} points "
        f"({' x '.join(name for name, _ in axes)}); it runs {firsts + ' or ' if firsts else ''}"
        f"{whole} of them (its first axes, the others at the workload's defaults) or a "
        f"multiple of {whole} (the grid repeated, as Tune's num_samples repeats it); "
        f"got {samples}")


def build_search(
    algorithm: str,
    workload: Workload,
    seed: int,
    gpus: int,
    samples: int | None = None,
    storage: str | None = None,
    max_concurrent: int | None = None,
) -> SearchAlgorithm:
    """The algorithm's search algorithm with the experiment added, as ``tune.run`` builds it
    (``max_concurrent``: its ``max_concurrent_trials``, applied to a ``Searcher``)."""
    check_algorithm(algorithm)
    if algorithm == "grid":
        config, samples = grid_of(workload, samples)
    else:
        config, samples = dict(workload.space), samples or default_samples(algorithm, gpus)
    exp = Experiment(
        "sim",
        TRAINABLE,
        config=config,
        num_samples=samples,
        stop={"training_iteration": workload.max_t},
        resources_per_trial={"cpu": 1, "gpu": 1},
        storage_path=storage or tempfile.mkdtemp(prefix="fluid_sim_"),
    )
    metric, mode = workload.metric, workload.mode
    search: SearchAlgorithm
    searcher = build_searcher(algorithm, seed)
    if searcher is not None:
        if max_concurrent:
            searcher = baselines.limit_concurrency(searcher, max_concurrent)
        search = SearchGenerator(searcher)
    else:
        search = BasicVariantGenerator(random_state=seed)
        compat.name_variants(search, f"s{seed}_")  # deterministic trial ids
    search.set_search_properties(metric, mode, exp.spec["config"], **exp.public_spec)
    search.add_configurations([exp])
    return search


def build_scheduler(algorithm: str, workload: Workload, adapted: bool) -> TrialScheduler:
    """The algorithm's scheduler for ``workload`` (``fluid.algorithms``; FIFO when it has none):
    Fluid's adapted class (``adapted``) or Ray's own."""
    options = AlgorithmOptions(max_t=workload.max_t, mutations=workload.mutations)
    sched = build_algorithm_scheduler(algorithm, options, adapted=adapted,
                                      log_config=False)  # PBT's log needs ray.init
    return sched if sched is not None else FIFOScheduler()


def build_executor(
    executor: str,
    base: TrialScheduler,
    workload: Workload,
    clock: SimClock,
    cluster: SimCluster,
    gpu_memory: float | None = None,
    fluid_options: dict[str, Any] | None = None,
    profile: bool = True,
) -> TrialScheduler:
    """The scheduler Tune is given for ``executor`` (see the module docstring).

    ``profile=False`` builds the ``FluidExecutor`` as a user who never ran ``fluid profile``
    would: its defaults (the conservative prior ``alpha = beta = 2`` until a trial is measured: no
    packing, no gang; no ``c``/``d``, no GPU memory given); only the simulated clock and
    cluster, and ``elastic=True`` (the simulated trainable is gang-capable, as one marked with
    ``fluid.train.elastic``), are passed. ``fluid_options`` apply either way. With a profile,
    Fluid gets what a simulated ``fluid profile`` finds (``fluid.sim.profiling``).
    """
    if executor in ("tune", baselines.TUNE_TUNED):
        return base
    if executor == "resource_changing":
        from ray.tune.schedulers.resource_changing_scheduler import (
            DistributeResources,
            ResourceChangingScheduler,
        )

        return ResourceChangingScheduler(
            base_scheduler=base,
            resources_allocation_function=DistributeResources(add_bundles=True),
        )
    if executor in FLUID_EXECUTORS:
        from fluid.tune import FluidExecutor

        # The simulated trials ask for one GPU each (plain Tune's set-up): Fluid sizes them.
        options: dict[str, Any] = {"elastic": True, "dynamic": executor != "fluid_static",
                                   "resize_requests": True, "verbose": False}
        if profile:
            alpha, beta, memory = profile_workload(workload)
            options.update(alpha=alpha, beta=beta, cpus_per_trial=1.0, cpus_per_worker=1.0,
                           gpu_memory=gpu_memory, trial_memory=memory)
        options.update(fluid_options or {})
        if executor == baselines.ONE_GPU:
            options.update(baselines.ONE_GPU_OPTIONS)
        return FluidExecutor(base, clock=clock, resources=cluster, **options)
    raise ValueError(f"unknown executor {executor!r}; known: {list(EXECUTORS)}")


def _deterministic_ids(seed: int) -> AbstractContextManager[None]:
    """Trial ids from a counter instead of uuid4 (``SearchGenerator``), restored afterwards."""
    counter = iter(range(10**9))
    return compat.trial_ids(lambda: f"t{seed}x{next(counter):05d}")


def run_experiment(
    algorithm: str,
    workload: Workload,
    executor: str,
    seed: int = 0,
    gpus: int = 8,
    *,
    samples: int | None = None,
    costs: RestartCosts | None = None,
    time_noise: float = 0.02,
    gpu_memory: float | None = None,
    fluid_options: dict[str, Any] | None = None,
    profile: bool = True,
    search_factory: Callable[[int, str], SearchAlgorithm] | None = None,
) -> RunResult:
    """Simulate one run: its ``RunResult`` (what it measured in ``RunResult.stats``).

    ``profile=False``: Fluid without a profile (see ``build_executor``).

    ``search_factory(seed, storage_path)`` replaces the algorithm's search algorithm (the
    replay's fixed trial list); the scheduler is then FIFO unless ``algorithm`` names one.
    """
    t0 = time.perf_counter()
    gpu_memory = gpu_memory if gpu_memory is not None else workload.gpu_memory_gb
    storage = tempfile.mkdtemp(prefix="fluid_sim_")
    try:
        ensure_trainable()
        with _deterministic_ids(seed):
            clock = SimClock()
            cluster = SimCluster(gpus, clock, memory=gpu_memory)
            if search_factory is not None:
                search = search_factory(seed, storage)
            else:
                limit = gpus if executor == baselines.TUNE_TUNED else None
                search = build_search(algorithm, workload, seed, gpus, samples, storage, limit)
            base = _base_scheduler(algorithm, workload, executor, replay=search_factory is not None)
            sched = build_executor(executor, base, workload, clock, cluster, gpu_memory,
                                   fluid_options, profile)
            sched.set_search_properties(workload.metric, workload.mode)
            ctl = SimController(search, sched, workload, gpus, clock=clock, cluster=cluster,
                                costs=costs, seed=seed, time_noise=time_noise)
            stats, stalled = _run(ctl)
    finally:
        shutil.rmtree(storage, ignore_errors=True)
    return RunResult(
        executor=executor, seed=seed, time_to_target=stats.time_to_target,
        makespan=stats.makespan, gpu_seconds=stats.gpu_seconds,
        gpu_utilization=stats.gpu_utilization, trials=stats.trials, restarts=stats.restarts,
        best=stats.best, sim_seconds=time.perf_counter() - t0, stalled=stalled,
        resizes=getattr(sched, "resizes", None), hook_seconds=getattr(sched, "hook_seconds", None),
        stats=stats,
    )


def _base_scheduler(algorithm: str, workload: Workload, executor: str,
                    replay: bool) -> TrialScheduler:
    """The algorithm's scheduler; FIFO for a replay's fixed trials unless it names one."""
    if replay and algorithm not in ALGORITHMS:
        return FIFOScheduler()
    return build_scheduler(algorithm, workload, executor in FLUID_EXECUTORS)


def _run(ctl: SimController) -> tuple[RunStats, bool]:
    """Run the controller to its end: its stats, and whether it stalled (a run that stalled
    before any stats is an error)."""
    try:
        return ctl.run(), False
    except SimulationStalled as e:
        if e.stats is None:
            raise
        return e.stats, True


def bound_of(stats: RunStats, gpus: int, seed: int, config: PolicyConfig | None = None) -> RunResult:
    """The ``lower_bound`` row from the work of a run (see the module docstring)."""
    config = config or PolicyConfig()

    def widths(spec: TrialSpec) -> list[float]:
        return allowed_widths(config.c_of(spec), config.d_of(spec, gpus), gpus)

    specs = [TrialSpec(f"t{i}", max(it, 1) * t, a, b)
             for i, (it, t, a, b, _) in enumerate(stats.work) if it > 0]
    makespan = policy_lower_bound(specs, gpus, config) if specs else 0.0
    area = sum((min(w * s.runtime_at(w) for w in widths(s)) for s in specs), 0.0)
    reaching = [TrialSpec("x", reached * t, a, b) for _it, t, a, b, reached in stats.work
                if reached]
    ttt = min((min(s.runtime_at(w) for w in widths(s)) for s in reaching), default=None)
    return RunResult(LOWER_BOUND, seed, ttt, makespan, area, None, len(specs))


def compare(
    algorithm: str,
    workload: Workload,
    gpus: int = 8,
    seeds: int | Sequence[int] = 3,
    executors: Sequence[str] = EXECUTORS,
    *,
    progress: Callable[[str], None] | None = None,
    search_factory: Callable[[int, str], SearchAlgorithm] | None = None,
    **options: Any,
) -> Comparison:
    """Every executor (and the lower bound) on the same seeds; see ``Comparison``.

    ``options``: the keyword arguments of ``run_experiment`` (``samples``, ``costs``, ...).
    """
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    comp = Comparison(algorithm, workload.name, gpus)
    # Without a model-based searcher the careful user's Tune is plain Tune: same rows.
    copy_tune = search_factory is not None or baselines.same_as_tune(algorithm)
    for seed in seed_list:
        for ex in executors:
            if progress:
                progress(f"{algorithm}/{workload.name} {ex} seed {seed}")
            tune_row = next((r for r in comp.of("tune") if r.seed == seed), None)
            if ex == baselines.TUNE_TUNED and copy_tune and tune_row is not None:
                comp.results.append(replace(tune_row, executor=ex))
                continue
            result = run_experiment(algorithm, workload, ex, seed, gpus,
                                    search_factory=search_factory, **options)
            comp.results.append(result)
            if ex == "tune" and result.stats is not None:
                comp.results.append(bound_of(result.stats, gpus, seed))
    return comp
