"""One node's daemon without Tune: what ``MPSManager`` and ``MPSDaemon`` do with a binary
that is missing, with another user's daemon, and the thread percentages they hand out
(stand-ins, ``standins``)."""

from __future__ import annotations

import os

import pytest

from fluid.gpu import mps


def test_missing_binary_is_reported(fake_mps, tmp_path):
    manager = mps.MPSManager(binary="no-such-mps-control", require_gpu=False, root=str(tmp_path))
    (st,) = manager.start().values()
    assert st["reason"] == "no-such-mps-control is not on PATH"
    assert manager.env_for_share(0.5) == {}
    manager.stop()


def test_thread_percentage_values():
    assert [mps.thread_percentage(s) for s in (0.01, 0.25, 1 / 3, 0.5, 1.0, 2.0)] == [
        1,
        25,
        34,
        50,
        100,
        100,
    ]
    with pytest.raises(ValueError, match="share"):
        mps.thread_percentage(0)
    with pytest.raises(ValueError, match="binary"):
        mps.MPSManager(binary="")


def test_a_daemon_of_another_user_is_named_and_not_used(fake_mps, tmp_path, monkeypatch):
    from fluid.gpu import mps_client

    system = tmp_path / "nvidia-mps"
    assert fake_mps.run(system, "-d") == 0
    owner = os.stat(system / "control").st_uid
    if owner == 0:  # root's daemon is the administrators': make its pipe another user's
        os.chown(system / "control", 4321, 4321)
    else:  # this process becomes another (non-root) user than the pipe's owner
        monkeypatch.setattr(mps_client.os, "getuid", lambda: owner + 1)
    daemon = mps.MPSDaemon("n", str(tmp_path / "own"), mps.CONTROL_BINARY, False, False,
                           system_pipe_dir=str(system))
    try:
        status = daemon.start()
        assert status["running"] and status["pipe_dir"] == str(tmp_path / "own" / "pipe")
        assert any("uid" in n and "not used" in n for n in status["notes"]), status["notes"]
        assert daemon.stop()["running"] is False and not (tmp_path / "own" / "pipe").exists()
    finally:
        fake_mps.run(system, stdin="quit")
