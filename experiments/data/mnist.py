"""MNIST from the original idx files (gzipped), without torchvision.

Files are looked up in ``data_dir/mnist/``, then ``data_dir/MNIST/raw/`` (torchvision's layout)
and ``data_dir`` itself; missing ones are downloaded into ``data_dir/mnist/``.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ._download import CorruptDataError, fetch

__all__ = [
    "MNIST_FILES",
    "MNIST_MIRRORS",
    "MNISTDataset",
    "load_mnist",
    "mnist_datasets",
    "read_idx",
]

MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
# key -> (file name, published MD5 as listed by torchvision, expected idx shape)
MNIST_FILES: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "train_images": ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", (60000, 28, 28)),
    "train_labels": ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432", (60000,)),
    "test_images": ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3", (10000, 28, 28)),
    "test_labels": ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c", (10000,)),
}
_IDX_UBYTE = 0x08


def read_idx(path: str | os.PathLike[str], expected_ndim: int | None = None) -> np.ndarray:
    """Parse an idx file (gzipped if the name ends in ``.gz``) of unsigned bytes.

    Checks the magic number (two zero bytes, type ``0x08`` = ubyte, number of dimensions) and
    that the payload has exactly ``prod(dims)`` bytes.

    Raises:
        CorruptDataError: bad gzip stream, bad magic, or truncated / oversized payload.
    """
    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise CorruptDataError(f"{path}: gzip stream is corrupt or truncated ({exc})") from exc
    if len(raw) < 4:
        raise CorruptDataError(f"{path}: idx file truncated: {len(raw)} bytes, no magic number")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    magic = int.from_bytes(raw[:4], "big")
    if zero != 0 or dtype != _IDX_UBYTE or (expected_ndim is not None and ndim != expected_ndim):
        want = f"0x{(_IDX_UBYTE << 8) | expected_ndim:08x}" if expected_ndim else "0x000008NN"
        raise CorruptDataError(f"{path}: bad idx magic number 0x{magic:08x}, expected {want}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise CorruptDataError(
            f"{path}: idx file truncated: header needs {header} bytes, found {len(raw)}"
        )
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    expected = int(np.prod(dims))
    found = len(raw) - header
    what = "pixels" if ndim >= 3 else "labels"
    if found < expected:
        raise CorruptDataError(
            f"{path}: idx file truncated: expected {expected} bytes of {what}, found {found}"
        )
    if found > expected:
        raise CorruptDataError(
            f"{path}: idx file has {found - expected} trailing bytes after {expected} bytes of {what}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _locate(data_dir: Path, filename: str) -> Path:
    for d in (data_dir / "mnist", data_dir / "MNIST" / "raw", data_dir):
        if (d / filename).is_file():
            return d
    return data_dir / "mnist"


def load_mnist(
    data_dir: str | os.PathLike[str],
    *,
    download: bool = True,
    checksums: Mapping[str, str | None] | None = None,
    mirrors: tuple[str, ...] = MNIST_MIRRORS,
) -> dict[str, np.ndarray]:
    """Load MNIST -> ``{"train_images", "train_labels", "test_images", "test_labels"}``.

    Images are ``uint8 (N, 28, 28)``, labels ``uint8``.  ``checksums`` maps a key or file name to
    an MD5 overriding the published one (``None`` skips verification for that file).

    Raises:
        ChecksumError, CorruptDataError, MissingDataError: see :mod:`experiments.data._download`.
    """
    data_dir = Path(data_dir)
    checksums = dict(checksums or {})
    out: dict[str, np.ndarray] = {}
    for key, (filename, md5, shape) in MNIST_FILES.items():
        md5 = checksums.get(key, checksums.get(filename, md5))
        path = fetch(
            filename,
            _locate(data_dir, filename),
            [m + filename for m in mirrors],
            md5=md5,
            download=download,
        )
        arr = read_idx(path, expected_ndim=len(shape))
        if arr.shape[1:] != shape[1:]:
            raise CorruptDataError(f"{path}: expected items of shape {shape[1:]}, found {arr.shape[1:]}")
        out[key] = arr
    for split in ("train", "test"):
        n_img, n_lab = len(out[f"{split}_images"]), len(out[f"{split}_labels"])
        if n_img != n_lab:
            raise CorruptDataError(f"MNIST {split}: {n_img} images but {n_lab} labels")
        if n_lab and out[f"{split}_labels"].max() > 9:
            raise CorruptDataError(f"MNIST {split}: labels outside [0, 9]")
    return out


class MNISTDataset(Dataset):
    """``(image, label)``: float32 ``(1, 28 + 2*pad, 28 + 2*pad)`` in ``[-1, 1]``, int64 label.

    The default ``pad=2`` gives 32x32 images (black border), the power-of-two size the DCGAN
    generator produces.  ``root``/``smoke`` record where the data came from, so consumers (the
    inception-score classifier cache) can key on it.
    """

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        pad: int = 2,
        root: Path | None = None,
        smoke: bool = False,
    ) -> None:
        # Stored as padded uint8 (60 MB for the train set rather than 250 MB as float32) since
        # several trials may share a machine; the per-item conversion is cheap.
        x = torch.from_numpy(np.ascontiguousarray(images))
        self.images = torch.nn.functional.pad(x, (pad,) * 4, value=0).unsqueeze(1)
        self.labels = torch.from_numpy(np.asarray(labels, dtype=np.int64))
        self.root = root
        self.smoke = smoke

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[i].float().div_(127.5).sub_(1.0), self.labels[i]


def mnist_datasets(
    data_dir: str | os.PathLike[str] | None,
    smoke: bool = False,
    *,
    download: bool = True,
    pad: int = 2,
) -> tuple[MNISTDataset, MNISTDataset]:
    """``(train, test)`` :class:`MNISTDataset`; ``smoke=True`` uses the synthetic 512/256 set."""
    if smoke:
        from .synthetic import synthetic_mnist

        arrays = synthetic_mnist()
    else:
        if data_dir is None:
            raise ValueError("data_dir is required unless smoke=True")
        arrays = load_mnist(data_dir, download=download)
    root = Path(data_dir).resolve() if data_dir is not None else None
    return tuple(  # type: ignore[return-value]
        MNISTDataset(arrays[f"{s}_images"], arrays[f"{s}_labels"], pad=pad, root=root, smoke=smoke)
        for s in ("train", "test")
    )
