"""One cluster, several experiments: the daemon Fluid starts on a node is shared by every
experiment there and stopped by the last one; one left by a driver killed with SIGKILL is
adopted by the next experiment. Drivers of their own run on this module's Ray instance, as
scripts do on a cluster started with ``ray start --head`` (stand-ins, ``standins``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import ray

#: An experiment under FluidExecutor(), no options: ``n`` trials at half a GPU each, two at
#: once, of the user module's trainable; each result's MPS evidence appended to a file.
DRIVER = """
import json, sys
import ray
from ray import tune
from fluid import FluidExecutor
import fluid_user_trainables as user

address, storage, rows, n, iters, hold = sys.argv[1:7]
KEYS = ("fluid_mps", "fluid_mps_reason", "answers", "answers_at_import", "pipe_at_import",
        "at", "i")

class Rows(tune.Callback):
    def on_trial_result(self, iteration, trials, trial, result, **info):
        with open(rows, "a") as f:
            f.write(json.dumps({k: result.get(k) for k in KEYS}) + "\\n")

ray.init(address=address, log_to_driver=False)
tune.run(tune.with_resources(user.trainable, {"cpu": 0.25, "gpu": 0.5}),
         config={"n": tune.grid_search(list(range(int(n)))), "iters": int(iters),
                 "hold": hold or None},
         scheduler=FluidExecutor(), storage_path=storage, callbacks=[Rows()],
         max_concurrent_trials=2, verbose=0)
"""


def _driver(tmp: Path, name: str, n: int, iters: int, hold: Path | None = None):
    """A driver process, and the file its rows go to."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    rows = tmp / f"{name}.jsonl"
    args = [ray.get_runtime_context().gcs_address, str(tmp / name), str(rows), str(n),
            str(iters), str(hold or "")]
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return proc, rows


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _wait_for_rows(proc, rows: Path, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while not _rows(rows):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no result from the driver: {proc.communicate()[0][-3000:]}")
        time.sleep(0.2)


def _ended(proc, limit_s: float = 180) -> str:
    try:
        out, _ = proc.communicate(timeout=limit_s)
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-3000:]
    return out


def _clients(rows: list[dict]) -> bool:
    """Every row from a process that was a client of a daemon answering, from its import."""
    return bool(rows) and all(r["fluid_mps"] and r["answers"] and r["answers_at_import"]
                              for r in rows)


def test_a_daemon_left_by_a_killed_driver_is_adopted_by_the_next_experiment(
        fake_mps, tmp_path):
    fake_mps.log.write_text("")
    fake_mps.gpus()
    try:
        first, first_rows = _driver(tmp_path, "killed", n=2, iters=2, hold=tmp_path / "never")
        _wait_for_rows(first, first_rows)
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert len(fake_mps.daemons()) == 1  # the daemon outlives its driver
        second, rows = _driver(tmp_path, "next", n=2, iters=2)
        _ended(second)
    finally:
        fake_mps.no_driver()
    assert _clients(_rows(rows)) and len(_rows(rows)) == 4
    assert [c.split()[0] for c in fake_mps.commands()] == ["start", "cmd"]  # adopted, stopped
    assert fake_mps.daemons() == []
    pipe = fake_mps.commands()[0].split()[1].removeprefix("pipe=")
    assert not os.path.exists(pipe) and not os.path.exists(os.path.dirname(pipe) + "/log")


def test_two_experiments_at_once_share_the_daemon_until_the_last_one_ends(
        fake_mps, tmp_path):
    fake_mps.log.write_text("")
    fake_mps.gpus()
    hold = tmp_path / "short-ended"
    try:
        long_, long_rows = _driver(tmp_path, "long", n=4, iters=2, hold=hold)
        _wait_for_rows(long_, long_rows)
        short, short_rows = _driver(tmp_path, "short", n=2, iters=1)
        _ended(short)
        short_end = time.time()
        assert fake_mps.daemons(), "the long experiment still uses the daemon"
        hold.touch()  # the long one's trials go on, and its last two start now
        _ended(long_)
    finally:
        fake_mps.no_driver()
    after = [r for r in _rows(long_rows) if r["at"] > short_end]
    assert len(after) >= 4 and _clients(after)  # its later trials' rows: still clients
    assert _clients(_rows(long_rows)) and _clients(_rows(short_rows))
    assert [c.split()[0] for c in fake_mps.commands()] == ["start", "cmd"]  # one start, one quit
    assert fake_mps.daemons() == []
