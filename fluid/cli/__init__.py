"""The ``fluid`` command line (console script ``fluid``; also ``python -m fluid``).

Every subcommand lives in its own module that exposes ``register(subparsers)``: it adds its
parser and sets ``func`` (``func(args) -> int``, the exit code) with ``set_defaults``. Adding a
subcommand is one line in ``SUBCOMMANDS``. Modules are imported when the parser is built, so
they must import heavy dependencies (ray, torch) inside ``func``, not at module level.

User errors (a bad instance, a missing file, an invalid value) print ``fluid: error: ...`` on
stderr and exit with code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

from fluid import __version__
from fluid.core.instance import InstanceError

#: Modules with a ``register(subparsers)`` function, one per subcommand, in ``--help`` order.
SUBCOMMANDS: tuple[str, ...] = (
    "fluid.cli.plan",
    "fluid.cli.bench",
    "fluid.cli.demo",
    "fluid.cli.profile",
    "fluid.cli.report",
    "fluid.cli.simulate",
)

#: Exit code of user errors (as argparse uses for usage errors).
USAGE_ERROR = 2


_EMPHASIS = re.compile(r"(?<![\w*])\*(\S(?:[^*\n]*\S)?)\*(?![\w*])")


def plain(text: str) -> str:
    """Docstring markup out of help text: ``` ``code`` ``` and ``*emphasis*`` become plain."""
    return _EMPHASIS.sub(r"\1", text.replace("``", ""))


class FluidParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help is plain text (subcommand parsers inherit it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for key in ("description", "epilog"):
            if kwargs.get(key):
                kwargs[key] = plain(kwargs[key])
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if isinstance(kwargs.get("help"), str):
            kwargs["help"] = plain(kwargs["help"])
        return super().add_argument(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The ``fluid`` parser with every registered subcommand."""
    parser = FluidParser(
        prog="fluid",
        description="Fluid: a resource-aware execution engine for hyperparameter tuning.",
    )
    parser.add_argument("--version", action="version", version=f"fluid {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def error(message: str) -> int:
    """Report a user error the way every subcommand does; returns the exit code (2)."""
    print(f"fluid: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``fluid`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors: argparse already printed
        return e.code if isinstance(e.code, int) else USAGE_ERROR
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    try:
        return int(func(args))
    except InstanceError as e:
        return error(str(e))
    except FileNotFoundError as e:
        return error(f"{e.filename}: no such file" if e.filename else str(e))
    except (ValueError, OSError) as e:
        return error(str(e))
    except KeyboardInterrupt:
        return 130
