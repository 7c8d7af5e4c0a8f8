"""The policy core is numpy-only: importing it must never pull in Ray or torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = (
    "import sys, {module}; "
    "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'torch')); "
    "print(','.join(heavy))"
)


@pytest.mark.parametrize("module", ["fluid.core", "fluid.core.instance", "fluid.cli"])
def test_import_does_not_load_ray_or_torch(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"


def test_building_the_cli_parser_does_not_load_ray_or_torch() -> None:
    """Subcommand modules import heavy dependencies inside ``func``, so ``fluid plan`` stays fast."""
    probe = PROBE.format(module="fluid.cli").replace(
        "import sys, fluid.cli; ", "import sys, fluid.cli; fluid.cli.build_parser(); "
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "", f"building the parser imported {out.stdout.strip()}"
