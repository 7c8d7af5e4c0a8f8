"""The worked example of a custom scheduler runs and declares the groups it says."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_custom_scheduler_example():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "custom_scheduler.py")],
        capture_output=True, text=True, timeout=400, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "best config: {'q': 1.2}" in out.stdout
    groups = [line for line in out.stdout.splitlines() if line.startswith("TrialGroup")]
    assert any("'round 1': 6 trials" in g for g in groups), out.stdout
    assert any("'round 2'" in g for g in groups), out.stdout
