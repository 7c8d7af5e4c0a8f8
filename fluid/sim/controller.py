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
import math
import os
import random
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from ray.train import Checkpoint
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter, SearchAlgorithm
from ray.tune.utils import flatten_dict

from fluid.core.model import is_packed
from fluid.sim.clock import SimClock
from fluid.sim.cluster import SimCluster, pgf_width
from fluid.sim.profiling import exact_profile
from fluid.sim.truth import fits_memory, iteration_time
from fluid.sim.workloads.base import TrialModel, Workload
from fluid.tune._ray_compat import _FutureTrainingResult, _TrainingResult

_START, _RESULT, _SAVED, _RESTORED = "start", "result", "saved", "restored"


@dataclass(frozen=True)
class RestartCosts:
    """Seconds a trial spends not training when it (re)starts, saves or restores.

    Attributes:
        actor_start_s: a new Ray actor: process start, ``import torch``, CUDA context,
            dataset loaders (2-5 s measured for the experiment trainables on a warm node;
            5 s, the upper end, calibrated on the paper's Table 2: docs/simulator.md).
        gang_setup_s: extra for a gang: worker actors and the ``torch.distributed`` rendezvous.
        save_fixed_s: Tune's save round trip besides writing the checkpoint.
        restore_fixed_s: Tune's restore round trip besides reading it.
        storage_gbps: checkpoint write/read bandwidth in GB/s (local NVMe or a shared FS).
    """

    actor_start_s: float = 5.0
    gang_setup_s: float = 1.0
    save_fixed_s: float = 0.2
    restore_fixed_s: float = 0.2
    storage_gbps: float = 1.0

    @classmethod
    def zero(cls) -> RestartCosts:
        """Free (re)starts: for scenarios checked against the policy core by hand."""
        return cls(0.0, 0.0, 0.0, 0.0, math.inf)

    def start(self, width: float) -> float:
        """Seconds from placement to a running actor."""
        gang = not is_packed(width) and round(width) > 1
        return self.actor_start_s + (self.gang_setup_s if gang else 0.0)

    def save(self, model: TrialModel) -> float:
        """Seconds to save a checkpoint."""
        return self.save_fixed_s + model.checkpoint_gb / self.storage_gbps

    def restore(self, model: TrialModel) -> float:
        """Seconds to restore a checkpoint."""
        return self.restore_fixed_s + model.checkpoint_gb / self.storage_gbps


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
        best_curve: ``[(time, best so far)]`` at every improvement.
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
    best_curve: list[tuple[float, float]] = field(default_factory=list)
    oom_errors: int = 0


class SimulationStalled(RuntimeError):
    """Nothing can happen any more but the experiment is not finished (a searcher that never
    suggests, a shape that never fits, a paused trial its scheduler never resumes).

    Real Tune hangs in the same state. ``stats`` holds what was measured until then.
    """

    def __init__(self, message: str, stats: RunStats | None = None) -> None:
        super().__init__(message)
        self.stats = stats


@dataclass
class _Actor:
    token: int
    pgf: Any
    asked: float  # GPUs the placement group asks for
    width: float | None = None  # None until placed
    busy_until: float = 0.0
    started: bool = False


@dataclass
class _SimState:
    index: int
    model: TrialModel | None = None
    curve: Any = None
    state: float | None = None  # learning-curve state
    iteration: int = 0
    train_time: float = 0.0
    work_time: float = 0.0  # one-GPU seconds of the iterations trained
    starts: int = 0
    reached: int | None = None  # iteration at which it first met the target
    first_start: float | None = None  # when it first started training
    end: float | None = None  # when it was stopped
    rng: np.random.Generator | None = None
    config_key: Any = None


class _SimFuture(_FutureTrainingResult):
    """A save in flight, as PBT sees it: resolves to the checkpoint it will hold."""

    def __init__(self, result: _TrainingResult) -> None:
        super().__init__(None)
        self._result = result

    def resolve(self, block: bool = True) -> _TrainingResult | None:
        return self._result


class _Syncer:
    def wait(self) -> None:
        """Nothing to sync: the simulation writes no files."""


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
        self._actors: dict[Trial, _Actor] = {}
        self._waiting_actors: list[Trial] = []  # actors requested, resources not placed yet
        self._sim: dict[Trial, _SimState] = {}
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
        self._storage = SimpleNamespace(experiment_driver_staging_path=None, syncer=_Syncer())
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
        with _seeded(self.seed):
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
        sim = _SimState(len(self._sim))
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

    # ------------------------------------------------------------------ actors
    def _maybe_add_actors(self) -> bool:
        worked = False
        trial_to_run = self._scheduler_alg.choose_trial_to_run(self)
        if trial_to_run and trial_to_run not in self._staged and trial_to_run not in self._actors:
            self._set_trial_status(trial_to_run, Trial.PENDING)
            self._staged[trial_to_run] = None
            self._schedule_trial_actor(trial_to_run)
            worked = True
        candidates, keep = self._pending_trials_list, []
        while candidates:
            if len(self._waiting_actors) >= self._max_pending_trials:
                break
            trial = candidates.pop(0)
            if trial not in self._status[Trial.PENDING]:
                continue
            if trial in self._actors:
                keep.append(trial)
                continue
            if trial in self._staged:
                continue
            self._staged[trial] = None
            self._schedule_trial_actor(trial)
            worked = True
        self._pending_trials_list = keep + candidates
        return worked

    def _schedule_trial_actor(self, trial: Trial) -> None:
        assert trial.status == Trial.PENDING
        self._tokens += 1
        pgf = trial.placement_group_factory
        self._actors[trial] = _Actor(self._tokens, pgf, pgf_width(pgf))
        self._waiting_actors.append(trial)
        self._placement_dirty = True

    def _try_start_actors(self) -> bool:
        # Only when something changed: an actor was requested or GPUs were released.
        if not self._placement_dirty:
            return False
        self._placement_dirty = False
        worked, still = False, []
        failed: set[float] = set()  # shapes that did not fit in this pass
        for trial in self._waiting_actors:
            actor = self._actors.get(trial)
            if actor is None or actor.width is not None:
                continue
            sim = self._sim[trial]
            self._model(trial)  # known before placement: co-runners look it up
            width = None
            if actor.asked not in failed and (actor.asked <= 0 or self.cluster.pool.has_free()):
                # Ray does not check GPU memory: an overfull GPU fails at start (_actor_started)
                width = self.cluster.place(trial.trial_id, actor.pgf)
            if width is None:
                failed.add(actor.asked)
                still.append(trial)
                continue
            actor.width = width
            sim.starts += 1
            self._push(self.clock() + self.costs.start(width), _START, trial, actor.token)
            worked = True
        self._waiting_actors = still
        return worked

    def _remove_actor(self, trial: Trial) -> None:
        actor = self._actors.pop(trial, None)
        if actor is None:
            return
        if trial in self._waiting_actors:
            self._waiting_actors.remove(trial)
        self._staged.pop(trial, None)
        self.cluster.release(trial.trial_id)
        self._placement_dirty = True

    def _push(self, time: float, kind: str, trial: Trial, token: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, trial, token))

    def _task_at(self, trial: Trial, duration: float) -> float:
        """When a task of ``duration`` queued on the trial's actor now completes."""
        actor = self._actors[trial]
        end = max(self.clock(), actor.busy_until) + duration
        actor.busy_until = end
        return end

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
        if kind == _START:
            self._actor_started(trial)
        elif kind == _RESULT:
            self._on_training_result(trial)
        elif kind == _SAVED:
            self._on_saving_result(trial)
        elif kind == _RESTORED:
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
        self._push(end, _RESTORED, trial, self._actors[trial].token)
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
        self._push(self._task_at(trial, duration), _RESULT, trial, actor.token)

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

    def _process_trial_results(self, trial: Trial, results: list[dict]) -> None:
        for result in results:
            decision = self._process_trial_result(trial, result)
            if decision == TrialScheduler.STOP:
                break

    def _process_trial_result(self, trial: Trial, result: dict[str, Any]) -> str | None:
        result.update(trial_id=trial.trial_id)
        flat_result = flatten_dict(result)
        stop = self._stopper is not None and self._stopper(trial.trial_id, result)
        if stop or trial.should_stop(flat_result):
            decision = TrialScheduler.STOP
        else:
            decision = self._scheduler_alg.on_trial_result(self, trial, flat_result)
        if decision == TrialScheduler.STOP:
            result.update(done=True)
        else:
            self._search_alg.on_trial_result(trial.trial_id, flat_result)
        trial.update_last_result(result)
        if trial.is_saving:
            if not self._cached_decisions.get(trial.trial_id) or decision in (
                TrialScheduler.PAUSE, TrialScheduler.STOP
            ):
                self._cached_decisions[trial.trial_id] = decision
            return None
        self._queue_decision(trial, decision)
        return decision

    def _queue_decision(self, trial: Trial, decision: str) -> None:
        old = self._queued_decisions.setdefault(trial.trial_id, decision)
        if old is TrialScheduler.STOP:
            return
        if decision is TrialScheduler.STOP or decision is TrialScheduler.PAUSE:
            self._queued_decisions[trial.trial_id] = decision

    def _maybe_execute_queued_decision(self, trial: Trial, after_save: bool = False) -> None:
        decision = self._queued_decisions.pop(trial.trial_id, None)
        if decision:
            self._execute_action(trial, decision, after_save=after_save)

    def _execute_action(self, trial: Trial, decision: str, after_save: bool = False) -> None:
        if decision == TrialScheduler.CONTINUE:
            self._schedule_trial_train(trial)
        elif decision == TrialScheduler.PAUSE:
            self.pause_trial(trial, should_checkpoint=not after_save)
        elif decision == TrialScheduler.STOP:
            self.stop_trial(trial)
        elif decision == TrialScheduler.NOOP:
            pass
        else:
            raise ValueError(f"Invalid decision: {decision}")

    # ------------------------------------------------------------------ save, pause, stop
    def _schedule_trial_save(self, trial: Trial, result: dict | None = None) -> _SimFuture | None:
        """``TuneController._schedule_trial_save`` (PBT calls it directly)."""
        if trial not in self._actors:
            return None
        result = result or trial.last_result
        self._ckpts += 1
        checkpoint = Checkpoint(os.path.join(self._tmp, f"{trial.trial_id}_ckpt{self._ckpts}"))
        sim = self._sim[trial]
        self._ckpt_state[checkpoint.path] = (sim.state, sim.iteration, sim.train_time,
                                             sim.work_time)
        future = _SimFuture(_TrainingResult(checkpoint=checkpoint, metrics=dict(result)))
        trial.temporary_state.saving_to = future
        self.cluster.set_active(trial.trial_id, 0.0)
        end = self._task_at(trial, self.costs.save(self._model(trial)))
        self._push(end, _SAVED, trial, self._actors[trial].token)
        return future

    def _on_saving_result(self, trial: Trial) -> None:
        future = trial.temporary_state.saving_to
        if future is not None:
            training_result = future.resolve()
            trial.on_checkpoint(training_result)
        trial.temporary_state.saving_to = None
        decision = self._cached_decisions.pop(trial.trial_id, None)
        if decision and future is not None:
            self._queue_decision(trial, decision)
        self._maybe_execute_queued_decision(trial, after_save=True)

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        """``TuneController.pause_trial``."""
        self._cached_decisions.pop(trial.trial_id, None)
        self._schedule_trial_pause(trial, should_checkpoint=should_checkpoint)

    def _schedule_trial_pause(self, trial: Trial, should_checkpoint: bool = True) -> None:
        if trial not in self._actors:
            return
        if should_checkpoint:
            self._cached_decisions[trial.trial_id] = TrialScheduler.PAUSE
            self._schedule_trial_save(trial)
        else:
            self._schedule_trial_stop(trial)
            self._set_trial_status(trial, Trial.PAUSED)

    def stop_trial(self, trial: Trial) -> None:
        """``TuneController.stop_trial``: complete (RUNNING) or remove (PENDING/PAUSED) it."""
        if trial.status in (Trial.ERROR, Trial.TERMINATED):
            return
        if trial.status in (Trial.PENDING, Trial.PAUSED):
            self._scheduler_alg.on_trial_remove(self, trial)
            self._search_alg.on_trial_complete(trial.trial_id)
        elif trial.status == Trial.RUNNING:
            self._scheduler_alg.on_trial_complete(self, trial, flatten_dict(trial.last_result))
            self._search_alg.on_trial_complete(
                trial.trial_id, result=flatten_dict(trial.last_result)
            )
        self._schedule_trial_stop(trial)
        self._live_trials.pop(trial, None)
        self._sim[trial].end = self.clock()

    def _schedule_trial_stop(self, trial: Trial, exception: Exception | None = None) -> None:
        if trial.status == Trial.ERROR:
            return
        if trial.is_saving:
            self._cached_decisions[trial.trial_id] = TrialScheduler.STOP
        trial.temporary_state.saving_to = None
        trial.temporary_state.restoring_from = None
        self._set_trial_status(trial, Trial.ERROR if exception else Trial.TERMINATED)
        self._remove_actor(trial)

    # ------------------------------------------------------------------ diagnostics
    def _stall_report(self) -> str:
        counts = {s: len(v) for s, v in self._status.items() if v}
        waiting = [(t.trial_id, pgf_width(t.placement_group_factory)) for t in self._waiting_actors]
        return (
            f"simulation stalled at t={self.clock():.1f}s: trials by status {counts}, actors "
            f"waiting for GPUs {waiting[:5]}, {self.cluster.describe()}, searcher finished "
            f"{self._search_alg.is_finished()}"
        )


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed the global ``random`` and ``numpy.random`` (PBT, HyperBand ties) for one run."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
