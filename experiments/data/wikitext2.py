"""WikiText-2 (raw) for word-level language modelling, without torchtext.

Files: ``data_dir/wikitext-2-raw/wiki.{train,valid,test}.raw`` (or directly in ``data_dir``);
when missing, ``wikitext-2-raw-v1.zip`` is downloaded and those three members are unpacked.

Tokenisation follows PyTorch's word_language_model example: each line is split on whitespace
and terminated by ``<eos>``.  The vocabulary is built from the training split, most frequent
words first, optionally capped at ``max_vocab`` entries; other words map to ``<unk>``.
"""

from __future__ import annotations

import os
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils.data import Dataset

from ._download import CorruptDataError, MissingDataError, fetch

__all__ = [
    "EOS",
    "UNK",
    "WIKITEXT2_URLS",
    "BPTTDataset",
    "TokenStream",
    "Vocabulary",
    "load_wikitext2",
    "tokenize_lines",
    "wikitext2_datasets",
]

EOS, UNK = "<eos>", "<unk>"
WIKITEXT2_ARCHIVE = "wikitext-2-raw-v1.zip"
WIKITEXT2_URLS = (
    "https://wikitext.smerity.com/wikitext-2-raw-v1.zip",
    "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-raw-v1.zip",
)
# No MD5 here on purpose: we are not certain of the published digest of the raw zip; the
# unpacked files are sanity-checked instead (non-empty, UTF-8).  Pass md5= to enforce one.
WIKITEXT2_MD5: str | None = None
WIKITEXT2_DIR = "wikitext-2-raw"
SPLITS = ("train", "valid", "test")
# Size of the standard (tokenised) WikiText-2 vocabulary, the usual reference for perplexity.
WIKITEXT2_VOCAB_SIZE = 33_278


class Vocabulary:
    """Word <-> index map; index 0 is ``<unk>``, 1 is ``<eos>``."""

    def __init__(self, words: Iterable[str] = ()) -> None:
        self.itos: list[str] = [UNK, EOS]
        self.stoi: dict[str, int] = {UNK: 0, EOS: 1}
        for w in words:
            self.add(w)

    def add(self, word: str) -> int:
        """Add ``word`` if new; return its index."""
        if word not in self.stoi:
            self.stoi[word] = len(self.itos)
            self.itos.append(word)
        return self.stoi[word]

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, words: Iterable[str]) -> list[int]:
        """Indices of ``words``; unknown words map to ``<unk>``."""
        unk = self.stoi[UNK]
        return [self.stoi.get(w, unk) for w in words]

    @classmethod
    def from_lines(cls, lines: Iterable[str], max_size: int | None = None) -> Vocabulary:
        """Vocabulary of the words in ``lines`` (plus ``<eos>``), most frequent first."""
        counts = Counter(w for line in lines for w in line.split())
        counts.pop(UNK, None)
        counts.pop(EOS, None)
        # Counter.most_common keeps first-seen order among ties: deterministic.
        keep = counts.most_common(None if max_size is None else max(0, max_size - 2))
        return cls(w for w, _ in keep)


def tokenize_lines(lines: Iterable[str], vocab: Vocabulary) -> torch.Tensor:
    """Flatten ``lines`` into one int64 token stream, appending ``<eos>`` after every line."""
    eos = vocab.stoi[EOS]
    ids: list[int] = []
    for line in lines:
        ids.extend(vocab.encode(line.split()))
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.int64)


@dataclass
class TokenStream:
    """One split as a flat token stream plus the (shared) vocabulary."""

    tokens: torch.Tensor
    vocab: Vocabulary
    smoke: bool = False

    def __len__(self) -> int:
        return int(self.tokens.numel())


class BPTTDataset(Dataset):
    """Non-overlapping windows of a token stream: item ``i`` is ``(x, y)``, both ``(bptt,)``.

    ``x = tokens[i*bptt : (i+1)*bptt]`` and ``y`` is ``x`` shifted by one token.  Windows are
    independent samples (hidden state is not carried between them), so any sampler, including a
    shuffling or distributed one, is valid.
    """

    def __init__(self, tokens: torch.Tensor, bptt: int) -> None:
        if bptt < 1:
            raise ValueError(f"bptt must be >= 1, got {bptt}")
        self.tokens = tokens
        self.bptt = bptt

    def __len__(self) -> int:
        return max(0, (self.tokens.numel() - 1) // self.bptt)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = i * self.bptt
        return self.tokens[s : s + self.bptt], self.tokens[s + 1 : s + 1 + self.bptt]


def _read_text(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"{path}: not valid UTF-8 text ({exc})") from exc
    if not text.strip():
        raise CorruptDataError(f"{path}: file is empty")
    return text.splitlines()


def _find_split_files(data_dir: Path) -> dict[str, Path] | None:
    for d in (data_dir / WIKITEXT2_DIR, data_dir):
        files = {s: d / f"wiki.{s}.raw" for s in SPLITS}
        if all(p.is_file() for p in files.values()):
            return files
    return None


def _unpack(archive: Path, out_dir: Path) -> None:
    """Write the three ``wiki.*.raw`` members of ``archive`` into ``out_dir`` (by name only)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            members = {Path(n).name: n for n in zf.namelist()}
            out_dir.mkdir(parents=True, exist_ok=True)
            for s in SPLITS:
                name = f"wiki.{s}.raw"
                if name not in members:
                    raise CorruptDataError(f"{archive} lacks member {name}")
                tmp = out_dir / (name + ".tmp")
                tmp.write_bytes(zf.read(members[name]))
                os.replace(tmp, out_dir / name)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise CorruptDataError(f"{archive} is not a readable zip archive: {exc}") from exc


def load_wikitext2(
    data_dir: str | os.PathLike[str],
    *,
    download: bool = True,
    md5: str | None = WIKITEXT2_MD5,
    max_vocab: int | None = WIKITEXT2_VOCAB_SIZE,
    urls: Sequence[str] = WIKITEXT2_URLS,
) -> tuple[Vocabulary, dict[str, torch.Tensor]]:
    """Load WikiText-2 raw -> ``(vocab, {"train"|"valid"|"test": int64 token stream})``.

    ``max_vocab`` caps the vocabulary (default: the 33,278 entries of the standard tokenised
    WikiText-2, so perplexities are comparable to published numbers); ``None`` keeps every
    training word.

    Raises:
        ChecksumError, CorruptDataError, MissingDataError: see :mod:`experiments.data._download`.
    """
    data_dir = Path(data_dir)
    files = _find_split_files(data_dir)
    if files is None:
        try:
            archive = fetch(WIKITEXT2_ARCHIVE, data_dir, list(urls), md5=md5, download=download)
        except MissingDataError as exc:
            raise MissingDataError(
                f"{exc} (or put wiki.train.raw, wiki.valid.raw, wiki.test.raw in "
                f"{data_dir / WIKITEXT2_DIR})"
            ) from exc
        _unpack(archive, data_dir / WIKITEXT2_DIR)
        files = _find_split_files(data_dir)
        assert files is not None
    lines = {s: _read_text(p) for s, p in files.items()}
    return text_to_streams(lines, max_vocab=max_vocab)


def text_to_streams(
    lines: dict[str, list[str]], max_vocab: int | None = None
) -> tuple[Vocabulary, dict[str, torch.Tensor]]:
    """Build the vocabulary from ``lines["train"]`` and tokenise every split with it."""
    vocab = Vocabulary.from_lines(lines["train"], max_size=max_vocab)
    return vocab, {s: tokenize_lines(ls, vocab) for s, ls in lines.items()}


def wikitext2_datasets(
    data_dir: str | os.PathLike[str] | None,
    smoke: bool = False,
    *,
    download: bool = True,
    max_vocab: int | None = WIKITEXT2_VOCAB_SIZE,
) -> tuple[TokenStream, TokenStream]:
    """``(train, valid)`` token streams; ``smoke=True`` uses a ~20k-token synthetic corpus."""
    if smoke:
        from .synthetic import synthetic_text

        vocab, streams = text_to_streams(synthetic_text(), max_vocab=max_vocab)
    else:
        if data_dir is None:
            raise ValueError("data_dir is required unless smoke=True")
        vocab, streams = load_wikitext2(data_dir, download=download, max_vocab=max_vocab)
    return (
        TokenStream(streams["train"], vocab, smoke),
        TokenStream(streams["valid"], vocab, smoke),
    )
