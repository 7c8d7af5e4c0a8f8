"""Stand-ins for a GPU node's MPS control binary and NVML, for tests on logical GPUs.

``StandIns.create(directory)`` writes both into ``directory``: with it first on ``PATH`` (the
binary) and ``PYTHONPATH`` (NVML's ``pynvml`` module) of the raylets a test starts, every
Ray worker there finds them.
"""

from __future__ import annotations

import _ctypes
import json
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

FAKE = """#!/bin/sh
# Stand-in MPS control binary that behaves as NVIDIA's does where Fluid depends on it:
#   -d          starts a daemon (a background process of this script, named as the real one)
#               that answers in $CUDA_MPS_PIPE_DIRECTORY; refused while one answers there;
#   commands    on stdin (quit, get_server_list, get_client_list PID) fail where no daemon
#               answers; quit ends the daemon.
# Every call is logged (argv, directories, CUDA_VISIBLE_DEVICES, stdin) to the test's log.
pipe=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
logdir=${CUDA_MPS_LOG_DIRECTORY:-/var/log/nvidia-mps}
alive() { [ -f "$pipe/standin.pid" ] && kill -0 "$(cat "$pipe/standin.pid")" 2>/dev/null; }
if [ "$1" = "--serve" ]; then
  trap 'kill "$child" 2>/dev/null; exit 0' TERM INT
  sleep 100000 & child=$!
  wait "$child"
  exit 0
fi
if [ "$1" = "-d" ]; then
  echo "start pipe=$pipe log=$logdir cvd=${CUDA_VISIBLE_DEVICES-unset}" >> {log}
  if alive; then
    echo "An instance of this daemon is already running" >&2
    exit 1
  fi
  mkdir -p "$pipe" "$logdir" || exit 1
  setsid "$0" --serve </dev/null >/dev/null 2>&1 &
  echo $! > "$pipe/standin.pid"
  touch "$pipe/control"
  echo "[$(date '+%F %T')] INFO: Starting control daemon $!" >> "$logdir/control.log"
  exit 0
fi
stdin=$(cat)
echo "cmd pipe=$pipe stdin=$stdin" >> {log}
if ! alive; then
  echo "Cannot find MPS control daemon process" >&2
  exit 1
fi
case "$stdin" in
  quit)
    kill "$(cat "$pipe/standin.pid")"
    rm -f "$pipe/control" "$pipe/standin.pid"
    echo "[$(date '+%F %T')] INFO: Exit" >> "$logdir/control.log" ;;
  get_server_list|get_client_list*) ;;
  *) echo "Unknown command" ; exit 1 ;;
esac
exit 0
"""

#: Stand-in NVML (the ``pynvml`` module, first on every worker's path), as the JSON file
#: ``{path}`` says: ``{"count": GPUs, "total_gb": each GPU's memory, "free_gb": what is free on
#: each (default: all of it), "process_gb": what every process that asks sees itself hold in
#: the compute process list, "mps_process_gb": in the MPS process list}`` (a process is listed
#: on GPU 0, in neither list where its figure is null); an empty file is NVML without a driver.
FAKE_NVML = """import json, os, pathlib, types
class NVMLError(Exception):
    pass
def _state():
    text = pathlib.Path({path!r}).read_text().strip()
    if not text:
        raise NVMLError("stand-in NVML: no driver")
    return json.loads(text)
def nvmlInit():
    _state()
def nvmlShutdown():
    pass
def nvmlDeviceGetCount():
    return _state()["count"]
def nvmlDeviceGetHandleByIndex(i):
    return i
def nvmlDeviceGetMemoryInfo(handle):
    state = _state()
    total = int(state["total_gb"] * 2**30)
    free = total if state.get("free_gb") is None else int(state["free_gb"] * 2**30)
    return types.SimpleNamespace(total=total, used=total - free, free=free)
def _listed(key):
    gb = _state().get(key)
    return [] if gb is None else [types.SimpleNamespace(pid=os.getpid(),
                                                        usedGpuMemory=int(gb * 2**30))]
def nvmlDeviceGetComputeRunningProcesses(handle):
    return _listed("process_gb") if handle == 0 else []
def nvmlDeviceGetMPSComputeRunningProcesses(handle):
    return _listed("mps_process_gb") if handle == 0 else []
"""


def write_fake(directory: Path, log: Path) -> None:
    path = directory / "nvidia-cuda-mps-control"
    path.write_text(FAKE.replace("{log}", str(log)))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@dataclass
class StandIns:
    """The stand-ins written in one directory: the binary's log and NVML's state file."""

    log: Path  # what the stand-in control binary was asked
    nvml: Path  # what the stand-in NVML reports (empty: no driver)
    directory: Path  # the stand-ins' directory, first on the workers' PATH and PYTHONPATH

    @classmethod
    def create(cls, directory: Path) -> StandIns:
        """Write both stand-ins into ``directory`` (NVML without a driver until told)."""
        standins = cls(directory / "mps.log", directory / "nvml.json", directory)
        standins.no_driver()
        write_fake(directory, standins.log)
        (directory / "pynvml.py").write_text(
            FAKE_NVML.replace("{path!r}", repr(str(standins.nvml))))
        shutil.copy(Path(__file__).with_name("user_module.py"),
                    directory / "fluid_user_trainables.py")
        # Stands for the CUDA driver library: a module that loads it has "started CUDA".
        shutil.copy(_ctypes.__file__, directory / "libcuda.so.1")
        return standins

    def gpus(self, count: int = 4, total_gb: float = 16.0, process_gb: float | None = 1.0,
             free_gb: float | None = None, mps_process_gb: float | None = None) -> None:
        """NVML sees ``count`` GPUs of ``total_gb``, ``free_gb`` free on each (``None``: all),
        and each process holding ``process_gb`` as a compute process and ``mps_process_gb`` as
        an MPS client (``None``: not in that list)."""
        self.nvml.write_text(json.dumps(
            {"count": count, "total_gb": total_gb, "free_gb": free_gb, "process_gb": process_gb,
             "mps_process_gb": mps_process_gb}))

    def no_driver(self) -> None:
        self.nvml.write_text("")

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def commands(self) -> list[str]:
        """What the binary was asked, less the questions whether a daemon answers."""
        return [ln for ln in self.lines() if not ln.endswith("stdin=get_server_list")]

    def daemons(self) -> list[int]:
        """Pids of the stand-in daemons alive now (anywhere on this machine)."""
        binary = str(self.directory / "nvidia-cuda-mps-control")
        pids = []
        for entry in os.listdir("/proc"):
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError):
                continue
            if binary.encode() in argv and b"--serve" in argv:
                pids.append(int(entry))
        return pids

    def run(self, pipe: Path, *args: str, stdin: str | None = None) -> int:
        """Run the stand-in binary on ``pipe`` as a node's administrator would."""
        env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
               "CUDA_MPS_LOG_DIRECTORY": str(pipe.parent / "log")}
        return subprocess.run([str(self.directory / "nvidia-cuda-mps-control"), *args],
                              input=stdin, env=env, text=True, capture_output=True).returncode


def most_on_one_gpu(ex, trials) -> int:  # noqa: ANN001
    """The most trials ``ex`` (a FluidExecutor) had on one GPU of its plan at once, replayed
    from each trial's shape timeline."""
    events = []
    for t in trials:
        timeline = ex.shape_timeline(t.trial_id)
        for (start, _w, gpus), (end, _, _) in zip(timeline, timeline[1:], strict=False):
            events += [(start, 1, g) for g in gpus] + [(end, -1, g) for g in gpus]
    load: dict[int, int] = {}
    most = 0
    for _, delta, g in sorted(events, key=lambda e: (e[0], e[1])):
        load[g] = load.get(g, 0) + delta
        most = max(most, load[g])
    return most
