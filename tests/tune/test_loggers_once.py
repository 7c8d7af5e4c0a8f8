"""Every logger sees each training iteration of a trial once under Fluid: a user's callback,
Tune's TensorBoard logger (read back from its event files), MLflow's callback (a local file
store), Tune's JSON log; across a crash retry and across resizes."""

from __future__ import annotations

import glob
import os
import struct
from collections import Counter

import pytest
from ray.tune import Callback
from ray.tune.logger import TBXLoggerCallback

from fluid import FluidExecutor, tune
from tests.tune.test_history import ITERS, KILL_AT, KillWhenReported
from tests.tune.trainables import modeled


class Recorder(Callback):
    """A user's callback: every ``(trial id, iteration)`` it is handed."""

    def __init__(self):
        self.seen: list[tuple[str, int]] = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen.append((trial.trial_id, result["training_iteration"]))


def tensorboard_steps(directory: str, tag: str = "ray/tune/it") -> list[int]:
    """The steps of ``tag`` in every TensorBoard event file of ``directory`` (TFRecord frames
    of ``Event`` protos, read without TensorFlow)."""
    from tensorboardX.proto.event_pb2 import Event

    steps = []
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        with open(path, "rb") as f:
            data = f.read()
        at = 0
        while at + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            event = Event.FromString(data[at + 12:at + 12 + length])
            at += 12 + length + 4  # length, its crc, the event, its crc
            steps += [event.step for v in event.summary.value if v.tag == tag]
    return steps


def mlflow_steps(uri: str, metric: str = "it") -> dict[str, list[int]]:
    """Each MLflow run's steps of ``metric`` (runs named after trials)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id]):
            history = client.get_metric_history(run.info.run_id, metric)
            runs[run.info.run_name] = sorted(m.step for m in history)
    return runs


def _loggers(tmp_path, monkeypatch):
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps it, in maintenance
    uri = f"file://{tmp_path / 'mlruns'}"
    return uri, [TBXLoggerCallback(), MLflowLoggerCallback(tracking_uri=uri,
                                                           experiment_name="once")]


@pytest.mark.slow
def test_a_crash_retry_is_logged_once_by_every_logger(ray4, tmp_path, monkeypatch):
    # The trial's process is killed right after it reported KILL_AT, before that result's
    # checkpoint is registered: it re-runs KILL_AT from the checkpoint before.
    plain = Recorder()
    tune.run(modeled, name="plain", config={"t": 0.05, "iters": ITERS},
             storage_path=str(tmp_path), max_failures=1, verbose=0,
             callbacks=[KillWhenReported(), plain], resources_per_trial={"cpu": 0.1, "gpu": 1})
    assert Counter(it for _, it in plain.seen)[KILL_AT] == 2  # plain Tune: seen twice

    uri, loggers = _loggers(tmp_path, monkeypatch)
    recorder, kill = Recorder(), KillWhenReported()
    ex = FluidExecutor(cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.2)
    analysis = tune.run(modeled, name="fluid", config={"t": 0.05, "iters": ITERS},
                        trial_executor=ex, storage_path=str(tmp_path), max_failures=1,
                        verbose=0, callbacks=[kill, recorder, *loggers])
    (trial,) = analysis.trials
    assert kill.killed and trial.num_failures == 1 and trial.status == "TERMINATED"
    once = list(range(1, ITERS + 1))
    assert [it for _, it in recorder.seen] == once
    assert sorted(tensorboard_steps(trial.local_path)) == once
    assert list(mlflow_steps(uri).values()) == [once]
    assert list(analysis.trial_dataframes[trial.trial_id]["training_iteration"]) == once


@pytest.mark.slow
def test_resized_trials_are_logged_once(ray4, tmp_path, monkeypatch):
    # Packing and gangs are free here (alpha = beta = 1): trials are packed, the long ones
    # grow into the GPUs the short ones leave; each resize restarts a trial from a checkpoint.
    uri, loggers = _loggers(tmp_path, monkeypatch)
    recorder = Recorder()
    ex = FluidExecutor(alpha=1.0, beta=1.0, cpus_per_trial=0.1, cpus_per_worker=0.1, eps=0.05)
    analysis = tune.run(modeled, config={"t": tune.grid_search([0.1, 0.1, 0.1, 0.8]),
                                         "iters": ITERS},
                        trial_executor=ex, storage_path=str(tmp_path), verbose=0,
                        callbacks=[recorder, *loggers])
    assert ex.resizes >= 1
    once = list(range(1, ITERS + 1))
    by_trial: dict[str, list[int]] = {}
    for tid, it in recorder.seen:
        by_trial.setdefault(tid, []).append(it)
    resized = [t for t in analysis.trials if t.trial_id in by_trial
               and analysis.trial_dataframes[t.trial_id]["gpus"].nunique() > 1]
    assert resized, "no trial changed shape"
    for trial in analysis.trials:
        assert by_trial[trial.trial_id] == once
        assert sorted(tensorboard_steps(trial.local_path)) == once, trial
    assert sorted(mlflow_steps(uri).values()) == [once] * len(analysis.trials)
