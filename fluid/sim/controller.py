"""A simulated Ray Tune controller: the real schedulers, searchers and ``Trial`` objects, no Ray.

``SimController`` reproduces what ``ray.tune.execution.tune_controller.TuneController`` (Ray
2.60) does in each ``step()`` and in the callbacks of its actor manager, in the same order and
through the same hooks, with actors, placement groups and training replaced by events on a
simulated clock:

``step()``
    1. ``_maybe_update_trial_queue``: ask the search algorithm for trials while fewer than
       ``max_pending_trials`` are PENDING (``add_trial``: ``create_placement_group_factory``,
       ``scheduler.on_trial_add``, then filed by the status the trial has after the hook);
    2. ``_maybe_add_actors``: ``scheduler.choose_trial_to_run`` once (the trial is set PENDING
       and its actor requested), then every PENDING trial in FIFO order, at most
       ``max_pending_trials`` actors waiting for resources;
    3. the resource manager places waiting actors whose shape fits (``SimCluster``), in request
       order, and schedules their start;
    4. one event is handled: the earliest due one; when the step did nothing else, the clock
       jumps to the next event (the simulation is event-driven, never a fixed tick).

Events (all times from ``RestartCosts`` and the workload's ``TrialModel``):

* actor started (``actor_start_s`` + ``gang_setup_s`` for gangs): ``on_trial_start``, status
  RUNNING, then restore from the latest checkpoint (``restore``) or train;
* training result (one iteration of the ground truth's time at the trial's width, with the
  trials sharing its GPU at the iteration's start (``fluid.sim.truth.iteration_time``), with
  seeded noise): ``_process_trial_result`` as in Tune (stopping criteria,
  ``scheduler.on_trial_result``, ``search_alg.on_trial_result``, ``trial.update_last_result``,
  decisions queued or cached while saving), then CONTINUE trains on, PAUSE saves and pauses,
  STOP completes the trial (``scheduler.on_trial_complete``, ``search_alg.on_trial_complete``);
* save done (``save``): ``trial.on_checkpoint`` and the cached decision;
* restore done: ``trial.on_restore`` and train.

An actor runs one task at a time (train, save, restore), like a Ray actor. A trial's training
state (its learning-curve state and iteration) lives in its checkpoints, so a resize restores
exactly what was saved and PBT's exploit copies the state of the trial it clones.

A packed trial whose GPU's residents need more memory than the GPU has fails when its actor
starts (CUDA out of memory: Ray does not check GPU memory for fractional GPUs): Tune's
failure path (``scheduler.on_trial_error``, ``search_alg.on_trial_complete(error=True)``,
status ERROR, no retries); ``RunStats.oom_errors`` counts them.

The controller is composed of its parts: the trials by status (``SimTrials``), the fake actor
layer that places actors and simulates what they do (``_actors.SimActors``), the decision loop
copied from ``TuneController`` (``_decisions.TuneDecisions``) and the events on the simulated
clock (``EventQueue``); it exposes what schedulers and ``FluidExecutor`` reach on a
``TuneController``.

Not reproduced: actor reuse (every start is a new actor, as with ``reuse_actors=False``),
retries of failed trials, buffered results, callbacks/loggers
(no files are written), the experiment checkpoint (``checkpoint`` is a no-op) and CPU limits.

Example:
    >>> from ray.tune.schedulers import FIFOScheduler
    >>> from fluid.sim.workloads import get_workload
    >>> from fluid.sim.experiment import build_search
    >>> w = get_workload("synthetic", iter_time=1.0, spread=0.0, max_t=3, trials=4)
    >>> ctl = SimController(build_search("grid", w, seed=0, gpus=2), FIFOScheduler(), w, gpus=2)
    >>> ctl.run().makespan  # 2 waves of (5 s actor start + 3 iterations of 1 s)
    16.0
"""

from __future__ import annotations

import os
from types import SimpleNamespace

from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter, SearchAlgorithm

from fluid.sim._actors import SimActors
from fluid.sim._bookkeeping import (
    RESTORED,
    RESULT,
    SAVED,
    START,
    EventQueue,
    SimSaveFuture,
    SimTrials,
    seeded,
)
from fluid.sim._decisions import TuneDecisions
from fluid.sim.clock import SimClock
from fluid.sim.cluster import SimCluster
from fluid.sim.costs import RestartCosts
from fluid.sim.outcome import RunStats, SimulationStalled
from fluid.sim.profiling import exact_profile
from fluid.sim.workloads.base import Workload
from fluid.tune import width_of

__all__ = [
    "RestartCosts",
    "RunStats",
    "SimController",
    "SimulationStalled",
]


class SimController:
    """Drives a Tune scheduler and search algorithm to completion on simulated GPUs.

    Args:
        search_alg: a Ray Tune ``SearchAlgorithm`` with its experiment added
            (``BasicVariantGenerator`` or ``SearchGenerator``; see ``fluid.sim.experiment``).
        scheduler: any ``TrialScheduler`` (Tune's, Fluid's adapted ones, ``FluidExecutor``).
        workload: iteration times, overheads and learning curves.
        gpus: GPUs of the simulated cluster (or pass ``cluster``).
        clock: the simulated clock (``FluidExecutor(clock=...)`` must get the same one).
        cluster: the simulated cluster (``FluidExecutor(resources=...)`` must get the same one).
        costs: restart costs.
        seed: seeds the iteration-time and validation noise (per trial, by creation order).
        time_noise: relative standard deviation of an iteration's time.
        max_pending_trials: as Tune's ``TUNE_MAX_PENDING_TRIALS_PG`` (default: Tune's "auto").
        max_steps: safety limit on controller steps.
        record_results: keep every result as ``(time, trial_id, result)`` in ``results``.
    """

    def __init__(
        self,
        search_alg: SearchAlgorithm,
        scheduler: TrialScheduler,
        workload: Workload,
        gpus: int = 8,
        *,
        clock: SimClock | None = None,
        cluster: SimCluster | None = None,
        costs: RestartCosts | None = None,
        seed: int = 0,
        time_noise: float = 0.0,
        max_pending_trials: int | None = None,
        max_steps: int = 50_000_000,
        record_results: bool = False,
    ) -> None:
        self.clock = clock or SimClock()
        self.cluster = cluster or SimCluster(gpus, self.clock)
        self._search_alg, self._scheduler_alg = search_alg, scheduler
        self.workload, self.seed = workload, seed
        self._max_steps = max_steps
        self._events = EventQueue(self.clock)
        self._trials = SimTrials()
        if max_pending_trials is None:
            max_pending_trials = self._auto_max_pending()
        self._max_pending_trials = max_pending_trials
        self._actors = SimActors(self._trials, self.cluster, self._events, workload,
                                 costs or RestartCosts(), seed, time_noise, max_pending_trials)
        self._decisions = TuneDecisions(self, scheduler, search_alg, self._trials, self._actors)
        self.results: list[tuple[float, str, dict]] | None = [] if record_results else None
        self._steps = 0
        self._results = 0
        self._oom_errors = 0
        self._time_to_target: float | None = None
        self._best: float | None = None
        # What Tune's helpers read of a controller (``fluid.tune._ray_compat``, Tune's
        # schedulers): no storage to sync (the simulation writes no files), the cluster's
        # resources, the decisions cached for saves under way.
        self._storage = SimpleNamespace(experiment_driver_staging_path=None,
                                        syncer=SimpleNamespace(wait=lambda: None))
        self._resource_updater = self.cluster
        self._cached_trial_decisions = self._decisions.cached_decisions

    # ------------------------------------------------------------------ what schedulers use
    @property
    def search_alg(self) -> SearchAlgorithm:
        """The search algorithm (``TuneController.search_alg``)."""
        return self._search_alg

    @property
    def scheduler_alg(self) -> TrialScheduler:
        """The scheduler (``TuneController.scheduler_alg``)."""
        return self._scheduler_alg

    def get_trials(self) -> list[Trial]:
        """Every trial, in the order added."""
        return self._trials.all

    def get_live_trials(self) -> dict[Trial, None]:
        """Trials not yet finished (an insertion-ordered set)."""
        return self._trials.live

    def checkpoint(self, force: bool = False, wait: bool = False) -> None:
        """The experiment checkpoint: nothing to write in a simulation."""

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        """``TuneController.pause_trial``."""
        self._decisions.pause_trial(trial, should_checkpoint)

    def stop_trial(self, trial: Trial) -> None:
        """``TuneController.stop_trial``: complete (RUNNING) or remove (PENDING/PAUSED) it."""
        self._decisions.stop_trial(trial)

    def _schedule_trial_save(self, trial: Trial, result: dict | None = None,
                             ) -> SimSaveFuture | None:
        """``TuneController._schedule_trial_save`` (PBT calls it directly)."""
        return self._decisions.schedule_trial_save(trial, result)

    def _set_trial_status(self, trial: Trial, status: str) -> None:
        """``TuneController._set_trial_status`` (``fluid.tune._ray_compat.set_trial_status``)."""
        self._trials.set_status(trial, status)

    def is_finished(self) -> bool:
        """All trials finished and the search algorithm has nothing more."""
        return (
            all(t.is_finished() for t in self._trials.live)
            and all(t.is_finished() for t in self._trials.all)
            and self._search_alg.is_finished()
        )

    # ------------------------------------------------------------------ main loop
    def run(self) -> RunStats:
        """Step until the experiment is finished; returns what was measured."""
        with seeded(self.seed):
            try:
                while not self.is_finished():
                    if self._steps >= self._max_steps:
                        raise SimulationStalled(f"more than {self._max_steps} controller steps")
                    self.step()
            except SimulationStalled as e:
                self.cluster.close()
                e.stats = self.stats()
                raise
        self.cluster.close()
        return self.stats()

    def step(self) -> None:
        """One ``TuneController.step``."""
        worked = self._maybe_update_trial_queue()
        chosen = self._scheduler_alg.choose_trial_to_run(self)
        worked = self._actors.add_actors(chosen) or worked
        worked = self._actors.place_waiting() or worked
        if self._events.due(idle=not worked):
            self._handle(*self._events.pop())
        elif not worked and not self.is_finished():
            raise SimulationStalled(self._stall_report())
        self._steps += 1

    def stats(self) -> RunStats:
        """Measurements so far."""
        now = self.clock()
        work = []
        sims = self._actors.sim
        for trial in self._trials.all:
            s = sims[trial]
            m = s.model or self.workload.trial_model(trial.config)
            mean = s.work_time / s.iteration if s.iteration else m.iteration_time
            prof = exact_profile(m)
            work.append((s.iteration, mean, prof.alpha, prof.beta, s.reached))
        return RunStats(
            makespan=now,
            time_to_target=self._time_to_target,
            best=self._best,
            gpu_seconds=self.cluster.gpu_seconds,
            gpu_utilization=self.cluster.busy_gpu_seconds / (self.cluster.n * now) if now else 0.0,
            trials=len(self._trials.all),
            results=self._results,
            restarts=sum(max(0, sims[t].starts - 1) for t in self._trials.all),
            steps=self._steps,
            work=work,
            spans={t.trial_id: (sims[t].first_start, sims[t].end) for t in self._trials.all},
            oom_errors=self._oom_errors,
        )

    # ------------------------------------------------------------------ trials
    def _auto_max_pending(self) -> int:
        # TuneController._get_max_pending_trials with TUNE_MAX_PENDING_TRIALS_PG=auto.
        env = os.environ.get("TUNE_MAX_PENDING_TRIALS_PG", "auto")
        if env != "auto":
            return int(env)
        if not isinstance(self._search_alg, BasicVariantGenerator):
            searcher = getattr(self._search_alg, "searcher", None)
            while searcher:
                if isinstance(searcher, ConcurrencyLimiter):
                    return searcher.max_concurrent
                searcher = getattr(searcher, "searcher", None)
            return 1
        return max(200, int(self.cluster.get_num_cpus() * 1.1))

    def _maybe_update_trial_queue(self) -> bool:
        if self._search_alg.is_finished():
            return False
        added = False
        while len(self._trials.by_status[Trial.PENDING]) < self._max_pending_trials:
            trial = self._search_alg.next_trial()
            if not trial:
                break
            self.add_trial(trial)
            added = True
        return added

    def add_trial(self, trial: Trial) -> None:
        """``TuneController.add_trial``."""
        trial.create_placement_group_factory()
        self._trials.all.append(trial)
        self._actors.track(trial)
        if trial.status != Trial.TERMINATED:
            self._trials.live[trial] = None
        self._scheduler_alg.on_trial_add(self, trial)
        self._trials.file(trial)

    # ------------------------------------------------------------------ events
    def _handle(self, kind: str, trial: Trial, token: int) -> None:
        if not self._actors.current(trial, token):
            return  # the actor this event belonged to is gone
        if kind == START:
            self._actor_started(trial)
        elif kind == RESULT and self._actors.due(trial):
            self._on_training_result(trial)
        elif kind == SAVED:
            self._decisions.on_saving_result(trial)
        elif kind == RESTORED:
            self._actors.restored(trial)
            self._trials.set_status(trial, Trial.RUNNING)
            self._actors.train(trial)
            self._trials.live[trial] = None

    def _actor_started(self, trial: Trial) -> None:
        fits = self._actors.started(trial)
        self._trials.set_status(trial, Trial.RUNNING)
        if not fits:
            self._oom_errors += 1
            self._decisions.trial_failed(
                trial, "CUDA out of memory: packed trials exceed the GPU's memory")
            return
        self._actors.restore_or_begin(trial)

    def _on_training_result(self, trial: Trial) -> None:
        result, value = self._actors.result(trial, self.workload.metric)
        self._results += 1
        if self.results is not None:
            self.results.append((self.clock(), trial.trial_id, dict(result)))
        self._track_target(value)
        sim = self._actors.sim[trial]
        if sim.reached is None and self.workload.reached(value):
            sim.reached = sim.iteration
        self._decisions.process_trial_results(trial, [result])
        self._decisions.maybe_execute_queued_decision(trial, after_save=False)

    def _track_target(self, value: float) -> None:
        w = self.workload
        if self._best is None or (value > self._best if w.mode == "max" else value < self._best):
            self._best = value
        if self._time_to_target is None and w.reached(value):
            self._time_to_target = self.clock()

    # ------------------------------------------------------------------ diagnostics
    def _stall_report(self) -> str:
        counts = {s: len(v) for s, v in self._trials.by_status.items() if v}
        waiting = [(t.trial_id, width_of(t.placement_group_factory))
                   for t in self._actors.waiting]
        return (
            f"simulation stalled at t={self.clock():.1f}s: trials by status {counts}, actors "
            f"waiting for GPUs {waiting[:5]}, {self.cluster.describe()}, searcher finished "
            f"{self._search_alg.is_finished()}"
        )
