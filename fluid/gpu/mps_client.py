"""What a CUDA process needs to be a client of an NVIDIA MPS daemon, and whether it is one.

CUDA reads ``CUDA_MPS_PIPE_DIRECTORY`` (and the per-client limits) once, when the process
creates its context, and connects there if a daemon answers; a process whose CUDA started
before the settings, or whose pipe directory has no daemon, runs without MPS. `client_state`
says which, in the process itself, by asking the daemon (``get_server_list``).
"""

from __future__ import annotations

import contextlib
import math
import os
import pwd
import shutil
import subprocess
import sys

CONTROL_BINARY = "nvidia-cuda-mps-control"
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
THREAD_PERCENTAGE_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
PINNED_MEMORY_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
#: The control binary a client asks whether its daemon answers (the one that started it).
CONTROL_ENV = "FLUID_MPS_CONTROL"
COMMAND_TIMEOUT_S = 30.0

#: Why this process is no client although it was given the settings (`join` sets it).
_joined_late: list[str] = []


def thread_percentage(share: float) -> int:
    """MPS active-thread percentage for a process holding ``share`` of a GPU (1..100).

    Example:
        >>> thread_percentage(0.5), thread_percentage(1 / 3), thread_percentage(1.0)
        (50, 34, 100)
    """
    if not share > 0:
        raise ValueError(f"thread_percentage(share=...) must be > 0, got {share}")
    return max(1, min(100, math.ceil(round(share * 100, 6))))


def pinned_memory_limit(peak_bytes: int, margin: float) -> str:
    """``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` for a client whose measured peak is ``peak_bytes``:
    the peak plus ``margin`` (a fraction) on its device 0, in MB, so that a client that grows
    beyond its place runs out of memory itself instead of its neighbour.

    Example:
        >>> pinned_memory_limit(2 * 2**30, 0.25)
        '0=2560M'
    """
    if not peak_bytes > 0 or not margin >= 0:
        raise ValueError(f"pinned_memory_limit needs peak_bytes > 0 and margin >= 0, got "
                         f"{peak_bytes}, {margin}")
    return f"0={math.ceil(peak_bytes * (1 + margin) / 2**20)}M"


def ask(pipe_dir: str, command: str, binary: str = CONTROL_BINARY) -> tuple[bool, str]:
    """Send ``command`` to the daemon of ``pipe_dir``: (whether it answered, its output or
    why not). The control binary fails where no daemon answers."""
    path = shutil.which(binary)
    if path is None:
        return False, f"{binary} is not on PATH"
    env = {**os.environ, PIPE_ENV: pipe_dir}
    try:
        proc = subprocess.run([path], input=command + "\n", env=env, capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{binary}: {e}"
    if proc.returncode != 0:
        return False, (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}"
    return True, proc.stdout.strip()


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def foreign_users(pipe_dir: str, server_list: str) -> list[str]:
    """Users other than this process's and root (the administrators') that the daemon of
    ``pipe_dir`` runs as or serves: the owner of its control pipe and of each MPS server
    ``server_list`` names (``get_server_list``'s output: one pid a line)."""
    uids = set()
    with contextlib.suppress(OSError):
        uids.add(os.stat(os.path.join(pipe_dir, "control")).st_uid)
    for word in server_list.split():
        try:
            uids.add(os.stat(f"/proc/{int(word)}").st_uid)
        except (ValueError, OSError):
            continue
    return [_user(u) for u in sorted(uids - {os.getuid(), 0})]


def cuda_started() -> bool:
    """Whether this process has started CUDA: torch initialised it, or the CUDA driver
    library is loaded (anything may have done so)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return True
    try:
        with open("/proc/self/maps") as f:
            return any("libcuda.so" in line for line in f)
    except OSError:
        return False


def set_client_env(env: dict[str, str]) -> None:
    """Set ``env`` (a daemon's client settings) in this process; where CUDA has started
    already they come too late, and `client_state` says so."""
    if env and not all(os.environ.get(k) == v for k, v in env.items()) and cuda_started():
        _joined_late.append("CUDA started in this process before its MPS settings")
    os.environ.update(env)


def client_state(share: float) -> tuple[bool, str | None]:
    """Whether this process, holding ``share`` of a GPU, is a client of a live MPS daemon:
    (True, None), or (False, why not), checked here: the settings it has, whether its CUDA
    started before them, and whether the daemon they name answers."""
    if share >= 1:
        return False, "holds a whole GPU (no MPS for it)"
    if "MIG-" in os.environ.get("CUDA_VISIBLE_DEVICES", ""):
        return False, "a MIG slice (no MPS for it)"
    pipe = os.environ.get(PIPE_ENV)
    if not pipe:
        return False, "no MPS settings (no daemon on this node)"
    if _joined_late:
        return False, _joined_late[0]
    answered, output = ask(pipe, "get_server_list", os.environ.get(CONTROL_ENV, CONTROL_BINARY))
    if not answered:
        return False, f"no MPS daemon answers in {pipe} ({output})"
    return True, None
