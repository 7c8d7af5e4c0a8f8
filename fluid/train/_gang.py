"""A gang: ``w`` worker actors (``fluid.train._worker``) in the trial's bundles ``1..w`` that
form a torch.distributed group and run the loop, driven by the trial process.

Rank 0 hands each result to the trial process, which calls ``ray.tune.report`` and then
releases every rank for the next iteration, so the gang is never more than the current
iteration ahead of Tune. A failing rank ends the trial with a `TrainingWorkerError` that names
the rank most likely at fault.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Callable
from typing import Any

import ray
from ray.tune import Checkpoint
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from fluid.shapes.bundles import ProcessShape
from fluid.train import _checkpoint as _ck
from fluid.train._process import _ckpt_root, _trial_id
from fluid.train._worker import TrainingWorkerError, _RemoteWorker, _WorkerSpec

logger = logging.getLogger(__name__)

WORKER_NAMESPACE = "fluid"
_STANDARD_KEYS = {"CPU", "GPU", "memory"}


def _actor_options(bundle: dict[str, float]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "num_cpus": float(bundle.get("CPU", 0.0)),
        "num_gpus": float(bundle.get("GPU", 0.0)),
    }
    if bundle.get("memory"):
        opts["memory"] = bundle["memory"]
    custom = {k: v for k, v in bundle.items() if k not in _STANDARD_KEYS and v}
    if custom:
        opts["resources"] = custom
    return opts


def _layout(infos: list[dict[str, Any]]) -> list[tuple[int, int, int, str | None, int]]:
    """Per rank: node_rank, local_rank, local_world_size, visible devices, device index."""
    per_node: dict[str, list[int]] = {}  # the nodes in the order of their first rank
    gpus: dict[str, dict[str, None]] = {}  # each node's GPU ids in order, once each
    for rank, info in enumerate(infos):
        per_node.setdefault(info["node_id"], []).append(rank)
        gpus.setdefault(info["node_id"], {}).update(dict.fromkeys(info["gpu_ids"]))
    nodes = list(per_node)
    out = []
    for rank, info in enumerate(infos):
        nid, node_gpus = info["node_id"], list(gpus[info["node_id"]])
        visible = ",".join(node_gpus) if node_gpus else None
        index = node_gpus.index(info["gpu_ids"][0]) if info["gpu_ids"] else 0
        out.append((nodes.index(nid), per_node[nid].index(rank), len(per_node[nid]), visible, index))
    return out


def _as_worker_error(rank: int, world_size: int, err: BaseException) -> TrainingWorkerError:
    if isinstance(err, ray.exceptions.RayActorError):
        return TrainingWorkerError(rank, world_size, f"the worker process died or was killed: {err}")
    cause = getattr(err, "cause", None)
    if isinstance(cause, TrainingWorkerError):
        return TrainingWorkerError(cause.rank, cause.world_size, cause.details, cause.failed_at)
    return TrainingWorkerError(rank, world_size, str(err))


def _raise_root_cause(failures: list[tuple[int, BaseException]], world_size: int) -> None:
    """Raise the failure that most likely caused the others.

    A dead process comes first (its peers then fail in collectives); among exceptions the
    earliest wins.
    """
    died = [(r, e) for r, e in failures if isinstance(e, ray.exceptions.RayActorError)]
    if died:
        rank, err = min(died, key=lambda f: f[0])
        raise _as_worker_error(rank, world_size, err) from None
    errors = [_as_worker_error(r, world_size, e) for r, e in failures]
    raise min(errors, key=lambda e: e.failed_at) from None


def _get(refs: list[Any], ranks: list[int], world_size: int, timeout_s: float) -> list[Any]:
    """ray.get that names the rank whose actor failed."""
    try:
        return ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise TrainingWorkerError(-1, world_size,
                                  f"gang workers did not start within {timeout_s:.0f} s") from None
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError):
        for ref, rank in zip(refs, ranks, strict=True):
            try:
                ray.get(ref, timeout=0)
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
                raise _as_worker_error(rank, world_size, e) from None
            except ray.exceptions.GetTimeoutError:
                pass
        raise


def _spawn_workers(workers: list[Any], shape: ProcessShape, pg: Any, trial_id: str) -> None:
    """One worker actor per rank in the trial's bundle ``rank + 1``, appended to ``workers``
    as each is created (the caller kills them, also those made before a failure)."""
    attempt = uuid.uuid4().hex[:8]
    for rank, bundle in enumerate(shape.worker_bundles):
        workers.append(
            _RemoteWorker.options(
                **_actor_options(bundle),
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=rank + 1
                ),
                max_concurrency=4,
                max_restarts=0,
                # Named for `ray list actors`; the attempt id keeps a restarted trial's names
                # clear of its previous workers that may still be shutting down.
                name=f"fluid-gang-{trial_id}-{attempt}-rank{rank}",
                namespace=WORKER_NAMESPACE,
            ).remote()
        )


def _run_gang(loop: Callable[..., Any], config: dict[str, Any], shape: ProcessShape,
              backend: str | None, timeout_s: float, startup_timeout_s: float) -> None:
    pg = ray.util.get_current_placement_group()
    if pg is None:
        raise RuntimeError("elastic: the trial resources describe a gang but the trial is not "
                           "running in a placement group")
    w = shape.world_size
    ranks = list(range(w))
    workers: list[Any] = []
    trial_id = _trial_id()
    try:
        _spawn_workers(workers, shape, pg, trial_id)
        infos = _get([a.node_info.remote() for a in workers], ranks, w, startup_timeout_s)
        layout = _layout(infos)
        prepared = _get([a.prepare.remote(lay[3], shape.gpu_share)
                         for a, lay in zip(workers, layout, strict=True)],
                        ranks, w, startup_timeout_s)
        if backend is None:
            backend = "nccl" if all(p["cuda"] for p in prepared) else "gloo"
        ckpt = ray.tune.get_checkpoint()
        files_ref = ray.put(_ck._pack_checkpoint(ckpt)) if ckpt is not None else None
        _ck._use_checkpoint_root(_ckpt_root(trial_id, "trial"))
        specs = [
            _WorkerSpec(rank=rank, world_size=w, local_rank=lay[1], local_world_size=lay[2],
                        node_rank=lay[0], master_addr=infos[0]["ip"],
                        master_port=prepared[0]["port"], backend=backend, device_index=lay[4],
                        gpu_share=shape.gpu_share, timeout_s=timeout_s, trial_id=trial_id)
            for rank, lay in enumerate(layout)
        ]
        run_refs = {actor.run.remote(loop, config, spec, files_ref): spec.rank
                    for actor, spec in zip(workers, specs, strict=True)}
        _drive(workers, run_refs, w, timeout_s)
    finally:
        _ck._use_checkpoint_root(None)
        # Killing is idempotent and the only way to be sure no rank outlives the trial.
        for actor in workers:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001
                logger.debug("fluid: could not kill gang worker", exc_info=True)


def _drive(workers: list[Any], run_refs: dict[Any, int], w: int, timeout_s: float) -> None:
    """Forward rank 0's results to Tune until every rank's loop has returned."""
    pending = dict(run_refs)
    poll_ref: Any | None = workers[0].poll.remote(1.0)
    rank0_done_at: float | None = None
    while pending:
        waitables = list(pending) + ([poll_ref] if poll_ref is not None else [])
        ray.wait(waitables, num_returns=1, timeout=1.0, fetch_local=False)
        ready, _ = ray.wait(waitables, num_returns=len(waitables), timeout=0, fetch_local=False)
        # Failures first: a dead or failing rank ends the trial now.
        failures: list[tuple[int, BaseException]] = []
        for ref in ready:
            if ref in pending:
                rank = pending.pop(ref)
                if (err := _failure(ref)) is not None:
                    failures.append((rank, err))
                if rank == 0:
                    rank0_done_at = time.monotonic()
        if failures:
            # Give near-simultaneous failures of other ranks a moment to arrive, so the
            # root cause is chosen among all of them.
            late: list[Any] = []
            if pending:
                late, _ = ray.wait(list(pending), num_returns=len(pending), timeout=1.0)
            failures += [(pending[ref], e) for ref in late if (e := _failure(ref)) is not None]
            _raise_root_cause(failures, w)
        if poll_ref is not None and poll_ref in ready:
            try:
                item = ray.get(poll_ref)
            except ray.exceptions.RayActorError as e:
                raise _as_worker_error(0, w, e) from None
            poll_ref = None
            if item is not None:
                seq, metrics, files = item
                _forward(metrics, files)
                for actor in workers:
                    actor.ack.remote(seq)
            if rank0_done_at is None:
                poll_ref = workers[0].poll.remote(1.0)
        if rank0_done_at is not None and pending and time.monotonic() - rank0_done_at > timeout_s:
            late = sorted(pending.values())
            raise TrainingWorkerError(
                late[0], w, f"ranks {late} still running {timeout_s:.0f} s after rank 0 finished; "
                "every rank must call fluid.train.report the same number of times")


def _failure(ref: Any) -> BaseException | None:
    """The error a rank's finished ``run`` raised (None: it returned)."""
    try:
        ray.get(ref)
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
        return e
    return None


def _forward(metrics: dict[str, Any], files: dict[str, bytes] | None) -> None:
    if files is None:
        ray.tune.report(metrics)
        return
    path = _ck._unpack_dir(files)
    try:
        ray.tune.report(metrics, checkpoint=Checkpoint.from_directory(path))
    finally:
        shutil.rmtree(path, ignore_errors=True)
