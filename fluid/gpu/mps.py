"""NVIDIA MPS control daemons, one per GPU node, for packed (fractional-GPU) trials.

`MPSManager` starts ``nvidia-cuda-mps-control -d`` on every GPU node through a small actor
pinned to the node, with ``CUDA_MPS_PIPE_DIRECTORY`` / ``CUDA_MPS_LOG_DIRECTORY`` under
``/tmp/fluid-mps/<ray session>/<node>``, and stops it with ``echo quit |
nvidia-cuda-mps-control``. Where a daemon already runs on a node (one the cluster's
administrators started, answering in ``CUDA_MPS_PIPE_DIRECTORY`` or ``/tmp/nvidia-mps``), it is
used and never stopped. Trial processes connect by calling `join` before CUDA starts (done by
the trainable ``FluidExecutor`` runs, by `fluid.train.elastic` in every gang worker), which
sets the environment a CUDA client on this node needs.

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
import math
import os
import shutil
import subprocess
import threading
from typing import Any

logger = logging.getLogger(__name__)

CONTROL_BINARY = "nvidia-cuda-mps-control"
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
THREAD_PERCENTAGE_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
NAMESPACE = "fluid"
#: Where MPS's own daemon answers unless told otherwise (``nvidia-cuda-mps-control`` manual).
SYSTEM_PIPE_DIR = "/tmp/nvidia-mps"
SYSTEM_LOG_DIR = "/var/log/nvidia-mps"
_COMMAND_TIMEOUT_S = 30.0

_warned_nodes: set[str] = set()
_warn_lock = threading.Lock()


def why_no_mps(binary: str = CONTROL_BINARY, require_gpu: bool = True) -> str | None:
    """Why this node cannot run an MPS daemon (``None``: it can): ``binary`` not on PATH, or,
    with ``require_gpu``, NVML unavailable or seeing no GPU."""
    if shutil.which(binary) is None:
        return f"{binary} is not on PATH"
    if require_gpu:
        from fluid.gpu.nvml import gpu_count

        n = gpu_count()
        if n is None:
            return "NVML is not available (no NVIDIA driver)"
        if n == 0:
            return "NVML reports no GPU"
    return None


def _actor_name(node_id: str) -> str:
    return f"fluid-mps-{node_id}"


def thread_percentage(share: float) -> int:
    """MPS active-thread percentage for a process holding ``share`` of a GPU (1..100).

    Example:
        >>> thread_percentage(0.5), thread_percentage(1 / 3), thread_percentage(1.0)
        (50, 34, 100)
    """
    if not share > 0:
        raise ValueError(f"thread_percentage(share=...) must be > 0, got {share}")
    return max(1, min(100, math.ceil(round(share * 100, 6))))


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


def base_dir(session_name: str, node_id: str, root: str = "/tmp/fluid-mps") -> str:
    """Per-session, per-node MPS directory (short: the pipe path must fit a Unix socket)."""
    return os.path.join(root, session_name, node_id[:12])


class MPSDaemon:
    """One node's MPS control daemon: `MPSManager` runs one per GPU node as a Ray actor;
    a single machine without Ray can use one directly (``experiments/colocate.py`` does).

    Args:
        node_id: the node's name in `status`.
        directory: parent of the daemon's ``pipe`` and ``log`` directories.
        binary: control binary name or path, looked up on PATH.
        require_gpu: report the daemon unavailable when NVML finds no GPU.
        thread_pct: give clients holding a share < 1 ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``.
        system_pipe_dir: where a daemon started before Fluid answers (default: the node's
            ``CUDA_MPS_PIPE_DIRECTORY``, else ``/tmp/nvidia-mps``, MPS's own default).

    Example:
        >>> d = MPSDaemon("local", "/tmp/fluid-mps/doc", "no-such-mps-control", True, False)
        >>> d.start()["reason"], d.client_env(0.5)
        ('no-such-mps-control is not on PATH', {})
    """

    def __init__(self, node_id: str, directory: str, binary: str, require_gpu: bool,
                 thread_pct: bool, system_pipe_dir: str | None = None) -> None:
        self.node_id = node_id
        self.pipe_dir = os.path.join(directory, "pipe")
        self.log_dir = os.path.join(directory, "log")
        self.system_pipe_dir = system_pipe_dir or os.environ.get(PIPE_ENV, SYSTEM_PIPE_DIR)
        self.owned = True  # False: a daemon that ran before Fluid, used and left running
        self.binary = binary
        self.require_gpu = require_gpu
        self.thread_pct = thread_pct
        self.running = False
        self.reason: str | None = None
        self.grants: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._path = shutil.which(binary)

    def _env(self) -> dict[str, str]:
        # Ray hides GPUs from actors that asked for none; the daemon must see them all.
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        return {**env, PIPE_ENV: self.pipe_dir, LOG_ENV: self.log_dir}

    def _probe(self) -> str | None:
        return why_no_mps(self.binary, self.require_gpu)

    def _control(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([self._path, *args], input=stdin, env=self._env(),
                              capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S)

    def start(self) -> dict[str, Any]:
        """Run ``<binary> -d`` unless running or unavailable; return `status`."""
        with self._lock:
            if not self.running:
                self.reason = self._probe() or self._launch()
                self.running = self.reason is None
            return self.status()

    def _launch(self) -> str | None:
        """Use a daemon that already runs, else run ``<binary> -d``; None when one runs,
        else why not."""
        if os.path.exists(os.path.join(self.system_pipe_dir, "control")):
            self.pipe_dir, self.owned = self.system_pipe_dir, False
            self.log_dir = os.environ.get(LOG_ENV, SYSTEM_LOG_DIR)
            return None
        os.makedirs(self.pipe_dir, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        try:
            proc = self._control("-d")
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"could not run {self.binary} -d: {e}"
        if proc.returncode != 0:
            return (f"{self.binary} -d exited with {proc.returncode}: "
                    f"{(proc.stderr or proc.stdout).strip()}")
        return None

    def stop(self) -> dict[str, Any]:
        """Send ``quit`` to a daemon this actor started; return `status`."""
        with self._lock:
            if self.running and self.owned:
                try:
                    proc = self._control(stdin="quit\n")
                    if proc.returncode != 0:
                        self.reason = f"quit exited with {proc.returncode}: {proc.stderr.strip()}"
                except (OSError, subprocess.TimeoutExpired) as e:
                    self.reason = f"could not stop the daemon: {e}"
            self.running = False
            return self.status()

    def client_env(self, share: float, pid: int | None = None) -> dict[str, str]:
        """Environment a CUDA process holding ``share`` of a GPU needs ({} when not running)."""
        if not self.running:
            return {}
        env = {PIPE_ENV: self.pipe_dir, LOG_ENV: self.log_dir}
        if self.thread_pct and 0 < share < 1:
            env[THREAD_PERCENTAGE_ENV] = str(thread_percentage(share))
        with self._lock:
            self.grants.append({"pid": pid, "share": share, "env": dict(env)})
        return env

    def status(self) -> dict[str, Any]:
        """Available, running, why not (``reason``), directories and the grants made."""
        return {
            "node_id": self.node_id,
            "available": self.reason is None and self._path is not None,
            "running": self.running,
            "owned": self.owned,
            "reason": self.reason,
            "pipe_dir": self.pipe_dir,
            "log_dir": self.log_dir,
            "thread_percentage": self.thread_pct,
            "grants": list(self.grants),
        }


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
            if reason is None:
                self._actors[nid] = remote.options(
                    name=_actor_name(nid), namespace=NAMESPACE,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False),
                ).remote(nid, base_dir(session, nid, self.root), self.binary,
                         self.require_gpu, self.enable_thread_percentage, self.system_pipe_dir)
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
        self._ask_all("stop")
        for a in self._actors.values():
            ray.kill(a)
        self._actors = {}
        return self.status()

    def status(self) -> dict[str, dict[str, Any]]:
        """Per node id: available, running, reason (why not), pipe/log dirs, grants."""
        import ray

        if self._actors and ray.is_initialized():
            self._ask_all("status")
        return {k: dict(v) for k, v in self._status.items()}

    def _ask_all(self, method: str) -> None:
        """Call ``method`` of every node's daemon; keep the statuses it returns."""
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
        nid = node_id or ray.get_runtime_context().get_node_id()
        actor = self._actors.get(nid)
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
    nid = ray.get_runtime_context().get_node_id()
    try:
        actor = ray.get_actor(_actor_name(nid), namespace=NAMESPACE)
    except ValueError:
        return {}
    return ray.get(actor.client_env.remote(share, os.getpid()), timeout=_COMMAND_TIMEOUT_S)


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
