"""The Ray Train example of docs/ray-train.md (README's "Using Fluid with Ray Train" links to it)
runs as written (logical GPUs, torch on the CPU, gloo)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def doc_example(doc: str) -> str:
    """The first Python block of ``doc`` (a path under the repository root)."""
    text = (ROOT / doc).read_text()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_the_readme_links_to_the_ray_train_example():
    text = (ROOT / "README.md").read_text()
    body = text.split("## Using Fluid with Ray Train\n", 1)[1].split("\n## ", 1)[0]
    assert "(docs/ray-train.md)" in body


@pytest.mark.slow
def test_ray_train_example_runs_as_written(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(doc_example("docs/ray-train.md"))
    env = {**os.environ, "HOME": str(tmp_path)}  # Tune's default storage: ~/ray_results
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=500, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    best = re.search(r"^best lr: ([0-9.]+)$", out.stdout, re.M)
    assert best and float(best.group(1)) in (0.1, 0.01), out.stdout[-2000:]
    assert "runs on gang of 2 GPU" in out.stderr  # Fluid's plan lines: 2 workers a trial
    results = list((tmp_path / "ray_results").rglob("result.json"))
    assert len(results) == 2
    for path in results:  # every trial ran its 4 epochs, each reported once
        epochs = [int(line.split('"epoch": ')[1].split(",")[0])
                  for line in path.read_text().splitlines()]
        assert epochs == [1, 2, 3, 4], (path, epochs)
