"""Plain Tune and Fluid run at once, each in a process of its own, so that whatever else
loads the machine (the other xdist worker, a neighbour's job) loads both alike: their Ray
clusters are separate, and a wall-time comparison of two runs one after the other on 2 shared
cores measures the load of each moment as much as the runs."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_at_once(commands: dict[str, tuple[list[str], Path]],
                timeout_s: float) -> dict[str, tuple[int, str]]:
    """Start ``python ARGS`` in directory ``CWD`` for every ``name: (ARGS, CWD)`` at once and
    wait for all; returns ``name: (exit status, output)``. A process still running
    ``timeout_s`` after the start is killed (its status then is negative, its output says so).

    Each process writes its output to a file of its own: a pipe read only once the process
    before it ended would block the later ones as soon as their output filled it (64 KiB),
    and the more verbose run of a pair would wait for the other."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    # A bare ray.init() joins the cluster named in RAY_ADDRESS or in
    # /tmp/ray/ray_current_cluster (written by ray.cluster_utils.Cluster in another test, on
    # another xdist worker, possibly gone by now): "local" makes each start its own.
    env["RAY_ADDRESS"] = "local"
    with ExitStack() as files:
        logs = {name: files.enter_context(tempfile.TemporaryFile("w+")) for name in commands}
        procs = {name: subprocess.Popen([sys.executable, *args], cwd=cwd, env=env,
                                        stdout=logs[name], stderr=subprocess.STDOUT, text=True)
                 for name, (args, cwd) in commands.items()}
        deadline = time.monotonic() + timeout_s
        done = {}
        for name, proc in procs.items():
            killed = ""
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                killed = f"\n(killed after {timeout_s:g} s)"
            logs[name].seek(0)
            done[name] = (proc.returncode, logs[name].read() + killed)
    return done
