"""The fake actor and resource layer of ``SimController``: actor requests, placement on the
simulated cluster (``SimCluster``) and the per-actor task queue, in the order and with the limits
of ``TuneController``'s actor manager (Ray 2.60; see ``fluid.sim.controller``).

A mixin of ``SimController``: it uses the controller's trial sets, cluster, clock and events.
"""

from __future__ import annotations

import heapq

from ray.tune.experiment import Trial

from fluid.sim._state import START, SimActor
from fluid.sim.cluster import pgf_width


class SimActors:
    """Actors of trials: requested, placed when their shape fits, one task at a time."""

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
        self._actors[trial] = SimActor(self._tokens, pgf, pgf_width(pgf))
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
            self._push(self.clock() + self.costs.start(width), START, trial, actor.token)
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
