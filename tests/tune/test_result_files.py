"""Where Tune keeps a trial's result files and the iteration a restart resumes after, read
from a real ``Trial`` (no Ray started): a Ray release that moves either fails here."""

from __future__ import annotations

import os
from pathlib import Path

from fluid.tune import _ray_compat as compat
from fluid.tune._result_files import restart_iteration, result_file_copies


def test_a_real_trials_result_files_and_restart_iteration(tmp_path, monkeypatch):
    from ray.tune import Checkpoint
    from ray.tune.experiment import Trial

    # The driver's staging directory lives in Ray's session directory (no Ray started here).
    monkeypatch.setattr("ray.train._internal.storage._get_ray_train_session_dir",
                        lambda: str(tmp_path / "session"))

    storage = compat.StorageContext(storage_path=str(tmp_path), experiment_dir_name="exp",
                                    trial_dir_name="t")
    trial = Trial("__fake", storage=storage, stub=True)
    assert restart_iteration(trial) == 0  # no checkpoint: from scratch
    own = Checkpoint(Path(storage.trial_fs_path, "checkpoint_000002").as_posix())
    trial.run_metadata.checkpoint_manager._latest_checkpoint_result = compat._TrainingResult(
        checkpoint=own, metrics={"training_iteration": 2})
    assert restart_iteration(trial) == 2
    donor = Checkpoint(str(tmp_path / "exp" / "other" / "checkpoint_000001"))
    trial.run_metadata.checkpoint_manager._latest_checkpoint_result = compat._TrainingResult(
        checkpoint=donor, metrics={"training_iteration": 1})
    assert restart_iteration(trial) is None  # PBT's exploit: not its own history
    copies = result_file_copies(trial)
    assert [(name, fs is None) for name, _, fs in copies] == [
        ("result.json", True), ("result.json", False),
        ("progress.csv", True), ("progress.csv", False)]
    assert copies[0][1] == os.path.join(trial.local_path, "result.json")
    assert copies[1][1] == Path(storage.trial_fs_path, "result.json").as_posix()
