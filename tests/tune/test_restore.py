"""The driver killed with SIGKILL mid-run, then restored: it completes under Fluid with every
trial's iterations reported exactly once overall."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tune.driver_script import ITERS

ROOT = Path(__file__).resolve().parents[2]


def _results(storage):
    out = {}
    for path in glob.glob(os.path.join(storage, "exp", "*", "result.json")):
        with open(path) as f:
            out[path] = [json.loads(line)["training_iteration"] for line in f if line.strip()]
    return out


@pytest.mark.slow
def test_driver_sigkill_then_restore(tmp_path):
    storage = str(tmp_path)
    cmd = [sys.executable, "-m", "tests.tune.driver_script", storage]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    fresh = subprocess.Popen(cmd + ["fresh"], cwd=ROOT, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    # Kill once some progress has reached storage but the experiment is far from done.
    while time.monotonic() < deadline:
        done = _results(storage)
        if sum(len(v) for v in done.values()) >= 6:
            break
        time.sleep(0.5)
    assert fresh.poll() is None, "the experiment finished before it could be killed"
    os.killpg(fresh.pid, signal.SIGKILL)  # the driver and the Ray processes it started
    fresh.wait()
    before = _results(storage)
    assert any(len(v) < ITERS for v in before.values())

    restored = subprocess.run(cmd + ["restore"], cwd=ROOT, env=env, timeout=300,
                              capture_output=True, text=True)
    assert restored.returncode == 0, restored.stderr[-3000:]
    after = _results(storage)
    assert len(after) == 4
    for path, iterations in after.items():
        assert iterations == list(range(1, ITERS + 1)), (path, iterations)
