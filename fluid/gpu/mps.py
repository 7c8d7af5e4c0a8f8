"""NVIDIA MPS control daemons, one per GPU node, for packed (fractional-GPU) trials.

`MPSManager` starts ``nvidia-cuda-mps-control -d`` on every GPU node through a small actor
pinned to the node, with ``CUDA_MPS_PIPE_DIRECTORY`` / ``CUDA_MPS_LOG_DIRECTORY`` under
``/tmp/fluid-mps/<ray session>/<node>``, and stops it with ``echo quit |
nvidia-cuda-mps-control``. Where a daemon already runs on a node (one the cluster's
administrators started, answering in ``CUDA_MPS_PIPE_DIRECTORY`` or ``/tmp/nvidia-mps``; or
another manager's in this Ray cluster, e.g. a script's own beside ``FluidExecutor``'s), it is
used and never stopped. Trial processes connect by calling `join` before CUDA starts (done by
the trainable ``FluidExecutor`` runs, by `fluid.train.elastic` in every gang worker), which
sets the environment a CUDA client on this node needs. Processes Ray starts for a trial
elsewhere (Ray Train's workers) get `worker_env` in their runtime environment: one environment
that leads each to its own node's daemon.

Compute share: with ``enable_thread_percentage=True`` a packed trial holding a fraction
``s`` of a GPU gets ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = ceil(100 * s)`` in its own
environment, i.e. a per-client limit that applies to that process's CUDA context. The
daemon-wide ``set_default_active_thread_percentage`` control command is *not* used: it
applies to every client that starts afterwards, so two trials with different shares
starting at the same time would race for it.

A node without MPS (no ``nvidia-cuda-mps-control`` on PATH, or NVML reports no GPU) is
reported once with a warning; packed trials on it run time-shared, as without Fluid.

Example:
    >>> mps = MPSManager(enable_thread_percentage=True)   # doctest: +SKIP
    >>> mps.start()                                         # doctest: +SKIP
    >>> ... tune.Tuner(...).fit() ...                       # doctest: +SKIP
    >>> mps.stop()                                          # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

from fluid.gpu.mps_daemon import (
    COMMAND_TIMEOUT_S,
    CONTROL_BINARY,
    LOG_ENV,
    NODE_LINK_DIR,
    PIPE_ENV,
    THREAD_PERCENTAGE_ENV,
    MPSDaemon,
    base_dir,
    thread_percentage,
    why_no_mps,
)

__all__ = ["CONTROL_BINARY", "LOG_ENV", "PIPE_ENV", "THREAD_PERCENTAGE_ENV", "MPSDaemon",
           "MPSManager", "client_env", "join", "thread_percentage", "why_no_mps",
           "worker_env"]

logger = logging.getLogger(__name__)

NAMESPACE = "fluid"

_warned_nodes: set[str] = set()
_warn_lock = threading.Lock()


_ACTOR_PREFIX = "fluid-mps-"


def _actor_name(node_id: str) -> str:
    return _ACTOR_PREFIX + node_id


def _node_actor(node_id: str) -> Any:
    """The actor running ``node_id``'s daemon for some manager of this cluster, or None."""
    import ray

    try:
        return ray.get_actor(_actor_name(node_id), namespace=NAMESPACE)
    except ValueError:
        return None


def _session_name() -> str:
    """A name of the Ray cluster's session: Ray's own from 2.54 (``get_session_name``), before
    it the head node's id (new with every start of the cluster)."""
    import ray

    context = ray.get_runtime_context()
    if hasattr(context, "get_session_name"):  # Ray 2.54 on (_ray_compat.SESSION_NAME)
        return context.get_session_name()
    head = [n["NodeID"] for n in ray.nodes()
            if n.get("Alive") and "node:__internal_head__" in n.get("Resources", {})]
    return f"head-{head[0][:12]}" if head else f"node-{context.get_node_id()[:12]}"


class MPSManager:
    """Starts and stops one MPS control daemon per GPU node of the Ray cluster.

    Args:
        enable_thread_percentage: give each packed trial (GPU share < 1) the per-client
            limit ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = ceil(100 * share)``.
        nodes: node ids to manage (default: every alive node with a ``GPU`` resource).
        binary: control binary name or path, looked up on each node's PATH.
        require_gpu: treat a node as MPS-less when NVML finds no GPU. Set False only where
            the binary is present but NVML is not (containers, tests with a fake binary).
        root: parent directory of the per-session pipe/log directories.
        system_pipe_dir: where a daemon started before Fluid answers (`MPSDaemon`).

    Each node is probed first (in this process for its own node, else by a task: no actor
    where the node has no MPS); ``start`` again takes the GPU nodes that joined since. The
    daemons are stopped by `stop`, and at the latest when the driver's interpreter exits (an
    experiment that failed or was interrupted).

    Example:
        >>> mps = MPSManager(enable_thread_percentage=True)      # doctest: +SKIP
        >>> mps.start(); print(mps.status()); mps.stop()        # doctest: +SKIP
    """

    def __init__(self, enable_thread_percentage: bool = False, *, nodes: list[str] | None = None,
                 binary: str = CONTROL_BINARY, require_gpu: bool = True,
                 root: str = "/tmp/fluid-mps", system_pipe_dir: str | None = None) -> None:
        if not isinstance(binary, str) or not binary:
            raise ValueError(f"MPSManager(binary=...) must be a non-empty string, got {binary!r}")
        self.enable_thread_percentage = bool(enable_thread_percentage)
        self._nodes = nodes
        self.binary = binary
        self.require_gpu = require_gpu
        self.root = root
        self.system_pipe_dir = system_pipe_dir
        self._actors: dict[str, Any] = {}
        self._borrowed: dict[str, Any] = {}  # node daemons of another manager of the cluster
        self._status: dict[str, dict[str, Any]] = {}
        self._at_exit = False

    def start(self) -> dict[str, dict[str, Any]]:
        """Start a daemon on every GPU node (idempotent); return `status`."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from fluid.gpu.nvml import gpu_nodes, on_each_node

        if not ray.is_initialized():
            raise RuntimeError("MPSManager.start() needs ray.init() first")
        if not self._at_exit:  # an experiment that fails or is interrupted stops them too
            atexit.register(self.stop)
            self._at_exit = True
        nodes = self._nodes if self._nodes is not None else gpu_nodes()
        new = [n for n in nodes if n not in self._status]
        why = on_each_node(why_no_mps, new, self.binary, self.require_gpu)
        remote = ray.remote(num_cpus=0, max_concurrency=4)(MPSDaemon)
        session = _session_name()
        for nid, reason in zip(new, why, strict=True):
            self._status[nid] = {"node_id": nid, "available": False, "running": False,
                                 "owned": False, "reason": reason, "grants": []}
            if reason is not None:
                continue
            if (other := _node_actor(nid)) is not None:
                self._borrowed[nid] = other  # another manager's, in this cluster: used only
                continue
            self._actors[nid] = remote.options(
                name=_actor_name(nid), namespace=NAMESPACE,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False),
            ).remote(nid, base_dir(session, nid, self.root), self.binary,
                     self.require_gpu, self.enable_thread_percentage, self.system_pipe_dir,
                     os.path.join(self.root, session, NODE_LINK_DIR))
        self._ask_all("start")
        for nid in new:
            if not self._status[nid]["running"]:
                _warn_once(nid, self._status[nid]["reason"])
        return self.status()

    def stop(self) -> dict[str, dict[str, Any]]:
        """Send ``quit`` to every daemon and end the node actors; return the final status."""
        import ray

        if not self._actors or not ray.is_initialized():
            return self.status()
        self._ask_all("stop", own_only=True)
        for a in self._actors.values():
            ray.kill(a)
        self._actors = {}
        return self.status()

    def status(self) -> dict[str, dict[str, Any]]:
        """Per node id: available, running, reason (why not), pipe/log dirs, grants."""
        import ray

        if (self._actors or self._borrowed) and ray.is_initialized():
            self._ask_all("status")
        return {k: dict(v) for k, v in self._status.items()}

    def _ask_all(self, method: str, own_only: bool = False) -> None:
        """Call ``method`` of every node's daemon (``own_only``: of those this manager
        started); keep the statuses they return (a borrowed one's as not owned)."""
        import ray

        actors = self._actors if own_only else {**self._borrowed, **self._actors}
        refs = [getattr(a, method).remote() for a in actors.values()]
        self._status.update(zip(actors, ray.get(refs), strict=True))
        for nid in self._borrowed:
            self._status[nid]["owned"] = False

    def env_for_share(self, share: float, node_id: str | None = None) -> dict[str, str]:
        """Environment for a CUDA process on ``node_id`` (default: this node) holding
        ``share`` of a GPU: the pipe/log directories, plus the thread percentage when
        enabled and ``share < 1``. Empty when the node runs no daemon."""
        import ray

        if not share > 0:
            raise ValueError(f"env_for_share(share=...) must be > 0, got {share}")
        nid = node_id or ray.get_runtime_context().get_node_id()
        actor = self._actors.get(nid) or self._borrowed.get(nid)
        if actor is None:
            return {}
        return ray.get(actor.client_env.remote(share, None))

    def __enter__(self) -> MPSManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _warn_once(node_id: str, reason: str | None) -> None:
    with _warn_lock:
        if node_id in _warned_nodes:
            return
        _warned_nodes.add(node_id)
    logger.warning("fluid.gpu.mps: no MPS on node %s (%s); packed trials on it run time-shared",
                   node_id[:12], reason)


def client_env(share: float) -> dict[str, str]:
    """Environment this process needs to use the MPS daemon Fluid runs on its node.

    `join` sets it in the process (the trainable Fluid runs, every ``fluid.train.elastic``
    worker), before CUDA starts: CUDA reads these variables when it creates its context.
    Returns {} when no `MPSManager` daemon runs on this node.
    """
    import ray

    if share <= 0 or not ray.is_initialized():
        return {}
    actor = _node_actor(ray.get_runtime_context().get_node_id())
    if actor is None:
        return {}
    return ray.get(actor.client_env.remote(share, os.getpid()), timeout=COMMAND_TIMEOUT_S)


def join(share: float | None = None) -> dict[str, str]:
    """Join this node's MPS daemon: `client_env` of ``share`` (default: the GPUs Ray assigned
    this process) set in ``os.environ``, where CUDA reads it when this process creates its
    context; returns it ({}: no daemon here, or no GPU). Call it before CUDA starts."""
    import ray

    if share is None:
        if not ray.is_initialized():
            return {}
        share = float(ray.get_runtime_context().get_assigned_resources().get("GPU", 0.0))
    env = client_env(share)
    os.environ.update(env)
    return env


def worker_env() -> dict[str, str]:
    """Environment for the processes Ray starts on any node, one GPU each (Ray Train's
    workers: ``fluid.train.run_config`` gives it to them through their runtime environment):
    each process finds its own node's daemon through the links that daemon keeps
    (`MPSDaemon`'s ``link_dir``; where a node runs none, the path leads nowhere and CUDA runs
    without MPS, as it would anyway). Empty where no daemon of `MPSManager` runs."""
    import ray

    if not ray.is_initialized():
        return {}
    nodes = [a["name"].removeprefix(_ACTOR_PREFIX)
             for a in ray.util.list_named_actors(all_namespaces=True)
             if a["namespace"] == NAMESPACE and a["name"].startswith(_ACTOR_PREFIX)]
    for node in nodes:
        actor = _node_actor(node)
        env = actor and ray.get(actor.worker_env.remote(), timeout=COMMAND_TIMEOUT_S)
        if env:
            return env
    return {}
