"""prepare_data_loader / prepare_model without Ray: sharding, positions, errors."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

import fluid.train as ft
from fluid.train._context import TrainContext, _set_context


@pytest.fixture
def as_rank():
    """Pretend to be `rank` of `world_size` (CPU, no process group)."""

    def make(rank: int = 0, world_size: int = 1) -> None:
        _set_context(
            TrainContext(
                rank=rank,
                world_size=world_size,
                local_rank=rank,
                local_world_size=world_size,
                node_rank=0,
                device=torch.device("cpu"),
                gpu_share=0.0,
                backend=None,
            )
        )

    yield make
    _set_context(None)


def _ds(n: int) -> TensorDataset:
    return TensorDataset(torch.arange(n))


def _steps(
    world_size: int,
    n: int = 50,
    batch: int = 8,
    shuffle: bool = True,
    epoch: int = 0,
    start: int = 0,
    drop_last: bool = False,
    as_rank=None,
) -> list[list[int]]:
    """Samples of each global step, gathered over all ranks."""
    per_rank = []
    for r in range(world_size):
        as_rank(r, world_size)
        loader = ft.prepare_data_loader(
            DataLoader(_ds(n), batch_size=batch, shuffle=shuffle, drop_last=drop_last), seed=7
        )
        loader.set_epoch(epoch, start)
        per_rank.append([b[0].tolist() for b in loader])
    assert len({len(p) for p in per_rank}) == 1, "every rank takes the same number of steps"
    return [sorted(sum((p[k] for p in per_rank), [])) for k in range(len(per_rank[0]))]


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_a_global_step_covers_the_same_samples_at_any_width(world_size, as_rank):
    one = _steps(1, as_rank=as_rank)
    many = _steps(world_size, as_rank=as_rank)
    assert len(one) == len(many) == 7  # ceil(50 / 8)
    for k in range(6):
        assert many[k] == one[k]
    # The short last batch (2 samples) is padded so each of the ranks gets one.
    assert set(many[-1]) >= set(one[-1]) and len(many[-1]) == max(2, world_size)


def test_each_epoch_is_a_new_permutation_covering_every_sample(as_rank):
    e0 = _steps(2, epoch=0, as_rank=as_rank)
    e1 = _steps(2, epoch=1, as_rank=as_rank)
    assert sorted(sum(e0, [])) == list(range(50)) == sorted(sum(e1, []))
    assert e0 != e1


def test_no_shuffle_keeps_order_and_drop_last_drops(as_rank):
    steps = _steps(2, n=20, batch=8, shuffle=False, drop_last=True, as_rank=as_rank)
    assert steps == [list(range(8)), list(range(8, 16))]


def test_resume_mid_epoch_skips_done_steps_at_new_width(as_rank):
    full = _steps(1, as_rank=as_rank)
    rest = _steps(2, start=3, as_rank=as_rank)
    assert rest == full[3:]


def test_uneven_split_keeps_global_batch(as_rank):
    as_rank(0, 3)
    sizes0 = [len(b[0]) for b in ft.prepare_data_loader(DataLoader(_ds(40), batch_size=8))]
    as_rank(2, 3)
    sizes2 = [len(b[0]) for b in ft.prepare_data_loader(DataLoader(_ds(40), batch_size=8))]
    assert sizes0 == [3] * 5 and sizes2 == [2] * 5  # 3 + 3 + 2 = 8 per step


def test_loader_tracks_position_and_advances_epoch(as_rank):
    as_rank(0, 1)
    loader = ft.prepare_data_loader(DataLoader(_ds(32), batch_size=8, shuffle=True))
    assert (loader.epoch, loader.batch, len(loader), loader.steps_per_epoch) == (0, 0, 4, 4)
    it = iter(loader)
    next(it)
    next(it)
    assert (loader.epoch, loader.batch) == (0, 2)
    assert len(list(it)) == 2
    assert (loader.epoch, loader.batch) == (1, 0)
    loader.set_epoch(5, 3)
    assert len(loader) == 1 and len(list(loader)) == 1 and loader.epoch == 6


def test_bad_loaders_are_rejected_with_clear_errors(as_rank):
    as_rank(0, 4)
    with pytest.raises(ValueError, match="global batch size 2 is smaller than the world size 4"):
        ft.prepare_data_loader(DataLoader(_ds(10), batch_size=2))
    with pytest.raises(TypeError, match="loader"):
        ft.prepare_data_loader([1, 2, 3])  # type: ignore[arg-type]
    sampler = torch.utils.data.SubsetRandomSampler(range(5))
    with pytest.raises(ValueError, match="sampler=SubsetRandomSampler"):
        ft.prepare_data_loader(DataLoader(_ds(10), batch_size=4, sampler=sampler))

    class Stream(IterableDataset):
        def __iter__(self):
            yield from range(3)

    with pytest.raises(ValueError, match="iterable-style"):
        ft.prepare_data_loader(DataLoader(Stream(), batch_size=4))
    loader = ft.prepare_data_loader(DataLoader(_ds(10), batch_size=4))
    with pytest.raises(ValueError, match="start_batch"):
        loader.set_epoch(0, -1)


def test_prepare_model_at_world_size_one_is_plain(as_rank):
    as_rank(0, 1)
    m = torch.nn.Linear(2, 2)
    assert ft.prepare_model(m) is m
    with pytest.raises(TypeError, match="model"):
        ft.prepare_model("net")  # type: ignore[arg-type]


def test_context_outside_a_loop_is_an_error():
    with pytest.raises(RuntimeError, match="outside a training loop"):
        ft.get_context()
