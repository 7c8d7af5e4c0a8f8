"""``fluid bench dropin``: the drop-in suite's scripts under plain Tune and under Fluid, timed
side by side.

Each drop-in script (``fluid.dropin.suite``: user scripts as Ray's docs and other libraries
write them, and an unmarked Ray Train trial) runs under plain Tune, then under
``FluidExecutor()`` with no option, one after the other on one local Ray instance of 8 logical
CPUs and 4 logical GPUs; each of Ray's own shipped examples of the suite
(``fluid.dropin.ray_examples.SUITE``) runs as shipped, then with only its scheduler wrapped,
each in a process and a Ray instance of its own. Run it on an otherwise idle machine: the two
runs of a script are minutes apart, and what else loads the machine loads them unequally.

Printed per script: both wall times (of ``Tuner.fit``) and their ratio, the most trials
RUNNING at once in each run and for how many seconds it held them, and then each bound as a
PASS or FAIL line:

* every run completes each iteration once (``fluid.dropin``'s behaviour checks, which the
  test suite asserts too);
* a script that counts its trials at once (each trial waits at its start for as many as plain
  Tune runs at once): plain Tune runs that many, and Fluid at least as many;
* the Ray Train trial: Fluid's wall time at most 1.5x plain Tune's;
* Ray's examples: Fluid holds at least as many trials at once as plain Tune held for 2 s or
  more, and its wall time is at most 1.3x plain Tune's + 10 s, plain Tune's scaled up to the
  iterations Fluid's run did where it did more (the examples' searchers are unseeded).

``--json`` prints a list with one object per script: ``script``, ``tune_wall_s``,
``fluid_wall_s``, ``ratio``, ``tune_at_once``, ``fluid_at_once``, ``tune_held_s``,
``fluid_held_s``, ``tune_iterations``, ``fluid_iterations``, ``bounds`` (each ``bound`` with
its ``ok``) and ``ok`` (every bound held). The exit code is 0 where the runs were measured,
whether or not the bounds held (the ``ok`` fields and FAIL lines say).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from fluid.cli import print_result, ray_instance, text_table

#: Ray's examples: Fluid's wall time at most this times plain Tune's (scaled to the work) ...
EXAMPLE_WALL = 1.3
#: ... plus this many seconds (an example's run is tens of seconds of actor starts).
EXAMPLE_SLACK_S = 10.0


def register(subparsers: Any) -> None:
    """Add ``fluid bench dropin``."""
    p = subparsers.add_parser("dropin", help="the drop-in scripts: plain Tune vs Fluid, timed",
                              description=__doc__)
    p.add_argument("--only", metavar="NAMES", default="",
                   help="comma-separated script names (default: all; --list names them)")
    p.add_argument("--list", action="store_true", help="print the script names and exit")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object a script")
    p.set_defaults(func=run)


def _names() -> tuple[list[Any], list[str]]:
    from fluid.dropin.ray_examples import SUITE
    from fluid.dropin.suite import RAY_TRAIN, SCRIPTS

    return [*SCRIPTS, RAY_TRAIN], list(SUITE)


def selected(only: str, scripts: list[Any], examples: list[str]) -> tuple[list[Any], list[str]]:
    """The scripts and examples ``--only`` names (all where it is empty)."""
    if not only:
        return scripts, examples
    wanted = [n.strip() for n in only.split(",") if n.strip()]
    known = [s.name for s in scripts] + examples
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"--only: unknown script {', '.join(unknown)}; "
                         f"one of {', '.join(known)}")
    return [s for s in scripts if s.name in wanted], [e for e in examples if e in wanted]


def row(name: str, plain: Any, fluid: Any, bounds: list[tuple[str, bool]]) -> dict[str, Any]:
    """One script's figures from its pair of runs (each with ``wall_s`` and ``seen``: a
    ``fluid.dropin.suite.Outcome`` or a ``fluid.dropin.ray_examples.ExampleRun``)."""
    return {"script": name, "tune_wall_s": plain.wall_s, "fluid_wall_s": fluid.wall_s,
            "ratio": fluid.wall_s / plain.wall_s if plain.wall_s else None,
            "tune_at_once": plain.seen.at_once, "fluid_at_once": fluid.seen.at_once,
            "tune_held_s": plain.seen.held_most_s(), "fluid_held_s": fluid.seen.held_most_s(),
            "tune_iterations": plain.seen.iterations,
            "fluid_iterations": fluid.seen.iterations,
            "bounds": [{"bound": b, "ok": ok} for b, ok in bounds],
            "ok": all(ok for _b, ok in bounds)}


def _completes(problems: list[str]) -> tuple[str, bool]:
    """The bound every pair of runs has: the behaviour checks found nothing."""
    said = "" if not problems else f" ({'; '.join(problems)[:300]})"
    return "each run completes each iteration once" + said, not problems


def script_bounds(script: Any, problems: list[str], plain: Any,
                  fluid: Any) -> list[tuple[str, bool]]:
    """The bounds of one drop-in script's pair of runs."""
    tune_at_once, fluid_at_once = plain.seen.at_once, fluid.seen.at_once
    bounds = [_completes(problems)]
    if script.expect:
        bounds.append((f"plain Tune runs {script.expect} at once", tune_at_once == script.expect))
        bounds.append((f"Fluid runs at least as many at once as plain Tune ({tune_at_once})",
                       fluid_at_once >= tune_at_once))
    if script.wall_bound is not None:
        bounds.append((f"Fluid's wall at most {script.wall_bound:g}x plain Tune's",
                       fluid.wall_s <= script.wall_bound * plain.wall_s))
    return bounds


def example_bounds(problems: list[str], plain: Any, fluid: Any) -> list[tuple[str, bool]]:
    """The bounds of one Ray example's pair of runs."""
    from fluid.dropin.ray_examples import HELD_S

    held = plain.seen.at_once_for(HELD_S)
    work = max(1.0, fluid.seen.iterations / max(1, plain.seen.iterations))
    limit = EXAMPLE_WALL * plain.wall_s * work + EXAMPLE_SLACK_S
    return [_completes(problems),
            (f"Fluid runs at least as many at once as plain Tune held for {HELD_S:g} s ({held})",
             fluid.seen.at_once >= held),
            (f"Fluid's wall at most {limit:.1f} s ({EXAMPLE_WALL:g}x plain Tune's x {work:.2f} "
             f"of its work + {EXAMPLE_SLACK_S:g} s)", fluid.wall_s <= limit)]


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _run_scripts(scripts: list[Any], storage: Path) -> list[dict[str, Any]]:
    from fluid.dropin.suite import run as run_script
    from fluid.dropin.suite import script_problems

    rows = []
    with ray_instance(gpus=4, cpus=8):
        for i, script in enumerate(scripts, 1):
            _log(f"[{i}/{len(scripts)}] {script.name}: plain Tune, then Fluid ...")
            plain = run_script(script, False, storage, count_at_once=True)
            fluid = run_script(script, True, storage, count_at_once=True)
            bounds = script_bounds(script, script_problems(script, plain, fluid), plain, fluid)
            rows.append(row(script.name, plain, fluid, bounds))
    return rows


def _run_examples(examples: list[str], storage: Path) -> list[dict[str, Any]]:
    from fluid.dropin.ray_examples import SUITE, example_problems, run_example

    rows = []
    for i, name in enumerate(examples, 1):
        _log(f"[{i}/{len(examples)}] Ray's {name}: as shipped, then under Fluid ...")
        plain, fluid = (run_example(name, mode, storage / name, SUITE[name])
                        for mode in ("tune", "fluid"))
        bounds = example_bounds(example_problems(plain, fluid), plain, fluid)
        rows.append(row(name, plain, fluid, bounds))
    return rows


def run(args: argparse.Namespace) -> int:
    """Run the selected scripts both ways; print the figures and the bounds."""
    scripts, examples = _names()
    if args.list:
        print("\n".join([s.name for s in scripts] + examples))
        return 0
    scripts, examples = selected(args.only, scripts, examples)
    with tempfile.TemporaryDirectory(prefix="fluid-bench-dropin-") as tmp:
        rows = _run_scripts(scripts, Path(tmp)) if scripts else []
        rows += _run_examples(examples, Path(tmp))
    return print_result(args, rows, lambda: print(report(rows)))


def report(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table, then every bound as a PASS or FAIL line."""
    table = text_table(
        ["script", "tune s", "fluid s", "ratio", "at once", "held s", "iterations"],
        [[r["script"], f"{r['tune_wall_s']:.1f}", f"{r['fluid_wall_s']:.1f}",
          "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
          f"{r['tune_at_once']}/{r['fluid_at_once']}",
          f"{r['tune_held_s']:.1f}/{r['fluid_held_s']:.1f}",
          f"{r['tune_iterations']}/{r['fluid_iterations']}"] for r in rows], rule=True)
    lines = [f"{'PASS' if b['ok'] else 'FAIL'} {r['script']}: {b['bound']}"
             for r in rows for b in r["bounds"]]
    failed = sum(not r["ok"] for r in rows)
    return "\n".join(["plain Tune / Fluid, one after the other", table, "", *lines,
                      f"{len(rows) - failed} of {len(rows)} scripts within their bounds"])


def page_section(res: Any) -> list[str]:
    """docs/benchmarks.md's section of this benchmark (``res``: ``benchmarks_page.Results``)."""
    lines = ["## Drop-in: the suite's scripts timed side by side", "",
             "The drop-in suite's scripts and Ray's shipped examples under plain Tune, then "
             "under `FluidExecutor()` with no option, on an otherwise idle machine (8 logical "
             "CPUs and 4 logical GPUs; each example on a Ray instance of its own). At once: "
             "the most trials RUNNING at one time, plain Tune's / Fluid's; held: for how many "
             "seconds in all.", "", *res.provenance(["dropin"]), ""]
    out = res.get("dropin")
    if out is None:
        return lines
    lines += ["| script | plain Tune s | Fluid s | ratio | at once | held s | bounds |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for r in out:
        failed = [b["bound"] for b in r["bounds"] if not b["ok"]]
        lines.append(
            f"| {r['script']} | {r['tune_wall_s']:.1f} | {r['fluid_wall_s']:.1f} | "
            f"{'-' if r['ratio'] is None else format(r['ratio'], '.2f')} | "
            f"{r['tune_at_once']} / {r['fluid_at_once']} | "
            f"{r['tune_held_s']:.1f} / {r['fluid_held_s']:.1f} | "
            f"{'all held' if not failed else 'FAIL: ' + '; '.join(failed)} |")
    return lines + [""]
