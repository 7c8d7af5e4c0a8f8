"""``fluid report RESULTS_DIR [RESULTS_DIR ...] [--out DIR]``: plot experiment runs as PNGs.

Plot what a tuning run did. RESULTS_DIR is a Ray Tune experiment directory (the
storage_path/name of a Tune run, under FluidExecutor or not) or a results directory written by
python -m experiments.run (holds run.json). Writes, into ``--out`` (default: ``report/``
inside the first RESULTS_DIR):

* ``best_metric.png``: best metric vs wall-clock time, one line per run (paper Figures 9-10);
* ``utilization-<run>.png``: per-GPU utilisation heatmap of each run (paper Figures 2 and 6),
  or for a Tune directory ``gpu_use-<run>.png``: GPUs allocated to trials over time;
* ``shapes-<run>.png``: each trial's shape (packed / one GPU / gang of w) over time.

Needs matplotlib (``pip install matplotlib``, or ``pip install '.[plot]'`` from a checkout).
Also runs as ``python -m fluid.cli.report``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fluid.cli import error, print_json


def register(subparsers: Any) -> None:
    """Add the ``report`` subcommand to ``fluid``."""
    p = subparsers.add_parser(
        "report",
        help="plot experiment runs (best metric over time, GPU heatmap, trial shapes)",
        description="Plot what a tuning run did: best metric over time, GPU use, each "
        "trial's shape over time. RESULTS_DIR is a Ray Tune experiment directory (the "
        "storage_path/name of a Tune run) or a results directory of python -m experiments.run "
        "(holds run.json).",
    )
    _add_arguments(p)
    p.set_defaults(func=run)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR",
                   help="a Ray Tune experiment directory, or a results directory with run.json")
    p.add_argument("--metric", default=None,
                   help="objective of a Tune directory (default: the experiment's own)")
    p.add_argument("--mode", default=None, choices=("max", "min"),
                   help="max or min (default: the experiment's own)")
    p.add_argument("-o", "--out", default=None,
                   help="directory for the PNGs (default: RESULTS_DIR/report of the first run)")
    p.add_argument("--json", action="store_true", help="list the written files as JSON")


def run(args: argparse.Namespace) -> int:
    """Write the plots; print one line per file (or a JSON list with ``--json``)."""
    from fluid.report import ReportError, write_report

    out = Path(args.out) if args.out else Path(args.results[0]) / "report"
    try:
        plots = write_report(args.results, out, args.metric, args.mode)
    except ReportError as e:
        return error(str(e))
    if args.json:
        print_json([{"path": str(p.path), "kind": p.kind, "series": p.series} for p in plots])
    else:
        for p in plots:
            print(f"{p.path}  ({p.kind}, {len(p.series)} series)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fluid.cli.report``: the same as ``fluid report``."""
    parser = argparse.ArgumentParser(prog="fluid report", description=__doc__)
    _add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
