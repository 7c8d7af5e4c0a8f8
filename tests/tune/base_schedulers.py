"""Base schedulers written for tests: each reproduces one thing a Tune algorithm does."""

from __future__ import annotations

from ray.tune.schedulers import FIFOScheduler, TrialScheduler


class ExploitedWhileSaving(FIFOScheduler):
    """Pauses each trial at its iteration ``AT`` twice, as synchronous PBT does when it exploits
    a member whose own pause (PBT's PAUSE for its turn) is still saving: Tune drops that save
    with the actor but keeps the STOP it cached for it (ray issue 57906)."""

    AT = 2

    def __init__(self) -> None:
        super().__init__()
        self.exploited: set[str] = set()

    def on_trial_result(self, tune_controller, trial, result):
        if result["training_iteration"] == self.AT and trial.trial_id not in self.exploited:
            self.exploited.add(trial.trial_id)
            tune_controller.pause_trial(trial)  # its own pause: a save starts
            tune_controller.pause_trial(trial, should_checkpoint=False)  # the exploit
            return TrialScheduler.NOOP
        return TrialScheduler.CONTINUE
