"""Small, seeded synthetic stand-ins for the real datasets (``--smoke`` mode, tests).

Each generator returns exactly what the matching real loader returns (same shapes, dtypes and
value ranges) and has learnable structure, so a model's loss visibly drops within a couple of
short iterations.  No network, no files.
"""

from __future__ import annotations

import numpy as np

__all__ = ["synthetic_cifar10", "synthetic_mnist", "synthetic_text"]


def _upsample(x: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upsampling of the last two axes."""
    return x.repeat(factor, axis=-2).repeat(factor, axis=-1)


def _shift(img: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """Translate the last two axes with wrap-around (cheap jitter)."""
    return np.roll(img, (dy, dx), axis=(-2, -1))


def synthetic_cifar10(
    n_train: int = 512, n_val: int = 256, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CIFAR-10-like data: ``(train_x, train_y, val_x, val_y)``.

    Images are ``uint8`` of shape ``(N, 3, 32, 32)``, labels ``int64`` in ``[0, 10)``.  Each class
    is a coarse random colour layout (a 4x4 grid upsampled) plus jitter, brightness change and
    pixel noise.
    """
    rng = np.random.default_rng(seed)
    prototypes = _upsample(rng.uniform(30, 225, size=(10, 3, 4, 4)), 8)

    def make(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 10, size=n)
        x = np.empty((n, 3, 32, 32), dtype=np.float64)
        for i, c in enumerate(y):
            dy, dx = rng.integers(-3, 4, size=2)
            x[i] = _shift(prototypes[c], dy, dx) * rng.uniform(0.7, 1.3)
        x += rng.normal(0, 40, size=x.shape)
        return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.int64)

    train_x, train_y = make(n_train)
    val_x, val_y = make(n_val)
    return train_x, train_y, val_x, val_y


def _stroke_prototype(rng: np.random.Generator) -> np.ndarray:
    """A 28x28 'digit': 2-4 thick random strokes inside the central 20x20 box."""
    img = np.zeros((28, 28))
    yy, xx = np.mgrid[0:28, 0:28]
    for _ in range(rng.integers(2, 5)):
        (y0, x0), (y1, x1) = rng.uniform(5, 23, size=(2, 2))
        for t in np.linspace(0, 1, 24):
            cy, cx = y0 + t * (y1 - y0), x0 + t * (x1 - x0)
            img = np.maximum(img, np.clip(2.0 - np.hypot(yy - cy, xx - cx), 0, 1))
    return img * 255


def synthetic_mnist(n_train: int = 512, n_test: int = 256, seed: int = 0) -> dict[str, np.ndarray]:
    """MNIST-like data with the keys of :func:`experiments.data.mnist.load_mnist`.

    ``{train,test}_images`` are ``uint8`` ``(N, 28, 28)`` with a black background,
    ``{train,test}_labels`` are ``uint8`` in ``[0, 10)``.
    """
    rng = np.random.default_rng(seed)
    prototypes = np.stack([_stroke_prototype(rng) for _ in range(10)])

    def make(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 10, size=n)
        x = np.empty((n, 28, 28))
        for i, c in enumerate(y):
            dy, dx = rng.integers(-2, 3, size=2)
            x[i] = _shift(prototypes[c], dy, dx) * rng.uniform(0.8, 1.0)
        x += rng.normal(0, 12, size=x.shape)
        return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.uint8)

    train_x, train_y = make(n_train)
    test_x, test_y = make(n_test)
    return {
        "train_images": train_x,
        "train_labels": train_y,
        "test_images": test_x,
        "test_labels": test_y,
    }


def synthetic_text(
    n_words: int = 200,
    train_tokens: int = 20_000,
    valid_tokens: int = 2_000,
    test_tokens: int = 2_000,
    seed: int = 0,
) -> dict[str, list[str]]:
    """A WikiText-like corpus: ``{"train"|"valid"|"test": lines}`` (lines end without newline).

    Sentences come from a sparse Markov chain (each word has 3 likely successors), so a language
    model can get far below the uniform perplexity of ``n_words``.
    """
    rng = np.random.default_rng(seed)
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: list[str] = []
    while len(words) < n_words:
        w = "".join(rng.choice(list(consonants)) + rng.choice(list(vowels)) for _ in range(rng.integers(1, 4)))
        if w not in words:
            words.append(w)
    successors = rng.integers(0, n_words, size=(n_words, 3))
    probs = np.array([0.6, 0.3, 0.1])

    def make(n_tokens: int) -> list[str]:
        lines, count = [], 0
        while count < n_tokens:
            length = int(rng.integers(5, 16))
            w = int(rng.integers(0, n_words))
            sent = []
            for _ in range(length):
                sent.append(words[w])
                w = int(successors[w, rng.choice(3, p=probs)])
            lines.append(" " + " ".join(sent) + " . ")
            count += length + 2  # words + "." + <eos>
        return lines

    return {"train": make(train_tokens), "valid": make(valid_tokens), "test": make(test_tokens)}
