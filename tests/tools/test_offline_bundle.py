"""tools/offline_bundle.py: a wheel stripped of some folders keeps a RECORD pip accepts, and the
dependencies left out are torch's, and the image's, with what they need."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tools.offline_bundle import _record_hash, _requires, restore_wheel

FILES = {
    "fakeray/__init__.py": b"VERSION = '1.0'\n",
    "fakeray/tune/__init__.py": b"from fakeray import VERSION\n",
    "fakeray/jars/ray_dist.jar": b"\x00java" * 1000,
    "fakeray/rllib/__init__.py": b"raise ImportError('rllib')\n",
    "fakeray-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: fakeray\nVersion: 1.0\n",
    "fakeray-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                   b"Tag: py3-none-any\n",
}


def _fake_wheel(path: Path) -> Path:
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in FILES.items():
            z.writestr(name, data)
            writer.writerow((name, _record_hash(data), len(data)))
        writer.writerow(("fakeray-1.0.dist-info/RECORD", "", ""))
        z.writestr("fakeray-1.0.dist-info/RECORD", rows.getvalue())
    return path


def test_a_stripped_wheel_lists_exactly_what_it_keeps(tmp_path: Path) -> None:
    src = _fake_wheel(tmp_path / "fakeray-1.0-py3-none-any.whl")
    (tmp_path / "out").mkdir()
    dst = tmp_path / "out" / src.name
    dropped = restore_wheel(src, dst, ("fakeray/jars/", "fakeray/rllib/"))
    assert dropped == {"files": 2, "bytes": len(FILES["fakeray/jars/ray_dist.jar"])
                       + len(FILES["fakeray/rllib/__init__.py"])}
    with zipfile.ZipFile(dst) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
        names = set(z.namelist())
        record = list(csv.reader(io.StringIO(z.read("fakeray-1.0.dist-info/RECORD").decode())))
        assert not any(n.startswith(("fakeray/jars", "fakeray/rllib")) for n in names)
        assert {row[0] for row in record} == names  # every file listed, nothing more
        for name, digest, size in record:
            if name.endswith("RECORD"):
                assert (digest, size) == ("", "")
            else:
                assert (digest, int(size)) == (_record_hash(FILES[name]), len(FILES[name]))


def test_pip_installs_the_stripped_wheel(tmp_path: Path) -> None:
    src = _fake_wheel(tmp_path / "fakeray-1.0-py3-none-any.whl")
    (tmp_path / "out").mkdir()
    dst = tmp_path / "out" / src.name
    restore_wheel(src, dst, ("fakeray/rllib/",))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--target", str(target), str(dst)], check=True, timeout=120)
    assert (target / "fakeray" / "tune" / "__init__.py").exists()
    assert not (target / "fakeray" / "rllib").exists()


def test_a_wheel_without_one_record_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("bad/__init__.py", b"")
    with pytest.raises(ValueError, match="exactly one .dist-info/RECORD"):
        restore_wheel(bad, tmp_path / "x.whl")


def test_only_unconditional_requirements_count() -> None:
    entry = {"metadata": {"requires_dist": [
        "numpy>=2.0; python_version < '3.14'", "python_dateutil>=2.9", "pyarrow; extra == 'x'",
        "Typing.Extensions (>=4)"]}}
    assert _requires(entry) == {"numpy", "python-dateutil", "typing-extensions"}
