"""The published training workloads that packing is measured on, as one training step each.

``resnet18`` (kuangliu's CIFAR-10 ResNet-18), ``lstm`` (PyTorch's word language model: 2 layers
of 200, 33,278 words, bptt 35) and ``dcgan`` (PyTorch's DCGAN example, 64x64, ngf = ndf = 64),
in FP32 on synthetic data at PyTorch's defaults; `training_step` builds one and returns a
function that runs a step and returns its loss (``loss.item()``, as a training loop that logs
does). ``fluid.gpu.colocate`` times them co-located on one GPU; ``fluid bench gpu`` also trains
`resnet18_cifar` (or, with ``--smoke``, `tiny_cnn`) in a real tuning job.

Example:
    >>> sum(p.numel() for p in resnet18_cifar().parameters())
    11173962
    >>> loss = training_step("lstm", 1, "cpu")()
    >>> loss > 0
    True
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

#: Each workload's name in the packing references (``fluid/sim/references/packing.json``).
WORKLOADS = {
    "resnet18": "ResNet-18 (kuangliu) CIFAR-10, PyTorch",
    "lstm": "2-layer LSTM 200/200 word LM, WikiText-2, bptt 35",
    "dcgan": "DCGAN (PyTorch example, 64x64, ngf=ndf=64) LSUN",
}
DEFAULT_BATCH = {"resnet18": 128, "lstm": 20, "dcgan": 64}
VOCAB, BPTT, NZ = 33278, 35, 100


def _block(cin: int, cout: int, stride: int) -> nn.Module:
    body = nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
        nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
    short = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
        nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    return _Residual(body, short)


class _Residual(nn.Module):
    def __init__(self, body: nn.Module, short: nn.Module) -> None:
        super().__init__()
        self.body, self.short = body, short

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


def resnet18_cifar() -> nn.Module:
    """kuangliu's CIFAR-10 ResNet-18: a 3x3 stem, no max-pool, four stages of two blocks."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [_block(cin, cout, stride), _block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers)


def tiny_cnn() -> nn.Module:
    """A CIFAR-10-shaped classifier small enough to train in a CPU smoke run (~4,000 weights)."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, 10))


class WordLM(nn.Module):
    """PyTorch's word language model: embedding, 2 LSTM layers of 200, untied decoder."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 200)
        self.rnn = nn.LSTM(200, 200, 2, dropout=0.2)
        self.decode = nn.Linear(200, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(bptt, batch, VOCAB)`` for word ids ``(bptt, batch)``."""
        return self.decode(self.rnn(self.embed(x))[0])


def dcgan_pair() -> tuple[nn.Module, nn.Module]:
    """PyTorch's DCGAN example: the generator and the discriminator (64x64, ngf = ndf = 64)."""
    def up(cin: int, cout: int, stride: int, pad: int) -> list[nn.Module]:
        return [nn.ConvTranspose2d(cin, cout, 4, stride, pad, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU()]

    def down(cin: int, cout: int, norm: bool) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False),
                *([nn.BatchNorm2d(cout)] if norm else []), nn.LeakyReLU(0.2)]

    g = nn.Sequential(*up(NZ, 512, 1, 0), *up(512, 256, 2, 1), *up(256, 128, 2, 1),
                      *up(128, 64, 2, 1), nn.ConvTranspose2d(64, 3, 4, 2, 1, bias=False), nn.Tanh())
    d = nn.Sequential(*down(3, 64, False), *down(64, 128, True), *down(128, 256, True),
                      *down(256, 512, True), nn.Conv2d(512, 1, 4, 1, 0, bias=False), nn.Flatten())
    return g, d


def _classifier_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    return step


def _gan_step(batch: int, device: str) -> Callable[[], float]:
    g, d = (m.to(device) for m in dcgan_pair())
    opt_g = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999))
    real = torch.rand(batch, 3, 64, 64, device=device) * 2 - 1
    ones, zeros = torch.ones(batch, 1, device=device), torch.zeros(batch, 1, device=device)
    bce = nn.BCEWithLogitsLoss()

    def step() -> float:
        fake = g(torch.randn(batch, NZ, 1, 1, device=device))
        opt_d.zero_grad(set_to_none=True)
        (bce(d(real), ones) + bce(d(fake.detach()), zeros)).backward()
        opt_d.step()
        opt_g.zero_grad(set_to_none=True)
        loss = bce(d(fake), ones)
        loss.backward()
        opt_g.step()
        return loss.item()

    return step


def training_step(workload: str, batch: int, device: str) -> Callable[[], float]:
    """One training step of ``workload`` on synthetic data; returns the step's loss."""
    torch.manual_seed(0)
    if workload == "resnet18":
        x = torch.randn(batch, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        return _classifier_step(resnet18_cifar().to(device), x, y)
    if workload == "lstm":
        x = torch.randint(0, VOCAB, (BPTT, batch), device=device)
        y = torch.randint(0, VOCAB, (BPTT, batch), device=device)
        return _classifier_step(WordLM().to(device), x, y)
    if workload == "dcgan":
        return _gan_step(batch, device)
    raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, got {workload!r}")
