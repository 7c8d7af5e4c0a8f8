"""The three tasks: models from sampled configs, smoke training, metrics, FLOPs, IS classifier."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.tasks import TASKS, Task, count_flops_and_params, dcgan, get_task, inception, wlm


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    # When the 2 cores are shared with other jobs, OpenMP barriers with 2 threads slow these tiny
    # models down ~8x.  Restored afterwards: the setting is process-wide.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def smoke_data() -> dict[str, tuple[Any, Any]]:
    return {name: task.build_datasets(None, smoke=True) for name, task in TASKS.items()}


@pytest.fixture(scope="module")
def smoke_classifier(tmp_path_factory: pytest.TempPathFactory) -> torch.nn.Module:
    cache = tmp_path_factory.mktemp("is_cache")
    return inception.get_mnist_classifier(None, smoke=True, cache_dir=cache)


def run(
    task: Task, data: tuple[Any, Any], config: dict[str, Any], iterations: int, **eval_kw: Any
) -> list[dict]:
    """Smoke-train ``iterations`` iterations; returns merged train+eval metrics per iteration."""
    train_ds, val_ds = data
    config = task.smoke_config({**config, **task.data_config(train_ds)})
    torch.manual_seed(0)
    model = task.build_model(config)
    optimizer = task.build_optimizer(model, config)
    train_loader = task.build_loader(train_ds, config, train=True)
    val_loader = task.build_loader(val_ds, config, train=False)
    history = []
    for _ in range(iterations):
        metrics = task.train_one_iteration(model, optimizer, train_loader, "cpu", config)
        metrics |= task.evaluate(model, val_loader, "cpu", config, **eval_kw)
        history.append(metrics)
    return history


def test_registry_objectives_and_search_spaces() -> None:
    assert set(TASKS) == {"cifar10", "wlm", "dcgan"}
    expected = {
        "cifar10": ("val_accuracy", "max", 0.90, 7),
        "wlm": ("val_perplexity", "min", 140.0, 10),
        "dcgan": ("inception_score", "max", 5.2, 2),
    }
    for name, (metric, mode, target, n_hparams) in expected.items():
        task = get_task(name)
        assert (task.metric, task.mode, task.target) == (metric, mode, target)
        assert len(task.search_space) == n_hparams
    assert TASKS["cifar10"].reached_target(0.91) and not TASKS["cifar10"].reached_target(0.89)
    assert TASKS["wlm"].reached_target(120.0) and not TASKS["wlm"].reached_target(150.0)
    with pytest.raises(KeyError, match="known"):
        get_task("imagenet")


def test_sample_config_is_seeded_and_in_space() -> None:
    task = TASKS["wlm"]
    a, b = task.sample_config(7), task.sample_config(7)
    assert a == b and a != task.sample_config(8)
    assert a["cell"] in wlm.CELLS and 1.0 <= a["lr"] <= 40.0 and isinstance(a["tied"], bool)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_sampled_configs_build_and_train(
    name: str, smoke_data: dict, smoke_classifier: torch.nn.Module
) -> None:
    task = TASKS[name]
    extra = {"classifier": smoke_classifier} if name == "dcgan" else {}
    for seed in (1, 2, 3):
        config = task.sample_config(seed)
        full = task.build_model(config)  # the real-size model builds from every sampled config
        assert sum(p.numel() for p in full.parameters()) > 100_000
        history = run(task, smoke_data[name], config, iterations=2, **extra)
        for metrics in history:
            assert task.metric in metrics and "train_loss" in metrics
            bad = {k: v for k, v in metrics.items() if not math.isfinite(v)}
            assert not bad, f"{name} seed {seed} config {config}: non-finite {bad}"
        assert history[0]["num_samples"] > 0


@pytest.mark.parametrize(
    ("name", "loss_key"), [("cifar10", "train_loss"), ("wlm", "train_loss"), ("dcgan", "d_loss")]
)
def test_default_config_learns_on_smoke_data(
    name: str, loss_key: str, smoke_data: dict, smoke_classifier: torch.nn.Module
) -> None:
    task = TASKS[name]
    extra = {"classifier": smoke_classifier} if name == "dcgan" else {}
    first, second = run(task, smoke_data[name], task.default_config, iterations=2, **extra)
    assert second[loss_key] < first[loss_key] - 0.05, (first, second)
    if name == "cifar10":
        assert second["val_accuracy"] > 0.2  # chance is 0.1
    if name == "wlm":
        # Uniform guessing over the ~200-word smoke vocabulary would give perplexity ~200.
        assert second["val_perplexity"] < 150


def test_wlm_divergence_reports_infinite_perplexity(smoke_data: dict) -> None:
    # An unbounded ReLU RNN with an absurd step size: activations overflow within an epoch.
    config = dict(wlm.DEFAULT_CONFIG, cell="RNN_RELU", lr=1e4, clip=1.0, dropout=0.0)
    metrics = run(TASKS["wlm"], smoke_data["wlm"], config, iterations=1)[0]
    assert metrics["val_perplexity"] == math.inf  # inf (worst for mode=min), never NaN


def test_wlm_model_semantics() -> None:
    base = dict(wlm.DEFAULT_CONFIG, vocab_size=50, emsize=16, nhid=16, nlayers=2)
    for cell in wlm.CELLS:
        model = wlm.build_model({**base, "cell": cell})
        assert model(torch.randint(0, 50, (3, 7))).shape == (3, 7, 50)
    tied = wlm.build_model({**base, "tied": True})
    assert tied.decoder.weight is tied.encoder.weight and tied.proj is None
    proj = wlm.build_model({**base, "tied": True, "nhid": 24})
    assert proj.decoder.weight is proj.encoder.weight and proj.proj.in_features == 24
    untied = wlm.build_model({**base, "tied": False})
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(untied) - n(tied) == 50 * 16  # the shared matrix is counted once


def test_dcgan_half_steps_update_only_their_network() -> None:
    config = dcgan.smoke_config(dcgan.DEFAULT_CONFIG) | {"lr_g": 1e-3, "lr_d": 3e-4}
    torch.manual_seed(0)
    snapshot = dcgan.build_model(config).state_dict()
    real = torch.rand(8, 1, 32, 32) * 2 - 1

    def fresh() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        model = dcgan.build_model(config)
        model.load_state_dict(snapshot)
        return model, dcgan.build_optimizer(model, config)

    full, opt = fresh()
    assert [g["lr"] for g in opt.param_groups] == [1e-3, 3e-4]
    torch.manual_seed(2)
    dcgan.train_one_iteration(full, opt, [(real, torch.zeros(8))], "cpu", config)

    # Reference: the discriminator half-step alone, on the same noise.
    ref, ref_opt = fresh()
    torch.manual_seed(2)
    fake = ref.generator(torch.randn(8, config["nz"], 1, 1))
    dcgan.discriminator_step(ref.discriminator, ref_opt, real, fake)
    for name, p in ref.generator.named_parameters():
        assert torch.equal(p, snapshot[f"generator.{name}"]), f"D step moved G {name}"

    ref_d = dict(ref.discriminator.named_parameters())
    for name, p in full.discriminator.named_parameters():
        assert not torch.equal(p, snapshot[f"discriminator.{name}"]), f"D {name} not trained"
        # Equal to the D-only update: the generator half-step left D's parameters alone.
        torch.testing.assert_close(p, ref_d[name], msg=f"G step moved D {name}")
    for name, p in full.generator.named_parameters():
        assert not torch.equal(p, snapshot[f"generator.{name}"]), f"G {name} not trained"


def test_inception_score_formula() -> None:
    assert inception.inception_score(torch.full((100, 10), 0.1)) == pytest.approx(1.0)
    one_hot = torch.eye(10).repeat(5, 1)
    assert inception.inception_score(one_hot) == pytest.approx(10.0, rel=1e-6)
    # Confident but all one class: no diversity -> 1.
    assert inception.inception_score(torch.eye(10)[[3] * 20]) == pytest.approx(1.0)
    # Two equally likely classes, each predicted with certainty -> 2.
    assert inception.inception_score(torch.eye(10)[[0, 1] * 10]) == pytest.approx(2.0)


def test_is_classifier_is_cached_per_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smoke_data: dict
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    calls = []
    real_train = inception.train_mnist_classifier

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_train(*args, **kwargs)

    monkeypatch.setattr(inception, "train_mnist_classifier", counting)
    first = inception.get_mnist_classifier(data_dir, smoke=True, datasets=smoke_data["dcgan"])
    path = inception.classifier_cache_path(data_dir, smoke=True)
    assert path.is_file() and path.parent == data_dir / ".fluid_cache" and len(calls) == 1
    assert first.test_accuracy > 0.9  # the smoke digits are learnable

    second = inception.get_mnist_classifier(data_dir, smoke=True)  # no datasets needed: loads
    assert len(calls) == 1
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert inception.classifier_cache_path(tmp_path / "other", smoke=True) != path
    assert inception.classifier_cache_path(data_dir, smoke=False) != path

    # The task's evaluate finds the classifier through the loader's MNISTDataset.
    train, test = dcgan.build_datasets(data_dir, smoke=True)
    assert train.root == data_dir.resolve()
    config = dcgan.smoke_config(dcgan.DEFAULT_CONFIG)
    model = dcgan.build_model(config)
    metrics = dcgan.evaluate(model, dcgan.build_loader(test, config, train=False), "cpu", config)
    assert 1.0 <= metrics["inception_score"] <= 10.0 and len(calls) == 1
    # Real smoke digits score high with it: the classifier is confident and class-balanced.
    probs = second(torch.stack([test[i][0] for i in range(len(test))])).softmax(-1)
    assert inception.inception_score(probs.detach()) > 6.0


def test_count_flops_and_params() -> None:
    cifar = TASKS["cifar10"]
    small = dict(cifar.default_config, num_filters=32, kernel_size=3, dense_width=256)
    flops, params = count_flops_and_params("cifar10", small)
    model = cifar.build_model(small)
    assert params == sum(p.numel() for p in model.parameters())
    # Forward conv1 alone is 2*32*3*9*32*32 FLOPs; training (fwd+bwd) is ~3x the forward total.
    assert flops > 3 * 2 * 32 * 3 * 9 * 32 * 32
    bigger, _ = count_flops_and_params(cifar, dict(small, num_filters=64))
    assert 3.0 < bigger / flops < 4.5  # conv cost grows ~quadratically in width

    # WLM: decoder + LSTM matmuls dominate and are linear in bptt; LSTM (oneDNN on CPU) counted.
    cfg = dict(
        wlm.DEFAULT_CONFIG, emsize=64, nhid=64, nlayers=1, vocab_size=1000, bptt=10, tied=False
    )
    f10, p10 = count_flops_and_params("wlm", cfg)
    f20, _ = count_flops_and_params("wlm", dict(cfg, bptt=20))
    assert f20 / f10 == pytest.approx(2.0, rel=0.01)
    per_token_fwd = 2 * 64 * 1000 + 2 * 4 * 64 * (64 + 64)  # decoder + LSTM gates
    assert 2.5 * per_token_fwd * 10 < f10 < 3.5 * per_token_fwd * 10
    assert p10 == 1000 * 64 + 4 * 64 * (64 + 64) + 2 * 4 * 64 + 64 * 1000 + 1000

    f_gan, p_gan = count_flops_and_params("dcgan", {"lr_g": 1e-3, "lr_d": 1e-3})
    assert p_gan > 1_000_000 and f_gan > 1e8
