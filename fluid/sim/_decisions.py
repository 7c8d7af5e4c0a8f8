"""``TuneController``'s handling of a trial's results, decisions, saves, pauses and stops
(Ray 2.60), reproduced for ``SimController``: the same hooks in the same order
(``_process_trial_result``, ``_queue_decision``, ``_execute_action``, ``_schedule_trial_save``,
``pause_trial``, ``stop_trial``), with saves as events on the simulated clock.

Why a copy and not ``TuneController`` itself: the real controller reads wall-clock time, talks to
Ray's actor manager and writes experiment state; driving it from a fake actor layer would change
the order in which the simulator's events are handled (and so every simulated number) and tie
the simulator to Ray's private execution classes. The copy is kept to these few methods, each
named after the one it mirrors; a Ray upgrade is checked against them.
"""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler
from ray.tune.search import SearchAlgorithm
from ray.tune.utils import flatten_dict

from fluid.sim._actors import SimActors
from fluid.sim._bookkeeping import SimSaveFuture, SimTrials


class TuneDecisions:
    """Results to decisions to actions, as ``TuneController`` does them.

    Args:
        controller: what the scheduler's hooks are given (the ``SimController``).
        scheduler: the scheduler deciding on each result.
        search_alg: the search algorithm told of results and completions.
        trials: the trials by status.
        actors: the trials' actors (saves, stops).
    """

    def __init__(self, controller: Any, scheduler: TrialScheduler, search_alg: SearchAlgorithm,
                 trials: SimTrials, actors: SimActors) -> None:
        self._controller, self._scheduler_alg, self._search_alg = controller, scheduler, search_alg
        self._trials, self._actors = trials, actors
        self._queued_decisions: dict[str, str] = {}
        #: Decisions waiting for a save under way (``TuneController._cached_trial_decisions``).
        self.cached_decisions: dict[str, str] = {}

    def process_trial_results(self, trial: Trial, results: list[dict]) -> None:
        """``TuneController._process_trial_results``."""
        for result in results:
            decision = self._process_trial_result(trial, result)
            if decision == TrialScheduler.STOP:
                break

    def _process_trial_result(self, trial: Trial, result: dict[str, Any]) -> str | None:
        result.update(trial_id=trial.trial_id)
        flat_result = flatten_dict(result)
        if trial.should_stop(flat_result):
            decision = TrialScheduler.STOP
        else:
            decision = self._scheduler_alg.on_trial_result(self._controller, trial, flat_result)
        if decision == TrialScheduler.STOP:
            result.update(done=True)
        else:
            self._search_alg.on_trial_result(trial.trial_id, flat_result)
        trial.update_last_result(result)
        if trial.is_saving:
            if not self.cached_decisions.get(trial.trial_id) or decision in (
                TrialScheduler.PAUSE, TrialScheduler.STOP
            ):
                self.cached_decisions[trial.trial_id] = decision
            return None
        self._queue_decision(trial, decision)
        return decision

    def _queue_decision(self, trial: Trial, decision: str) -> None:
        old = self._queued_decisions.setdefault(trial.trial_id, decision)
        if old is TrialScheduler.STOP:
            return
        if decision is TrialScheduler.STOP or decision is TrialScheduler.PAUSE:
            self._queued_decisions[trial.trial_id] = decision

    def maybe_execute_queued_decision(self, trial: Trial, after_save: bool = False) -> None:
        """``TuneController._maybe_execute_queued_decision``."""
        decision = self._queued_decisions.pop(trial.trial_id, None)
        if decision:
            self._execute_action(trial, decision, after_save=after_save)

    def _execute_action(self, trial: Trial, decision: str, after_save: bool = False) -> None:
        if decision == TrialScheduler.CONTINUE:
            self._actors.train(trial)
        elif decision == TrialScheduler.PAUSE:
            self.pause_trial(trial, should_checkpoint=not after_save)
        elif decision == TrialScheduler.STOP:
            self.stop_trial(trial)
        elif decision == TrialScheduler.NOOP:
            pass
        else:
            raise ValueError(f"Invalid decision: {decision}")

    # ------------------------------------------------------------------ save, pause, stop
    def schedule_trial_save(self, trial: Trial, result: dict | None = None) -> SimSaveFuture | None:
        """``TuneController._schedule_trial_save`` (PBT calls it directly)."""
        if trial not in self._actors.by_trial:
            return None
        future = self._actors.save(trial, result or trial.last_result)
        trial.temporary_state.saving_to = future
        return future

    def on_saving_result(self, trial: Trial) -> None:
        """``TuneController._on_saving_result``: the save finished."""
        future = trial.temporary_state.saving_to
        if future is not None:
            training_result = future.resolve()
            trial.on_checkpoint(training_result)
        trial.temporary_state.saving_to = None
        decision = self.cached_decisions.pop(trial.trial_id, None)
        if decision and future is not None:
            self._queue_decision(trial, decision)
        self.maybe_execute_queued_decision(trial, after_save=True)

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        """``TuneController.pause_trial``."""
        self.cached_decisions.pop(trial.trial_id, None)
        self._schedule_trial_pause(trial, should_checkpoint=should_checkpoint)

    def _schedule_trial_pause(self, trial: Trial, should_checkpoint: bool = True) -> None:
        if trial not in self._actors.by_trial:
            return
        if should_checkpoint:
            self.cached_decisions[trial.trial_id] = TrialScheduler.PAUSE
            self.schedule_trial_save(trial)
        else:
            self._schedule_trial_stop(trial)
            self._trials.set_status(trial, Trial.PAUSED)

    def stop_trial(self, trial: Trial) -> None:
        """``TuneController.stop_trial``: complete (RUNNING) or remove (PENDING/PAUSED) it."""
        if trial.status in (Trial.ERROR, Trial.TERMINATED):
            return
        if trial.status in (Trial.PENDING, Trial.PAUSED):
            self._scheduler_alg.on_trial_remove(self._controller, trial)
            self._search_alg.on_trial_complete(trial.trial_id)
        elif trial.status == Trial.RUNNING:
            self._scheduler_alg.on_trial_complete(self._controller, trial,
                                                  flatten_dict(trial.last_result))
            self._search_alg.on_trial_complete(
                trial.trial_id, result=flatten_dict(trial.last_result)
            )
        self._schedule_trial_stop(trial)
        self._ended(trial)

    def trial_failed(self, trial: Trial, message: str) -> None:
        """``TuneController._process_trial_failure`` without retries."""
        self._scheduler_alg.on_trial_error(self._controller, trial)
        self._search_alg.on_trial_complete(trial.trial_id, error=True)
        self._schedule_trial_stop(trial, exception=RuntimeError(message))
        self._ended(trial)

    def _ended(self, trial: Trial) -> None:
        self._trials.live.pop(trial, None)
        self._actors.ended(trial)

    def _schedule_trial_stop(self, trial: Trial, exception: Exception | None = None) -> None:
        if trial.status == Trial.ERROR:
            return
        if trial.is_saving:
            self.cached_decisions[trial.trial_id] = TrialScheduler.STOP
        trial.temporary_state.saving_to = None
        trial.temporary_state.restoring_from = None
        self._trials.set_status(trial, Trial.ERROR if exception else Trial.TERMINATED)
        self._actors.remove(trial)
