"""Each iteration once in a trial's result files when it restarts from an older checkpoint.

A trial's process killed after the driver wrote a result row but before the result's checkpoint
was registered (Tune reports them in two steps) restarts from the checkpoint before: plain Tune
then writes that iteration twice; FluidExecutor drops the stale row when the trial restarts.
"""

from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace

import pyarrow.fs
import pytest
from ray.tune import Callback

from fluid import FluidExecutor, tune
from fluid.tune import _history as history
from tests.tune.trainables import modeled

ITERS = 6
KILL_AT = 3


def _json(iterations, torn=False):
    rows = "".join(json.dumps({"training_iteration": i, "x": i}) + "\n" for i in iterations)
    return rows + ('{"training_iter' if torn else "")


def test_result_json_keeps_rows_up_to_the_restart_iteration():
    assert history.trim_result_json(_json([1, 2, 3, 3]), 2) == _json([1, 2])
    assert history.trim_result_json(_json([1, 2]), 2) is None  # nothing to drop
    # A torn line (a driver killed mid-write) is kept: it is not ours to judge.
    assert history.trim_result_json(_json([1, 2, 3], torn=True), 1) == _json([1], torn=True)
    assert history.trim_result_json(_json([1, 2]), 0) == ""


def test_progress_csv_keeps_its_header_and_rows_up_to_the_restart_iteration():
    text = "x,training_iteration\r\n1,1\r\n2,2\r\n\"a,b\",3\r\n"
    assert history.trim_progress_csv(text, 2) == "x,training_iteration\r\n1,1\r\n2,2\r\n"
    assert history.trim_progress_csv(text, 3) is None
    assert history.trim_progress_csv("x,y\r\n1,2\r\n", 0) is None  # no iteration column


def _fake_trial(tmp_path, checkpoint_iteration):
    local, stored = tmp_path / "local", tmp_path / "stored"
    local.mkdir()
    stored.mkdir()
    checkpoint = SimpleNamespace(path=str(stored / "checkpoint_000001"))
    result = SimpleNamespace(metrics={"training_iteration": checkpoint_iteration},
                             checkpoint=checkpoint)
    storage = SimpleNamespace(trial_fs_path=str(stored),
                              storage_filesystem=pyarrow.fs.LocalFileSystem())
    return SimpleNamespace(trial_id="t1", local_path=str(local), storage=storage,
                           latest_checkpoint_result=result), local, stored


def test_restart_trim_rewrites_both_copies_after_waiting_for_the_sync(tmp_path):
    trial, local, stored = _fake_trial(tmp_path, checkpoint_iteration=2)
    (local / "result.json").write_text(_json([1, 2, 3]))
    (stored / "result.json").write_text(_json([1, 2, 3]))
    (stored / "progress.csv").write_bytes(b"training_iteration\r\n1\r\n2\r\n3\r\n")
    waited = []
    controller = SimpleNamespace(_storage=SimpleNamespace(
        syncer=SimpleNamespace(wait=lambda: waited.append(True))))
    trim = history.RestartTrim(controller)
    with open(local / "result.json", "a") as logger_handle:  # as Tune's JSON logger holds it
        trim.on_trial_start(0, [], trial)
        logger_handle.write(_json([3]))
    assert (local / "result.json").read_text() == _json([1, 2, 3])
    assert (stored / "result.json").read_text() == _json([1, 2])
    assert (stored / "progress.csv").read_bytes() == b"training_iteration\r\n1\r\n2\r\n"
    assert not (local / "progress.csv").exists()
    assert waited and trim.trims == [("t1", 2, ("progress.csv", "result.json"))]
    trial.latest_checkpoint_result.metrics["training_iteration"] = 3  # the re-run checkpointed
    trim.on_trial_start(0, [], trial)  # nothing to drop: no sync waited on, no trim
    assert len(waited) == 1 and len(trim.trims) == 1
    # Restarting from another trial's checkpoint (PBT's exploit) keeps the trial's own rows.
    trial.latest_checkpoint_result.metrics["training_iteration"] = 1
    trial.latest_checkpoint_result.checkpoint.path = str(tmp_path / "donor" / "checkpoint_0")
    trim.on_trial_start(0, [], trial)
    assert (stored / "result.json").read_text() == _json([1, 2]) and len(trim.trims) == 1
    # Restarting from scratch (no checkpoint): the re-run writes every row again.
    trial.latest_checkpoint_result = None
    trim.on_trial_start(0, [], trial)
    assert (stored / "result.json").read_text() == "" and trim.trims[-1][1] == 0


class KillWhenReported(Callback):
    """On the driver, SIGKILL the trial's process as soon as it reports ``KILL_AT``: the row is
    written, the checkpoint of that result is not registered yet (Tune saves it next)."""

    def __init__(self):
        self.killed = 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result["training_iteration"] == KILL_AT and not self.killed:
            self.killed = result["pid"]
            os.kill(result["pid"], signal.SIGKILL)


def _run(tmp_path, name, executor):
    kill = KillWhenReported()
    analysis = tune.run(
        modeled, name=name, config={"t": 0.05, "iters": ITERS}, trial_executor=executor,
        storage_path=str(tmp_path), max_failures=1, callbacks=[kill], verbose=0,
        resources_per_trial=None if executor else {"cpu": 0.1, "gpu": 1},
    )
    assert kill.killed, "the trial was never killed"
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and trial.num_failures == 1
    with open(os.path.join(trial.storage.trial_fs_path, "result.json")) as f:
        stored = [json.loads(line)["training_iteration"] for line in f]
    frame = list(analysis.trial_dataframes[trial.trial_id]["training_iteration"])
    return stored, frame


@pytest.mark.slow
def test_kill_between_result_and_checkpoint(ray4, tmp_path):
    # Plain Tune: the killed iteration is re-run from the checkpoint before and written twice.
    plain = _run(tmp_path, "plain", None)
    assert plain[0].count(KILL_AT) == 2, plain
    # Under Fluid the re-run replaces the stale row: every iteration once, in order.
    ex = FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.2)
    assert _run(tmp_path, "fluid", ex) == (list(range(1, ITERS + 1)),) * 2
