"""Reading what ``fluid report`` plots: run records (``run.json``, or a Ray Tune experiment
directory through ``fluid.report._tune``), their labels, and the text a PNG carries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fluid.report._tune import ReportError, is_tune_experiment, load_tune_experiment

RUN_FILE = "run.json"


def load_runs(
    paths: Sequence[str | Path], metric: str | None = None, mode: str | None = None
) -> list[dict[str, Any]]:
    """Run records from result directories (or ``run.json`` files), in the order given.

    A directory without ``run.json`` that is a Ray Tune experiment (run under FluidExecutor or
    not) is read from Tune's own files (:func:`fluid.report.load_tune_experiment`), with
    ``metric``/``mode`` if given, else the experiment's. Each record gets ``_path``. Raises
    :class:`ReportError` for a directory that is neither or a file that is not a record.
    """
    if not paths:
        raise ReportError("no results directory given")
    runs = []
    for p in paths:
        path = Path(p)
        file = path / RUN_FILE if path.is_dir() else path
        if not file.is_file() and is_tune_experiment(path):
            runs.append({**load_tune_experiment(path, metric, mode), "_path": str(path)})
            continue
        if not file.is_file():
            raise ReportError(f"{p}: neither a run record ({RUN_FILE}, written by python -m "
                              "experiments.run) nor a Ray Tune experiment directory")
        try:
            record = json.loads(file.read_text())
        except ValueError as e:
            raise ReportError(f"{file}: not valid JSON ({e})") from None
        missing = [k for k in ("task", "executor", "metric", "mode", "trials", "wall_clock")
                   if not isinstance(record, dict) or k not in record]
        if missing:
            raise ReportError(f"{file}: not a run record (missing {', '.join(missing)})")
        record["_path"] = str(file)
        runs.append(record)
    return runs


def run_labels(runs: Sequence[dict[str, Any]]) -> list[str]:
    """A short, unique label per run: the executor, plus task/algorithm where runs differ."""
    varying = [k for k in ("task", "algorithm") if len({r.get(k) for r in runs}) > 1]
    labels = [" / ".join([*(str(r.get(k)) for k in varying), str(r.get("executor"))])
              for r in runs]
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if labels.count(label) == 1 else f"{label} #{seen[label]}")
    return out


def png_text(path: str | Path) -> dict[str, str]:
    """The text metadata of a PNG file, after checking it is a well-formed PNG.

    Checks the signature, every chunk's CRC, that ``IHDR`` comes first with a non-empty size,
    that there is image data and that ``IEND`` ends the file. Returns the ``tEXt`` entries
    (for the report's plots: ``fluid:series``, ``fluid:labels``, ``Title``, ...).

    Raises:
        ReportError: when the file is not a valid PNG.
    """
    import struct
    import zlib

    data = Path(path).read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ReportError(f"{path}: not a PNG (bad signature)")
    pos, chunks, text = 8, [], {}
    while pos < len(data):
        if pos + 8 > len(data):
            raise ReportError(f"{path}: truncated chunk header at byte {pos}")
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        crc_at = pos + 8 + length
        if crc_at + 4 > len(data):
            raise ReportError(f"{path}: truncated {kind!r} chunk")
        (crc,) = struct.unpack(">I", data[crc_at : crc_at + 4])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ReportError(f"{path}: bad CRC in {kind!r} chunk")
        chunks.append(kind)
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
            if width == 0 or height == 0:
                raise ReportError(f"{path}: empty image ({width}x{height})")
        elif kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            text[key.decode("latin-1")] = value.decode("latin-1")
        pos = crc_at + 4
    if not chunks or chunks[0] != b"IHDR" or chunks[-1] != b"IEND" or b"IDAT" not in chunks:
        raise ReportError(f"{path}: not a complete PNG (chunks {[c.decode() for c in chunks]})")
    return text
