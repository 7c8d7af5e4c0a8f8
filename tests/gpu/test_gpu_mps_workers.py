"""Where MPS daemons reach beyond the trial's own process: a second manager of the cluster
uses the first one's daemons, links keep one environment valid on every node, and processes
holding whole GPUs (Ray Train's workers, gang workers) are no clients (stand-ins,
``standins``)."""

from __future__ import annotations

import os

from ray import tune

from fluid.gpu import mps

from ..train.fluid_train_loops import ResultLog


def test_a_second_manager_uses_the_first_ones_daemons_and_the_last_to_stop_stops_them(
        fake_mps, tmp_path):
    fake_mps.log.write_text("")
    first = mps.MPSManager(require_gpu=False, root=str(tmp_path))
    second = mps.MPSManager(require_gpu=False, root=str(tmp_path / "other"))
    try:
        (node, ours), = first.start().items()
        theirs = second.start()[node]
        assert theirs["running"] and theirs["pipe_dir"] == ours["pipe_dir"]
        assert second.env_for_share(0.5)[mps.PIPE_ENV] == ours["pipe_dir"]
        first.stop()  # the second one still uses it
        assert second.status()[node]["running"] and fake_mps.daemons()
        assert [c.split()[0] for c in fake_mps.commands()] == ["start"]
    finally:
        first.stop()
        second.stop()
    assert [c.split()[0] for c in fake_mps.commands()] == ["start", "cmd"]
    assert fake_mps.daemons() == []


def test_a_running_daemon_keeps_links_that_one_environment_names_on_every_node(
        fake_mps, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_RAYLET_PID", "4242")
    daemon = mps.MPSDaemon("n", str(tmp_path / "own"), mps.CONTROL_BINARY, False, False,
                           link_dir=str(tmp_path / "r${RAY_RAYLET_PID}"))
    assert daemon.worker_env() == {}  # not running
    daemon.start()
    env = daemon.worker_env()
    assert env[mps.PIPE_ENV] == str(tmp_path / "r${RAY_RAYLET_PID}" / "pipe")
    assert os.path.realpath(os.path.expandvars(env[mps.PIPE_ENV])) == daemon.pipe_dir
    daemon.stop()
    assert not (tmp_path / "r4242" / "pipe").exists() and daemon.worker_env() == {}
    assert fake_mps.daemons() == []


def test_a_ray_train_trainers_workers_are_no_clients(
        fake_mps, tmp_path):
    from fluid import FluidExecutor
    from tests.tune.ray_train_trainables import two_workers

    fake_mps.log.write_text("")
    fake_mps.gpus()
    try:
        results = ResultLog()
        tune.Tuner(two_workers, param_space={"epochs": 1},
                   tune_config=tune.TuneConfig(scheduler=FluidExecutor(
                       cpus_per_trial=0.5, cpus_per_worker=0.5)),
                   run_config=tune.RunConfig(storage_path=str(tmp_path), callbacks=[results],
                                             verbose=0)).fit()
    finally:
        fake_mps.no_driver()
    assert [(r["workers"], r["mps"]) for r in results.results] == [(2, "")]


def test_whole_gpu_gang_workers_are_no_clients(fake_mps, tmp_path):
    """A gang's workers hold whole GPUs and run NCCL (unsupported under MPS)."""
    import fluid.train as ft

    from ..train.fluid_train_loops import env_loop, fit, gang

    fake_mps.gpus()
    try:
        with mps.MPSManager(require_gpu=False, root=str(tmp_path)) as manager:
            results = ResultLog()
            fit(ft.elastic(env_loop), gang(2), {}, str(tmp_path / "a"), callbacks=[results])
            grants = manager.status()
    finally:
        fake_mps.no_driver()
    assert [(r["world_size"], r["pipe"]) for r in results.results] == [(2, "")]
    assert all(node["grants"] == [] for node in grants.values())
