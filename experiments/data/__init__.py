"""Dataset loaders for the paper's tasks (CIFAR-10, MNIST, WikiText-2), without torchvision.

Real loaders read the standard distribution formats from ``data_dir`` (downloading with checksum
verification when a file is missing); ``smoke=True`` variants generate small seeded synthetic data.
"""

from ._download import ChecksumError, CorruptDataError, DataError, MissingDataError, fetch
from .cifar10 import CIFAR10Dataset, cifar10_datasets, load_cifar10, read_cifar_batch
from .mnist import MNISTDataset, load_mnist, mnist_datasets, read_idx
from .wikitext2 import (
    BPTTDataset,
    TokenStream,
    Vocabulary,
    load_wikitext2,
    tokenize_lines,
    wikitext2_datasets,
)

__all__ = [
    "BPTTDataset",
    "CIFAR10Dataset",
    "ChecksumError",
    "CorruptDataError",
    "DataError",
    "MNISTDataset",
    "MissingDataError",
    "TokenStream",
    "Vocabulary",
    "cifar10_datasets",
    "fetch",
    "load_cifar10",
    "load_mnist",
    "load_wikitext2",
    "mnist_datasets",
    "read_cifar_batch",
    "read_idx",
    "tokenize_lines",
    "wikitext2_datasets",
]
