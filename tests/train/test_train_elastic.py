"""fluid.train.elastic under ray.tune: gangs, resizes, failures (CPU, gloo, logical GPUs)."""

from __future__ import annotations

import time

import pytest
import ray
from ray import tune

import fluid.train as ft

from .fluid_train_loops import ResizeAt, ResultLog, fit, gang, mlp_loop, packed

ITERS = 6


def _alive_workers() -> list[str]:
    """Names of live gang worker actors (named actors drop their name when they die)."""
    return sorted(
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "fluid" and a["name"].startswith("fluid-gang-")
    )


def _wait_no_workers(timeout_s: float = 20.0) -> list:
    deadline = time.monotonic() + timeout_s
    alive = _alive_workers()
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        alive = _alive_workers()
    return alive


SHAPES = {"packed": packed(), "gang2": gang(2), "gang2_fail": gang(2)}


def _fit(cases: list[str], directory: str) -> dict:
    """The trials of ``cases`` at once (saves minutes of process start-up on a 2-core box;
    ``ray4x4``'s 4 logical CPUs hold their bundles): ``packed``, the uninterrupted 1-worker
    reference; ``gang2``, the same config on a 2-worker gang; ``gang2_fail``, a gang whose
    rank 1 raises. Returns {case: (results in order, trial error)}."""
    log = ResultLog()
    grid = fit(
        ft.elastic(mlp_loop),
        lambda config: SHAPES[config["case"]],
        {
            "iterations": ITERS,
            "case": tune.grid_search(cases),
            "fail_rank": tune.sample_from(
                lambda spec: 1 if spec.config.case.endswith("fail") else None
            ),
            "fail_at": 1,
        },
        directory,
        callbacks=[log],
    )
    out = {}
    for result in grid:
        case = result.config["case"]
        out[case] = ([r for r in log.results if r["config"]["case"] == case], result.error)
    return out


@pytest.fixture(scope="module")
def runs(ray4x4, tmp_path_factory):
    """The two gangs (slow tests only)."""
    return _fit(["gang2", "gang2_fail"], str(tmp_path_factory.mktemp("runs")))


@pytest.fixture(scope="module")
def reference(ray4x4, tmp_path_factory):
    results, error = _fit(["packed"], str(tmp_path_factory.mktemp("reference")))["packed"]
    assert error is None
    return results


def test_packed_trial_runs_in_process(reference):
    assert [r["training_iteration"] for r in reference] == list(range(1, ITERS + 1))
    assert {r["world_size"] for r in reference} == {1}
    assert {r["gpu_share"] for r in reference} == {0.5}
    # Fluid's executor sees the mark on the class Tune builds from the function.
    assert {r["cls_elastic"] for r in reference} == {True}
    losses = [r["loss"] for r in reference]
    assert losses[-1] < 0.5 * losses[0]
    # 4 steps per iteration, 8 per epoch: the loader position is part of each result.
    assert [(r["epoch"], r["batch"]) for r in reference][:3] == [(0, 4), (0, 8), (1, 4)]


@pytest.mark.slow
def test_two_worker_gang_trains_like_one_worker(runs, reference):
    res, error = runs["gang2"]
    assert error is None
    assert [r["training_iteration"] for r in res] == list(range(1, ITERS + 1))
    assert {r["world_size"] for r in res} == {2}
    assert {r["rank"] for r in res} == {0}, "only rank 0 reports to Tune"
    assert max(r["param_spread"] for r in res) < 1e-6, "replicas diverged"
    # Same global batch and same samples per step: the curve matches the 1-worker run.
    for got, want in zip(res, reference, strict=True):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-4, abs=1e-6)
    assert not _wait_no_workers()


@pytest.mark.slow
def test_exception_on_one_rank_fails_trial_with_its_traceback(runs):
    res, error = runs["gang2_fail"]
    assert [r["training_iteration"] for r in res] == [1]
    err = str(error)
    assert "rank 1 of 2 failed" in err
    assert "ValueError: boom on rank 1" in err
    assert "fluid_train_loops.py" in err, "the rank's own traceback is kept"
    assert not _wait_no_workers()


@pytest.mark.slow
def test_resize_1_2_1_continues_without_repeats(reference, tmp_path):
    log = ResultLog()
    # Pause after iteration 1 (mid-epoch: batch 4 of 8) -> 2 workers; after 3 -> 1 GPU.
    sched = ResizeAt({1: gang(2), 3: gang(1)})
    grid = fit(
        ft.elastic(mlp_loop),
        gang(1),
        {"iterations": 5},
        str(tmp_path),
        scheduler=sched,
        callbacks=[log],
    )
    assert grid[0].error is None
    res = log.results
    assert [r["training_iteration"] for r in res] == [1, 2, 3, 4, 5]
    assert [r["world_size"] for r in res] == [1, 2, 2, 1, 1]
    assert len({r["pid"] for r in res}) == 3, "each resize restarts the trial process"
    # No progress lost or repeated: identical to the run that never resized.
    for got, want in zip(res, reference, strict=False):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-4, abs=1e-6)
        assert (got["epoch"], got["batch"]) == (want["epoch"], want["batch"])
    assert not _wait_no_workers()


@pytest.mark.slow
def test_killed_worker_fails_fast_and_retries_from_checkpoint(ray4x4, tmp_path):
    killed_at: list[float] = []
    errors: list[str] = []

    class KillOnce(ResultLog):
        def on_trial_result(self, iteration, trials, trial, result, **info):  # noqa: ANN001
            super().on_trial_result(iteration, trials, trial, result, **info)
            if result["training_iteration"] == 2 and not killed_at:
                workers = _alive_workers()
                assert len(workers) == 2
                ray.kill(ray.get_actor(workers[-1], namespace="fluid"))
                killed_at.append(time.monotonic())

        def on_trial_recover(self, iteration, trials, trial, **info):  # noqa: ANN001
            # Tune calls this instead of on_trial_error when it will retry the trial.
            self.errors.append(time.monotonic())
            with open(trial.error_file) as f:
                errors.append(f.read())

    log = KillOnce()
    grid = fit(
        ft.elastic(mlp_loop),
        gang(2),
        {"iterations": 4, "sleep": 0.2},
        str(tmp_path),
        callbacks=[log],
        max_failures=1,
    )
    assert grid[0].error is None, grid[0].error
    assert killed_at and len(log.errors) == 1
    print(f"failure detected {log.errors[0] - killed_at[0]:.1f} s after the kill")
    assert log.errors[0] - killed_at[0] < 60
    # Retried from the checkpoint of iteration 2: nothing repeated, nothing skipped.
    assert [r["training_iteration"] for r in log.results] == [1, 2, 3, 4]
    assert {r["world_size"] for r in log.results} == {2}
    assert "TrainingWorkerError" in errors[0] and "died" in errors[0]
    assert not _wait_no_workers()


def test_is_elastic_marks_the_trainable():
    fn = ft.elastic(mlp_loop)
    assert ft.is_elastic(fn)
    assert fn.__name__ == "mlp_loop"
    assert not ft.is_elastic(mlp_loop)
    from ray import tune

    assert ft.is_elastic(tune.with_resources(fn, gang(2)))

    def other(config):
        pass

    other.__mixins__ = (type("M", (), {"_fluid_elastic": True}),)
    assert ft.is_elastic(other)


def test_elastic_rejects_bad_arguments():
    with pytest.raises(TypeError, match="train_loop_per_worker"):
        ft.elastic(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backend"):
        ft.elastic(mlp_loop, backend="mpi")
    with pytest.raises(ValueError, match="collective_timeout_s"):
        ft.elastic(mlp_loop, collective_timeout_s=0)


def test_trial_resources_validates():
    assert ft.trial_resources(0.25).bundles == [{"CPU": 1.0, "GPU": 0.25}]
    with pytest.raises(ValueError, match="width"):
        ft.trial_resources(1.5)
    with pytest.raises(ValueError, match="width"):
        ft.trial_resources(0)


def test_layout_groups_ranks_by_node():
    from fluid.train._gang import _layout

    infos = [
        {"node_id": "a", "gpu_ids": ["3"]},
        {"node_id": "b", "gpu_ids": ["0"]},
        {"node_id": "a", "gpu_ids": ["1"]},
    ]
    assert _layout(infos) == [(0, 0, 2, "3,1", 0), (1, 0, 1, "0", 0), (0, 1, 2, "3,1", 1)]


def test_root_cause_is_the_dead_rank_or_the_earliest_exception():
    from fluid.train._gang import _raise_root_cause
    from fluid.train._worker import TrainingWorkerError

    class TaskError(RuntimeError):  # what ray.get raises: the rank's error as `.cause`
        def __init__(self, cause):
            super().__init__(str(cause))
            self.cause = cause

    first = TaskError(TrainingWorkerError(1, 3, "ValueError: boom", failed_at=10.0))
    echo = TaskError(TrainingWorkerError(0, 3, "RuntimeError: Connection closed", failed_at=11.0))
    with pytest.raises(TrainingWorkerError, match="rank 1 of 3 failed") as info:
        _raise_root_cause([(0, echo), (1, first)], 3)
    assert info.value.failed_at == 10.0
    with pytest.raises(TrainingWorkerError, match="rank 2 of 3 failed:\nthe worker process died"):
        _raise_root_cause([(0, echo), (2, ray.exceptions.RayActorError())], 3)
