"""What a user installs: the wheel ships ``fluid`` only, with its data files, and the simulator's
code path runs without torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_ships_fluid_only_with_its_data(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("fluid", "experiments"):  # experiments/ is there, and must stay out
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "w"),
         str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "deprecated" not in out.stderr.lower(), out.stderr
    (wheel,) = (tmp_path / "w").glob("fluid_tune-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"fluid"}
    data = sorted(p.relative_to(ROOT).as_posix() for ext in ("json", "csv")
                  for p in (ROOT / "fluid").rglob(f"*.{ext}"))  # fmt: skip
    assert "fluid/sim/workloads/profiles.json" in data
    assert set(data) <= set(names)


PROBE = """
import json, sys
from fluid.cli import main
rc = main(["simulate", "--algorithm", "hyperband", "--workload", "cifar10", "--gpus", "2",
           "--seeds", "1", "--samples", "4", "--json", "--no-progress"])
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "experiments"})
print(json.dumps({"rc": rc, "heavy": heavy}))
"""


@pytest.mark.slow
def test_fluid_simulate_imports_neither_torch_nor_experiments() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe == {"rc": 0, "heavy": []}


def readme_pip_commands() -> list[list[str]]:
    """Every ``pip install ...`` line of README's shell blocks, as words (comments dropped)."""
    import re
    import shlex

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("pip install")]


@pytest.mark.slow
def test_every_pip_install_in_the_readme_resolves_as_written() -> None:
    commands = readme_pip_commands()
    assert len(commands) >= 3, commands  # Fluid, with Ray Train, with BOHB
    for words in commands:
        out = subprocess.run([sys.executable, "-m", *words, "--dry-run", "-q"], cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (words, out.stdout[-2000:], out.stderr[-2000:])
        assert "does not provide the extra" not in out.stderr, (words, out.stderr[-2000:])
