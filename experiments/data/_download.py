"""Shared download + checksum helpers for the dataset loaders.

Files are looked up in ``data_dir`` first; only when absent are they downloaded with ``urllib``.
Every file with a known digest is verified, so a truncated download or a wrong file is caught
before it is parsed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "ChecksumError",
    "CorruptDataError",
    "DataError",
    "MissingDataError",
    "fetch",
    "file_digest",
    "verify_checksum",
]

_CHUNK = 1 << 20


class DataError(RuntimeError):
    """Base class for dataset problems (missing, corrupt or wrong files)."""


class ChecksumError(DataError):
    """A file's digest does not match the published one."""


class CorruptDataError(DataError):
    """A file has the right name but cannot be parsed (truncated, wrong format)."""


class MissingDataError(DataError):
    """A file is not in the data dir and could not be downloaded."""


def file_digest(path: str | os.PathLike[str], algorithm: str = "md5") -> str:
    """Return the hex digest of ``path`` computed with ``algorithm`` (``md5``, ``sha256``...)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def verify_checksum(
    path: str | os.PathLike[str], expected: str, algorithm: str = "md5"
) -> None:
    """Raise :class:`ChecksumError` (naming file, expected and actual digest) on mismatch."""
    actual = file_digest(path, algorithm)
    if actual.lower() != expected.lower():
        size = os.path.getsize(path)
        raise ChecksumError(
            f"{algorithm.upper()} checksum mismatch for {path} ({size} bytes): "
            f"expected {expected.lower()}, got {actual}. The file is corrupt, truncated or not "
            "the published one; delete it and download it again."
        )


def fetch(
    filename: str,
    data_dir: str | os.PathLike[str],
    urls: Sequence[str],
    *,
    md5: str | None = None,
    sha256: str | None = None,
    download: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Return ``data_dir/filename``, downloading it from the first working URL if absent.

    A local copy is always used as-is when present (no network), but is still verified against
    ``md5``/``sha256`` when given.  Downloads go to a ``.part`` file that is verified before it
    is renamed into place, so an interrupted download never leaves a bad file behind.

    Raises:
        ChecksumError: local or downloaded file has the wrong digest.
        MissingDataError: file absent and ``download`` is false or every URL failed.
    """
    data_dir = Path(data_dir)
    dest = data_dir / filename
    checks = [(a, d) for a, d in (("md5", md5), ("sha256", sha256)) if d]
    if dest.is_file():
        for algorithm, digest in checks:
            verify_checksum(dest, digest, algorithm)
        return dest

    where = f"put {filename} at {dest}"
    if urls:
        where += f" (it is published at {urls[0]})"
    if not download:
        raise MissingDataError(f"{filename} not found in {data_dir} and download is disabled: {where}.")

    data_dir.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    errors: list[str] = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(part, "wb") as out:
                shutil.copyfileobj(resp, out, _CHUNK)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            errors.append(f"{url}: {exc}")
            part.unlink(missing_ok=True)
            continue
        try:
            for algorithm, digest in checks:
                verify_checksum(part, digest, algorithm)
        except ChecksumError:
            part.unlink(missing_ok=True)
            raise
        os.replace(part, dest)
        return dest
    raise MissingDataError(
        f"{filename} not found in {data_dir} and could not be downloaded "
        f"({'; '.join(errors) or 'no URL known'}). Without network access, {where}."
    )
