"""Running the ``fluid`` command in-process, for the tests of its subcommands."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fluid.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_file(tmp_path: Path, obj: Any, name: str = "inst.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return str(path)


def temp_folder_env(scratch: Path) -> dict[str, str]:
    """Variables that give a ``fluid`` subprocess ``scratch`` as its temp folder, to see what it
    leaves there; Ray's own folder stays where it is (Ray would follow ``TMPDIR``, and its
    sockets' paths must stay short)."""
    return {"TMPDIR": str(scratch), "RAY_TMPDIR": tempfile.gettempdir()}
