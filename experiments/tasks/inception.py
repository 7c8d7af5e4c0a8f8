"""The inception score DCGAN runs are scored with: ``IS = exp(E_x KL(p(y|x) || p(y)))``, where
``p(y|x)`` comes from a small MNIST CNN (not Inception) trained once per data dir and cached on
disk (`get_mnist_classifier`)."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from experiments.data.mnist import mnist_datasets

from ._common import Device, unwrap

CLASSIFIER_VERSION = 1


class MNISTClassifier(nn.Module):
    """Small CNN on ``(N, 1, 32, 32)`` images in ``[-1, 1]`` -> 10 logits (``width`` filters)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.width = width
        w = width
        self.net = nn.Sequential(
            nn.Conv2d(1, w, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(2),  # 16x16
            nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(True), nn.MaxPool2d(2),  # 8x8
            nn.Flatten(), nn.Linear(2 * w * 8 * 8, 128), nn.ReLU(True), nn.Linear(128, 10),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits."""
        return self.net(x)


def inception_score(probs: torch.Tensor, splits: int = 1) -> float:
    """``exp(E_x KL(p(y|x) || p(y)))`` from class probabilities ``(N, C)``; mean over ``splits``.

    Ranges from 1 (every sample predicted identically) to ``C`` (confident and class-balanced).
    """
    probs = probs.double().clamp_min(1e-12)
    scores = []
    for part in probs.chunk(splits):
        p_y = part.mean(0, keepdim=True)
        kl = (part * (part.log() - p_y.log())).sum(1).mean()
        scores.append(math.exp(kl.item()))
    return sum(scores) / len(scores)


def classifier_cache_path(
    data_dir: str | Path | None, smoke: bool, cache_dir: str | Path | None = None
) -> Path:
    """Where the IS classifier for ``data_dir`` is cached.

    Default: ``<data_dir>/.fluid_cache/``; ``~/.cache/fluid`` (``$XDG_CACHE_HOME/fluid``) when
    there is no data dir (smoke) or it is read-only.
    The file name carries a hash of the resolved data dir and the smoke flag, so one cache dir
    can serve several data dirs.
    """
    key = f"{Path(data_dir).resolve() if data_dir is not None else '<none>'}|smoke={smoke}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    if cache_dir is None:
        if data_dir is not None and os.access(data_dir, os.W_OK):
            cache_dir = Path(data_dir) / ".fluid_cache"
        else:
            cache_dir = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fluid"
    tag = "smoke" if smoke else "full"
    return Path(cache_dir) / f"mnist_is_classifier_v{CLASSIFIER_VERSION}_{tag}_{digest}.pt"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive lock so concurrent trials train the classifier once, not once each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        try:
            import fcntl

            fcntl.flock(f, fcntl.LOCK_EX)
        except ImportError:  # non-POSIX: no lock; the atomic rename still keeps the file sane
            pass
        yield


def train_mnist_classifier(
    train: Dataset, test: Dataset, smoke: bool, device: Device = "cpu"
) -> tuple[MNISTClassifier, float]:
    """Train the IS classifier; returns ``(model, test accuracy)``.

    Full: width 32, 2 epochs of Adam (~99% on MNIST).  Smoke: width 16, 60 steps (~1 s on CPU).
    """
    from ._common import evaluate_classifier

    with torch.random.fork_rng(devices=[]):  # deterministic without disturbing the caller's RNG
        torch.manual_seed(0)
        model = MNISTClassifier(width=16 if smoke else 32).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loader = DataLoader(train, batch_size=64 if smoke else 128, shuffle=True, drop_last=True)
        steps_left = 60 if smoke else 2 * len(loader)
        model.train()
        while steps_left > 0:
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                steps_left -= 1
                if steps_left == 0:
                    break
        _, acc, _ = evaluate_classifier(model, DataLoader(test, batch_size=512), device)
    return model.eval(), acc


def get_mnist_classifier(
    data_dir: str | Path | None,
    smoke: bool = False,
    device: Device = "cpu",
    cache_dir: str | Path | None = None,
    datasets: tuple[Dataset, Dataset] | None = None,
) -> MNISTClassifier:
    """The cached IS classifier for ``data_dir`` (trained and saved on first use).

    ``datasets`` optionally supplies the ``(train, test)`` MNIST sets to train on (otherwise they
    are loaded with :func:`experiments.data.mnist_datasets`).  The file is written atomically
    under a lock, so concurrent trials share one training run.
    """
    path = classifier_cache_path(data_dir, smoke, cache_dir)
    with _file_lock(path.with_suffix(".lock")):
        if not path.is_file():
            train, test = datasets if datasets is not None else mnist_datasets(data_dir, smoke)
            model, acc = train_mnist_classifier(train, test, smoke, device)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            os.close(fd)
            state = {"state_dict": model.state_dict(), "width": model.width, "test_accuracy": acc}
            torch.save(state, tmp)
            os.replace(tmp, path)
    ckpt = torch.load(path, map_location=device, weights_only=True)
    model = MNISTClassifier(width=int(ckpt["width"])).to(device)
    model.load_state_dict(ckpt["state_dict"])
    model.test_accuracy = float(ckpt["test_accuracy"])  # type: ignore[assignment]
    return model.eval()


@torch.no_grad()
def generator_inception_score(
    model: nn.Module, classifier: nn.Module, n_samples: int, device: Device, seed: int = 0
) -> float:
    """IS of ``n_samples`` images from ``model``'s generator (eval mode, fixed noise seed)."""
    gen = unwrap(unwrap(model).generator)
    was_training = gen.training
    gen.eval()
    rng = torch.Generator().manual_seed(seed)
    probs = []
    for start in range(0, n_samples, 500):
        z = torch.randn(min(500, n_samples - start), gen.nz, 1, 1, generator=rng).to(device)
        probs.append(classifier(gen(z)).softmax(-1).cpu())
    gen.train(was_training)
    return inception_score(torch.cat(probs))
