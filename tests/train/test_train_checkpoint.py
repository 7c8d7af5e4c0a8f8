"""save_checkpoint / load_checkpoint / report without Ray workers."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch
from ray.tune import Checkpoint
from torch.utils.data import DataLoader, TensorDataset

import fluid.train as ft
from fluid.train import _checkpoint as ck
from fluid.train._context import TrainContext, _set_context


class FakeSession:
    def __init__(self) -> None:
        self.reports: list[tuple[dict, Checkpoint | None]] = []
        self.restore: Checkpoint | None = None

    def report(self, metrics, checkpoint):
        self.reports.append((metrics, checkpoint))

    def get_checkpoint(self):
        return self.restore


@pytest.fixture
def session(tmp_path):
    s = FakeSession()
    ck._use_checkpoint_root(str(tmp_path / "ckpts"))

    def become(rank: int = 0, world_size: int = 1) -> FakeSession:
        _set_context(
            TrainContext(rank, world_size, rank, world_size, 0, torch.device("cpu"), 0.0, None, s)
        )
        return s

    become()
    yield become
    _set_context(None)
    ck._use_checkpoint_root(None)


def _setup():
    torch.manual_seed(3)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    loader = ft.prepare_data_loader(DataLoader(TensorDataset(torch.randn(20, 3)), batch_size=4))
    return model, opt, loader


def test_roundtrip_restores_model_optimizer_position_and_rng(session):
    s = session()
    model, opt, loader = _setup()
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
    it = iter(loader)
    next(it), next(it), next(it)
    random.seed(11)
    np.random.seed(11)
    torch.manual_seed(11)
    saved = ft.save_checkpoint(model=model, optimizer=opt, loader=loader, iteration=7)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    s.restore = saved

    model2, opt2, loader2 = _setup()
    torch.manual_seed(999)
    state = ft.load_checkpoint(model=model2, optimizer=opt2, loader=loader2)
    assert state is not None and state["iteration"] == 7 and state["world_size"] == 1
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)
    assert opt2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    assert (loader2.epoch, loader2.batch) == (0, 3)


def test_fresh_start_returns_none(session):
    session()
    assert ft.load_checkpoint() is None


def test_report_releases_own_checkpoint_dirs_only(session, tmp_path):
    s = session()
    mine = ft.save_checkpoint(model=torch.nn.Linear(1, 1))
    theirs_dir = tmp_path / "user"
    theirs_dir.mkdir()
    theirs = Checkpoint.from_directory(str(theirs_dir))
    ft.report({"loss": torch.tensor(0.5)}, checkpoint=mine)
    assert s.reports[-1][0] == {"loss": 0.5}, "0-d tensors are turned into numbers"
    ck._release(mine)
    ck._release(theirs)
    assert not os.path.exists(mine.path)
    assert theirs_dir.exists()


def test_only_rank_zero_writes(session):
    session(rank=1, world_size=2)
    assert ft.save_checkpoint(model=torch.nn.Linear(1, 1)) is None


def test_bad_arguments_name_the_parameter(session):
    session()
    with pytest.raises(ValueError, match="reserved"):
        ft.save_checkpoint(rng=1)
    with pytest.raises(TypeError, match="model"):
        ft.save_checkpoint(model={"w": 1})
    with pytest.raises(TypeError, match="optimizer"):
        ft.save_checkpoint(optimizer=1)
    with pytest.raises(TypeError, match="loader"):
        ft.save_checkpoint(loader=[1])
    with pytest.raises(TypeError, match="metrics"):
        ft.report([1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        ft.report({"v": torch.ones(3)})
    with pytest.raises(TypeError, match="checkpoint"):
        ft.report({}, checkpoint="/tmp/x")  # type: ignore[arg-type]


def test_foreign_checkpoint_is_a_clear_error(session, tmp_path):
    s = session()
    s.restore = Checkpoint.from_directory(str(tmp_path))
    with pytest.raises(ValueError, match="not written by fluid.train.save_checkpoint"):
        ft.load_checkpoint()


def test_pack_unpack_roundtrip(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.bin").write_bytes(b"\x00\x01")
    (tmp_path / "c.txt").write_text("hi")
    files = ck._pack_dir(str(tmp_path))
    out = ck._unpack_dir(files)
    assert ck._pack_dir(out) == files == {"a/b.bin": b"\x00\x01", "c.txt": b"hi"}
