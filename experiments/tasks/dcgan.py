"""DCGAN on MNIST (padded to 32x32), scored with an MNIST-classifier inception score.

Generator ``z (nz,1,1) -> 4x4 -> 8x8 -> 16x16 -> 32x32`` with transposed convs, BN and ReLU,
``tanh`` output; the discriminator mirrors it with strided convs and LeakyReLU(0.2) and returns
one logit per image.  Adam(beta1=0.5) with separate generator/discriminator learning rates (the
two hyperparameters) lives in one optimizer as two parameter groups; each half-step only fills
the gradients of the network being updated, and optimizers skip parameters without a gradient.

Inception score: ``IS = exp(E_x KL(p(y|x) || p(y)))`` where ``p(y|x)`` comes from a small MNIST
CNN (not Inception) trained once per data dir and cached on disk (:mod:`.inception`). Real MNIST
scores about 9.5 with it; the target is 5.2.

One *iteration* is one epoch over the training images (60,000; 512 in smoke mode).  Under DDP,
wrap ``model.generator`` and ``model.discriminator`` separately (a GAN step runs several forwards
per backward); the step functions only use those two attributes.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from experiments.data.mnist import MNISTDataset, mnist_datasets
from fluid.sim.workloads.spaces import DCGAN

from ._common import Config, Device, batches, mean, unwrap
from .inception import generator_inception_score, get_mnist_classifier

# The objective, search space and defaults live in fluid (the simulator models the same task).
NAME, METRIC, MODE, TARGET = DCGAN.name, DCGAN.metric, DCGAN.mode, DCGAN.target
ITERATION = "one epoch over the training images (60,000; 512 in smoke mode)"
TRAIN_SAMPLES = DCGAN.train_samples
SEARCH_SPACE: dict[str, Any] = dict(DCGAN.space)
DEFAULT_CONFIG: dict[str, Any] = dict(DCGAN.defaults)


def _fixed(config: Config, key: str) -> Any:
    return config.get(key, DEFAULT_CONFIG[key])


class Generator(nn.Module):
    """``(N, nz, 1, 1)`` noise -> ``(N, 1, 32, 32)`` images in ``[-1, 1]``."""

    def __init__(self, nz: int = 100, ngf: int = 64) -> None:
        super().__init__()
        self.nz = nz

        def up(cin: int, cout: int, stride: int, pad: int) -> list[nn.Module]:
            return [
                nn.ConvTranspose2d(cin, cout, 4, stride, pad, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(True),
            ]

        self.net = nn.Sequential(
            *up(nz, 4 * ngf, 1, 0),  # 4x4
            *up(4 * ngf, 2 * ngf, 2, 1),  # 8x8
            *up(2 * ngf, ngf, 2, 1),  # 16x16
            nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False),  # 32x32
            nn.Tanh(),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Images for noise ``z``."""
        return self.net(z)


class Discriminator(nn.Module):
    """``(N, 1, 32, 32)`` images -> ``(N,)`` real/fake logits."""

    def __init__(self, ndf: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False),  # 16x16
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, 2 * ndf, 4, 2, 1, bias=False),  # 8x8
            nn.BatchNorm2d(2 * ndf),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(2 * ndf, 4 * ndf, 4, 2, 1, bias=False),  # 4x4
            nn.BatchNorm2d(4 * ndf),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(4 * ndf, 1, 4, 1, 0, bias=False),  # 1x1
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One logit per image."""
        return self.net(x).flatten()


def _dcgan_init(m: nn.Module) -> None:
    # DCGAN paper initialisation: N(0, 0.02) convs, N(1, 0.02) BN scales.
    if isinstance(m, nn.Conv2d | nn.ConvTranspose2d):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


class DCGAN(nn.Module):
    """Container of ``generator`` and ``discriminator``; ``forward(z)`` generates images."""

    def __init__(self, nz: int = 100, ngf: int = 64, ndf: int = 64) -> None:
        super().__init__()
        self.nz = nz
        self.generator = Generator(nz, ngf)
        self.discriminator = Discriminator(ndf)
        self.apply(_dcgan_init)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Generated images ``(N, 1, 32, 32)``."""
        return self.generator(z)


def build_model(config: Config) -> nn.Module:
    """DCGAN with ``nz``/``ngf``/``ndf`` from ``config`` (defaults 100/64/64)."""
    return DCGAN(int(_fixed(config, "nz")), int(_fixed(config, "ngf")), int(_fixed(config, "ndf")))


def build_optimizer(model: nn.Module, config: Config) -> torch.optim.Optimizer:
    """Adam(betas=(0.5, 0.999)); group 0 = generator (``lr_g``), group 1 = discriminator (``lr_d``)."""
    m = unwrap(model)
    return torch.optim.Adam(
        [
            {"params": m.generator.parameters(), "lr": float(config["lr_g"])},
            {"params": m.discriminator.parameters(), "lr": float(config["lr_d"])},
        ],
        betas=(0.5, 0.999),
    )


def build_datasets(
    data_dir: str | Path | None, smoke: bool = False
) -> tuple[MNISTDataset, MNISTDataset]:
    """``(train, test)`` MNIST padded to 32x32 in ``[-1, 1]`` (synthetic if smoke)."""
    return mnist_datasets(data_dir, smoke)


def build_loader(dataset: Dataset, config: Config, train: bool, num_workers: int = 0) -> DataLoader:
    """Loader with the fixed GAN batch size (64; ``config["batch_size"]`` overrides)."""
    return DataLoader(
        dataset,
        batch_size=int(_fixed(config, "batch_size")),
        shuffle=train,
        drop_last=train,  # BatchNorm in D/G needs more than one sample per batch
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
    )


def data_config(train_dataset: Any) -> dict[str, Any]:
    """No data-dependent model settings for DCGAN."""
    return {}


def smoke_config(config: Config) -> dict[str, Any]:
    """Narrow networks, small batches and few IS samples for CPU smoke runs."""
    out = dict(config)
    out.update(nz=32, ngf=8, ndf=8, batch_size=32, is_samples=512)
    return out


def _bce(logits: torch.Tensor, target: float) -> torch.Tensor:
    return nn.functional.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


def discriminator_step(
    disc: nn.Module, optimizer: torch.optim.Optimizer, real: torch.Tensor, fake: torch.Tensor
) -> torch.Tensor:
    """Update D on real vs. (detached) fake images; G gets no gradient, so it is not stepped."""
    optimizer.zero_grad(set_to_none=True)
    d_loss = _bce(disc(real), 1.0) + _bce(disc(fake.detach()), 0.0)
    d_loss.backward()
    optimizer.step()
    return d_loss.detach()


def generator_step(
    disc: nn.Module, optimizer: torch.optim.Optimizer, fake: torch.Tensor
) -> torch.Tensor:
    """Update G with the non-saturating loss; D's gradients are dropped so D stays put."""
    optimizer.zero_grad(set_to_none=True)
    g_loss = _bce(disc(fake), 1.0)
    g_loss.backward()
    for p in disc.parameters():
        p.grad = None
    optimizer.step()
    return g_loss.detach()


def _gan_step_losses(
    model: nn.Module, optimizer: torch.optim.Optimizer, real: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    m = unwrap(model)
    gen, disc = m.generator, m.discriminator
    fake = gen(torch.randn(real.shape[0], unwrap(gen).nz, 1, 1, device=real.device))
    d_loss = discriminator_step(disc, optimizer, real, fake)
    g_loss = generator_step(disc, optimizer, fake)
    return d_loss, g_loss


def train_one_iteration(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Iterable[Any],
    device: Device,
    config: Config | None = None,
    max_batches: int | None = None,
) -> dict[str, float]:
    """One epoch (or ``max_batches`` batches) of alternating D/G updates.

    Returns mean ``d_loss`` and ``g_loss``, ``train_loss = d_loss + g_loss`` and ``num_samples``.
    """
    model.train()
    d_sum = torch.zeros((), device=device)
    g_sum = torch.zeros((), device=device)
    steps = rows = 0
    for _, (real, _labels) in batches(loader, max_batches):
        real = real.to(device, non_blocking=True)
        d_loss, g_loss = _gan_step_losses(model, optimizer, real)
        d_sum += d_loss
        g_sum += g_loss
        steps += 1
        rows += real.shape[0]
    d, g = mean(d_sum, steps), mean(g_sum, steps)
    return {"d_loss": d, "g_loss": g, "train_loss": d + g, "num_samples": float(rows)}


def evaluate(
    model: nn.Module,
    loader: Iterable[Any],
    device: Device,
    config: Config | None = None,
    max_batches: int | None = None,
    classifier: nn.Module | None = None,
) -> dict[str, float]:
    """Inception score of ``config["is_samples"]`` generated images (default 5000).

    The classifier is found through ``loader.dataset`` (an :class:`MNISTDataset` records its data
    dir and smoke flag) unless passed explicitly.  ``loader`` is otherwise unused: no real
    images are needed to score a generator.
    """
    config = config or DEFAULT_CONFIG
    if classifier is None:
        ds = getattr(loader, "dataset", None)
        if not isinstance(ds, MNISTDataset):
            raise TypeError("dcgan.evaluate needs a loader over an MNISTDataset or classifier=")
        classifier = get_mnist_classifier(ds.root, ds.smoke, device)
    n = int(_fixed(config, "is_samples"))
    return {"inception_score": generator_inception_score(model, classifier.to(device), n, device)}


def example_batch(config: Config, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random real images (one sample = one real image plus one generated image)."""
    return torch.rand(n, 1, 32, 32) * 2 - 1, torch.zeros(n, dtype=torch.int64)
