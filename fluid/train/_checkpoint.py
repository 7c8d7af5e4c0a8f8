"""Checkpoints that hold everything a resize needs, and their transport between nodes."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray.tune import Checkpoint

from fluid.train._context import _get_context_or_none
from fluid.train._data import ElasticDataLoader, unwrap_model

STATE_FILE = "fluid_state.pt"
_FORMAT = 1
_RESERVED = frozenset({"model", "optimizer", "rng", "world_size", "fluid_format"})

# Directories made by save_checkpoint: report() deletes them once Tune has copied them to
# storage. Directories the user made are never deleted.
_owned_dirs: set[str] = set()
_owned_lock = threading.Lock()
# Where this process writes checkpoint directories. A paused trial's process is killed
# while blocked in report(), before it can delete its last directory, so each trial
# keeps its files under one root that the next start of the trial clears.
_root: str | None = None


def _use_checkpoint_root(path: str | None) -> None:
    """Switch to a fresh root, or with None remove the current one.

    ``path`` is ``<trial dir>/<role>``; each process writes under ``<role>-<pid>`` so that an
    old process of the same trial, still exiting after a resize, never deletes the new one's
    files. Roots of processes that no longer run are cleared here (a paused trial's process
    is killed before it can clean up).
    """
    global _root
    if path is None and _root is not None:
        shutil.rmtree(_root, ignore_errors=True)
        with contextlib.suppress(OSError):  # the per-trial parent, once its roles are gone
            os.rmdir(os.path.dirname(_root))
    if path is not None:
        parent, role = os.path.split(path)
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                head, _, pid = name.rpartition("-")
                if head == role and pid.isdigit() and not _alive(int(pid)):
                    shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        path = f"{path}-{os.getpid()}"
        os.makedirs(path, exist_ok=True)
    _root = path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                             "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        # The number of visible GPUs can change with the world size; restore what fits.
        for i, s in enumerate(cuda[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s, i)


def save_checkpoint(*, model: torch.nn.Module | None = None,
                    optimizer: torch.optim.Optimizer | None = None,
                    loader: ElasticDataLoader | None = None, **extra: Any) -> Checkpoint | None:
    """Write a resumable checkpoint of this rank's training state.

    Saves the model (DDP unwrapped, so it loads at any width), the optimizer, the
    loader position (epoch, global steps done in it), RNG states (torch, CUDA, numpy,
    python) and any extra picklable values. In a gang only rank 0 writes (DDP keeps all
    replicas equal); other ranks get ``None``, which `report` accepts.

    Args:
        model: the model (plain or as returned by `prepare_model`).
        optimizer: its optimizer.
        loader: the `ElasticDataLoader` whose position to save. Without it you may pass
            ``epoch=``/``batch=`` yourself.
        **extra: more state, e.g. ``scheduler=sched.state_dict()``.

    Example:
        >>> ckpt = fluid.train.save_checkpoint(model=model, optimizer=opt, loader=loader)
        >>> fluid.train.report({"loss": loss}, checkpoint=ckpt)     # doctest: +SKIP
    """
    bad = _RESERVED.intersection(extra)
    if bad:
        raise ValueError(f"save_checkpoint(): extra keys {sorted(bad)} are reserved")
    if loader is not None:
        if not isinstance(loader, ElasticDataLoader):
            raise TypeError("save_checkpoint(loader=...) must come from "
                            f"fluid.train.prepare_data_loader, got {type(loader)!r}")
        if "epoch" in extra or "batch" in extra:
            raise ValueError("save_checkpoint(): pass either loader= or epoch=/batch=, not both")
    if model is not None and not isinstance(model, torch.nn.Module):
        raise TypeError(f"save_checkpoint(model=...) must be a torch.nn.Module, got {type(model)!r}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("save_checkpoint(optimizer=...) must be a torch.optim.Optimizer, "
                        f"got {type(optimizer)!r}")
    ctx = _get_context_or_none()
    if ctx is not None and ctx.rank != 0:
        return None
    state: dict[str, Any] = {"fluid_format": _FORMAT,
                             "world_size": ctx.world_size if ctx is not None else 1,
                             "rng": _rng_state(), **extra}
    if model is not None:
        state["model"] = unwrap_model(model).state_dict()
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    if loader is not None:
        state["epoch"] = loader.epoch
        state["batch"] = loader.batch
    path = tempfile.mkdtemp(prefix="fluid-ckpt-", dir=_root)
    torch.save(state, os.path.join(path, STATE_FILE))
    with _owned_lock:
        _owned_dirs.add(path)
    return Checkpoint.from_directory(path)


def _release(checkpoint: Checkpoint | None) -> None:
    """Delete a directory made by save_checkpoint once it has been handed over."""
    if checkpoint is None:
        return
    path = checkpoint.path
    with _owned_lock:
        owned = path in _owned_dirs
        _owned_dirs.discard(path)
    if owned:
        shutil.rmtree(path, ignore_errors=True)


def load_checkpoint(*, model: torch.nn.Module | None = None,
                    optimizer: torch.optim.Optimizer | None = None,
                    loader: ElasticDataLoader | None = None) -> dict[str, Any] | None:
    """Restore the latest checkpoint of this trial, or return None on a fresh start.

    Restores RNG states always, and model / optimizer / loader position when given.
    Returns the saved dict (``model``, ``optimizer``, ``epoch``, ``batch``,
    ``world_size`` -- the width it was saved at -- and the extra keys).

    Example:
        >>> state = fluid.train.load_checkpoint(model=model, optimizer=opt, loader=loader)
        >>> start_epoch = state["epoch"] if state else 0            # doctest: +SKIP
    """
    from fluid.train._api import get_checkpoint

    ckpt = get_checkpoint()
    if ckpt is None:
        return None
    with ckpt.as_directory() as d:
        file = Path(d) / STATE_FILE
        if not file.exists():
            raise ValueError(f"load_checkpoint(): checkpoint {ckpt.path} has no {STATE_FILE}; it "
                             "was not written by fluid.train.save_checkpoint")
        # weights_only=False: RNG states hold numpy arrays and python tuples; the file is
        # this trial's own checkpoint, not untrusted input.
        state = torch.load(file, map_location="cpu", weights_only=False)
    if model is not None:
        if "model" not in state:
            raise ValueError("load_checkpoint(model=...): the checkpoint holds no model state")
        unwrap_model(model).load_state_dict(state["model"])
    if optimizer is not None:
        if "optimizer" not in state:
            raise ValueError("load_checkpoint(optimizer=...): the checkpoint holds no optimizer")
        optimizer.load_state_dict(state["optimizer"])
    if loader is not None:
        if "epoch" not in state:
            raise ValueError("load_checkpoint(loader=...): the checkpoint holds no loader position")
        loader.set_epoch(state["epoch"], state.get("batch", 0))
    _set_rng_state(state["rng"])
    return state


def _pack_dir(path: str) -> dict[str, bytes]:
    """Read a checkpoint directory into memory so it can cross nodes via the object store."""
    root = Path(path)
    return {f.relative_to(root).as_posix(): f.read_bytes()
            for f in sorted(root.rglob("*")) if f.is_file()}


def _unpack_dir(files: dict[str, bytes], prefix: str = "fluid-ckpt-") -> str:
    path = tempfile.mkdtemp(prefix=prefix, dir=_root)
    for rel, data in files.items():
        target = Path(path) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return path


def _pack_checkpoint(checkpoint: Checkpoint) -> dict[str, bytes]:
    with checkpoint.as_directory() as d:
        return _pack_dir(d)
