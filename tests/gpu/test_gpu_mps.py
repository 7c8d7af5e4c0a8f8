"""MPSManager against a fake nvidia-cuda-mps-control that records what it is sent."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
import ray

import fluid.train as ft
from fluid.gpu import mps

from ..train.fluid_train_loops import ResultLog, env_loop, fit, packed

FAKE = """#!/bin/sh
# Fake MPS control: log argv, the pipe/log directories and (for commands) stdin.
if [ "$1" = "-d" ]; then
  echo "start pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY cvd=${CUDA_VISIBLE_DEVICES-unset}" >> {log}
else
  echo "cmd pipe=$CUDA_MPS_PIPE_DIRECTORY stdin=$(cat)" >> {log}
fi
"""


def write_fake(directory: Path, log: Path) -> None:
    path = directory / "nvidia-cuda-mps-control"
    path.write_text(FAKE.replace("{log}", str(log)))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture(scope="module")
def fake_mps(tmp_path_factory):
    """Ray with the fake binary first on every worker's PATH; yields the command log."""
    d = tmp_path_factory.mktemp("fakebin")
    log = d / "mps.log"
    write_fake(d, log)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{d}{os.pathsep}{old}"  # raylet and workers inherit it
    ray.init(address="local", num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield log
    ray.shutdown()
    os.environ["PATH"] = old


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_daemon_per_node_and_thread_percentage_for_packed_trials(fake_mps, tmp_path):
    log = fake_mps
    log.write_text("")
    manager = mps.MPSManager(enable_thread_percentage=True, require_gpu=False, root=str(tmp_path))
    status = manager.start()
    manager.start()  # idempotent: still one daemon
    node = ray.get_runtime_context().get_node_id()
    assert list(status) == [node] and status[node]["running"]
    pipe = status[node]["pipe_dir"]
    assert pipe.startswith(str(tmp_path)) and ray.get_runtime_context().get_session_name() in pipe
    starts = [line for line in _lines(log) if line.startswith("start")]
    assert starts == [f"start pipe={pipe} log={status[node]['log_dir']} cvd=unset"]

    results = ResultLog()
    grid = fit(ft.elastic(env_loop), packed(0.25), {}, str(tmp_path / "a"), callbacks=[results])
    assert grid[0].error is None
    (r,) = results.results
    assert (r["pct"], r["pipe"], r["gpu_share"]) == ("25", pipe, 0.25)
    grants = manager.status()[node]["grants"]
    assert [(g["share"], g["env"][mps.THREAD_PERCENTAGE_ENV]) for g in grants] == [(0.25, "25")]
    assert manager.env_for_share(0.5)[mps.THREAD_PERCENTAGE_ENV] == "50"

    final = manager.stop()
    assert not final[node]["running"]
    assert _lines(log)[1:] == [f"cmd pipe={pipe} stdin=quit"]
    manager.stop()  # nothing left to stop
    assert len(_lines(log)) == 2


def test_thread_percentage_off_by_default(fake_mps, tmp_path):
    with mps.MPSManager(require_gpu=False, root=str(tmp_path)) as manager:
        env = manager.env_for_share(0.5)
        assert mps.THREAD_PERCENTAGE_ENV not in env and mps.PIPE_ENV in env
        results = ResultLog()
        fit(ft.elastic(env_loop), packed(0.5), {}, str(tmp_path / "a"), callbacks=[results])
        assert results.results[0]["pct"] == "" and results.results[0]["pipe"] == env[mps.PIPE_ENV]


def test_node_without_gpu_is_reported_once_and_trials_run_time_shared(fake_mps, tmp_path, caplog):
    log = fake_mps
    log.write_text("")
    caplog.set_level(logging.WARNING, logger="fluid.gpu.mps")
    mps._warned_nodes.clear()
    manager = mps.MPSManager(enable_thread_percentage=True)  # require_gpu: NVML finds none here
    status = manager.start()
    manager.start()
    (st,) = status.values()
    assert not st["running"] and not st["available"] and "NVML" in st["reason"]
    warnings = [r for r in caplog.records if r.name == "fluid.gpu.mps"]
    assert len(warnings) == 1 and "time-shared" in warnings[0].getMessage()
    assert _lines(log) == [], "no daemon was started"
    results = ResultLog()
    fit(ft.elastic(env_loop), packed(0.5), {}, str(tmp_path / "a"), callbacks=[results])
    assert (results.results[0]["pct"], results.results[0]["pipe"]) == ("", "")
    manager.stop()
    assert _lines(log) == []


def test_missing_binary_is_reported(fake_mps, tmp_path):
    manager = mps.MPSManager(binary="no-such-mps-control", require_gpu=False, root=str(tmp_path))
    (st,) = manager.start().values()
    assert st["reason"] == "no-such-mps-control is not on PATH"
    assert manager.env_for_share(0.5) == {}
    manager.stop()


def test_thread_percentage_values():
    assert [mps.thread_percentage(s) for s in (0.01, 0.25, 1 / 3, 0.5, 1.0, 2.0)] == [
        1,
        25,
        34,
        50,
        100,
        100,
    ]
    with pytest.raises(ValueError, match="share"):
        mps.thread_percentage(0)
    with pytest.raises(ValueError, match="binary"):
        mps.MPSManager(binary="")


def test_fluid_executor_runs_the_daemons_for_an_experiment(fake_mps, tmp_path):
    from ray.tune import RunConfig, TuneConfig, Tuner

    from fluid import FluidExecutor

    log = fake_mps
    log.write_text("")
    manager = mps.MPSManager(enable_thread_percentage=True, require_gpu=False, root=str(tmp_path))
    results = ResultLog()
    # Fluid is shown one GPU (an injected resource view), so the two trials are packed.
    one_gpu = type("OneGpu", (), {"gpus": lambda self: 1.0})()
    executor = FluidExecutor(mps=manager, cpus_per_trial=0.1, c=4, resources=one_gpu)
    Tuner(
        ft.elastic(env_loop),
        param_space={"n": ray.tune.grid_search([0, 1])},
        tune_config=TuneConfig(scheduler=executor),
        run_config=RunConfig(storage_path=str(tmp_path / "exp"), callbacks=[results], verbose=0),
    ).fit()
    lines = _lines(log)
    assert [ln.split()[0] for ln in lines] == ["start", "cmd"] and lines[1].endswith("stdin=quit")
    # Two trials on one GPU, c = 4: only two share it, so each gets half of it (not 1/c) and
    # is limited to 50% of the SMs.
    assert sorted((r["gpu_share"], r["pct"]) for r in results.results) == [(0.5, "50")] * 2
