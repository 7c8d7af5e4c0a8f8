"""Sizes, read from the source (``ast``, nothing is imported): every module of the project
(``fluid``, ``experiments``, ``examples``, ``tools``, ``tests``) stays under 400 lines and every
function under 60, from ``def`` to its last line. A longer one is a sign it holds two jobs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("fluid", "experiments", "examples", "tools", "tests")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: Modules allowed to be longer, each with why; generated tables would be named here too.
LONG_MODULES: dict[str, str] = {}

SOURCES = {str(p.relative_to(ROOT)): p.read_text()
           for folder in CODE for p in sorted((ROOT / folder).rglob("*.py"))}


def _lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function as a reader meets them, from ``def`` to its last line."""
    return fn.end_lineno - fn.lineno + 1  # type: ignore[operator]


def test_every_folder_is_read() -> None:
    assert {name.split("/")[0] for name in SOURCES} == set(CODE)


def test_no_module_holds_two_jobs() -> None:
    long = {name: n for name, text in SOURCES.items()
            if name not in LONG_MODULES and (n := len(text.splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_functions_are_short() -> None:
    long = sorted(f"{name}:{node.name}: {n} lines" for name, text in SOURCES.items()
                  for node in ast.walk(ast.parse(text, name))
                  if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                  and (n := _lines(node)) > MAX_FUNCTION_LINES)
    assert long == []


def test_known_long_modules_are_still_long() -> None:
    """An exception that no longer applies must leave ``LONG_MODULES``."""
    for name in LONG_MODULES:
        assert len(SOURCES[name].splitlines()) > MAX_MODULE_LINES, name
