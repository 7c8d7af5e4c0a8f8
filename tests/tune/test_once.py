"""``fluid.tune._once``: which results reach the wrapped callbacks (no Ray started)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from ray.tune import Callback
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

from fluid.tune._once import Delivered, Once, install_once
from tests.tune.test_history import _fake_trial


class Recorder(Callback):
    def __init__(self):
        self.seen, self.starts, self.state = [], 0, None

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen.append(result["training_iteration"])

    def on_trial_start(self, **info):
        self.starts += 1

    def get_state(self):
        return {"seen": list(self.seen)}

    def set_state(self, state):
        self.state = state


def _trial(tmp_path, last=0):
    """``test_history``'s fake trial, starting from scratch."""
    trial, _, _ = _fake_trial(tmp_path, 0)
    trial.latest_checkpoint_result, trial.last_result = None, {"training_iteration": last}
    return trial


def _restart(trial, tmp_path, iteration, own=True):
    """The trial restarts from its own checkpoint of ``iteration`` (or another trial's)."""
    where = trial.storage.trial_fs_path if own else str(tmp_path / "donor")
    checkpoint = SimpleNamespace(path=f"{where}/checkpoint_000001")
    trial.latest_checkpoint_result = SimpleNamespace(
        metrics={"training_iteration": iteration}, checkpoint=checkpoint)


def _feed(delivered, wrapped, trial, iterations):
    for it in iterations:
        result = {"training_iteration": it}
        for cb in (delivered, wrapped):  # Delivered is first in the experiment's list
            cb.on_trial_result(iteration=0, trials=[], trial=trial, result=result)


def test_a_rerun_iteration_is_passed_on_once(tmp_path):
    delivered, inner = Delivered(), Recorder()
    once = Once(inner, delivered)
    trial = _trial(tmp_path)
    delivered.on_trial_start(0, [], trial)
    _feed(delivered, once, trial, [1, 2, 3])
    _restart(trial, tmp_path, 2)
    delivered.on_trial_start(0, [], trial)  # restarts from its own iteration 2
    _feed(delivered, once, trial, [3, 4])
    assert inner.seen == [1, 2, 3, 4] and delivered.held_back == 1


def test_another_trials_checkpoint_continues_from_its_iteration(tmp_path):
    # PBT's exploit: the trial goes on from the donor's iteration, as under plain Tune.
    delivered, inner = Delivered(), Recorder()
    once = Once(inner, delivered)
    trial = _trial(tmp_path)
    delivered.on_trial_start(0, [], trial)
    _feed(delivered, once, trial, [1, 2, 3, 4])
    _restart(trial, tmp_path, 2, own=False)
    delivered.on_trial_start(0, [], trial)
    _feed(delivered, once, trial, [3])
    assert inner.seen == [1, 2, 3, 4, 3]


def test_a_restored_driver_starts_from_the_stored_log(tmp_path):
    trial = _trial(tmp_path, last=2)
    _restart(trial, tmp_path, 1)
    rows = "".join(json.dumps({"training_iteration": i}) + "\n" for i in (1, 2, 3))
    (tmp_path / "stored" / "result.json").write_text(rows + '{"training_it')  # torn last line
    delivered, inner = Delivered(), Recorder()
    once = Once(inner, delivered)
    delivered.on_trial_start(0, [], trial)
    _feed(delivered, once, trial, [2, 3, 4])
    assert inner.seen == [4]


def test_other_hooks_and_state_pass_through():
    delivered, inner = Delivered(), Recorder()
    once = Once(inner, delivered)
    once.on_trial_start(iteration=0, trials=[], trial=None)
    assert inner.starts == 1
    inner.seen = [1]
    assert once.get_state() == {"seen": [1]}
    once.set_state({"x": 1})
    assert inner.state == {"x": 1}


def test_install_wraps_loggers_but_not_trimmed_files_or_fluids_own():
    mine, json_log, csv_log = Recorder(), JsonLoggerCallback(), CSVLoggerCallback()

    class Own(Callback):
        pass

    own = Own()
    callbacks = [own, mine, json_log, csv_log]
    controller = SimpleNamespace(_callbacks=SimpleNamespace(_callbacks=callbacks))
    delivered = install_once(controller, (Own,))
    assert callbacks[0] is delivered and callbacks[1] is own
    assert isinstance(callbacks[2], Once) and callbacks[2].inner is mine
    assert callbacks[3:] == [json_log, csv_log]
    assert install_once(SimpleNamespace()) is None
