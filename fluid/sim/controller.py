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

Not reproduced: actor reuse (``reuse_actors`` must be False, as Fluid requires anyway),
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

import copy
import heapq
import os
import tempfile
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter, SearchAlgorithm

from fluid.sim._actors import SimActors
from fluid.sim._decisions import TuneDecisions
from fluid.sim._state import (
    RESTORED,
    RESULT,
    SAVED,
    START,
    NoSyncer,
    SimActor,
    SimTrialState,
    seeded,
)
from fluid.sim.clock import SimClock
from fluid.sim.cluster import SimCluster, pgf_width
from fluid.sim.costs import RestartCosts
from fluid.sim.outcome import RunStats, SimulationStalled
from fluid.sim.profiling import exact_profile
from fluid.sim.truth import fits_memory, iteration_time
from fluid.sim.workloads.base import TrialModel, Workload

__all__ = [
    "RestartCosts",
    "RunStats",
    "SimController",
    "SimulationStalled",
]


class SimController(TuneDecisions, SimActors):
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
        stopper: ``(trial_id, result) -> bool``, Tune's ``stop=`` callable.
        max_pending_trials: as Tune's ``TUNE_MAX_PENDING_TRIALS_PG`` (default: Tune's "auto").
        max_steps: safety limit on controller steps.
        record_results: keep every result as ``(time, trial_id, result)`` in ``results``.
    """

    _reuse_actors = False

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
        stopper: Callable[[str, dict], bool] | None = None,
        max_pending_trials: int | None = None,
        max_steps: int = 50_000_000,
        record_results: bool = False,
    ) -> None:
        self.clock = clock or SimClock()
        self.cluster = cluster or SimCluster(gpus, self.clock)
        self._search_alg = search_alg
        self._scheduler_alg = scheduler
        self.workload = workload
        self.costs = costs or RestartCosts()
        self.seed = seed
        self.time_noise = time_noise
        self._stopper = stopper
        self._max_steps = max_steps
        self._trials: list[Trial] = []
        self._live_trials: dict[Trial, None] = {}
        self._status: dict[str, dict[Trial, None]] = {
            s: {} for s in (Trial.PENDING, Trial.RUNNING, Trial.PAUSED, Trial.TERMINATED,
                            Trial.ERROR)
        }
        self._pending_trials_list: list[Trial] = []
        self._staged: dict[Trial, None] = {}
        self._actors: dict[Trial, SimActor] = {}
        self._waiting_actors: list[Trial] = []  # actors requested, resources not placed yet
        self._sim: dict[Trial, SimTrialState] = {}
        self._queued_decisions: dict[str, str] = {}
        self._cached_decisions: dict[str, str] = {}
        self._ckpt_state: dict[str, tuple[float | None, int, float, float]] = {}
        self._heap: list[tuple[float, int, str, Trial, int]] = []
        self._durations: dict[Trial, tuple[float, float]] = {}  # (seconds, one-GPU seconds)
        self._models_by_id: dict[str, TrialModel] = {}
        self._oom_errors = 0
        self._placement_dirty = False
        self.results: list[tuple[float, str, dict]] | None = [] if record_results else None
        self._seq = 0
        self._tokens = 0
        self._ckpts = 0
        self._iteration = 0
        self._results = 0
        self._time_to_target: float | None = None
        self._best: float | None = None
        self._best_curve: list[tuple[float, float]] = []
        self._tmp = tempfile.mkdtemp(prefix="fluid_sim_")
        self._storage = SimpleNamespace(experiment_driver_staging_path=None, syncer=NoSyncer())
        self._resource_updater = self.cluster
        self._max_pending_trials = (
            max_pending_trials if max_pending_trials is not None else self._auto_max_pending()
        )

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
        return self._trials

    def get_live_trials(self) -> dict[Trial, None]:
        """Trials not yet finished (an insertion-ordered set)."""
        return self._live_trials

    def get_trial(self, tid: str) -> Trial | None:
        """The trial with id ``tid``."""
        return next((t for t in self._trials if t.trial_id == tid), None)

    def _wrapped(self) -> SimController:
        return self

    def checkpoint(self, force: bool = False, wait: bool = False) -> None:
        """The experiment checkpoint: nothing to write in a simulation."""

    def is_finished(self) -> bool:
        """All trials finished and the search algorithm has nothing more."""
        return (
            all(t.is_finished() for t in self._live_trials)
            and all(t.is_finished() for t in self._trials)
            and self._search_alg.is_finished()
        )

    # ------------------------------------------------------------------ main loop
    def run(self) -> RunStats:
        """Step until the experiment is finished; returns what was measured."""
        with seeded(self.seed):
            try:
                while not self.is_finished():
                    if self._iteration >= self._max_steps:
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
        worked = self._maybe_add_actors() or worked
        worked = self._try_start_actors() or worked
        if self._heap and (self._heap[0][0] <= self.clock() or not worked):
            time, _, kind, trial, token = heapq.heappop(self._heap)
            self.clock.advance_to(max(time, self.clock()))
            self._handle(kind, trial, token)
        elif not worked and not self.is_finished():
            raise SimulationStalled(self._stall_report())
        self._iteration += 1

    def stats(self) -> RunStats:
        """Measurements so far."""
        now = self.clock()
        work = []
        for trial in self._trials:
            s = self._sim[trial]
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
            trials=len(self._trials),
            results=self._results,
            restarts=sum(max(0, self._sim[t].starts - 1) for t in self._trials),
            steps=self._iteration,
            work=work,
            spans={t.trial_id: (self._sim[t].first_start, self._sim[t].end) for t in self._trials},
            best_curve=list(self._best_curve),
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
        while len(self._status[Trial.PENDING]) < self._max_pending_trials:
            trial = self._search_alg.next_trial()
            if not trial:
                break
            self.add_trial(trial)
            added = True
        return added

    def add_trial(self, trial: Trial) -> None:
        """``TuneController.add_trial``."""
        trial.create_placement_group_factory()
        self._trials.append(trial)
        sim = SimTrialState(len(self._sim))
        sim.rng = np.random.default_rng([self.seed, sim.index])
        self._sim[trial] = sim
        if trial.status != Trial.TERMINATED:
            self._live_trials[trial] = None
        self._scheduler_alg.on_trial_add(self, trial)
        self._status[trial.status][trial] = None
        if trial.status == Trial.PENDING:
            self._pending_trials_list.append(trial)

    def _set_trial_status(self, trial: Trial, status: str) -> None:
        """``TuneController._set_trial_status``: move a trial between the status sets."""
        current = trial.status
        if current == status:
            return
        assert trial in self._status[current], (trial, current)
        assert trial not in self._status[status], (trial, status)
        del self._status[current][trial]
        self._status[status][trial] = None
        if status == Trial.PENDING:
            self._pending_trials_list.append(trial)
        trial.set_status(status)

    def _model(self, trial: Trial) -> TrialModel:
        sim = self._sim[trial]
        # Keyed by content: an id() key could match a new config (PBT) at a freed address.
        if sim.model is None or sim.config_key != trial.config:
            sim.model = self.workload.trial_model(trial.config)
            sim.curve = self.workload.curve(trial.config)
            sim.config_key = copy.deepcopy(trial.config)
            self._models_by_id[trial.trial_id] = sim.model
        return sim.model

    def _peers(self, trial: Trial) -> list[TrialModel]:
        """Models of the other trials on the trial's GPU (packed trials only)."""
        ids = self.cluster.pool.neighbours(trial.trial_id)
        return [self._models_by_id[t] for t in ids if t in self._models_by_id]

    def _out_of_memory(self, trial: Trial) -> bool:
        width = self._actors[trial].width
        if width is None or width >= 1:
            return False
        memories = [m.memory_gb for m in (self._model(trial), *self._peers(trial))]
        return not fits_memory(memories, self.cluster.pool.memory)

    def _trial_failed(self, trial: Trial, message: str) -> None:
        """``TuneController._process_trial_failure`` without retries."""
        self._scheduler_alg.on_trial_error(self, trial)
        self._search_alg.on_trial_complete(trial.trial_id, error=True)
        self._schedule_trial_stop(trial, exception=RuntimeError(message))
        self._live_trials.pop(trial, None)
        self._sim[trial].end = self.clock()

    # ------------------------------------------------------------------ events
    def _handle(self, kind: str, trial: Trial, token: int) -> None:
        actor = self._actors.get(trial)
        if actor is None or actor.token != token:
            return  # the actor this event belonged to is gone
        if kind == START:
            self._actor_started(trial)
        elif kind == RESULT:
            self._on_training_result(trial)
        elif kind == SAVED:
            self._on_saving_result(trial)
        elif kind == RESTORED:
            self._process_trial_restore(trial)

    def _actor_started(self, trial: Trial) -> None:
        actor = self._actors[trial]
        actor.started = True
        actor.busy_until = self.clock()
        self._staged.pop(trial, None)
        self._set_trial_status(trial, Trial.RUNNING)
        if self._out_of_memory(trial):
            self._oom_errors += 1
            self._trial_failed(trial, "CUDA out of memory: packed trials exceed the GPU's memory")
            return
        if not self._schedule_trial_restore(trial):
            sim = self._sim[trial]
            sim.state, sim.iteration, sim.train_time, sim.work_time = None, 0, 0.0, 0.0
            self._schedule_trial_train(trial)

    def _schedule_trial_restore(self, trial: Trial) -> bool:
        checkpoint_result = trial.latest_checkpoint_result
        if not checkpoint_result:
            return False
        trial.temporary_state.restoring_from = checkpoint_result
        end = self._task_at(trial, self.costs.restore(self._model(trial)))
        self._push(end, RESTORED, trial, self._actors[trial].token)
        return True

    def _process_trial_restore(self, trial: Trial) -> None:
        checkpoint = trial.temporary_state.restoring_from.checkpoint
        trial.on_restore()
        sim = self._sim[trial]
        saved = self._ckpt_state.get(checkpoint.path) if checkpoint is not None else None
        if saved is not None:
            sim.state, sim.iteration, sim.train_time, sim.work_time = saved
        self._set_trial_status(trial, Trial.RUNNING)
        self._schedule_trial_train(trial)
        self._live_trials[trial] = None

    def _schedule_trial_train(self, trial: Trial) -> None:
        sim, actor = self._sim[trial], self._actors[trial]
        model = self._model(trial)
        width = actor.width or 1.0
        peers = [m.truth for m in self._peers(trial)] if width < 1 else []
        timing = iteration_time(model.truth, width, peers)
        noise = 1.0
        if self.time_noise > 0:
            noise = float(np.exp(sim.rng.normal(0.0, self.time_noise)))
        duration = timing.seconds * noise
        self._durations[trial] = (duration, model.iteration_time * noise)
        self.cluster.set_active(trial.trial_id, timing.busy)
        if sim.first_start is None:
            sim.first_start = max(self.clock(), actor.busy_until)
        self._push(self._task_at(trial, duration), RESULT, trial, actor.token)

    def _on_training_result(self, trial: Trial) -> None:
        sim, actor = self._sim[trial], self._actors[trial]
        model = self._model(trial)
        width = actor.width or 1.0
        curve = sim.curve
        if sim.state is None:
            sim.state = curve.initial
        sim.state = curve.step(sim.state)
        sim.iteration += 1
        dt, solo = self._durations.pop(trial)
        sim.train_time += dt
        sim.work_time += solo
        value = curve.value(sim.state)
        if curve.noise:
            value *= 1.0 + float(sim.rng.normal(0.0, curve.noise))
        result = {
            "training_iteration": sim.iteration,
            self.workload.metric: value,
            "time_this_iter_s": dt,
            "time_total_s": sim.train_time,
            "done": False,
            "fluid_peak_gpu_memory": model.memory_gb * 2**30,
            "fluid_width": width,
        }
        self._results += 1
        if self.results is not None:
            self.results.append((self.clock(), trial.trial_id, dict(result)))
        self._track_target(value)
        if sim.reached is None and self.workload.reached(value):
            sim.reached = sim.iteration
        self._process_trial_results(trial, [result])
        self._maybe_execute_queued_decision(trial, after_save=False)

    def _track_target(self, value: float) -> None:
        w = self.workload
        better = self._best is None or (value > self._best if w.mode == "max" else value < self._best)
        if better:
            self._best = value
            self._best_curve.append((self.clock(), value))
        if self._time_to_target is None and w.reached(value):
            self._time_to_target = self.clock()

    # ------------------------------------------------------------------ diagnostics
    def _stall_report(self) -> str:
        counts = {s: len(v) for s, v in self._status.items() if v}
        waiting = [(t.trial_id, pgf_width(t.placement_group_factory)) for t in self._waiting_actors]
        return (
            f"simulation stalled at t={self.clock():.1f}s: trials by status {counts}, actors "
            f"waiting for GPUs {waiting[:5]}, {self.cluster.describe()}, searcher finished "
            f"{self._search_alg.is_finished()}"
        )
