"""NVIDIA MPS control daemons, one per GPU node, for packed (fractional-GPU) trials.

`MPSManager` gives every GPU node a daemon through a small actor pinned to the node: one that
answers there already (the administrators', in ``CUDA_MPS_PIPE_DIRECTORY`` or
``/tmp/nvidia-mps``, serving this user), else one in ``/tmp/fluid-mps/<ray session>/<node>``
that belongs to the cluster: every experiment on the node registers as its user, and the last
one to end sends it ``quit`` and removes its directories. One left running by a driver that
was killed answers there and is adopted by the next experiment (`fluid.gpu.mps_daemon`).

Trial processes are clients from their first instruction: the driver gives the actor of each
packed trial `MPSManager.trial_env` in the environment Ray starts it with (the daemon's
directories through links that one environment names on every node, the thread percentage,
a pinned memory limit), so a module that touches CUDA at import is a client too. A process
holding a whole GPU gets none: MPS gains nothing there and NCCL under MPS is unsupported.
`join` sets the same settings later, in a process Fluid did not start (and says so where CUDA
had started already: `fluid.gpu.mps_client.client_state`).

Compute share: with ``enable_thread_percentage=True`` a packed trial holding a fraction
``s`` of a GPU gets ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = ceil(100 * s)`` in its own
environment, a per-client limit (the daemon-wide
``set_default_active_thread_percentage`` would race between trials starting together).

A node without MPS (no ``nvidia-cuda-mps-control`` on PATH, NVML sees no GPU, a GPU in MIG
mode) is reported once with a warning; packed trials on it run time-shared, as without Fluid.

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
import uuid
from typing import Any

from fluid.gpu.mps_client import (
    COMMAND_TIMEOUT_S,
    CONTROL_BINARY,
    CONTROL_ENV,
    LOG_ENV,
    PINNED_MEMORY_ENV,
    PIPE_ENV,
    THREAD_PERCENTAGE_ENV,
    client_state,
    pinned_memory_limit,
    set_client_env,
    thread_percentage,
)
from fluid.gpu.mps_daemon import NODE_LINK_DIR, MPSDaemon, base_dir, why_no_mps

__all__ = ["CONTROL_BINARY", "LOG_ENV", "PINNED_MEMORY_ENV", "PIPE_ENV", "THREAD_PERCENTAGE_ENV",
           "MPSDaemon", "MPSManager", "client_env", "client_state", "join",
           "thread_percentage", "why_no_mps"]

logger = logging.getLogger(__name__)

NAMESPACE = "fluid"
_ACTOR_PREFIX = "fluid-mps-"

_warned_nodes: set[str] = set()
_warn_lock = threading.Lock()


def _actor_name(node_id: str, user: str) -> str:
    return f"{_ACTOR_PREFIX}{node_id}-{user}"


def _live_actor_names() -> list[str]:
    import ray

    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
            if a["namespace"] == NAMESPACE and a["name"].startswith(_ACTOR_PREFIX)]


def _node_actors(node_id: str) -> list[Any]:
    """The live actors of every manager that runs ``node_id``'s daemon."""
    import ray

    out = []
    for name in _live_actor_names():
        if name.startswith(_actor_name(node_id, "")):
            try:
                out.append(ray.get_actor(name, namespace=NAMESPACE))
            except ValueError:  # ended since it was listed
                continue
    return out


def users_alive(users: list[str]) -> set[str]:
    """Which of a daemon's users (managers) still run: a manager's node actors end with the
    driver that made them, a driver killed with SIGKILL included."""
    names = _live_actor_names()
    return {u for u in users if any(n.endswith("-" + u) for n in names)}


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
    """Gives every GPU node of the Ray cluster an MPS control daemon, shared with the other
    experiments there (each one a user of it; the last to end stops it).

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
    where the node has no MPS); ``start`` again takes the GPU nodes that joined since. This
    manager leaves the daemons by `stop`, at the latest when the driver's interpreter exits.

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
        self.user = uuid.uuid4().hex[:12]  # this manager, as its daemons' user
        self._actors: dict[str, Any] = {}
        self._status: dict[str, dict[str, Any]] = {}
        self._session = ""  # the Ray session's name, once started
        self._at_exit = False

    def start(self) -> dict[str, dict[str, Any]]:
        """Give every GPU node a daemon (idempotent); return `status`."""
        import ray

        from fluid.gpu.nvml import gpu_nodes, on_each_node

        if not ray.is_initialized():
            raise RuntimeError("MPSManager.start() needs ray.init() first")
        if not self._at_exit:  # an experiment that fails or is interrupted leaves them too
            atexit.register(self.stop)
            self._at_exit = True
        self._session = _session_name()
        nodes = self._nodes if self._nodes is not None else gpu_nodes()
        new = [n for n in nodes if n not in self._status]
        why = on_each_node(why_no_mps, new, self.binary, self.require_gpu)
        for nid, reason in zip(new, why, strict=True):
            self._status[nid] = {"node_id": nid, "available": False, "running": False,
                                 "owned": False, "reason": reason, "notes": [], "grants": []}
            if reason is None:
                self._actors[nid] = self._node_actor(nid)
        self._ask_all("start")
        for nid in new:
            if not self._status[nid]["running"]:
                _warn_once(nid, self._status[nid]["reason"])
            for note in self._status[nid]["notes"]:
                logger.warning("fluid.gpu.mps: node %s: %s", nid[:12], note)
        return self.status()

    def _node_actor(self, node_id: str) -> Any:
        """This manager's actor for ``node_id``, in the directory of the daemon other
        experiments use there (else this session's own)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        session = self._session
        others = _node_actors(node_id)
        directory = (ray.get(others[0].where.remote(), timeout=COMMAND_TIMEOUT_S) if others
                     else base_dir(session, node_id, self.root))
        remote = ray.remote(num_cpus=0, max_concurrency=4)(MPSDaemon)
        return remote.options(
            name=_actor_name(node_id, self.user), namespace=NAMESPACE,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
        ).remote(node_id, directory, self.binary, self.require_gpu,
                 self.enable_thread_percentage, self.system_pipe_dir,
                 os.path.join(self.root, session, NODE_LINK_DIR), self.user, users_alive)

    def stop(self) -> dict[str, dict[str, Any]]:
        """Leave every daemon (the last user of one stops it) and end the node actors;
        return the final status."""
        import ray

        if not self._actors or not ray.is_initialized():
            return self.status()
        self._ask_all("stop")
        for a in self._actors.values():
            ray.kill(a)
        self._actors = {}
        return self.status()

    def status(self) -> dict[str, dict[str, Any]]:
        """Per node id: available, running, owned, reason (why not), notes (what was found
        and not used), pipe/log dirs, grants."""
        import ray

        if self._actors and ray.is_initialized():
            self._ask_all("status")
        return {k: dict(v) for k, v in self._status.items()}

    def _ask_all(self, method: str) -> None:
        """Call ``method`` of every node's actor; keep the statuses they return."""
        import ray

        refs = [getattr(a, method).remote() for a in self._actors.values()]
        self._status.update(zip(self._actors, ray.get(refs), strict=True))

    def env_for_share(self, share: float, node_id: str | None = None) -> dict[str, str]:
        """Environment for a CUDA process on ``node_id`` (default: this node) holding
        ``share`` of a GPU: the pipe/log directories, plus the thread percentage when
        enabled and ``share < 1``. Empty when the node runs no daemon."""
        import ray

        if not share > 0:
            raise ValueError(f"env_for_share(share=...) must be > 0, got {share}")
        actor = self._actors.get(node_id or ray.get_runtime_context().get_node_id())
        return {} if actor is None else ray.get(actor.client_env.remote(share, None))

    def trial_env(self, share: float, peak_bytes: int | None = None,
                  margin: float = 0.2) -> dict[str, str]:
        """Environment a trial's process holding ``share`` of a GPU starts with, on whichever
        node: its node's daemon through the links (a node with none: a path that leads
        nowhere, and CUDA runs without MPS), the thread percentage when enabled, and where
        ``peak_bytes`` (its measured peak) is known, a pinned memory limit of it plus
        ``margin``. Empty for a whole GPU or more, or where no node runs a daemon."""
        if not 0 < share < 1 or not any(s["running"] for s in self._status.values()):
            return {}
        links = os.path.join(self.root, self._session, NODE_LINK_DIR)
        env = {PIPE_ENV: os.path.join(links, "pipe"), LOG_ENV: os.path.join(links, "log"),
               CONTROL_ENV: self.binary}
        if self.enable_thread_percentage:
            env[THREAD_PERCENTAGE_ENV] = str(thread_percentage(share))
        if peak_bytes:
            env[PINNED_MEMORY_ENV] = pinned_memory_limit(peak_bytes, margin)
        return env

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
    """Environment this process, holding ``share`` of a GPU, needs to be a client of the MPS
    daemon of its node: {} for a whole GPU or more, or where no daemon of `MPSManager` runs
    on this node."""
    import ray

    if not 0 < share < 1 or not ray.is_initialized():
        return {}
    for actor in _node_actors(ray.get_runtime_context().get_node_id()):
        env = ray.get(actor.client_env.remote(share, os.getpid()), timeout=COMMAND_TIMEOUT_S)
        if env:
            return env
    return {}


def join(share: float | None = None) -> dict[str, str]:
    """Join this node's MPS daemon: `client_env` of ``share`` (default: the GPUs Ray assigned
    this process) set in ``os.environ``, where CUDA reads it when this process creates its
    context; returns it. A process Fluid starts for a packed trial has it from its start;
    elsewhere call it before CUDA starts (`client_state` says if it came too late)."""
    import ray

    if share is None:
        if not ray.is_initialized():
            return {}
        share = float(ray.get_runtime_context().get_assigned_resources().get("GPU", 0.0))
    env = client_env(share)
    set_client_env(env)
    return env
