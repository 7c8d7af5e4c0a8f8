"""Stand-ins for a GPU node's MPS control binary and NVML, for tests on logical GPUs.

``StandIns.create(directory)`` writes both into ``directory``: with it first on ``PATH`` (the
binary) and ``PYTHONPATH`` (NVML's ``pynvml`` module) of the raylets a test starts, every
Ray worker there finds them.
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path

FAKE = """#!/bin/sh
# Stand-in MPS control: log argv, the pipe/log directories and (for commands) stdin; a daemon
# that runs has a ``control`` file in its pipe directory, as MPS's own has its socket there.
if [ "$1" = "-d" ]; then
  echo "start pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY cvd=${CUDA_VISIBLE_DEVICES-unset}" >> {log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" && touch "$CUDA_MPS_PIPE_DIRECTORY/control"
else
  stdin=$(cat)
  echo "cmd pipe=$CUDA_MPS_PIPE_DIRECTORY stdin=$stdin" >> {log}
  [ "$stdin" = "quit" ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
fi
exit 0
"""

#: Stand-in NVML (the ``pynvml`` module, first on every worker's path), as the JSON file
#: ``{path}`` says: ``{"count": GPUs, "total_gb": each GPU's memory, "process_gb": what every
#: process that asks sees itself hold}``; an empty file is NVML without a driver.
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
    total = int(_state()["total_gb"] * 2**30)
    return types.SimpleNamespace(total=total, used=0, free=total)
def nvmlDeviceGetComputeRunningProcesses(handle):
    used = int(_state().get("process_gb", 0) * 2**30)
    return [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=used)] if handle == 0 else []
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

    @classmethod
    def create(cls, directory: Path) -> StandIns:
        """Write both stand-ins into ``directory`` (NVML without a driver until told)."""
        standins = cls(directory / "mps.log", directory / "nvml.json")
        standins.no_driver()
        write_fake(directory, standins.log)
        (directory / "pynvml.py").write_text(
            FAKE_NVML.replace("{path!r}", repr(str(standins.nvml))))
        return standins

    def gpus(self, count: int = 4, total_gb: float = 16.0, process_gb: float = 1.0) -> None:
        """NVML sees ``count`` GPUs of ``total_gb``, and each process holding ``process_gb``."""
        self.nvml.write_text(json.dumps(
            {"count": count, "total_gb": total_gb, "process_gb": process_gb}))

    def no_driver(self) -> None:
        self.nvml.write_text("")

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []
