"""One node's NVIDIA MPS control daemon (`MPSDaemon`): started in directories of its own, or
one that already runs there used as it is; and the environment its CUDA clients need.

`fluid.gpu.mps.MPSManager` runs one per GPU node of a Ray cluster; a single machine without Ray
can use one directly (``experiments/colocate.py`` does).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import threading
from typing import Any

CONTROL_BINARY = "nvidia-cuda-mps-control"
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
THREAD_PERCENTAGE_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#: Where MPS's own daemon answers unless told otherwise (``nvidia-cuda-mps-control`` manual).
SYSTEM_PIPE_DIR = "/tmp/nvidia-mps"
SYSTEM_LOG_DIR = "/var/log/nvidia-mps"
COMMAND_TIMEOUT_S = 30.0
#: A node's own directory, named by what every Ray worker process of that node has in its
#: environment (its raylet's pid), so that one environment names it on every node: Ray expands
#: ``${VAR}`` in a runtime environment's ``env_vars`` where the process starts.
NODE_LINK_DIR = "r${RAY_RAYLET_PID}"


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


def thread_percentage(share: float) -> int:
    """MPS active-thread percentage for a process holding ``share`` of a GPU (1..100).

    Example:
        >>> thread_percentage(0.5), thread_percentage(1 / 3), thread_percentage(1.0)
        (50, 34, 100)
    """
    if not share > 0:
        raise ValueError(f"thread_percentage(share=...) must be > 0, got {share}")
    return max(1, min(100, math.ceil(round(share * 100, 6))))


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
        link_dir: while the daemon runs, ``link_dir/pipe`` and ``link_dir/log`` link to its
            directories (environment variables in it expanded here: `NODE_LINK_DIR`), so
            that one environment serves the processes Ray starts on any node.

    Example:
        >>> d = MPSDaemon("local", "/tmp/fluid-mps/doc", "no-such-mps-control", True, False)
        >>> d.start()["reason"], d.client_env(0.5)
        ('no-such-mps-control is not on PATH', {})
    """

    def __init__(self, node_id: str, directory: str, binary: str, require_gpu: bool,
                 thread_pct: bool, system_pipe_dir: str | None = None,
                 link_dir: str | None = None) -> None:
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
        self.link_template = link_dir
        self.link_dir = os.path.expandvars(link_dir) if link_dir else None

    def _env(self) -> dict[str, str]:
        # Ray hides GPUs from actors that asked for none; the daemon must see them all.
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        return {**env, PIPE_ENV: self.pipe_dir, LOG_ENV: self.log_dir}

    def _probe(self) -> str | None:
        return why_no_mps(self.binary, self.require_gpu)

    def _control(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([self._path, *args], input=stdin, env=self._env(),
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)

    def start(self) -> dict[str, Any]:
        """Run ``<binary> -d`` unless running or unavailable; return `status`."""
        with self._lock:
            if not self.running:
                self.reason = self._probe() or self._launch()
                self.running = self.reason is None
                if self.running:
                    self._link(True)
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
            self._link(False)
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

    def worker_env(self) -> dict[str, str]:
        """What a process holding a whole GPU on any node needs, through the links each node's
        daemon keeps (``link_dir`` unexpanded; {} without one or when not running)."""
        if not (self.running and self.link_template):
            return {}
        return {PIPE_ENV: os.path.join(self.link_template, "pipe"),
                LOG_ENV: os.path.join(self.link_template, "log")}

    def _link(self, on: bool) -> None:
        """Make (``on``) or remove ``link_dir``'s links to the daemon's directories."""
        if self.link_dir is None:
            return
        for name, target in (("pipe", self.pipe_dir), ("log", self.log_dir)):
            link = os.path.join(self.link_dir, name)
            if os.path.islink(link):
                os.unlink(link)
            if on:
                os.makedirs(self.link_dir, exist_ok=True)
                os.symlink(target, link)

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
