"""CIFAR-10 from the official "python version" tarball, without torchvision.

Layout: ``data_dir/cifar-10-python.tar.gz`` (verified against the published MD5) is unpacked
once into ``data_dir/cifar-10-batches-py/{data_batch_1..5,test_batch}``; an existing unpacked
directory is used directly.
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from ._download import CorruptDataError, MissingDataError, fetch

__all__ = [
    "CIFAR10_MD5",
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "CIFAR10_URL",
    "CIFAR10Dataset",
    "cifar10_datasets",
    "load_cifar10",
    "read_cifar_batch",
]

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_DIR = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
_IMAGE_BYTES = 3 * 32 * 32


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that only resolves the numpy globals a CIFAR batch needs.

    The batches are pickles; refusing every other global keeps a tampered file from running
    code when checksum verification is bypassed (e.g. an unpacked directory).
    """

    _ALLOWED = {
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # protocol-2 pickles written by Python 3 encode bytes this way
    }

    def find_class(self, module: str, name: str) -> Any:
        # The official batches were pickled by numpy 1.x as numpy.core.*, numpy 2's numpy._core.
        if module.startswith("numpy.core"):
            module = "numpy._core" + module[len("numpy.core") :]
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a CIFAR batch")
        return super().find_class(module, name)


def _parse_batch(raw: bytes, source: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        obj = _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as exc:  # truncated pickles raise EOFError, UnpicklingError, ValueError...
        raise CorruptDataError(
            f"CIFAR-10 batch {source} is corrupt or truncated ({len(raw)} bytes): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(obj, dict):
        raise CorruptDataError(f"CIFAR-10 batch {source}: expected a dict, found {type(obj).__name__}")
    # Python-2 pickles loaded with encoding="bytes" have bytes keys; fresh ones have str keys.
    norm = {k.decode() if isinstance(k, bytes) else k: v for k, v in obj.items()}
    missing = {"data", "labels"} - norm.keys()
    if missing:
        raise CorruptDataError(f"CIFAR-10 batch {source}: missing key(s) {sorted(missing)}")
    data = np.asarray(norm["data"])
    labels = np.asarray(norm["labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _IMAGE_BYTES:
        raise CorruptDataError(
            f"CIFAR-10 batch {source}: expected uint8 data of shape (N, {_IMAGE_BYTES}), "
            f"found {data.dtype} {data.shape}"
        )
    if labels.shape != (data.shape[0],):
        raise CorruptDataError(
            f"CIFAR-10 batch {source}: {data.shape[0]} images but {labels.shape[0]} labels"
        )
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise CorruptDataError(f"CIFAR-10 batch {source}: labels outside [0, 9]")
    return data.reshape(-1, 3, 32, 32), labels


def read_cifar_batch(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR-10 python batch file -> ``(uint8 (N, 3, 32, 32), int64 (N,))``."""
    return _parse_batch(Path(path).read_bytes(), str(path))


def _unpack(archive: Path, out_dir: Path) -> None:
    """Write the known batch members of ``archive`` into ``out_dir`` (no tar.extractall)."""
    wanted = {f"{CIFAR10_DIR}/{name}" for name in (*TRAIN_BATCHES, TEST_BATCH)}
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                if member.name in wanted and member.isfile():
                    f = tar.extractfile(member)
                    assert f is not None
                    found[member.name] = f.read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CorruptDataError(f"{archive} is not a readable .tar.gz archive: {exc}") from exc
    missing = sorted(wanted - found.keys())
    if missing:
        raise CorruptDataError(f"{archive} lacks member(s) {missing}")
    for name, raw in found.items():
        _parse_batch(raw, f"{archive}:{name}")  # validate before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, raw in found.items():
        tmp = out_dir / (Path(name).name + ".tmp")
        tmp.write_bytes(raw)
        os.replace(tmp, out_dir / Path(name).name)


def load_cifar10(
    data_dir: str | os.PathLike[str],
    *,
    download: bool = True,
    md5: str | None = CIFAR10_MD5,
    url: str = CIFAR10_URL,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load CIFAR-10 -> ``(train_x, train_y, test_x, test_y)``.

    Images are ``uint8 (N, 3, 32, 32)`` (50000 train, 10000 test), labels ``int64``.  ``md5``
    is the expected digest of the tarball (``None`` skips verification).

    Raises:
        ChecksumError, CorruptDataError, MissingDataError: see :mod:`experiments.data._download`.
    """
    data_dir = Path(data_dir)
    batch_dir = data_dir / CIFAR10_DIR
    names = (*TRAIN_BATCHES, TEST_BATCH)
    if not all((batch_dir / n).is_file() for n in names):
        try:
            archive = fetch(CIFAR10_ARCHIVE, data_dir, [url], md5=md5, download=download)
        except MissingDataError as exc:
            raise MissingDataError(f"{exc} (or unpack it so that {batch_dir}/data_batch_1 exists)") from exc
        _unpack(archive, batch_dir)
    parts = [read_cifar_batch(batch_dir / n) for n in TRAIN_BATCHES]
    test_x, test_y = read_cifar_batch(batch_dir / TEST_BATCH)
    train_x = np.concatenate([p[0] for p in parts])
    train_y = np.concatenate([p[1] for p in parts])
    return train_x, train_y, test_x, test_y


class CIFAR10Dataset(Dataset):
    """``(image, label)`` pairs: float32 ``(3, 32, 32)`` normalised per channel, int64 label.

    With ``augment=True`` each access applies the standard CIFAR augmentation: a random 32x32 crop
    of the image zero-padded by 4 pixels and a random horizontal flip.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, augment: bool = False) -> None:
        if images.dtype != np.uint8 or images.shape[1:] != (3, 32, 32):
            raise ValueError(f"expected uint8 images (N, 3, 32, 32), got {images.dtype} {images.shape}")
        # Keep uint8 (150 MB for the full train set, not 600 MB as float32): several trials
        # may share a machine, and per-item normalisation is cheap.
        self.images = torch.from_numpy(np.ascontiguousarray(images))
        self._mean = torch.tensor(CIFAR10_MEAN).view(3, 1, 1)
        self._std = torch.tensor(CIFAR10_STD).view(3, 1, 1)
        self.labels = torch.from_numpy(np.asarray(labels, dtype=np.int64))
        self.augment = augment

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = (self.images[i].float().div_(255) - self._mean) / self._std
        if self.augment:
            dy, dx = torch.randint(0, 9, (2,)).tolist()
            x = torch.nn.functional.pad(x, (4, 4, 4, 4))[:, dy : dy + 32, dx : dx + 32]
            if torch.rand(()) < 0.5:
                x = x.flip(-1)
        return x, self.labels[i]


def cifar10_datasets(
    data_dir: str | os.PathLike[str] | None, smoke: bool = False, *, download: bool = True
) -> tuple[CIFAR10Dataset, CIFAR10Dataset]:
    """``(train, val)`` datasets; train is augmented, val is the official test batch.

    ``smoke=True`` returns the synthetic 512/256-image set from
    :func:`experiments.data.synthetic.synthetic_cifar10` (no files, no network).
    """
    if smoke:
        from .synthetic import synthetic_cifar10

        train_x, train_y, val_x, val_y = synthetic_cifar10()
    else:
        if data_dir is None:
            raise ValueError("data_dir is required unless smoke=True")
        train_x, train_y, val_x, val_y = load_cifar10(data_dir, download=download)
    return CIFAR10Dataset(train_x, train_y, augment=True), CIFAR10Dataset(val_x, val_y)
