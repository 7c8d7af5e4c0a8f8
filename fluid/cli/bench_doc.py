"""``fluid bench doc RESULTS_DIR [--run] [--out FILE]``: docs/benchmarks.md from the benchmarks'
own JSON.

``--run`` first runs every benchmark of ``benchmarks_page.BENCHMARKS`` whose result is not in
``RESULTS_DIR`` yet (each a ``fluid`` command with ``--json``), ``--jobs N`` at a time (those
that time the machine itself alone, after the others), saying which; a result is
``NAME.json``: ``{"command", "commit", "output"}``, ``output`` the command's JSON as it
printed it. Then the page is written from what ``RESULTS_DIR`` holds: one section per
question, each table with the command that made it and the commit it ran on, once; a benchmark
not run yet is named with its command.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout
    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no").strip() else "")


#: Benchmarks that time the machine itself: run alone, after the others.
TIMED = frozenset({"policy", "sim", "sim-10000", "e2e", "e2e-load2", "load", "load-nodes4",
                   "dropin"})


def run_missing(results: Path, log: Callable[[str], None], jobs: int = 1,
                benchmarks: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """Run each benchmark (``benchmarks``, default the page's) whose result ``results``
    lacks, writing ``NAME.json``: ``jobs`` at a time, then those of ``TIMED`` one at a time."""
    if benchmarks is None:
        from fluid.cli.benchmarks_page import BENCHMARKS  # (imports fluid.sim: only when run)

        benchmarks = BENCHMARKS
    results.mkdir(parents=True, exist_ok=True)
    todo = [n for n in benchmarks if not (results / f"{n}.json").exists()]
    count = itertools.count(1)

    def one(name: str) -> None:
        log(f"[{next(count)}/{len(todo)}] {name}: fluid {' '.join(benchmarks[name])}")
        _run_one(results, name, benchmarks[name], log)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, [n for n in todo if n not in TIMED]))
    for name in (n for n in todo if n in TIMED):
        one(name)


def _run_one(results: Path, name: str, args: tuple[str, ...],
             log: Callable[[str], None]) -> None:
    argv = list(args)
    command = "fluid " + " ".join(argv)
    markdown = results / f"{name}.md"
    if "--paper" in argv:  # it writes a Markdown section, not JSON
        argv += ["--out", str(markdown)]
    done = subprocess.run([sys.executable, "-m", "fluid", *argv], cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode != 0:
        log(f"  {name} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
        return
    output = {"markdown": markdown.read_text()} if markdown.exists() else json.loads(done.stdout)
    record = {"command": command, "commit": _commit(), "output": output}
    (results / f"{name}.json").write_text(json.dumps(record) + "\n")


def register(subparsers: Any) -> None:
    """Add ``fluid bench doc``."""
    p = subparsers.add_parser(
        "doc", help="write docs/benchmarks.md from the benchmarks' JSON (--run: run them)",
        description="Write docs/benchmarks.md from the results in RESULTS_DIR (NAME.json, "
        "each the JSON a benchmark command printed, with the command and its commit); --run "
        "first runs every benchmark not there yet (an hour or more on 2 CPUs).")
    p.add_argument("results", metavar="RESULTS_DIR", help="where the results are kept")
    p.add_argument("--run", action="store_true", help="run the benchmarks not there yet")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="simulations run N at a time with --run (default 1; the timed "
                   "benchmarks always run alone)")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"),
                   help="the page to write (default: docs/benchmarks.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run what is missing (``--run``), then write the page."""
    from fluid.cli.benchmarks_page import Results, page

    results = Path(args.results)
    if args.run:
        if args.jobs < 1:
            raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
        run_missing(results, lambda line: print(line, file=sys.stderr, flush=True), args.jobs)
    if not results.is_dir():
        raise ValueError(f"RESULTS_DIR {results} does not exist (--run makes it)")
    text = page(Results(results))
    Path(args.out).write_text(text)
    print(f"{args.out}: {len(text.splitlines())} lines")
    return 0
