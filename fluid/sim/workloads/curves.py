"""Learning curves: the metric a trial reports after each iteration, as a function of its config.

A documented synthetic surrogate, not a fit to any run. A trial's training state is the value of
its metric on a *working scale* (the metric itself, or its logarithm for perplexity); one
iteration of training under config ``c`` moves the state a fraction ``rate(c)`` of the way to the
config's asymptote ``final(c)``::

    s_{t+1} = s_t + (final(c) - s_t) * rate(c)        s_0 = start

so with a fixed config the curve is ``final - (final - start) (1 - rate)^t`` (exponential
saturation, the shape of most accuracy curves), and a config changed mid-training (PBT) keeps
the state it reached and heads for the new asymptote. Checkpoints hold the state, so resizes,
pauses and PBT's exploit restore exactly what was saved. The reported value adds validation
noise (``noise``, not accumulated into the state).

``final(c)`` and ``rate(c)`` are per workload (``cifar10.py``, ``wlm.py``, ``dcgan.py``): a
best value for the best hyperparameters minus quadratic penalties in the distance (log scale for
learning rates) from them, plus a per-config offset drawn from the config itself (``luck``:
what the config's seed would do), so that only a minority of the search space reaches the paper's
target and only after enough iterations.

Example:
    >>> curve = Curve(start=0.1, final=0.9, rate=0.5)
    >>> s = curve.start
    >>> s = curve.step(s); s = curve.step(s)
    >>> round(curve.value(s), 3)
    0.7
    >>> curve.iterations_to(0.85)
    4
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Curve:
    """``s_{t+1} = s_t + (final - s_t) * rate`` on a linear or log working scale.

    Attributes:
        start: metric before any training.
        final: the config's asymptote.
        rate: fraction of the remaining distance covered per iteration (0, 1].
        log: the working scale is ``log(metric)`` (perplexity).
        noise: standard deviation of the validation noise, relative to the metric.
    """

    start: float
    final: float
    rate: float
    log: bool = False
    noise: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1:
            raise ValueError(f"rate must be in (0, 1], got {self.rate}")

    @property
    def initial(self) -> float:
        """The working-scale state before training."""
        return math.log(self.start) if self.log else self.start

    def step(self, state: float) -> float:
        """State after one more iteration from ``state``."""
        goal = math.log(self.final) if self.log else self.final
        return state + (goal - state) * self.rate

    def value(self, state: float) -> float:
        """The metric of a state (without noise)."""
        return math.exp(state) if self.log else state

    def iterations_to(self, target: float, limit: int = 100_000) -> int | None:
        """Iterations from scratch until the noise-free metric reaches ``target`` (``None``: never).

        "Reaches" is ``>=`` for a rising curve and ``<=`` for a falling one.
        """
        rising = self.final >= self.start
        s = self.initial
        for t in range(1, limit + 1):
            s = self.step(s)
            v = self.value(s)
            if (v >= target) if rising else (v <= target):
                return t
        return None


def luck(config: Mapping[str, Any], salt: str = "") -> float:
    """A standard-normal number that depends only on the config's values (and ``salt``)."""
    text = salt + repr(sorted((k, repr(v)) for k, v in config.items()))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    u = (int.from_bytes(digest, "big") + 0.5) / 2**64
    return math.sqrt(2) * _erfinv(2 * u - 1)


def _erfinv(y: float) -> float:
    # Giles' single-precision approximation, refined by two Newton steps.
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
            p = c + p * w
    else:
        w = math.sqrt(w) - 3
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
            p = c + p * w
    x = p * y
    for _ in range(2):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def log_distance(x: float, best: float) -> float:
    """``log10(x / best)``: how many decades ``x`` is from ``best``."""
    return math.log10(max(x, 1e-300) / best)
