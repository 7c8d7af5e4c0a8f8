"""``fluid.tune._once``: which results reach the wrapped callbacks (no Ray started)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from ray.tune import Callback
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
from ray.tune.progress_reporter import TrialProgressCallback

from fluid.tune._history import RestartTrim
from fluid.tune._once import Delivered, Once, install_once
from tests.tune.test_history import _fake_trial


class Recorder(Callback):
    def __init__(self):
        self.seen, self.state = [], None

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen.append(result["training_iteration"])

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


def _feed(wrapped, trial, iterations):
    for it in iterations:
        result = {"training_iteration": it}
        for cb in wrapped:  # each wrapper is handed the same result
            cb.on_trial_result(iteration=0, trials=[], trial=trial, result=result)


def _start(wrapped, trial):
    for cb in wrapped:
        cb.on_trial_start(iteration=0, trials=[], trial=trial)


def _pair():
    """Two wrapped callbacks sharing one ``Delivered``, as in an experiment."""
    delivered, first, second = Delivered(), Recorder(), Recorder()
    return delivered, (first, second), [Once(first, delivered), Once(second, delivered)]


def test_a_rerun_iteration_is_passed_on_once(tmp_path):
    delivered, inner, wrapped = _pair()
    trial = _trial(tmp_path)
    _start(wrapped, trial)
    _feed(wrapped, trial, [1, 2, 3])
    _restart(trial, tmp_path, 2)
    _start(wrapped, trial)  # restarts from its own iteration 2
    _feed(wrapped, trial, [3, 4])
    assert inner[0].seen == inner[1].seen == [1, 2, 3, 4]
    assert delivered.held_back == 1


def test_another_trials_checkpoint_continues_from_its_iteration(tmp_path):
    # PBT's exploit: the trial goes on from the donor's iteration, as under plain Tune.
    _, inner, wrapped = _pair()
    trial = _trial(tmp_path)
    _start(wrapped, trial)
    _feed(wrapped, trial, [1, 2, 3, 4])
    _restart(trial, tmp_path, 2, own=False)
    _start(wrapped, trial)
    _feed(wrapped, trial, [3])
    assert inner[0].seen == inner[1].seen == [1, 2, 3, 4, 3]


def test_a_restored_driver_starts_from_the_stored_log(tmp_path):
    trial = _trial(tmp_path, last=2)
    _restart(trial, tmp_path, 1)
    rows = "".join(json.dumps({"training_iteration": i}) + "\n" for i in (1, 2, 3))
    (tmp_path / "stored" / "result.json").write_text(rows + '{"training_it')  # torn last line
    _, inner, wrapped = _pair()
    _start(wrapped, trial)
    _feed(wrapped, trial, [2, 3, 4])
    assert inner[0].seen == inner[1].seen == [4]


def test_other_hooks_and_state_pass_through():
    delivered, inner = Delivered(), Recorder()
    once = Once(inner, delivered)
    once.on_step_end(iteration=0, trials=[])
    once.on_trial_complete(iteration=0, trials=[], trial=None)
    inner.seen = [1]
    assert once.get_state() == {"seen": [1]}
    once.set_state({"x": 1})
    assert inner.state == {"x": 1}


def test_install_wraps_loggers_but_not_trimmed_files_or_displays():
    mine, json_log, csv_log = Recorder(), JsonLoggerCallback(), CSVLoggerCallback()
    display = TrialProgressCallback()
    callbacks = [mine, display, json_log, csv_log]
    controller = SimpleNamespace(_callbacks=SimpleNamespace(_callbacks=callbacks))
    assert install_once(controller) is not None
    # each wrapper in its callback's place: Tune restores callback states by place
    assert isinstance(callbacks[0], Once) and callbacks[0].inner is mine
    assert callbacks[1:4] == [display, json_log, csv_log]
    assert isinstance(callbacks[4], RestartTrim)  # after the result-file loggers
    assert install_once(SimpleNamespace()) is None

