"""A user's trainable module, copied onto every worker's path as ``fluid_user_trainables``
(``StandIns.create``): it reads the MPS settings when Ray imports it, before any trial code,
as a module that touches CUDA at import would have CUDA read them."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from fluid.gpu.mps_client import ask

_PIPE = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
#: What the module saw at import: the daemon directory it was given, and whether one answered.
AT_IMPORT = {"pipe_at_import": os.path.realpath(_PIPE) if _PIPE else "",
             "answers_at_import": bool(_PIPE) and ask(_PIPE, "get_server_list")[0]}
if os.environ.get("FLUID_TEST_LOAD_CUDA"):  # stands for a module that starts CUDA at import
    import ctypes

    ctypes.CDLL(os.environ["FLUID_TEST_LOAD_CUDA"])


def trainable(config: dict[str, Any]) -> None:
    """``iters`` results, each saying whether the daemon of this process's settings answers
    now; after the first, waits for the file ``hold`` (if given) to exist."""
    from ray import tune

    for i in range(int(config.get("iters", 1))):
        pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
        tune.report({**AT_IMPORT, "answers": bool(pipe) and ask(pipe, "get_server_list")[0],
                     "pid": os.getpid(), "at": time.time(), "i": i})
        deadline = time.monotonic() + 120
        while config.get("hold") and not Path(config["hold"]).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{config['hold']} never appeared")
            time.sleep(0.1)
