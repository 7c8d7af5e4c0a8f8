"""`elastic`: one Tune function trainable that runs at whatever width Fluid gives it.

Shapes (the trial's PlacementGroupFactory):

* one bundle (``{"CPU": x, "GPU": g}`` with ``g <= 1``): the loop runs in the trial
  process itself, world size 1 (packed when ``g < 1``);
* ``[{"CPU": x}] + [{"CPU": y, "GPU": 1}] * w``: the trial process (bundle 0) starts
  ``w`` worker actors in bundles 1..w, they form a torch.distributed group and run the
  loop. The trial process drives them: rank 0 hands each result to it, it calls
  ``ray.tune.report`` and then releases every rank for the next iteration, so the gang
  is never more than the current iteration ahead of Tune.
"""

from __future__ import annotations

import inspect
import logging
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import ray
import torch
from ray.tune import Checkpoint
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from fluid.train import _checkpoint as _ck
from fluid.train._context import TrainContext, _set_context

logger = logging.getLogger(__name__)

ELASTIC_ATTR = "_fluid_elastic"
WORKER_NAMESPACE = "fluid"
_STANDARD_KEYS = {"CPU", "GPU", "memory"}


class TrainingWorkerError(RuntimeError):
    """A rank of an elastic gang failed (its exception or its process died).

    Attributes:
        rank: the failing rank (-1 when no single rank is to blame, e.g. start-up).
        world_size: the gang's world size.
        details: the rank's formatted traceback or the reason it died.
    """

    def __init__(
        self, rank: int, world_size: int, details: str, failed_at: float | None = None
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.details = details
        # Wall-clock time of the failure on the rank: the earliest of several is the cause.
        self.failed_at = time.time() if failed_at is None else failed_at
        who = f"rank {rank} of {world_size}" if rank >= 0 else f"gang of {world_size}"
        super().__init__(f"{who} failed:\n{details}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.rank, self.world_size, self.details, self.failed_at))


class ElasticMixin:
    """Marks the Tune trainable class built from an `elastic` function.

    Ray's ``wrap_function`` puts a function's ``__mixins__`` into the bases of the class it
    builds, so the driver (Fluid's executor) sees ``_fluid_elastic`` and
    ``_fluid_cpus_per_worker`` on ``trial.get_trainable_cls()``.
    """

    _fluid_elastic = True
    _fluid_cpus_per_worker = 1.0


# --------------------------------------------------------------------------- shapes


@dataclass(frozen=True)
class _Shape:
    world_size: int
    in_process: bool
    gpu_share: float  # per process: the packed fraction, or each worker's GPU count
    worker_bundles: tuple[dict[str, float], ...]  # gang only, bundle i+1 -> rank i


def _shape_from_bundles(bundles: list[dict[str, float]]) -> _Shape:
    if not bundles:
        raise ValueError("elastic: the trial's PlacementGroupFactory has no bundles")
    if len(bundles) == 1:
        gpu = float(bundles[0].get("GPU", 0.0))
        if gpu > 1:
            raise ValueError(
                f"elastic: a single bundle with GPU={gpu} is not a supported shape; give a "
                "gang one bundle per worker: [{'CPU': x}] + [{'CPU': y, 'GPU': 1}] * w"
            )
        return _Shape(1, True, gpu, ())
    workers = tuple(dict(b) for b in bundles[1:])
    for i, b in enumerate(workers, start=1):
        g = float(b.get("GPU", 0.0))
        if g not in (0.0, 1.0):
            raise ValueError(
                f"elastic: gang bundle {i} asks for GPU={g}; gang workers use exactly one "
                "whole GPU each (or none, for CPU-only gangs)"
            )
    gpus = {float(b.get("GPU", 0.0)) for b in workers}
    if len(gpus) != 1:
        raise ValueError("elastic: gang bundles must all have the same GPU count (0 or 1)")
    return _Shape(len(workers), False, gpus.pop(), workers)


def _current_bundles() -> list[dict[str, float]] | None:
    try:
        pgf = ray.tune.get_context().get_trial_resources()
    except Exception:  # noqa: BLE001 -- outside a Tune session the accessor raises
        return None
    if pgf is None:
        return None
    return [dict(b) for b in pgf.bundles]


def _trial_id() -> str:
    try:
        return str(ray.tune.get_context().get_trial_id())
    except Exception:  # noqa: BLE001
        return f"pid{os.getpid()}"


def _ckpt_root(trial_id: str, role: str) -> str:
    return os.path.join(tempfile.gettempdir(), "fluid-ckpt", trial_id, role)


# ----------------------------------------------------------------- in-process trials


class _TuneSession:
    """World size 1: straight to ray.tune in the trial process."""

    def report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        try:
            ray.tune.report(metrics, checkpoint=checkpoint)
        finally:
            # Tune has copied the directory to trial storage by now.
            _ck._release(checkpoint)

    def get_checkpoint(self) -> Checkpoint | None:
        return ray.tune.get_checkpoint()


def _call_loop(loop: Callable[..., Any], config: dict[str, Any]) -> None:
    if _loop_takes_config(loop):
        loop(config)
    else:
        loop()


def _loop_takes_config(loop: Callable[..., Any]) -> bool:
    params = [
        p
        for p in inspect.signature(loop).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return bool(params)


def _apply_mps_env(share: float) -> None:
    """Connect this process to the node's MPS daemon (if Fluid runs one) before CUDA starts."""
    if share <= 0:
        return
    from fluid.gpu.mps import client_env

    env = client_env(share)
    if not env:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        logger.warning(
            "fluid: CUDA was initialised before the loop started; MPS settings %s do not "
            "apply to this process",
            env,
        )
    os.environ.update(env)


def _local_device(share: float, index: int = 0) -> torch.device:
    if share > 0 and torch.cuda.is_available():
        return torch.device("cuda", index)
    return torch.device("cpu")


def _run_in_process(loop: Callable[..., Any], config: dict[str, Any], share: float) -> None:
    _apply_mps_env(share)
    device = _local_device(share)
    if share > 0 and device.type == "cpu":
        logger.info("fluid: trial holds %.2f GPU but CUDA is not available; using the CPU", share)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    _ck._use_checkpoint_root(_ckpt_root(_trial_id(), "trial"))
    ctx = TrainContext(
        rank=0,
        world_size=1,
        local_rank=0,
        local_world_size=1,
        node_rank=0,
        device=device,
        gpu_share=min(share, 1.0),
        backend=None,
        _session=_TuneSession(),
    )
    _set_context(ctx)
    try:
        _call_loop(loop, config)
    finally:
        _set_context(None)
        _ck._use_checkpoint_root(None)


# ---------------------------------------------------------------------- gang workers


@dataclass(frozen=True)
class _WorkerSpec:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    backend: str
    device_index: int
    gpu_share: float
    timeout_s: float
    trial_id: str


class _WorkerSession:
    """Rank r inside a gang: results go to the trial process through rank 0's outbox."""

    def __init__(self, worker: _GangWorker, rank: int, ckpt_dir: str | None) -> None:
        self._worker = worker
        self._rank = rank
        self._ckpt_dir = ckpt_dir
        self._seq = 0

    def report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        self._seq += 1
        if self._rank == 0:
            files = _ck._pack_checkpoint(checkpoint) if checkpoint is not None else None
            _ck._release(checkpoint)
            self._worker._outbox.put((self._seq, metrics, files))
        else:
            _ck._release(checkpoint)
        self._worker._wait_ack(self._seq)

    def get_checkpoint(self) -> Checkpoint | None:
        return Checkpoint.from_directory(self._ckpt_dir) if self._ckpt_dir else None


class _GangWorker:
    """One rank of a gang; a threaded actor so the trial process can poll and ack
    while `run` is busy with the user's loop."""

    def __init__(self) -> None:
        self._outbox: queue.Queue[tuple[int, dict[str, Any], dict[str, bytes] | None]] = (
            queue.Queue()
        )
        self._cv = threading.Condition()
        self._acked = 0

    def node_info(self) -> dict[str, Any]:
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        }

    def prepare(self, visible_devices: str | None, share: float) -> dict[str, Any]:
        # Must run before anything initialises CUDA in this process: CUDA reads
        # CUDA_VISIBLE_DEVICES once. All of a node's gang GPUs are made visible so that
        # NCCL can use peer-to-peer paths between them.
        if visible_devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices
        _apply_mps_env(share)
        cuda = share > 0 and torch.cuda.is_available()
        return {"cuda": cuda, "port": _free_port()}

    def poll(self, timeout_s: float) -> tuple[int, dict[str, Any], dict[str, bytes] | None] | None:
        try:
            return self._outbox.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def ack(self, seq: int) -> None:
        with self._cv:
            self._acked = max(self._acked, seq)
            self._cv.notify_all()

    def _wait_ack(self, seq: int) -> None:
        with self._cv:
            while self._acked < seq:
                self._cv.wait(timeout=1.0)

    def run(
        self,
        loop: Callable[..., Any],
        config: dict[str, Any],
        spec: _WorkerSpec,
        ckpt_files: dict[str, bytes] | None,
    ) -> None:
        import torch.distributed as dist

        try:
            _ck._use_checkpoint_root(_ckpt_root(spec.trial_id, f"rank{spec.rank}"))
            ckpt_dir = _ck._unpack_dir(ckpt_files) if ckpt_files is not None else None
            if spec.backend == "nccl":
                device = torch.device("cuda", spec.device_index)
                torch.cuda.set_device(device)
            else:
                device = _local_device(spec.gpu_share, spec.device_index)
            dist.init_process_group(
                backend=spec.backend,
                init_method=f"tcp://{_url_host(spec.master_addr)}:{spec.master_port}",
                rank=spec.rank,
                world_size=spec.world_size,
                timeout=timedelta(seconds=spec.timeout_s),
            )
            ctx = TrainContext(
                rank=spec.rank,
                world_size=spec.world_size,
                local_rank=spec.local_rank,
                local_world_size=spec.local_world_size,
                node_rank=spec.node_rank,
                device=device,
                gpu_share=spec.gpu_share,
                backend=spec.backend,
                _session=_WorkerSession(self, spec.rank, ckpt_dir),
            )
            _set_context(ctx)
            try:
                _call_loop(loop, config)
            finally:
                _set_context(None)
                _ck._use_checkpoint_root(None)
            dist.destroy_process_group()
        except Exception:
            # The process group is deliberately left open: closing it would make the other
            # ranks fail at once with "connection closed" errors that could be taken for the
            # cause. The trial process kills every rank right after this error arrives.
            raise TrainingWorkerError(spec.rank, spec.world_size, traceback.format_exc()) from None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _url_host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


_RemoteWorker = ray.remote(_GangWorker)


# ----------------------------------------------------------------------- gang driver


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
    nodes: list[str] = []
    per_node: dict[str, list[int]] = {}
    gpus: dict[str, list[str]] = {}
    for rank, info in enumerate(infos):
        nid = info["node_id"]
        if nid not in per_node:
            nodes.append(nid)
            per_node[nid] = []
            gpus[nid] = []
        per_node[nid].append(rank)
        for g in info["gpu_ids"]:
            if g not in gpus[nid]:
                gpus[nid].append(g)
    out = []
    for rank, info in enumerate(infos):
        nid = info["node_id"]
        visible = ",".join(gpus[nid]) if gpus[nid] else None
        index = gpus[nid].index(info["gpu_ids"][0]) if info["gpu_ids"] else 0
        out.append(
            (nodes.index(nid), per_node[nid].index(rank), len(per_node[nid]), visible, index)
        )
    return out


def _as_worker_error(rank: int, world_size: int, err: BaseException) -> TrainingWorkerError:
    if isinstance(err, ray.exceptions.RayActorError):
        return TrainingWorkerError(
            rank, world_size, f"the worker process died or was killed: {err}"
        )
    cause = getattr(err, "cause", None)
    if isinstance(cause, TrainingWorkerError):
        return TrainingWorkerError(cause.rank, cause.world_size, cause.details, cause.failed_at)
    return TrainingWorkerError(rank, world_size, str(err))


def _raise_worker_failure(rank: int, world_size: int, err: BaseException) -> None:
    raise _as_worker_error(rank, world_size, err) from None


def _raise_root_cause(failures: list[tuple[int, BaseException]], world_size: int) -> None:
    """Raise the failure that most likely caused the others.

    A dead process comes first (its peers then fail in collectives); among exceptions the
    earliest wins.
    """
    died = [(r, e) for r, e in failures if isinstance(e, ray.exceptions.RayActorError)]
    if died:
        rank, err = min(died, key=lambda f: f[0])
        _raise_worker_failure(rank, world_size, err)
    errors = [_as_worker_error(r, world_size, e) for r, e in failures]
    raise min(errors, key=lambda e: e.failed_at) from None


def _get(refs: list[Any], ranks: list[int], world_size: int, timeout_s: float) -> list[Any]:
    """ray.get that names the rank whose actor failed."""
    try:
        return ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise TrainingWorkerError(
            -1, world_size, f"gang workers did not start within {timeout_s:.0f} s"
        ) from None
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError):
        for ref, rank in zip(refs, ranks, strict=True):
            try:
                ray.get(ref, timeout=0)
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
                _raise_worker_failure(rank, world_size, e)
            except ray.exceptions.GetTimeoutError:
                pass
        raise


def _run_gang(
    loop: Callable[..., Any],
    config: dict[str, Any],
    shape: _Shape,
    backend: str | None,
    timeout_s: float,
    startup_timeout_s: float,
) -> None:
    pg = ray.util.get_current_placement_group()
    if pg is None:
        raise RuntimeError(
            "elastic: the trial resources describe a gang but the trial is not running in "
            "a placement group"
        )
    w = shape.world_size
    ranks = list(range(w))
    workers: list[Any] = []
    trial_id = _trial_id()
    attempt = uuid.uuid4().hex[:8]
    try:
        for rank, bundle in enumerate(shape.worker_bundles):
            workers.append(
                _RemoteWorker.options(
                    **_actor_options(bundle),
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        placement_group=pg, placement_group_bundle_index=rank + 1
                    ),
                    max_concurrency=4,
                    max_restarts=0,
                    # Named for `ray list actors`; the attempt id keeps a restarted trial's
                    # names clear of its previous workers that may still be shutting down.
                    name=f"fluid-gang-{trial_id}-{attempt}-rank{rank}",
                    namespace=WORKER_NAMESPACE,
                ).remote()
            )
        infos = _get([a.node_info.remote() for a in workers], ranks, w, startup_timeout_s)
        layout = _layout(infos)
        prepared = _get(
            [
                a.prepare.remote(lay[3], shape.gpu_share)
                for a, lay in zip(workers, layout, strict=True)
            ],
            ranks,
            w,
            startup_timeout_s,
        )
        if backend is None:
            backend = "nccl" if all(p["cuda"] for p in prepared) else "gloo"
        ckpt = ray.tune.get_checkpoint()
        files_ref = ray.put(_ck._pack_checkpoint(ckpt)) if ckpt is not None else None
        _ck._use_checkpoint_root(_ckpt_root(trial_id, "trial"))
        run_refs: dict[Any, int] = {}
        for rank, (actor, lay) in enumerate(zip(workers, layout, strict=True)):
            spec = _WorkerSpec(
                rank=rank,
                world_size=w,
                local_rank=lay[1],
                local_world_size=lay[2],
                node_rank=lay[0],
                master_addr=infos[0]["ip"],
                master_port=prepared[0]["port"],
                backend=backend,
                device_index=lay[4],
                gpu_share=shape.gpu_share,
                timeout_s=timeout_s,
                trial_id=trial_id,
            )
            run_refs[actor.run.remote(loop, config, spec, files_ref)] = rank
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
                try:
                    ray.get(ref)
                except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
                    failures.append((rank, e))
                if rank == 0:
                    rank0_done_at = time.monotonic()
        if failures:
            # Give near-simultaneous failures of other ranks a moment to arrive, so the
            # root cause is chosen among all of them.
            late: list[Any] = []
            if pending:
                late, _ = ray.wait(list(pending), num_returns=len(pending), timeout=1.0)
            for ref in late:
                try:
                    ray.get(ref)
                except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as e:
                    failures.append((pending[ref], e))
            _raise_root_cause(failures, w)
        if poll_ref is not None and poll_ref in ready:
            try:
                item = ray.get(poll_ref)
            except ray.exceptions.RayActorError as e:
                _raise_worker_failure(0, w, e)
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
                late[0],
                w,
                f"ranks {late} still running {timeout_s:.0f} s after rank 0 finished; every "
                "rank must call fluid.train.report the same number of times",
            )


def _forward(metrics: dict[str, Any], files: dict[str, bytes] | None) -> None:
    if files is None:
        ray.tune.report(metrics)
        return
    path = _ck._unpack_dir(files)
    try:
        ray.tune.report(metrics, checkpoint=Checkpoint.from_directory(path))
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------ public API


def elastic(
    train_loop_per_worker: Callable[..., Any],
    *,
    backend: str | None = None,
    cpus_per_worker: float = 1,
    collective_timeout_s: float = 300.0,
    startup_timeout_s: float = 120.0,
) -> Callable[[dict[str, Any]], None]:
    """Turn a training loop into a Ray Tune function trainable that runs at any width.

    The width comes from the trial's resources (set by Fluid, or by
    ``tune.with_resources``): a single bundle runs the loop in the trial process
    (a packed GPU fraction or one GPU); ``[{"CPU": x}] + [{"CPU": y, "GPU": 1}] * w``
    runs it on ``w`` data-parallel workers (NCCL on GPUs, gloo on CPUs). Inside the loop
    use `get_context`, `prepare_model`, `prepare_data_loader`, `report`,
    `save_checkpoint` and `load_checkpoint`.

    Args:
        train_loop_per_worker: ``loop(config)`` or ``loop()``, run on every rank.
        backend: force a torch.distributed backend (default: NCCL when every worker sees
            CUDA, gloo otherwise).
        cpus_per_worker: CPUs each gang worker bundle should hold; read by Fluid's executor
            (``trainable._fluid_cpus_per_worker``) when it builds gang shapes.
        collective_timeout_s: torch.distributed timeout; a gang stuck this long fails.
        startup_timeout_s: how long the worker actors may take to start.

    Returns:
        ``fn(config)``, marked so that `is_elastic(fn)` is True.

    Example:
        >>> def loop(config):
        ...     model = fluid.train.prepare_model(torch.nn.Linear(4, 1))
        ...     ...
        >>> trainable = fluid.train.elastic(loop)
        >>> pgf = tune.PlacementGroupFactory([{"CPU": 1}] + [{"CPU": 1, "GPU": 1}] * 2)
        >>> tune.Tuner(tune.with_resources(trainable, pgf)).fit()   # doctest: +SKIP
    """
    if not callable(train_loop_per_worker):
        raise TypeError(
            f"elastic(train_loop_per_worker=...) must be callable, got {train_loop_per_worker!r}"
        )
    if backend is not None and backend not in ("nccl", "gloo"):
        raise ValueError(f"elastic(backend=...) must be 'nccl', 'gloo' or None, got {backend!r}")
    if not isinstance(cpus_per_worker, int | float) or cpus_per_worker <= 0:
        raise ValueError(f"elastic(cpus_per_worker=...) must be > 0, got {cpus_per_worker!r}")
    if collective_timeout_s <= 0:
        raise ValueError(
            f"elastic(collective_timeout_s=...) must be > 0, got {collective_timeout_s}"
        )
    if startup_timeout_s <= 0:
        raise ValueError(f"elastic(startup_timeout_s=...) must be > 0, got {startup_timeout_s}")
    _loop_takes_config(train_loop_per_worker)  # fail early on uninspectable callables
    loop = train_loop_per_worker

    def fluid_elastic_trainable(config: dict[str, Any]) -> None:
        bundles = _current_bundles()
        if bundles is None:
            raise RuntimeError(
                "fluid.train.elastic trainables run under ray.tune (Tuner.fit); no Tune "
                "session was found"
            )
        shape = _shape_from_bundles(bundles)
        # A paused attempt of this trial was killed inside report() and could not clean
        # up; its files on this node go now, before this attempt's workers exist.
        shutil.rmtree(os.path.dirname(_ckpt_root(_trial_id(), "trial")), ignore_errors=True)
        if shape.in_process:
            _run_in_process(loop, config, shape.gpu_share)
        else:
            _run_gang(loop, config, shape, backend, collective_timeout_s, startup_timeout_s)

    # Not functools.wraps: Tune inspects the signature, and __wrapped__ would expose the
    # user's (possibly zero-argument) loop instead of fn(config).
    name = getattr(loop, "__name__", "train_loop")
    fluid_elastic_trainable.__name__ = name
    fluid_elastic_trainable.__qualname__ = name
    fluid_elastic_trainable.__doc__ = getattr(loop, "__doc__", None)
    setattr(fluid_elastic_trainable, ELASTIC_ATTR, True)
    fluid_elastic_trainable._fluid_cpus_per_worker = float(cpus_per_worker)  # type: ignore[attr-defined]
    mixin = type(
        "FluidElasticTrainable", (ElasticMixin,), {"_fluid_cpus_per_worker": float(cpus_per_worker)}
    )
    fluid_elastic_trainable.__mixins__ = (mixin,)  # type: ignore[attr-defined]
    return fluid_elastic_trainable


def is_elastic(trainable: Any) -> bool:
    """True when ``trainable`` came from `elastic` and may be given a gang.

    Accepts the function `elastic` returned (also after ``tune.with_resources``) and the
    Tune trainable class Ray builds from it (``trial.get_trainable_cls()``).

    Example:
        >>> fluid.train.is_elastic(fluid.train.elastic(lambda: None))
        True
    """
    seen = 0
    while trainable is not None and seen < 8:
        if getattr(trainable, ELASTIC_ATTR, False) is True:
            return True
        # A function marked the way Ray marks classes: through its __mixins__.
        if any(
            getattr(m, ELASTIC_ATTR, False) is True for m in getattr(trainable, "__mixins__", ())
        ):
            return True
        trainable = getattr(trainable, "__wrapped__", None)
        seen += 1
    return False


def trial_resources(
    width: float, *, cpus_per_worker: float = 1.0, trial_cpus: float = 1.0
) -> ray.tune.PlacementGroupFactory:
    """The PlacementGroupFactory for a trial of ``width`` GPUs, in the shapes `elastic` runs.

    ``width < 1``: one packed bundle ``{"CPU": trial_cpus, "GPU": width}``;
    ``width == 1``: ``{"CPU": trial_cpus, "GPU": 1}`` (in process);
    integer ``width > 1``: ``[{"CPU": trial_cpus}] + [{"CPU": cpus_per_worker, "GPU": 1}] * width``.

    Example:
        >>> fluid.train.trial_resources(2, cpus_per_worker=0.5).bundles
        [{'CPU': 1.0}, {'CPU': 0.5, 'GPU': 1.0}, {'CPU': 0.5, 'GPU': 1.0}]
    """
    if not width > 0:
        raise ValueError(f"trial_resources(width=...) must be > 0, got {width}")
    if width > 1 and float(width) != int(width):
        raise ValueError(f"trial_resources(width=...) above 1 must be an integer, got {width}")
    if cpus_per_worker <= 0:
        raise ValueError(f"trial_resources(cpus_per_worker=...) must be > 0, got {cpus_per_worker}")
    if trial_cpus <= 0:
        raise ValueError(f"trial_resources(trial_cpus=...) must be > 0, got {trial_cpus}")
    if width <= 1:
        return ray.tune.PlacementGroupFactory([{"CPU": float(trial_cpus), "GPU": float(width)}])
    return ray.tune.PlacementGroupFactory(
        [{"CPU": float(trial_cpus)}]
        + [{"CPU": float(cpus_per_worker), "GPU": 1.0} for _ in range(int(width))]
    )
