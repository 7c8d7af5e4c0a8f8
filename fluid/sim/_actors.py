"""The fake actor layer of ``SimController``: actor requests, placement on the simulated cluster
(``SimCluster``) in the order and with the limits of ``TuneController``'s actor manager (Ray
2.60; see ``fluid.sim.controller``), and what each actor does, one task at a time: start, train
an iteration (the ground truth's time at its width, with the trials sharing its GPU, with
seeded noise), save, restore.

A packed trial's iteration runs at the pace the trials computing beside it allow, from moment
to moment: when a mate starts or ends an iteration, or its actor stops, the iterations in flight
on that GPU are timed again for the work they have left (a GPU shares its time among the
kernels there are now, not those there were when an iteration began).

A trial's training state lives in its checkpoints (``save``, ``restored``; why: the
controller's docstring).
"""

from __future__ import annotations

import copy
import itertools
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ray.train import Checkpoint
from ray.tune.experiment import Trial

from fluid.sim._bookkeeping import (
    RESTORED,
    RESULT,
    SAVED,
    START,
    EventQueue,
    SimActor,
    SimSaveFuture,
    SimTrials,
    SimTrialState,
    _TrainingResult,
)
from fluid.sim.cluster import SimCluster
from fluid.sim.costs import RestartCosts
from fluid.sim.truth import Timing, fits_memory, iteration_time
from fluid.sim.workloads.base import TrialModel, Workload
from fluid.tune import width_of

#: Where a simulated checkpoint says it lies: a checkpoint is a key of what the simulation
#: keeps in memory, and nothing is written there (no directory is created for it).
CHECKPOINTS = os.path.join(tempfile.gettempdir(), "fluid-sim-checkpoints")


class SimActors:
    """Actors of trials and the training they simulate.

    Args are ``SimController``'s, and: ``trials``, the trials by status (an actor's trial is
    set PENDING when requested); ``events``, where each task's end is scheduled;
    ``max_pending``, the most actors waiting for resources at once.
    """

    def __init__(self, trials: SimTrials, cluster: SimCluster, events: EventQueue,
                 workload: Workload, costs: RestartCosts, seed: int, time_noise: float,
                 max_pending: int) -> None:
        self._trials, self.cluster, self._events = trials, cluster, events
        self.workload, self.costs = workload, costs
        self.seed, self.time_noise, self.max_pending = seed, time_noise, max_pending
        self.by_trial: dict[Trial, SimActor] = {}
        #: Trials whose actors wait for resources (not placed yet), in request order.
        self.waiting: list[Trial] = []
        self._staged: dict[Trial, None] = {}
        self._placement_dirty = False
        self._tokens = 0
        self.sim: dict[Trial, SimTrialState] = {}
        self._models_by_id: dict[str, TrialModel] = {}
        self._iterations: dict[Trial, _Iteration] = {}  # iterations in flight
        self._iteration_seqs = itertools.count()  # each new iteration's place in its order
        self._by_id: dict[str, Trial] = {}
        self._ckpt_state: dict[str, tuple[float | None, int, float, float]] = {}
        self._ckpts = 0

    def track(self, trial: Trial) -> None:
        """Start the simulated state of a trial just added (its noise seeded by its order)."""
        sim = SimTrialState(len(self.sim))
        sim.rng = np.random.default_rng([self.seed, sim.index])
        self.sim[trial] = sim
        self._by_id[trial.trial_id] = trial

    # ------------------------------------------------------------------ requests, placement
    def add_actors(self, chosen: Trial | None) -> bool:
        """``TuneController._maybe_add_actors``: an actor for the trial the scheduler chose,
        then for every PENDING trial in FIFO order, at most ``max_pending`` waiting."""
        worked = False
        if chosen and chosen not in self._staged and chosen not in self.by_trial:
            self._trials.set_status(chosen, Trial.PENDING)
            self._staged[chosen] = None
            self._request(chosen)
            worked = True
        candidates, keep = self._trials.pending, []
        while candidates and len(self.waiting) < self.max_pending:
            trial = candidates.pop(0)
            if trial not in self._trials.by_status[Trial.PENDING]:
                continue
            if trial in self.by_trial:
                keep.append(trial)
                continue
            if trial in self._staged:
                continue
            self._staged[trial] = None
            self._request(trial)
            worked = True
        self._trials.pending = keep + candidates
        return worked

    def _request(self, trial: Trial) -> None:
        assert trial.status == Trial.PENDING
        self._tokens += 1
        pgf = trial.placement_group_factory
        self.by_trial[trial] = SimActor(self._tokens, pgf, width_of(pgf))
        self.waiting.append(trial)
        self._placement_dirty = True

    def place_waiting(self) -> bool:
        """The resource manager: place waiting actors whose shape fits, in request order, and
        schedule their start. Only when something changed (a request, GPUs released)."""
        if not self._placement_dirty:
            return False
        self._placement_dirty = False
        worked, still = False, []
        failed: set[float] = set()  # shapes that did not fit in this pass
        for trial in self.waiting:
            actor = self.by_trial.get(trial)
            if actor is None or actor.width is not None:
                continue
            self.model(trial)  # known before placement: co-runners look it up
            width = None
            if actor.asked not in failed and (actor.asked <= 0 or self.cluster.pool.has_free()):
                # Ray does not check GPU memory: an overfull GPU fails at start (``started``)
                width = self.cluster.place(trial.trial_id, actor.pgf)
            if width is None:
                failed.add(actor.asked)
                still.append(trial)
                continue
            actor.width = width
            self.sim[trial].starts += 1
            self._events.push(self._events.clock() + self.costs.start(width), START, trial,
                              actor.token)
            worked = True
        self.waiting = still
        return worked

    def remove(self, trial: Trial) -> None:
        """The trial's actor stops: its resources are free again."""
        actor = self.by_trial.pop(trial, None)
        if actor is None:
            return
        if trial in self.waiting:
            self.waiting.remove(trial)
        self._staged.pop(trial, None)
        mates = self._computing_mates(trial)
        self._iterations.pop(trial, None)
        self.cluster.release(trial.trial_id)
        self._placement_dirty = True
        self._retime(mates)

    def ended(self, trial: Trial) -> None:
        """The trial was stopped (completed, failed or removed) now."""
        self.sim[trial].end = self._events.clock()

    def current(self, trial: Trial, token: int) -> bool:
        """Whether an event of actor ``token`` still belongs to the trial's actor."""
        actor = self.by_trial.get(trial)
        return actor is not None and actor.token == token

    def _task_at(self, trial: Trial, duration: float) -> float:
        """When a task of ``duration`` queued on the trial's actor now completes."""
        actor = self.by_trial[trial]
        end = max(self._events.clock(), actor.busy_until) + duration
        actor.busy_until = end
        return end

    # ------------------------------------------------------------------ what actors do
    def model(self, trial: Trial) -> TrialModel:
        """The trial's workload model (its configuration's; PBT may change the configuration)."""
        sim = self.sim[trial]
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

    def _computing_mates(self, trial: Trial) -> list[Trial]:
        """The other trials on the trial's GPU with an iteration in flight, in the order their
        iterations began (the order their events are pushed in)."""
        flying = self._iterations
        ids = dict.fromkeys(self.cluster.pool.neighbours(trial.trial_id))
        mates = [t for t in map(self._by_id.get, ids) if t in flying]
        return sorted(mates, key=lambda t: flying[t].seq) if len(mates) > 1 else mates

    def _timing(self, trial: Trial, width: float) -> Timing:
        """The truth's time of a whole iteration of the trial at ``width``, beside the trials
        computing on its GPU now."""
        mates = self._computing_mates(trial) if width < 1 else []
        return iteration_time(self.model(trial).truth, width,
                              [self.model(t).truth for t in mates])

    def _retime(self, trials: list[Trial]) -> None:
        """Time the iterations in flight of ``trials`` again for the work they have left, at
        the pace of the trials computing beside them now."""
        now = self._events.clock()
        for trial in trials:
            it = self._iterations.get(trial)
            actor = self.by_trial.get(trial)
            if it is None or actor is None:
                continue
            if now > it.since:
                it.left -= (now - it.since) / it.seconds
                it.since = now
            timing = self._timing(trial, actor.width or 1.0)
            it.seconds = timing.seconds * it.noise
            it.end = actor.busy_until = it.since + max(it.left, 0.0) * it.seconds
            self.cluster.set_active(trial.trial_id, timing.busy)
            self._events.push(it.end, RESULT, trial, actor.token)

    def due(self, trial: Trial) -> bool:
        """Whether a ``RESULT`` event now ends the trial's iteration in flight (an iteration
        timed again has a new end; the event of its old one is stale)."""
        it = self._iterations.get(trial)
        return it is not None and it.end == self._events.clock()

    def started(self, trial: Trial) -> bool:
        """The actor is up; whether the trial fits its GPU's memory (else it fails, CUDA out
        of memory: Ray does not check GPU memory for fractional GPUs)."""
        actor = self.by_trial[trial]
        actor.busy_until = self._events.clock()
        self._staged.pop(trial, None)
        if actor.width is None or actor.width >= 1:
            return True
        memories = [m.memory_gb for m in (self.model(trial), *self._peers(trial))]
        return fits_memory(memories, self.cluster.pool.memory)

    def restore_or_begin(self, trial: Trial) -> None:
        """Restore the latest checkpoint (``RESTORED`` when done), else train from scratch."""
        checkpoint_result = trial.latest_checkpoint_result
        if checkpoint_result:
            trial.temporary_state.restoring_from = checkpoint_result
            end = self._task_at(trial, self.costs.restore(self.model(trial)))
            self._events.push(end, RESTORED, trial, self.by_trial[trial].token)
            return
        sim = self.sim[trial]
        sim.state, sim.iteration, sim.train_time, sim.work_time = None, 0, 0.0, 0.0
        self.train(trial)

    def restored(self, trial: Trial) -> None:
        """The restore finished: the trial's state is its checkpoint's."""
        checkpoint = trial.temporary_state.restoring_from.checkpoint
        trial.on_restore()
        sim = self.sim[trial]
        saved = self._ckpt_state.get(checkpoint.path) if checkpoint is not None else None
        if saved is not None:
            sim.state, sim.iteration, sim.train_time, sim.work_time = saved

    def train(self, trial: Trial) -> None:
        """Train one iteration (``RESULT`` when done)."""
        sim, actor = self.sim[trial], self.by_trial[trial]
        timing = self._timing(trial, actor.width or 1.0)
        noise = 1.0
        if self.time_noise > 0:
            noise = float(np.exp(sim.rng.normal(0.0, self.time_noise)))
        begin = max(self._events.clock(), actor.busy_until)
        if sim.first_start is None:
            sim.first_start = begin
        end = self._task_at(trial, timing.seconds * noise)
        old = self._iterations.get(trial)  # (a dict keeps a replaced key's place)
        seq = next(self._iteration_seqs) if old is None else old.seq
        self._iterations[trial] = _Iteration(begin, timing.seconds * noise, noise, end, seq)
        self.cluster.set_active(trial.trial_id, timing.busy)
        self._events.push(end, RESULT, trial, actor.token)
        self._retime(self._computing_mates(trial))

    def result(self, trial: Trial, metric: str) -> tuple[dict[str, Any], float]:
        """The iteration just trained: its result (``metric`` its validation value, with the
        curve's noise) and that value."""
        sim, actor = self.sim[trial], self.by_trial[trial]
        model = self.model(trial)
        curve = sim.curve
        if sim.state is None:
            sim.state = curve.initial
        sim.state = curve.step(sim.state)
        sim.iteration += 1
        it = self._iterations.pop(trial)
        dt, solo = self._events.clock() - it.begin, model.iteration_time * it.noise
        self._retime(self._computing_mates(trial))
        sim.train_time += dt
        sim.work_time += solo
        value = curve.value(sim.state)
        if curve.noise:
            value *= 1.0 + float(sim.rng.normal(0.0, curve.noise))
        result = {
            "training_iteration": sim.iteration,
            metric: value,
            "time_this_iter_s": dt,
            "time_total_s": sim.train_time,
            "done": False,
            "fluid_peak_gpu_memory": model.memory_gb * 2**30,
            "fluid_width": actor.width or 1.0,
        }
        return result, value

    def save(self, trial: Trial, result: dict) -> SimSaveFuture:
        """Save the trial's state in a new checkpoint (``SAVED`` when done)."""
        self._ckpts += 1
        checkpoint = Checkpoint(os.path.join(CHECKPOINTS, f"{trial.trial_id}_ckpt{self._ckpts}"))
        sim = self.sim[trial]
        self._ckpt_state[checkpoint.path] = (sim.state, sim.iteration, sim.train_time,
                                             sim.work_time)
        future = SimSaveFuture(_TrainingResult(checkpoint=checkpoint, metrics=dict(result)))
        self.cluster.set_active(trial.trial_id, 0.0)
        end = self._task_at(trial, self.costs.save(self.model(trial)))
        self._events.push(end, SAVED, trial, self.by_trial[trial].token)
        return future


@dataclass(slots=True)
class _Iteration:
    """An iteration in flight: when it began, its seconds at the pace it holds since ``since``
    (noise included), its noise, its end, its place among the iterations in flight (``seq``)
    and the share of its work left at ``since``."""

    begin: float
    seconds: float
    noise: float
    end: float
    seq: int
    since: float = field(init=False)
    left: float = 1.0

    def __post_init__(self) -> None:
        self.since = self.begin
