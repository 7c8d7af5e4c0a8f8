"""Trainables of Ray Tune's actor-reuse tests (``python/ray/tune/tests/test_actor_reuse.py``),
as class and function trainables: each result says how often the actor was reset for another
trial (``num_resets``), and a trial fails, sleeps or prints where its config says so."""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ray import tune

logger = logging.getLogger("ray.tune")

#: Function trainables started in this process (a reused actor runs the next trial's function).
_STARTS = {"n": 0}


def _step(config: dict[str, Any], it: int, num_resets: int) -> dict[str, Any]:
    """One iteration's side effects (prints, failure, sleep) and its result."""
    message = config.get("message")
    if message:
        print(f"PRINT_STDOUT: {message}")
        print(f"PRINT_STDERR: {message}", file=sys.stderr)
        logger.info("LOG_STDERR: %s", message)
    if config.get("fail"):
        raise RuntimeError("Failing")
    time.sleep(float(config.get("sleep", 0)))
    return {"id": config.get("id", 0), "num_resets": num_resets, "done": it > 1, "iter": it}


class ResettableClass(tune.Trainable):
    """Two iterations; ``reset_config`` counts resets (refused with ``fake_reset_not_supported``)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.num_resets, self.iter = 0, 0

    def step(self) -> dict[str, Any]:
        self.iter += 1
        return _step(self.config, self.iter, self.num_resets)

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"iter": self.iter}

    def load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.iter = checkpoint["iter"]

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        if "fake_reset_not_supported" in self.config:
            return False
        self.num_resets += 1
        self.iter = 0
        return True

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> Any:
        return config.get("required_resources")


def resettable_function(config: dict[str, Any]) -> None:
    """The function form: two reports with a checkpoint each, resumed from the last one; its
    resets are the functions this process started before it."""
    _STARTS["n"] += 1
    num_resets = _STARTS["n"] - 1
    it = 0
    if (checkpoint := tune.get_checkpoint()) is not None:
        with checkpoint.as_directory() as d:
            it = json.loads(Path(d, "state.json").read_text())["iter"]
    while it < 2:
        it += 1
        result = _step(config, it, num_resets)
        d = tempfile.mkdtemp()
        Path(d, "state.json").write_text(json.dumps({"iter": it}))
        tune.report(result, checkpoint=tune.Checkpoint.from_directory(d))
