"""Word-level language modelling on WikiText-2 with a multi-layer RNN.

The model follows PyTorch's ``word_language_model`` example: embedding -> dropout -> RNN
(``RNN_TANH``, ``RNN_RELU``, ``LSTM`` or ``GRU``, inter-layer dropout) -> dropout -> linear
decoder, optionally with the decoder weight tied to the embedding.  When tying is requested but
``nhid != emsize`` a linear projection ``nhid -> emsize`` is inserted before the decoder (the
example refuses that combination; a random search space produces it all the time).  Training is
plain SGD with gradient-norm clipping, as in the example.

Batches are independent ``bptt``-token windows (see :class:`experiments.data.BPTTDataset`): the
hidden state starts at zero for every batch instead of being carried over, which keeps the loader
compatible with shuffling and distributed samplers.

One *iteration* is one epoch over the training windows (~2.1M tokens; ~20k in smoke mode).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from experiments.data.wikitext2 import (
    WIKITEXT2_VOCAB_SIZE,
    BPTTDataset,
    TokenStream,
    wikitext2_datasets,
)
from fluid.sim.workloads.spaces import WLM, WLM_CELLS

from ._common import Config, Device, evaluate_classifier, train_classifier_iteration

# The objective, search space and defaults live in fluid (the simulator models the same task).
NAME, METRIC, MODE, TARGET = WLM.name, WLM.metric, WLM.mode, WLM.target
ITERATION = "one epoch over the training token stream in bptt windows (~2.1M tokens; ~20k smoke)"
TRAIN_SAMPLES = WLM.train_samples  # windows = tokens // bptt
CELLS = WLM_CELLS
SEARCH_SPACE: dict[str, Any] = dict(WLM.space)
DEFAULT_CONFIG: dict[str, Any] = dict(WLM.defaults)


class RNNLanguageModel(nn.Module):
    """Embedding -> RNN -> (projection) -> decoder; inputs ``(B, T)`` -> logits ``(B, T, V)``."""

    def __init__(
        self,
        vocab_size: int,
        cell: str = "LSTM",
        emsize: int = 650,
        nhid: int = 650,
        nlayers: int = 2,
        dropout: float = 0.5,
        tied: bool = False,
    ) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, emsize)
        inter = dropout if nlayers > 1 else 0.0  # torch warns about dropout on a 1-layer RNN
        if cell in ("LSTM", "GRU"):
            self.rnn: nn.RNNBase = getattr(nn, cell)(
                emsize, nhid, nlayers, dropout=inter, batch_first=True
            )
        else:
            nonlinearity = "tanh" if cell == "RNN_TANH" else "relu"
            self.rnn = nn.RNN(
                emsize, nhid, nlayers, nonlinearity=nonlinearity, dropout=inter, batch_first=True
            )
        self.proj = nn.Linear(nhid, emsize) if tied and nhid != emsize else None
        self.decoder = nn.Linear(emsize if tied else nhid, vocab_size)
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        if tied:
            self.decoder.weight = self.encoder.weight
        else:
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``(B, T, vocab_size)`` for token ids ``(B, T)`` (zero initial state)."""
        out, _ = self.rnn(self.drop(self.encoder(x)))
        out = self.drop(out)
        if self.proj is not None:
            out = self.proj(out)
        return self.decoder(out)


def build_model(config: Config) -> nn.Module:
    """RNN LM from ``cell``, ``emsize``, ``nhid``, ``nlayers``, ``dropout``, ``tied``.

    The vocabulary size comes from ``config["vocab_size"]`` (see :func:`data_config`) and
    defaults to 33,278, the standard WikiText-2 vocabulary.
    """
    return RNNLanguageModel(
        vocab_size=int(config.get("vocab_size", WIKITEXT2_VOCAB_SIZE)),
        cell=str(config["cell"]),
        emsize=int(config["emsize"]),
        nhid=int(config["nhid"]),
        nlayers=int(config["nlayers"]),
        dropout=float(config["dropout"]),
        tied=bool(config["tied"]),
    )


def build_optimizer(model: nn.Module, config: Config) -> torch.optim.Optimizer:
    """Plain SGD with ``lr`` (the example's optimiser; clipping happens in the step)."""
    return torch.optim.SGD(model.parameters(), lr=float(config["lr"]))


def build_datasets(
    data_dir: str | Path | None, smoke: bool = False
) -> tuple[TokenStream, TokenStream]:
    """``(train, valid)`` token streams of WikiText-2 (synthetic corpus if smoke).

    They are windowed into ``bptt``-long samples by :func:`build_loader`, since ``bptt`` is a
    hyperparameter.
    """
    return wikitext2_datasets(data_dir, smoke)


def build_loader(
    dataset: TokenStream, config: Config, train: bool, num_workers: int = 0
) -> DataLoader:
    """Loader of ``(x, y)`` windows ``(batch_size, bptt)``; shuffled for training."""
    return DataLoader(
        BPTTDataset(dataset.tokens, int(config["bptt"])),
        batch_size=int(config["batch_size"]),
        shuffle=train,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
    )


def data_config(train_dataset: TokenStream) -> dict[str, Any]:
    """``{"vocab_size": ...}`` of the loaded data; merge it into the config before building."""
    return {"vocab_size": len(train_dataset.vocab)}


def smoke_config(config: Config) -> dict[str, Any]:
    """Shrink widths 16x (keeping ``emsize == nhid`` pairs equal) for CPU smoke runs."""
    out = dict(config)
    out["emsize"] = max(8, int(config["emsize"]) // 16)
    out["nhid"] = max(8, int(config["nhid"]) // 16)
    return out


def perplexity(loss: float) -> float:
    """``exp(loss)``; ``inf`` for a diverged (non-finite or huge) loss instead of an overflow."""
    return math.exp(loss) if math.isfinite(loss) and loss < 700 else math.inf


def train_one_iteration(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: Iterable[Any],
    device: Device,
    config: Config | None = None,
    max_batches: int | None = None,
) -> dict[str, float]:
    """One epoch (or ``max_batches`` batches) with gradient clipping at ``config["clip"]``.

    Returns ``train_loss`` (mean per token), ``train_perplexity``, ``train_accuracy`` and
    ``num_samples`` (windows).
    """
    clip = float((config or DEFAULT_CONFIG)["clip"])
    out = train_classifier_iteration(model, optimizer, loader, device, max_batches, clip=clip)
    out["train_perplexity"] = perplexity(out["train_loss"])
    return out


def evaluate(
    model: nn.Module,
    loader: Iterable[Any],
    device: Device,
    config: Config | None = None,
    max_batches: int | None = None,
) -> dict[str, float]:
    """Validation pass -> ``val_loss`` (per token), ``val_perplexity``."""
    loss, _, _ = evaluate_classifier(model, loader, device, max_batches)
    return {"val_loss": loss, "val_perplexity": perplexity(loss)}


def example_batch(config: Config, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random ``bptt``-token windows (one sample = one window), for FLOP counting."""
    vocab = int(config.get("vocab_size", WIKITEXT2_VOCAB_SIZE))
    bptt = int(config["bptt"])
    return torch.randint(0, vocab, (n, bptt)), torch.randint(0, vocab, (n, bptt))
