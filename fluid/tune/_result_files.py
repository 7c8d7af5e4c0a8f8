"""Where Tune keeps a trial's result files, and from which iteration a restarted trial's
rows continue (Tune's storage layout and checkpoint bookkeeping, Ray 2.60; each checked by
``tests/tune/test_result_files.py`` on a real ``Trial``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow.fs

#: The result files Tune's default loggers keep per trial, and restore from storage on restart.
RESULT_JSON = "result.json"
PROGRESS_CSV = "progress.csv"


def restart_iteration(trial: Any) -> int | None:
    """The iteration a starting trial resumes after: its own checkpoint's (0: from scratch).

    ``None`` when it resumes from another trial's checkpoint (PBT's exploit): its result files
    hold its own history, which that checkpoint does not continue.

    Why: ``Trial.latest_checkpoint_result`` is the checkpoint Tune restores a trial from; its
    metrics carry ``training_iteration``, which the restored trainable counts on from.
    """
    checkpoint = getattr(trial.latest_checkpoint_result, "checkpoint", None)
    if checkpoint is not None:
        own = Path(trial.storage.trial_fs_path).as_posix().rstrip("/") + "/"
        if not Path(checkpoint.path).as_posix().startswith(own):
            return None
    return checkpoint_iteration(trial)


def checkpoint_iteration(trial: Any) -> int:
    """The iteration of the checkpoint a starting trial restores, whoever wrote it (0: none).

    Why: as ``restart_iteration``, from ``Trial.latest_checkpoint_result``.
    """
    result = trial.latest_checkpoint_result
    if getattr(result, "checkpoint", None) is None:
        return 0
    return int(result.metrics.get("training_iteration", 0) or 0)


def result_file_copies(trial: Any) -> list[tuple[str, str, Any]]:
    """Both copies of the trial's result files, as ``(name, path, filesystem)``.

    The driver's copy comes first, with ``filesystem`` ``None`` (a local path); the copy in
    storage follows, with its ``pyarrow.fs.FileSystem`` (left out when it is the same file).

    Why: Tune keeps them in the trial's driver staging directory (``Trial.local_path``) and
    uploads them to ``trial.storage.trial_fs_path`` on ``storage.storage_filesystem`` (a
    developer API); its loggers copy the stored one back when the trial restarts.
    """
    storage = trial.storage
    copies: list[tuple[str, str, Any]] = []
    for name in (RESULT_JSON, PROGRESS_CSV):
        local = os.path.join(trial.local_path, name)
        stored = Path(storage.trial_fs_path, name).as_posix()
        copies.append((name, local, None))
        fs = storage.storage_filesystem
        if not (isinstance(fs, pyarrow.fs.LocalFileSystem)
                and os.path.abspath(stored) == os.path.abspath(local)):
            copies.append((name, stored, fs))
    return copies
