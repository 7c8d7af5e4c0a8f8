"""MPSManager and FluidExecutor's GPU nodes against stand-ins: an nvidia-cuda-mps-control that
records what it is sent, and an NVML that reports what a test tells it (``standins``)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
import ray
from ray import tune

import fluid.train as ft
from fluid.gpu import mps

from ..train.fluid_train_loops import ResultLog, env_loop, fit, packed
from .standins import most_on_one_gpu


def test_daemon_per_node_and_thread_percentage_for_packed_trials(fake_mps, tmp_path):
    log = fake_mps.log
    log.write_text("")
    manager = mps.MPSManager(enable_thread_percentage=True, require_gpu=False, root=str(tmp_path))
    status = manager.start()
    manager.start()  # idempotent: still one daemon
    node = ray.get_runtime_context().get_node_id()
    assert list(status) == [node] and status[node]["running"]
    pipe = status[node]["pipe_dir"]
    assert pipe.startswith(str(tmp_path)) and ray.get_runtime_context().get_session_name() in pipe
    starts = [line for line in fake_mps.lines() if line.startswith("start")]
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
    assert fake_mps.commands()[1:] == [f"cmd pipe={pipe} stdin=quit"]
    assert fake_mps.daemons() == [] and not os.path.exists(pipe)  # its directories go too
    manager.stop()  # nothing left to stop
    assert len(fake_mps.commands()) == 2


def test_thread_percentage_off_by_default(fake_mps, tmp_path):
    with mps.MPSManager(require_gpu=False, root=str(tmp_path)) as manager:
        env = manager.env_for_share(0.5)
        assert mps.THREAD_PERCENTAGE_ENV not in env and mps.PIPE_ENV in env
        results = ResultLog()
        fit(ft.elastic(env_loop), packed(0.5), {}, str(tmp_path / "a"), callbacks=[results])
        assert results.results[0]["pct"] == "" and results.results[0]["pipe"] == env[mps.PIPE_ENV]


def test_node_without_gpu_is_reported_once_and_trials_run_time_shared(fake_mps, tmp_path, caplog):
    log = fake_mps.log
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
    assert fake_mps.lines() == [], "no daemon was started"
    results = ResultLog()
    fit(ft.elastic(env_loop), packed(0.5), {}, str(tmp_path / "a"), callbacks=[results])
    assert (results.results[0]["pct"], results.results[0]["pipe"]) == ("", "")
    manager.stop()
    assert fake_mps.lines() == []


def test_fluid_executor_runs_the_daemons_for_an_experiment(fake_mps, tmp_path):
    from ray.tune import RunConfig, TuneConfig, Tuner

    from fluid import FluidExecutor

    log = fake_mps.log
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
    lines = fake_mps.commands()
    assert [ln.split()[0] for ln in lines] == ["start", "cmd"] and lines[1].endswith("stdin=quit")
    # Two trials on one GPU, c = 4: only two share it, so each gets half of it (not 1/c) and
    # is limited to 50% of the SMs.
    assert sorted((r["gpu_share"], r["pct"]) for r in results.results) == [(0.5, "50")] * 2


def _seen() -> dict:
    pipe = os.environ.get(mps.PIPE_ENV, "")
    return {"pipe": os.path.realpath(pipe) if pipe else "",
            "pct": os.environ.get(mps.THREAD_PERCENTAGE_ENV, ""),
            "pinned": os.environ.get(mps.PINNED_MEMORY_ENV, "")}


def _function_trainable(config):
    tune.report(_seen())


class _ClassTrainable(tune.Trainable):
    def setup(self, config):
        self.seen = _seen()

    def step(self):
        return {**self.seen, "done": True}


# Ray's workers do not have tests/ on their path: ship the trainables above by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _run(trainable, executor, storage: Path, gpu: float = 0.5) -> list[dict]:
    from fluid import FluidExecutor

    results = ResultLog()
    tune.Tuner(
        tune.with_resources(trainable, {"cpu": 0.5, "gpu": gpu}),
        param_space={"n": tune.grid_search([0, 1])},
        tune_config=tune.TuneConfig(scheduler=executor or FluidExecutor()),
        run_config=tune.RunConfig(storage_path=str(storage), callbacks=[results], verbose=0),
    ).fit()
    return results.results


@pytest.mark.parametrize("trainable", [_function_trainable, _ClassTrainable],
                         ids=["function", "class"])
def test_by_default_packed_trials_join_the_daemon_fluid_starts_where_mps_is(
        fake_mps, tmp_path, trainable):
    fake_mps.log.write_text("")
    fake_mps.gpus()  # NVML sees GPUs: MPS is available on the node
    try:
        results = _run(trainable, None, tmp_path)  # FluidExecutor(), no options
    finally:
        fake_mps.no_driver()
    start, quit_ = fake_mps.commands()
    pipe = start.split()[1].removeprefix("pipe=")
    assert start.startswith("start") and quit_ == f"cmd pipe={pipe} stdin=quit"
    assert pipe.startswith("/tmp/fluid-mps/")
    assert [(r["pipe"], r["pct"]) for r in results] == [(pipe, "")] * 2  # at their first line
    assert [r["fluid_mps"] for r in results] == [True, True]  # and each result says so


def test_a_module_that_reads_the_settings_at_import_sees_its_nodes_live_daemon(
        fake_mps, tmp_path):
    import fluid_user_trainables as user

    from fluid import FluidExecutor

    fake_mps.log.write_text("")
    fake_mps.gpus()
    try:
        results = _run(user.trainable, FluidExecutor(), tmp_path)
    finally:
        fake_mps.no_driver()
    pipe = fake_mps.commands()[0].split()[1].removeprefix("pipe=")
    assert [(r["pipe_at_import"], r["answers_at_import"]) for r in results] == [(pipe, True)] * 2
    assert all(r["fluid_mps"] and "fluid_mps_reason" not in r for r in results)


def test_a_process_whose_cuda_started_before_its_settings_says_it_is_no_client(
        fake_mps, tmp_path, monkeypatch):
    """A process started without the settings (Fluid's are replaced here by the instruction
    to load the stand-in CUDA driver at import) joins in its trainable's ``__init__``: too
    late, and its results say so."""
    import fluid_user_trainables as user

    from fluid import FluidExecutor
    from fluid.tune._gpu_nodes import GpuNodes

    cuda = {"FLUID_TEST_LOAD_CUDA": str(fake_mps.directory / "libcuda.so.1")}
    monkeypatch.setattr(GpuNodes, "trial_env", lambda self, trial, **kw: cuda)
    fake_mps.gpus()
    try:
        results = _run(user.trainable, FluidExecutor(), tmp_path)
    finally:
        fake_mps.no_driver()
    assert [r["pipe_at_import"] for r in results] == ["", ""]
    assert [r["fluid_mps"] for r in results] == [False, False]
    assert all("CUDA started" in r["fluid_mps_reason"] for r in results)


def test_a_packed_client_pins_its_measured_peak_plus_the_margin(fake_mps, tmp_path):
    """The first two trials' processes measure 2 GB each; the two started after them pin
    2 GB plus the margin (``Tunables.pinned_memory_margin``, 25%) on their device."""
    from fluid import FluidExecutor
    from fluid.core import Tunables

    margin = Tunables().pinned_memory_margin
    fake_mps.gpus(count=4, total_gb=16.0, process_gb=2.0)
    results = ResultLog()
    try:
        tune.Tuner(
            tune.with_resources(_function_trainable, {"cpu": 0.5, "gpu": 0.5}),
            param_space={"n": tune.grid_search([0, 1, 2, 3])},
            tune_config=tune.TuneConfig(scheduler=FluidExecutor(), max_concurrent_trials=2),
            run_config=tune.RunConfig(storage_path=str(tmp_path), callbacks=[results],
                                      verbose=0),
        ).fit()
    finally:
        fake_mps.no_driver()
    pinned = sorted(r["pinned"] for r in results.results)
    assert pinned == ["", "", *[f"0={int(2 * 1024 * (1 + margin))}M"] * 2], pinned


def test_a_trial_holding_a_whole_gpu_is_no_client(fake_mps, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="fluid")
    fake_mps.gpus()
    try:
        results = _run(_function_trainable, None, tmp_path, gpu=1)
    finally:
        fake_mps.no_driver()
    assert [r["pipe"] for r in results] == ["", ""]
    assert [(r["fluid_mps"], r["fluid_mps_reason"]) for r in results] == [
        (False, "holds a whole GPU (no MPS for it)")] * 2
    said = [r.getMessage() for r in caplog.records if "runs without MPS" in r.getMessage()]
    assert len(said) == 2 and all(m.endswith("holds a whole GPU (no MPS for it)") for m in said)


def test_with_thread_percentages_each_packed_trial_gets_its_share(fake_mps, tmp_path):
    from fluid import FluidExecutor

    fake_mps.log.write_text("")
    manager = mps.MPSManager(enable_thread_percentage=True, require_gpu=False, root=str(tmp_path))
    results = _run(_function_trainable, FluidExecutor(mps=manager), tmp_path / "exp", gpu=0.25)
    assert sorted(r["pct"] for r in results) == ["25", "25"]
    (pipe,) = {r["pipe"] for r in results}
    assert pipe.startswith(str(tmp_path)) and pipe.endswith("/pipe")


def test_a_daemon_that_already_runs_is_used_and_left_running(fake_mps, tmp_path):
    from fluid import FluidExecutor

    system = tmp_path / "nvidia-mps"
    assert fake_mps.run(system, "-d") == 0  # the administrators' daemon answers here
    fake_mps.log.write_text("")
    try:
        manager = mps.MPSManager(require_gpu=False, root=str(tmp_path),
                                 system_pipe_dir=str(system))
        results = _run(_function_trainable, FluidExecutor(mps=manager), tmp_path / "exp")
        assert [(r["pipe"], r["fluid_mps"]) for r in results] == [(str(system), True)] * 2
        (status,) = manager.status().values()
        assert not status["owned"] and fake_mps.run(system, stdin="get_server_list") == 0
        assert [c.split()[0] for c in fake_mps.commands()] == [], "neither started nor stopped"
    finally:
        fake_mps.run(system, stdin="quit")


def test_a_stale_directory_is_not_used_and_fluid_says_why(fake_mps, tmp_path):
    """A ``control`` file where no daemon answers (one that was killed) is not a daemon:
    Fluid starts its own, and its trials are clients of that one."""
    from fluid import FluidExecutor

    system = tmp_path / "nvidia-mps"
    system.mkdir()
    (system / "control").touch()
    fake_mps.log.write_text("")
    manager = mps.MPSManager(require_gpu=False, root=str(tmp_path / "own"),
                             system_pipe_dir=str(system))
    results = _run(_function_trainable, FluidExecutor(mps=manager), tmp_path / "exp")
    start = fake_mps.commands()[0]
    pipe = start.split()[1].removeprefix("pipe=")
    assert start.startswith("start") and pipe.startswith(str(tmp_path / "own"))
    assert [(r["pipe"], r["fluid_mps"]) for r in results] == [(pipe, True)] * 2
    (status,) = manager.status().values()
    assert any(str(system) in n and "does not answer" in n for n in status["notes"])
    assert fake_mps.daemons() == []


def test_without_mps_anywhere_trainables_are_left_as_they_are(fake_mps, tmp_path):
    fake_mps.log.write_text("")  # NVML sees no GPU here: no daemon, nothing wrapped
    results = _run(_function_trainable, None, tmp_path)
    assert [(r["pipe"], r["pct"]) for r in results] == [("", "")] * 2
    assert fake_mps.lines() == []
    assert all("fluid_mps" not in r for r in results)  # nothing wrapped


@pytest.mark.parametrize(("process_gb", "packs"), [(10.0, False), (4.0, True)],
                         ids=["peaks-do-not-fit", "peaks-fit"])
def test_by_default_trials_are_packed_only_where_their_measured_peaks_fit_a_gpu(
        fake_mps, tmp_path, process_gb, packs):
    """NVML says 16 GB GPUs and what each trial process holds; Fluid packs the cheap one-GPU
    trials after its first wave (no peak known yet: one GPU each) two to a GPU only where two
    such peaks fit (10% left free)."""
    from fluid import FluidExecutor
    from fluid.train.modeled import modeled_trainable

    fake_mps.gpus(count=4, total_gb=16.0, process_gb=process_gb)
    ex = FluidExecutor(alpha=1.25, cpus_per_trial=0.1)
    try:
        analysis = tune.run(
            tune.with_resources(modeled_trainable, {"cpu": 0.1, "gpu": 1}),
            config={"t1": 0.5, "iters": 3, "alpha": 1.25, "n": tune.grid_search(list(range(12)))},
            scheduler=ex, storage_path=str(tmp_path), verbose=0)
    finally:
        fake_mps.no_driver()
    frames = analysis.trial_dataframes
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    peaks = {int(p) for t in analysis.trials for p in frames[t.trial_id]["fluid_peak_gpu_memory"]}
    assert peaks == {int(process_gb * 2**30)}  # measured in every trial's own process
    assert most_on_one_gpu(ex, analysis.trials) == (2 if packs else 1)


def test_fluid_profile_measures_packing_under_mps_where_the_node_has_it(fake_mps, tmp_path):
    from fluid.tune.profiler import profile

    fake_mps.log.write_text("")
    fake_mps.gpus(process_gb=3.0)
    try:
        prof = profile(_ClassTrainable, {}, iterations=2, max_pack=2, max_workers=1, cache=None)
    finally:
        fake_mps.no_driver()
    assert prof.sharing == "mps" and prof.memory == 3.0  # each copy's process measured
    assert [line.split()[0] for line in fake_mps.commands()] == ["start", "cmd"]  # and stopped
    prof = profile(_ClassTrainable, {}, iterations=2, max_pack=2, max_workers=1, cache=None)
    assert prof.sharing.startswith("time-sliced (NVML")  # no driver: no daemon, and why


#: A driver of its own (a process on this module's Ray instance): an experiment under
#: FluidExecutor() that is interrupted (SIGINT once the daemon started) or fails (a callback
#: raises in the driver).
DRIVER = """
import sys, time
import ray
from ray import tune
from fluid import FluidExecutor

class Fails(tune.Callback):
    def on_trial_result(self, **info):
        raise RuntimeError("a callback failed")

def train(config):
    for i in range(600):
        tune.report({"i": i})
        time.sleep(0.1)

ray.init(address=sys.argv[3], log_to_driver=False)
tune.run(tune.with_resources(train, {"cpu": 0.5, "gpu": 1}), scheduler=FluidExecutor(),
         storage_path=sys.argv[2], verbose=0,
         callbacks=[Fails()] if sys.argv[1] == "fail" else [])
"""


@pytest.mark.parametrize("ending", ["interrupt", "fail"])
def test_the_daemon_stops_when_the_experiment_is_interrupted_or_fails(fake_mps, tmp_path,
                                                                      ending):
    import signal
    import subprocess
    import time

    fake_mps.log.write_text("")
    fake_mps.gpus()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    address = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, ending, str(tmp_path), address], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not fake_mps.lines() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fake_mps.lines(), "no daemon was started"
        if ending == "interrupt":
            time.sleep(2)  # the trial runs
            proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=40)  # well before the trial's 60 s
    finally:
        proc.kill()
        fake_mps.no_driver()
    start, *rest = fake_mps.commands()
    pipe = start.split()[1].removeprefix("pipe=")
    assert rest == [f"cmd pipe={pipe} stdin=quit"], out[-3000:]
    assert fake_mps.daemons() == []
    if ending == "fail":
        assert proc.returncode != 0 and "a callback failed" in out
