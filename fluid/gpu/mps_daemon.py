"""One node's NVIDIA MPS control daemon (`MPSDaemon`): one that answers there already used as
it is, else one started in Fluid's directory; shared by every experiment that registers as
its user, stopped when the last one leaves; and the environment its CUDA clients need.

A daemon counts as running only when it answers: ``get_server_list`` through the control
binary succeeds in its pipe directory (a ``control`` file alone may be left by a daemon that
was killed). `fluid.gpu.mps.MPSManager` runs one per GPU node of a Ray cluster; a single
machine without Ray can use one directly (``experiments/colocate.py`` does).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fluid.gpu.mps_client import (
    COMMAND_TIMEOUT_S,
    CONTROL_BINARY,
    CONTROL_ENV,
    LOG_ENV,
    PIPE_ENV,
    THREAD_PERCENTAGE_ENV,
    ask,
    foreign_users,
    thread_percentage,
)

#: Where MPS's own daemon answers unless told otherwise (``nvidia-cuda-mps-control`` manual).
SYSTEM_PIPE_DIR = "/tmp/nvidia-mps"
SYSTEM_LOG_DIR = "/var/log/nvidia-mps"
#: A node's own directory, named by what every Ray worker process of that node has in its
#: environment (its raylet's pid), so that one environment names it on every node: Ray expands
#: ``${VAR}`` in a runtime environment's ``env_vars`` where the process starts.
NODE_LINK_DIR = "r${RAY_RAYLET_PID}"
#: How long ``-d`` may take to answer: the real binary forks its daemon and returns at once.
START_WAIT_S = 10.0


def why_no_mps(binary: str = CONTROL_BINARY, require_gpu: bool = True) -> str | None:
    """Why this node cannot run an MPS daemon (``None``: it can): ``binary`` not on PATH, or,
    with ``require_gpu``, NVML unavailable, seeing no GPU, or a GPU in MIG mode (a MIG slice
    is isolated already; Fluid runs no MPS beside it)."""
    if shutil.which(binary) is None:
        return f"{binary} is not on PATH"
    if require_gpu:
        from fluid.gpu.nvml import gpu_count, mig_gpus

        n = gpu_count()
        if n is None:
            return "NVML is not available (no NVIDIA driver)"
        if n == 0:
            return "NVML reports no GPU"
        if mig := mig_gpus():
            return f"MIG mode is on (GPU {', '.join(map(str, mig))}): MIG slices get no MPS"
    return None


def base_dir(session_name: str, node_id: str, root: str = "/tmp/fluid-mps") -> str:
    """Per-session, per-node MPS directory (short: the pipe path must fit a Unix socket)."""
    return os.path.join(root, session_name, node_id[:12])


def raylet_visible_devices() -> str | None:
    """``CUDA_VISIBLE_DEVICES`` of this node's raylet (the GPUs Ray was given here), read from
    its initial environment; ``None``: not set there (every GPU), or not readable."""
    pid = os.environ.get("RAY_RAYLET_PID")
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except (OSError, TypeError):
        return None
    for item in raw.split(b"\0"):
        if item.startswith(b"CUDA_VISIBLE_DEVICES="):
            return item.split(b"=", 1)[1].decode()
    return None


class MPSDaemon:
    """One node's MPS control daemon: `MPSManager` runs one per GPU node and experiment as a
    Ray actor; a single machine without Ray can use one directly.

    Args:
        node_id: the node's name in `status`.
        directory: parent of the daemon's ``pipe``, ``log`` and ``users`` directories.
        binary: control binary name or path, looked up on PATH.
        require_gpu: report the daemon unavailable when NVML finds no GPU.
        thread_pct: give clients holding a share < 1 ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``.
        system_pipe_dir: where a daemon started before Fluid answers (default: the node's
            ``CUDA_MPS_PIPE_DIRECTORY``, else ``/tmp/nvidia-mps``, MPS's own default).
        link_dir: while the daemon runs, ``link_dir/pipe`` and ``link_dir/log`` link to its
            directories (environment variables in it expanded here: `NODE_LINK_DIR`), so
            that one environment serves the processes Ray starts on any node.
        user: this daemon's user (an experiment), registered under ``directory/users``; the
            daemon stops when the last live user stops it. ``None``: the only user.
        users_alive: which of the registered users still run (default: all of them).

    Example:
        >>> d = MPSDaemon("local", "/tmp/fluid-mps/doc", "no-such-mps-control", True, False)
        >>> d.start()["reason"], d.client_env(0.5)
        ('no-such-mps-control is not on PATH', {})
    """

    def __init__(self, node_id: str, directory: str, binary: str, require_gpu: bool,
                 thread_pct: bool, system_pipe_dir: str | None = None,
                 link_dir: str | None = None, user: str | None = None,
                 users_alive: Callable[[list[str]], set[str]] | None = None) -> None:
        self.node_id = node_id
        self.directory = directory
        self.pipe_dir = os.path.join(directory, "pipe")
        self.log_dir = os.path.join(directory, "log")
        self.system_pipe_dir = system_pipe_dir or os.environ.get(PIPE_ENV, SYSTEM_PIPE_DIR)
        self.owned = True  # False: a daemon that ran before Fluid, used and left running
        self.binary = binary
        self.require_gpu = require_gpu
        self.thread_pct = thread_pct
        self.running = False
        self.reason: str | None = None
        self.notes: list[str] = []  # what was found and not used, and why
        self.grants: list[dict[str, Any]] = []
        self.user = user or "only"
        self._users_alive = users_alive or (lambda users: set(users))
        self._lock = threading.Lock()
        self._path = shutil.which(binary)
        self.link_template = link_dir
        self.link_dir = os.path.expandvars(link_dir) if link_dir else None

    def _env(self, pipe_dir: str | None = None) -> dict[str, str]:
        # Ray hides GPUs from actors that asked for none; the daemon must see the node's GPUs
        # that Ray was given (the raylet's CUDA_VISIBLE_DEVICES), no others.
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        if (visible := raylet_visible_devices()) is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        return {**env, PIPE_ENV: pipe_dir or self.pipe_dir, LOG_ENV: self.log_dir}

    @contextmanager
    def _node_lock(self) -> Iterator[None]:
        """Held while starting or stopping: the experiments on this node take turns."""
        os.makedirs(self.directory, exist_ok=True)
        with self._lock, open(os.path.join(self.directory, "lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def start(self) -> dict[str, Any]:
        """Use a daemon that answers (the administrators', or one in ``directory``: another
        experiment's, or left by a driver that was killed), else run ``<binary> -d``; register
        as a user; return `status`."""
        if self.running:
            return self.status()
        with self._node_lock():
            self.reason = why_no_mps(self.binary, self.require_gpu) or self._launch()
            self.running = self.reason is None
            if self.running:
                self._register(True)
                self._link()
        return self.status()

    def _launch(self) -> str | None:
        """Use a daemon that answers, else run ``<binary> -d``; None when one runs, else why
        not."""
        if self._usable(self.system_pipe_dir, "the administrators' daemon"):
            self.pipe_dir, self.owned = self.system_pipe_dir, False
            self.log_dir = os.environ.get(LOG_ENV, SYSTEM_LOG_DIR)
            return None
        if self._usable(self.pipe_dir, "a daemon in Fluid's directory"):
            if self._users():  # else one left by a driver that was killed: adopted
                self.notes.append(f"adopted the daemon left running in {self.pipe_dir}")
            return None
        shutil.rmtree(self.pipe_dir, ignore_errors=True)  # a dead daemon's files, if any
        os.makedirs(self.pipe_dir, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        try:
            proc = subprocess.run([self._path or self.binary, "-d"], env=self._env(),
                                  capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"could not run {self.binary} -d: {e}"
        if proc.returncode != 0:
            return (f"{self.binary} -d exited with {proc.returncode}: "
                    f"{(proc.stderr or proc.stdout).strip()}")
        deadline = time.monotonic() + START_WAIT_S
        while ask(self.pipe_dir, "get_server_list", self.binary)[0] is not True:
            if time.monotonic() > deadline:
                return f"{self.binary} -d returned but no daemon answers in {self.pipe_dir}"
            time.sleep(0.1)
        return None

    def _usable(self, pipe_dir: str, what: str) -> bool:
        """Whether the daemon of ``pipe_dir`` answers and serves this user; why not, in
        `notes`, where a ``control`` file is there."""
        if not os.path.exists(os.path.join(pipe_dir, "control")):
            return False
        answered, output = ask(pipe_dir, "get_server_list", self.binary)
        if not answered:
            self.notes.append(f"{what} at {pipe_dir} does not answer ({output}): not used")
            return False
        if others := foreign_users(pipe_dir, output):
            self.notes.append(f"{what} at {pipe_dir} serves {', '.join(others)}: not used "
                              "(MPS serves one user at a time)")
            return False
        return True

    def stop(self) -> dict[str, Any]:
        """Leave the daemon: the last live user sends ``quit`` to one Fluid started or adopted
        and removes its directories; return `status`."""
        with self._node_lock():
            if self.running:
                links = self._link_dirs()  # every user's, the dead ones' included
                self._register(False)
                if self.owned and not self._users():
                    answered, output = ask(self.pipe_dir, "quit", self.binary)
                    if not answered:
                        self.reason = f"quit failed: {output}"
                    self._remove(links)
            self.running = False
        return self.status()

    def _users_dir(self) -> str:
        return os.path.join(self.directory, "users")

    def _register(self, on: bool) -> None:
        path = os.path.join(self._users_dir(), self.user)
        if on:
            os.makedirs(self._users_dir(), exist_ok=True)
            with open(path, "w") as f:
                f.write(self.link_dir or "")
        elif os.path.exists(path):
            os.unlink(path)

    def _users(self) -> list[str]:
        """Registered users still alive; the files of the others are removed."""
        try:
            users = sorted(os.listdir(self._users_dir()))
        except FileNotFoundError:
            return []
        alive = self._users_alive(users)
        for gone in set(users) - alive:
            os.unlink(os.path.join(self._users_dir(), gone))
        return sorted(alive)

    def _remove(self, links: set[str]) -> None:
        """The stopped daemon's directories and the links to them in ``links``."""
        for link_dir in links:
            for name in ("pipe", "log"):
                if os.path.islink(link := os.path.join(link_dir, name)):
                    os.unlink(link)
        for name in ("pipe", "log", "users"):
            shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    def client_env(self, share: float, pid: int | None = None) -> dict[str, str]:
        """Environment a CUDA process holding ``share`` of a GPU needs ({} when not running)."""
        if not self.running:
            return {}
        env = {PIPE_ENV: self.pipe_dir, LOG_ENV: self.log_dir, CONTROL_ENV: self.binary}
        if self.thread_pct and 0 < share < 1:
            env[THREAD_PERCENTAGE_ENV] = str(thread_percentage(share))
        with self._lock:
            self.grants.append({"pid": pid, "share": share, "env": dict(env)})
        return env

    def worker_env(self) -> dict[str, str]:
        """What a process on any node needs, through the links each node's daemon keeps
        (``link_dir`` unexpanded; {} without one or when not running)."""
        if not (self.running and self.link_template):
            return {}
        return {PIPE_ENV: os.path.join(self.link_template, "pipe"),
                LOG_ENV: os.path.join(self.link_template, "log"), CONTROL_ENV: self.binary}

    def where(self) -> str:
        """The directory this daemon's files are in (other experiments on the node use it)."""
        return self.directory

    def _link(self) -> None:
        """This user's links to the daemon's directories (`_remove` takes them away)."""
        if self.link_dir is None:
            return
        for name, target in (("pipe", self.pipe_dir), ("log", self.log_dir)):
            link = os.path.join(self.link_dir, name)
            if os.path.islink(link):
                os.unlink(link)
            os.makedirs(self.link_dir, exist_ok=True)
            os.symlink(target, link)

    def _link_dirs(self) -> set[str]:
        """Where every registered user keeps links (each user file names its directory)."""
        dirs = {self.link_dir} if self.link_dir else set()
        users = self._users_dir()
        for name in os.listdir(users) if os.path.isdir(users) else []:
            with open(os.path.join(users, name)) as f:
                dirs.add(f.read().strip())
        return dirs - {""}

    def status(self) -> dict[str, Any]:
        """Available, running, why not (``reason``), what was not used (``notes``),
        directories and the grants made."""
        return {
            "node_id": self.node_id,
            "available": self.reason is None and self._path is not None,
            "running": self.running,
            "owned": self.owned,
            "reason": self.reason,
            "notes": list(self.notes),
            "pipe_dir": self.pipe_dir,
            "log_dir": self.log_dir,
            "thread_percentage": self.thread_pct,
            "grants": list(self.grants),
        }
