"""The ``fluid`` command line (console script ``fluid``; also ``python -m fluid``).

Every subcommand lives in its own module that exposes ``register(subparsers)``: it adds its
parser and sets ``func`` (``func(args) -> int``, the exit code) with ``set_defaults``. Adding a
subcommand is one line in ``SUBCOMMANDS``. Modules are imported when the parser is built, so
they must import heavy dependencies (ray, torch) inside ``func``, not at module level.

User errors (a bad instance, a missing file, an invalid value) print ``fluid: error: ...`` on
stderr and exit with code 2, without a traceback.

With ``--json`` a subcommand prints exactly one JSON document on stdout, with ``print_json``:
while it runs, everything else written to stdout (its own lines, Ray Tune's experiment banner
and tables, Ray's logs, child processes started meanwhile) goes to stderr (``json_stdout``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

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


#: Where ``print_json`` writes: the real stdout while ``json_stdout`` is active, else None.
_json_out: TextIO | None = None


@contextlib.contextmanager
def json_stdout() -> Iterator[TextIO]:
    """Send stdout to stderr until the block ends; yields a stream to the real stdout.

    Redirected at the Python level (``print``, ``sys.stdout``) and, when ``sys.stdout`` is file
    descriptor 1, at the descriptor level too: Ray's C++ core, its log handlers holding the
    old stream and processes started inside the block write to descriptor 1 directly.
    """
    global _json_out
    out = sys.stdout
    out.flush()
    try:
        fd_level = out.fileno() == 1
    except (AttributeError, OSError, ValueError):  # pytest's capsys, io.StringIO
        fd_level = False
    previous = _json_out
    with contextlib.ExitStack() as stack:
        real = out
        if fd_level:
            saved = os.dup(1)
            stack.callback(os.close, saved)
            real = stack.enter_context(open(saved, "w", encoding="utf-8", closefd=False))
            os.dup2(2, 1)
            stack.callback(os.dup2, saved, 1)
            stack.callback(out.flush)  # what the old stream buffered meanwhile: to stderr
        stack.callback(sys.stderr.flush)
        _json_out = real
        try:
            with contextlib.redirect_stdout(sys.stderr):
                yield real
        finally:
            _json_out = previous


def print_json(obj: Any) -> None:
    """Print ``obj`` as one line of JSON on the real stdout (see ``json_stdout``)."""
    out = _json_out if _json_out is not None else sys.stdout
    out.write(json.dumps(obj) + "\n")
    out.flush()


def print_result(args: argparse.Namespace, obj: Any, show: Callable[[], object]) -> int:
    """``obj`` as JSON with ``--json`` (``print_json``), else ``show()`` prints it for people;
    returns 0, the exit code."""
    if args.json:
        print_json(obj)
    else:
        show()
    return 0


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1,
               rule: bool = False) -> str:
    """Columns two spaces apart, each as wide as its widest cell: the first ``left`` columns
    left-aligned, the others right-aligned; ``rule``: a line of dashes under the headers."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    dashes = ["  ".join("-" * w for w in widths)] if rule else []
    return "\n".join([line(headers), *dashes, *(line(r) for r in rows)])


@contextlib.contextmanager
def ray_instance(gpus: int = 0, cpus: int = 2, address: str | None = None,
                 quiet: bool = True) -> Iterator[None]:
    """Ray for the block, shut down after it: the cluster at ``address``, else a local instance
    with ``cpus`` CPUs and ``gpus`` logical GPUs; no dashboard, no worker logs on the driver,
    and with ``quiet`` Ray's own logs at WARNING only."""
    import logging

    import ray

    where = {"address": address} if address else {"address": "local", "num_cpus": cpus,
                                                   "num_gpus": gpus}
    ray.init(**where, include_dashboard=False, log_to_driver=False,
             **({"logging_level": logging.WARNING} if quiet else {}))
    try:
        yield
    finally:
        ray.shutdown()


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
        if getattr(args, "json", False):
            with json_stdout():
                return int(func(args))
        return int(func(args))
    except InstanceError as e:
        return error(str(e))
    except FileNotFoundError as e:
        return error(f"{e.filename}: no such file" if e.filename else str(e))
    except (ValueError, OSError) as e:
        return error(str(e))
    except KeyboardInterrupt:
        return 130
