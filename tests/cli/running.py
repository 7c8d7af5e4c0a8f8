"""Running the ``fluid`` command in-process, for the tests of its subcommands."""

from __future__ import annotations

import json
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
