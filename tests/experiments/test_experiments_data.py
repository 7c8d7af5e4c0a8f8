"""Dataset loaders on small files written here in the standard distribution formats."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.data import (
    BPTTDataset,
    ChecksumError,
    CorruptDataError,
    MissingDataError,
    MNISTDataset,
    cifar10_datasets,
    fetch,
    load_cifar10,
    load_mnist,
    load_wikitext2,
    mnist_datasets,
    read_idx,
    wikitext2_datasets,
)
from experiments.data.cifar10 import CIFAR10_MD5
from experiments.data.mnist import MNIST_FILES
from experiments.data.synthetic import synthetic_cifar10, synthetic_mnist, synthetic_text

UNREACHABLE = "http://127.0.0.1:9/"  # discard port: connection refused at once, no real network


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------------- CIFAR-10


def _cifar_batch(n: int, seed: int) -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n).tolist()
    # Keys as bytes: what the official Python-2 pickles yield under encoding="bytes".
    batch = {b"batch_label": b"x", b"labels": labels, b"data": data, b"filenames": [b"f"] * n}
    return batch, data, np.array(labels)


def write_cifar_tarball(root: Path, n_train: int = 4, n_test: int = 3) -> tuple[Path, dict]:
    """A real (mini) cifar-10-python.tar.gz; returns its path and the arrays it holds."""
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    path = root / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
        for seed, name in enumerate(names):
            batch, data, labels = _cifar_batch(n_test if name == "test_batch" else n_train, seed)
            raw = pickle.dumps(batch, protocol=2)
            if name == "data_batch_1":
                # The official files were written by numpy 1.x: same opcodes, old module path.
                assert b"numpy._core.multiarray" in raw
                raw = raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
            arrays[name] = (data, labels)
    return path, arrays


def test_cifar_tarball_roundtrip_and_unpacked_reuse(tmp_path: Path) -> None:
    archive, arrays = write_cifar_tarball(tmp_path)
    train_x, train_y, test_x, test_y = load_cifar10(tmp_path, download=False, md5=md5(archive))
    assert train_x.shape == (20, 3, 32, 32) and train_x.dtype == np.uint8
    assert test_x.shape == (3, 3, 32, 32) and train_y.dtype == np.int64
    # Row layout is 1024 R, 1024 G, 1024 B values, row-major: pixel (c, y, x) = row[c*1024+y*32+x].
    data1, labels1 = arrays["data_batch_1"]
    assert train_x[0, 1, 2, 3] == data1[0, 1024 + 2 * 32 + 3]
    np.testing.assert_array_equal(train_y[:4], labels1)
    np.testing.assert_array_equal(test_x.reshape(3, -1), arrays["test_batch"][0])
    # Unpacked once: later loads need neither the tarball nor the network.
    archive.unlink()
    again = load_cifar10(tmp_path, download=False)
    np.testing.assert_array_equal(again[0], train_x)


def test_cifar_bad_checksum_names_file_and_digests(tmp_path: Path) -> None:
    archive, _ = write_cifar_tarball(tmp_path)
    with pytest.raises(ChecksumError) as err:
        load_cifar10(tmp_path, download=False)  # published MD5 vs our mini tarball
    msg = str(err.value)
    assert "cifar-10-python.tar.gz" in msg
    assert CIFAR10_MD5 in msg and md5(archive) in msg


def test_cifar_truncated_tarball(tmp_path: Path) -> None:
    archive, _ = write_cifar_tarball(tmp_path)
    raw = archive.read_bytes()
    archive.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CorruptDataError, match=r"cifar-10-python\.tar\.gz is not a readable"):
        load_cifar10(tmp_path, download=False, md5=None)
    assert not (tmp_path / "cifar-10-batches-py").exists()  # nothing half-written


def test_cifar_corrupt_batches(tmp_path: Path) -> None:
    archive, _ = write_cifar_tarball(tmp_path)
    load_cifar10(tmp_path, download=False, md5=None)
    batch3 = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    raw = batch3.read_bytes()
    batch3.write_bytes(raw[:100])
    with pytest.raises(
        CorruptDataError, match=r"data_batch_3 is corrupt or truncated \(100 bytes\)"
    ):
        load_cifar10(tmp_path, download=False)

    bad = {b"data": np.zeros((2, 3000), np.uint8), b"labels": [0, 1]}
    batch3.write_bytes(pickle.dumps(bad))
    with pytest.raises(CorruptDataError, match=r"expected uint8 data of shape \(N, 3072\)"):
        load_cifar10(tmp_path, download=False)

    # A pickle that would run code is refused, not executed.
    batch3.write_bytes(pickle.dumps(os.getcwd))
    with pytest.raises(CorruptDataError, match="not allowed"):
        load_cifar10(tmp_path, download=False)


def test_cifar_missing_without_network(tmp_path: Path) -> None:
    with pytest.raises(MissingDataError) as err:
        load_cifar10(tmp_path, download=False)
    msg = str(err.value)
    assert f"put cifar-10-python.tar.gz at {tmp_path / 'cifar-10-python.tar.gz'}" in msg
    assert "cifar-10-batches-py" in msg
    with pytest.raises(MissingDataError, match="could not be downloaded"):
        load_cifar10(tmp_path, url=UNREACHABLE + "cifar-10-python.tar.gz")


def test_cifar_dataset_normalises_and_augments() -> None:
    train, val = cifar10_datasets(None, smoke=True)
    x, y = val[0]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert -3 < x.mean() < 3
    torch.manual_seed(0)
    views = torch.stack([train[0][0] for _ in range(8)])
    assert not all(torch.equal(views[0], v) for v in views[1:])  # random crop/flip differ
    assert torch.equal(val[0][0], val[0][0])  # validation is deterministic


# -------------------------------------------------------------------------------------- MNIST


def idx_bytes(arr: np.ndarray) -> bytes:
    return (
        struct.pack(">HBB", 0, 0x08, arr.ndim)
        + struct.pack(f">{arr.ndim}I", *arr.shape)
        + arr.tobytes()
    )


def write_mnist(root: Path, n_train: int = 5, n_test: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, n_train, dtype=np.uint8),
        "test_images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    root.mkdir(parents=True, exist_ok=True)
    for key, arr in arrays.items():
        (root / MNIST_FILES[key][0]).write_bytes(gzip.compress(idx_bytes(arr)))
    return arrays


def test_mnist_idx_roundtrip(tmp_path: Path) -> None:
    arrays = write_mnist(tmp_path / "mnist")
    sums = {k: md5(tmp_path / "mnist" / MNIST_FILES[k][0]) for k in arrays}
    out = load_mnist(tmp_path, download=False, checksums=sums)
    for key, arr in arrays.items():
        np.testing.assert_array_equal(out[key], arr)
        assert out[key].dtype == np.uint8


def test_mnist_torchvision_layout_and_dataset(tmp_path: Path) -> None:
    arrays = write_mnist(tmp_path / "MNIST" / "raw")
    none = dict.fromkeys(arrays)
    assert load_mnist(tmp_path, download=False, checksums=none)["test_images"].shape == (3, 28, 28)
    train = MNISTDataset(arrays["train_images"], arrays["train_labels"])
    x, y = train[0]
    assert x.shape == (1, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert x.min() >= -1 and x.max() <= 1
    assert torch.all(x[:, :2] == -1)  # black padding
    assert x[0, 2 + 5, 2 + 7].item() == pytest.approx(arrays["train_images"][0, 5, 7] / 127.5 - 1)


def test_mnist_bad_checksum(tmp_path: Path) -> None:
    write_mnist(tmp_path / "mnist")
    path = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
    with pytest.raises(ChecksumError) as err:
        load_mnist(tmp_path, download=False)
    msg = str(err.value)
    assert str(path) in msg
    assert "f68b3c2dcbeaaa9fbdd348bbdeb94873" in msg and md5(path) in msg


def test_mnist_truncated_and_bad_magic(tmp_path: Path) -> None:
    header = struct.pack(">HBBIII", 0, 0x08, 3, 60000, 28, 28)
    trunc = tmp_path / "train-images-idx3-ubyte.gz"
    trunc.write_bytes(gzip.compress(header + bytes(1000)))
    with pytest.raises(
        CorruptDataError, match="idx file truncated: expected 47040000 bytes of pixels, found 1000"
    ):
        read_idx(trunc, expected_ndim=3)

    labels = tmp_path / "labels.gz"
    labels.write_bytes(gzip.compress(struct.pack(">HBBI", 0, 0x08, 1, 10) + bytes(7)))
    with pytest.raises(CorruptDataError, match="expected 10 bytes of labels, found 7"):
        read_idx(labels)

    magic = tmp_path / "magic.gz"
    magic.write_bytes(gzip.compress(struct.pack(">HBBI", 0, 0x0D, 1, 1) + bytes(4)))
    with pytest.raises(
        CorruptDataError, match="bad idx magic number 0x00000d01, expected 0x00000801"
    ):
        read_idx(magic, expected_ndim=1)

    cut = tmp_path / "cut.gz"
    noisy = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    cut.write_bytes(gzip.compress(header + noisy)[:200])
    with pytest.raises(CorruptDataError, match="cut.gz: gzip stream is corrupt or truncated"):
        read_idx(cut)


def test_mnist_missing_without_network(tmp_path: Path) -> None:
    with pytest.raises(MissingDataError) as err:
        load_mnist(tmp_path, download=False)
    assert f"put train-images-idx3-ubyte.gz at {tmp_path / 'mnist'}" in str(err.value)
    with pytest.raises(MissingDataError, match="could not be downloaded"):
        load_mnist(tmp_path, mirrors=(UNREACHABLE,))


# --------------------------------------------------------------------------------- download


def test_fetch_downloads_and_verifies(tmp_path: Path) -> None:
    src = tmp_path / "src" / "blob.bin"
    src.parent.mkdir()
    src.write_bytes(b"hello data")
    digest = hashlib.md5(b"hello data").hexdigest()
    sha = hashlib.sha256(b"hello data").hexdigest()
    dest_dir = tmp_path / "data"
    # First URL fails, the second (a file:// URL stands in for a mirror) works.
    got = fetch(
        "blob.bin", dest_dir, [UNREACHABLE + "blob.bin", src.as_uri()], md5=digest, sha256=sha
    )
    assert got == dest_dir / "blob.bin" and got.read_bytes() == b"hello data"

    other = tmp_path / "other"
    with pytest.raises(ChecksumError, match=f"expected {'0' * 32}, got {digest}"):
        fetch("blob.bin", other, [src.as_uri()], md5="0" * 32)
    assert list(other.iterdir()) == []  # bad download is not kept (no file, no .part)


# ------------------------------------------------------------------------------ WikiText-2

RAW = {
    "train": [" = Title = ", "", " the cat sat on the mat . ", " the dog sat . "],
    "valid": [" the cat ran . "],
    "test": [" a dog sat . "],
}


def write_wikitext(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for split, lines in RAW.items():
        (root / f"wiki.{split}.raw").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_wikitext_tokenisation(tmp_path: Path) -> None:
    write_wikitext(tmp_path / "wikitext-2-raw")
    vocab, streams = load_wikitext2(tmp_path, download=False, max_vocab=None)
    # One <eos> per line (empty lines included), words split on whitespace.
    n_train = sum(len(line.split()) + 1 for line in RAW["train"])
    assert streams["train"].numel() == n_train and streams["train"].dtype == torch.int64
    assert vocab.itos[:3] == ["<unk>", "<eos>", "the"]  # specials, then most frequent word
    words = [vocab.itos[i] for i in streams["train"].tolist()]
    assert words[:5] == ["=", "Title", "=", "<eos>", "<eos>"]
    # "ran" and "a" are not in the training vocabulary -> <unk>.
    assert [vocab.itos[i] for i in streams["valid"].tolist()] == [
        "the",
        "cat",
        "<unk>",
        ".",
        "<eos>",
    ]
    assert [vocab.itos[i] for i in streams["test"].tolist()][0] == "<unk>"

    small, capped = load_wikitext2(tmp_path, download=False, max_vocab=4)
    # "=" and "sat" both occur twice: ties keep first-seen order, so the result is stable.
    assert small.itos == ["<unk>", "<eos>", "the", "="]
    assert capped["train"].max().item() == 3


def test_wikitext_from_zip_and_errors(tmp_path: Path) -> None:
    archive = tmp_path / "wikitext-2-raw-v1.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for split, lines in RAW.items():
            zf.writestr(f"wikitext-2-raw/wiki.{split}.raw", "\n".join(lines) + "\n")
    vocab, streams = load_wikitext2(tmp_path, download=False, md5=md5(archive))
    assert "cat" in vocab.stoi and (tmp_path / "wikitext-2-raw" / "wiki.valid.raw").is_file()

    (tmp_path / "wikitext-2-raw" / "wiki.test.raw").write_text("  \n")
    with pytest.raises(CorruptDataError, match=r"wiki\.test\.raw: file is empty"):
        load_wikitext2(tmp_path, download=False)

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        MissingDataError, match="put wiki.train.raw, wiki.valid.raw, wiki.test.raw in"
    ):
        load_wikitext2(empty, download=False)
    (empty / "wikitext-2-raw-v1.zip").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CorruptDataError, match="wikitext-2-raw-v1.zip is not a readable zip"):
        load_wikitext2(empty, download=False)


def test_bptt_windows() -> None:
    tokens = torch.arange(11)
    ds = BPTTDataset(tokens, bptt=3)
    assert len(ds) == 3  # (11 - 1) // 3
    x, y = ds[2]
    assert x.tolist() == [6, 7, 8] and y.tolist() == [7, 8, 9]
    with pytest.raises(IndexError):
        ds[3]


# ------------------------------------------------------------------------------- synthetic


def test_synthetic_data_is_deterministic_and_shaped_like_real() -> None:
    a, b = synthetic_cifar10(seed=3), synthetic_cifar10(seed=3)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert a[0].shape == (512, 3, 32, 32) and a[0].dtype == np.uint8 and a[1].dtype == np.int64
    assert set(np.unique(a[1])) == set(range(10))

    m = synthetic_mnist()
    assert m["train_images"].shape == (512, 28, 28) and m["train_labels"].dtype == np.uint8
    np.testing.assert_array_equal(m["test_images"], synthetic_mnist()["test_images"])

    text = synthetic_text()
    assert text == synthetic_text() and set(text) == {"train", "valid", "test"}
    train, valid = wikitext2_datasets(None, smoke=True)
    assert train.vocab is valid.vocab and len(train) > 10 * len(train.vocab)
    mtrain, mtest = mnist_datasets(None, smoke=True)
    assert len(mtrain) == 512 and len(mtest) == 256 and mtrain.smoke
