"""An offline bundle of Fluid and Ray Tune for GPU nodes that reach no package registry.

``make offline-bundle`` runs this: it resolves Fluid's dependencies for a target (CPython
``--python``, manylinux x86_64) with pip, leaves out torch and everything torch needs (the GPU
image has them) and the packages named by ``--assume`` (large ones a PyTorch GPU image usually
holds: numpy, scipy, pandas, pyarrow), downloads the rest from the index, builds Fluid's wheel
from the committed tree (``git archive HEAD``; the commit is in the bundle's ``COMMIT``), strips
Ray's wheel of what Tune does not use (``ray/jars``, the Java runtime, and ``ray/rllib``) with
its ``RECORD`` rewritten so pip accepts it, re-stores every wheel uncompressed (xz then
compresses across files) and writes one ``.tar.xz`` holding ``wheels/``, ``requirements.txt``,
``install.sh`` and ``assumed.txt``. On the GPU node::

    tar xf fluid-offline-py3.12.tar.xz && fluid-offline-py3.12/install.sh   # pip, index off
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import tomllib

#: What Ray's wheel carries that Ray Tune never imports.
RAY_STRIP = ("ray/jars/", "ray/rllib/")
DEFAULT_ASSUME = ("numpy", "scipy", "pandas", "pyarrow")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
ROOT = Path(__file__).resolve().parents[1]
INSTALL_SH = """#!/bin/sh
# Installs Fluid and Ray Tune from the wheels beside this script, with pip's index off.
# PYTHON=/path/to/python3 picks the interpreter (default: python3); extra arguments go to pip.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${{PYTHON:-python3}}
have=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$have" != "{python}" ]; then
    echo "install.sh: this bundle is for Python {python}; $PYTHON is Python $have" >&2
    exit 2
fi
"$PYTHON" -m pip install --no-index --find-links "$here/wheels" -r "$here/requirements.txt" "$@"
"$PYTHON" -c "import fluid, ray; from ray import tune; print('installed: fluid', fluid.__version__, 'ray', ray.__version__)"
"""


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _record_name(names: Iterable[str]) -> str:
    records = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/RECORD", n)]
    if len(records) != 1:
        raise ValueError(f"a wheel holds exactly one .dist-info/RECORD, found {records}")
    return records[0]


def restore_wheel(src: Path, dst: Path, strip: Sequence[str] = ()) -> dict[str, int]:
    """Copy wheel ``src`` to ``dst`` uncompressed (ZIP_STORED), without the files under the
    ``strip`` prefixes; ``RECORD`` lists exactly the files kept (each hash checked, as pip's
    RECORD rules ask). Returns the count and bytes of the files dropped."""
    dropped = {"files": 0, "bytes": 0}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        record = _record_name(zin.namelist())
        rows = []
        for info in zin.infolist():
            if info.filename.startswith(tuple(strip)):
                dropped["files"] += 1
                dropped["bytes"] += info.file_size
                continue
            if info.filename == record:
                continue
            data = zin.read(info)
            kept = zipfile.ZipInfo(info.filename, info.date_time)
            kept.external_attr = info.external_attr
            zout.writestr(kept, data)
            if not info.is_dir():
                rows.append((info.filename, _record_hash(data), str(len(data))))
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([*rows, (record, "", "")])
        zout.writestr(zipfile.ZipInfo(record, (1980, 1, 1, 0, 0, 0)), text.getvalue())
    return dropped


def _pip(python: str, *args: str) -> None:
    subprocess.run([python, "-m", "pip", *args], check=True)


def _target(version: str) -> list[str]:
    flags = ["--only-binary=:all:", "--implementation", "cp", "--python-version", version]
    for p in PLATFORMS:
        flags += ["--platform", p]
    return flags


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _requires(entry: dict) -> set[str]:
    """Names ``entry`` of pip's report needs: every requirement not behind an extra, whatever its
    environment marker (at worst one more package is taken to be on the image)."""
    out = set()
    for req in entry["metadata"].get("requires_dist") or []:
        if "extra ==" in req:
            continue
        out.add(_name(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0]))
    return out


def resolve(pip_python: str, version: str, assume: Sequence[str], workdir: Path) -> dict[str, str]:
    """``{name: version}`` of every package Fluid needs on the target, less torch, what torch
    needs, and ``assume``."""
    report = workdir / "report.json"
    # Fluid's own dependencies, torch among them, so that what torch needs can be left out.
    reqs = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    _pip(pip_python, "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
         str(report), "--target", str(workdir / "unused"), *_target(version), *reqs)
    entries = {_name(e["metadata"]["name"]): e for e in json.loads(report.read_text())["install"]}
    image, todo = set(), ["torch", *map(_name, assume)]
    while todo:
        name = todo.pop()
        if name in image or name not in entries:
            continue
        image.add(name)
        todo += sorted(_requires(entries[name]))
    return {n: e["metadata"]["version"] for n, e in entries.items() if n not in image}


def _wheels(pip_python: str, version: str, packages: dict[str, str], wheels: Path,
            workdir: Path) -> dict[str, int]:
    """Download ``packages`` for the target and build Fluid's wheel, all re-stored into
    ``wheels``; Ray's stripped. Returns what stripping Ray dropped."""
    raw = workdir / "raw"
    _pip(pip_python, "download", "--no-deps", "--quiet", "-d", str(raw), *_target(version),
         *[f"{n}=={v}" for n, v in sorted(packages.items())])
    source = workdir / "source"  # the committed tree: what the bundle says it holds
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    _pip(pip_python, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(raw),
         str(source))
    dropped = {"files": 0, "bytes": 0}
    for whl in sorted(raw.glob("*.whl")):
        strip = RAY_STRIP if _name(whl.name.split("-")[0]) == "ray" else ()
        got = restore_wheel(whl, wheels / whl.name, strip)
        dropped = {k: dropped[k] + got[k] for k in dropped}
    return dropped


def _commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def build(out: Path, version: str, assume: Sequence[str], pip_python: str = sys.executable
          ) -> dict[str, object]:
    """Write the bundle to ``out`` (a ``.tar.xz``) for CPython ``version``; what it holds."""
    if not re.fullmatch(r"3\.\d{1,2}", version):
        raise ValueError(f"--python must be a CPython version such as 3.12, got {version!r}")
    with tempfile.TemporaryDirectory(prefix="fluid-bundle-") as tmp:
        workdir = Path(tmp)
        top = workdir / f"fluid-offline-py{version}"
        (top / "wheels").mkdir(parents=True)
        packages = resolve(pip_python, version, assume, workdir)
        packages.pop("fluid-tune", None)
        dropped = _wheels(pip_python, version, packages, top / "wheels", workdir)
        (top / "requirements.txt").write_text("fluid-tune\n")
        (top / "COMMIT").write_text(_commit() + "\n")
        script = top / "install.sh"
        script.write_text(INSTALL_SH.format(python=version))
        script.chmod(0o755)
        (top / "assumed.txt").write_text(
            "# Not in this bundle: torch, what torch needs, and these (on the GPU image):\n"
            + "".join(f"{name}\n" for name in assume))
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:xz", preset=9) as tar:
            tar.add(top, arcname=top.name)
    return {"bundle": str(out), "commit": _commit(), "mib": round(out.stat().st_size / 2**20, 1),
            "packages": sorted(packages), "ray_dropped": dropped, "assumed": list(assume)}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python tools/offline_bundle.py --python 3.12 --out dist/X.tar.xz``."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="3.12", help="target CPython version (3.12)")
    ap.add_argument("--out", required=True, help="the bundle to write (.tar.xz)")
    ap.add_argument("--assume", default=" ".join(DEFAULT_ASSUME),
                    help="packages the GPU image holds, left out (space-separated; '' for none)")
    ap.add_argument("--max-mib", type=float, default=40.0, help="fail above this size (40)")
    args = ap.parse_args(argv)
    info = build(Path(args.out), args.python, args.assume.split())
    print(json.dumps(info, indent=1))
    if info["mib"] > args.max_mib:  # type: ignore[operator]
        print(f"offline_bundle: {args.out} is {info['mib']} MiB, over --max-mib {args.max_mib}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
