"""Where MPS daemons reach beyond the trial's own process: a second manager of the cluster
uses the first one's daemons, links keep one environment valid on every node, and Ray Train's
workers join their node's daemon (stand-ins, ``standins``)."""

from __future__ import annotations

import os

from ray import tune

from fluid.gpu import mps

from ..train.fluid_train_loops import ResultLog


def test_a_second_manager_uses_the_first_ones_daemons_and_leaves_them_running(
        fake_mps, tmp_path):
    fake_mps.log.write_text("")
    first = mps.MPSManager(require_gpu=False, root=str(tmp_path))
    second = mps.MPSManager(require_gpu=False, root=str(tmp_path / "other"))
    try:
        (node, ours), = first.start().items()
        theirs = second.start()[node]
        assert theirs["running"] and not theirs["owned"] and theirs["pipe_dir"] == ours["pipe_dir"]
        assert second.env_for_share(0.5)[mps.PIPE_ENV] == ours["pipe_dir"]
        second.stop()
        assert first.status()[node]["running"] and len(fake_mps.lines()) == 1  # one start
    finally:
        first.stop()
    assert [ln.split()[0] for ln in fake_mps.lines()] == ["start", "cmd"]


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


def test_by_default_a_ray_train_trainers_workers_join_the_daemon_of_their_node(
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
    start, _ = fake_mps.lines()
    pipe = start.split()[1].removeprefix("pipe=")
    assert [(r["workers"], r["mps"]) for r in results.results] == [(2, pipe)]
