"""Ray's own Tune examples (``ray/tune/examples`` in the installed wheel), run as shipped under
plain Tune or with only the scheduler line wrapped in ``FluidExecutor``, each in a process of
its own, and what a user would see of them.

``fluid_source`` changes one expression of the example: the ``scheduler=`` argument of its
``TuneConfig`` becomes ``FluidExecutor(<it>)``, or ``scheduler=FluidExecutor()`` is added
where it has none. ``run_examples`` runs the example both ways at once, each in a process of
its own (``python -m tests.dropin.ray_examples NAME tune|fluid OUT -- ARGS``); a callback added to its ``Tuner`` records each trial's results
(iteration and experiment tag), how each trial ended, the most trials running at once and the
wall time of ``Tuner.fit``, written to ``OUT`` as JSON (``ExampleRun``).

``python -m tests.dropin.ray_examples compare [NAME ...]`` runs every example of ``RUNS_HERE``
(or those named) both ways and prints their figures side by side.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray.tune.examples

from tests.side_by_side import run_at_once

EXAMPLES = Path(ray.tune.examples.__file__).parent
#: Trials running at once for this long in all under plain Tune must also run at once under
#: Fluid. A shorter level is a race between actor starts: in one run of BOHB's example, plain
#: Tune's 4 at once lasted 1.6 s of 96 s (1 or 2 at once: 17.5 s).
HELD_S = 2.0

#: Ray's examples that run here (no data set to download; packages of the ``test`` extra),
#: with the arguments Ray's own CI gives them. ``optuna_define_by_run_example`` fails under
#: plain Tune with the Optuna of the ``test`` extra: it is not among them.
RUNS_HERE: dict[str, tuple[str, ...]] = {
    "tune_basic_example": ("--smoke-test",),
    "async_hyperband_example": ("--smoke-test",),
    "hyperband_example": ("--smoke-test",),
    "hyperband_function_example": ("--smoke-test",),
    "bohb_example": (),
    "pbt_example": ("--smoke-test",),
    "pbt_function": ("--smoke-test",),
    "optuna_example": ("--smoke-test",),
    "optuna_multiobjective_example": ("--smoke-test",),
    "hyperopt_conditional_search_space_example": ("--smoke-test",),
    "logging_example": ("--smoke-test",),
    "custom_func_checkpointing": ("--smoke-test",),
    "custom_checkpointing_with_callback": ("--smoke-test",),
}


def fluid_source(source: str) -> str:
    """``source`` with its ``TuneConfig``'s scheduler wrapped in ``FluidExecutor`` (added
    where it has none), and ``FluidExecutor`` imported; every other line as it was."""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
             and getattr(n.func, "attr", getattr(n.func, "id", None)) == "TuneConfig"]
    if len(calls) != 1:
        raise ValueError(f"expected one TuneConfig(...) call, found {len(calls)}")
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(lineno: int, col: int) -> int:
        return offsets[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    call = calls[0]
    kw = next((k for k in call.keywords if k.arg == "scheduler"), None)
    if kw is None:  # none: FIFO under plain Tune, so FluidExecutor() with no base
        start = at(call.func.end_lineno, call.func.end_col_offset) + 1  # after "TuneConfig("
        new = source[:start] + "scheduler=FluidExecutor(), " + source[start:]
    else:
        v = kw.value
        start, end = at(v.lineno, v.col_offset), at(v.end_lineno, v.end_col_offset)
        new = f"{source[:start]}FluidExecutor({source[start:end]}){source[end:]}"
    return "from fluid import FluidExecutor\n" + new


@dataclass
class ExampleRun:
    """What one run of an example showed."""

    returncode: int
    wall_s: float  # of Tuner.fit
    ended: dict[str, str]  # trial id -> TERMINATED / ERROR
    results: dict[str, list[list]]  # trial id -> [[iteration, experiment tag], ...]
    at_once: int  # most trials RUNNING at once
    shapes: list  # every result's fluid_shape (None where it had none)
    output: str
    held_s: dict[int, float] = field(default_factory=dict)  # trials RUNNING -> seconds so

    def at_once_for(self, seconds: float) -> int:
        """The most trials RUNNING at once for ``seconds`` in all over the run. Where trials
        run for less than an actor takes to start (most of these examples: their trials are
        RUNNING a small part of the wall time, which Tune's own actor starts and checkpoints
        fill), the most at any one instant is a race between actor starts."""
        return max((n for n in self.held_s
                    if sum(s for m, s in self.held_s.items() if m >= n) >= seconds), default=0)

    @property
    def iterations(self) -> int:
        """Results reported over all trials: the work the run did (an unseeded searcher and
        an early-stopping scheduler make it differ from run to run)."""
        return sum(len(rows) for rows in self.results.values())

    def iteration_breaks(self) -> list[tuple[str, int, int]]:
        """``(trial, iteration, next)`` where a trial's next result is not the next iteration
        and its experiment tag stayed the same (a PBT exploit changes the tag): a result lost
        or repeated."""
        breaks = []
        for tid, rows in self.results.items():
            for (i, tag), (j, tag2) in zip(rows, rows[1:], strict=False):
                if j != i + 1 and tag == tag2:
                    breaks.append((tid, i, j))
            if rows and rows[0][0] != 1:
                breaks.append((tid, 0, rows[0][0]))
        return breaks


def run_examples(name: str, out_dir: Path, args: tuple[str, ...] = (),
                 timeout_s: float = 300.0) -> tuple[ExampleRun, ExampleRun]:
    """Run Ray's example ``name`` (its file's stem) as shipped and with its scheduler wrapped,
    each in a new process, both at once: whatever else loads the machine loads both alike
    (their Ray clusters are separate; trials at once are counted in Tune, not in cores)."""
    commands = {}
    for mode in ("tune", "fluid"):
        (out_dir / mode).mkdir(parents=True, exist_ok=True)
        commands[mode] = (["-m", "tests.dropin.ray_examples", name, mode,
                           str(out_dir / mode / f"{name}.json"), "--", *args], out_dir / mode)
    done = run_at_once(commands, timeout_s)
    runs = [_read(out_dir / mode / f"{name}.json", *done[mode]) for mode in commands]
    return runs[0], runs[1]


def _read(out: Path, returncode: int, log: str) -> ExampleRun:
    log = log[-8000:]
    if not out.exists():
        return ExampleRun(returncode, 0.0, {}, {}, 0, [], log)
    data = json.loads(out.read_text())
    return ExampleRun(returncode, data["wall_s"], data["ended"], data["results"],
                      data["at_once"], data["shapes"], log,
                      {int(n): s for n, s in data["held_s"].items()})


class _Recorder:
    """A Tune callback (made a subclass of ``ray.tune.Callback`` in ``_main``): what a user's
    callback gets, written to ``path`` at the end of the experiment."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.results: dict[str, list[list]] = defaultdict(list)
        self.ended: dict[str, str] = {}
        self.shapes: list = []
        self.at_once = 0
        self.wall_s = 0.0
        self._running = 0  # trials RUNNING at the last count, since self._since
        self._since: float | None = None
        self.held_s: dict[int, float] = defaultdict(float)

    def _count(self, trials: list, starting: Any = None) -> None:
        running = sum(t.status == "RUNNING" or t is starting for t in trials)
        self.at_once = max(self.at_once, running)
        now = time.monotonic()
        if self._since is not None:
            self.held_s[self._running] += now - self._since
        self._running, self._since = running, now

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        self._count(trials)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self._count(trials)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._count(trials, starting=trial)  # Tune marks it RUNNING after this call

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        self._count(trials)
        self.results[trial.trial_id].append([int(result["training_iteration"]),
                                             trial.experiment_tag])
        self.shapes.append(result.get("fluid_shape"))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.ended[trial.trial_id] = "TERMINATED"

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.ended[trial.trial_id] = "ERROR"

    def write(self) -> None:
        Path(self.path).write_text(json.dumps({
            "wall_s": self.wall_s, "ended": self.ended, "results": self.results,
            "at_once": self.at_once, "shapes": self.shapes, "held_s": self.held_s}))


def _main(name: str, mode: str, out: str, args: list[str]) -> None:
    """Run the example in this process, its ``Tuner`` given the recorder and a storage path
    of its own (the working directory)."""
    from ray import tune

    recorder = type("Recorder", (_Recorder, tune.Callback), {})(out)
    init, fit = tune.Tuner.__init__, tune.Tuner.fit

    def tuner_init(self: Any, *a: Any, run_config: Any = None, **kw: Any) -> None:
        run_config = run_config or tune.RunConfig()
        run_config.callbacks = [*(run_config.callbacks or []), recorder]
        run_config.storage_path = os.path.join(os.getcwd(), "results")
        init(self, *a, run_config=run_config, **kw)

    def tuner_fit(self: Any) -> Any:
        start = time.monotonic()
        try:
            return fit(self)
        finally:
            recorder.wall_s = time.monotonic() - start
            recorder.write()

    tune.Tuner.__init__, tune.Tuner.fit = tuner_init, tuner_fit
    path = EXAMPLES / f"{name}.py"
    source = path.read_text()
    if mode == "fluid":
        source = fluid_source(source)
    sys.argv = [str(path), *args]
    exec(compile(source, str(path), "exec"), {"__name__": "__main__", "__file__": str(path)})


def compare(names: list[str]) -> int:
    """Run each example both ways, print one line each; returns how many broke a rule of
    ``tests/dropin/test_ray_examples.py``."""
    import tempfile

    from tests.dropin.test_ray_examples import check

    failed = 0
    print(f"{'example':44} {'tune s':>7} {'fluid s':>7} {'ratio':>6} {'at once':>8} "
          f"{f'for {HELD_S:g} s':>8} {'trials':>7}")
    for name in names or list(RUNS_HERE):
        with tempfile.TemporaryDirectory() as tmp:
            plain, fluid = run_examples(name, Path(tmp), RUNS_HERE.get(name, ()))
        try:
            check(plain, fluid)
            verdict = "ok"
        except AssertionError as e:
            failed += 1
            verdict = f"FAILED: {str(e)[:200]}"
        ratio = fluid.wall_s / plain.wall_s if plain.wall_s else float("nan")
        print(f"{name:44} {plain.wall_s:7.1f} {fluid.wall_s:7.1f} {ratio:6.2f} "
              f"{plain.at_once:>3}/{fluid.at_once:<4} "
              f"{plain.at_once_for(HELD_S):>3}/{fluid.at_once_for(HELD_S):<4} "
              f"{len(plain.ended):>3}/{len(fluid.ended):<3} "
              f"{verdict}", flush=True)
    return failed


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:
        sys.exit(1 if compare(sys.argv[2:]) else 0)
    _name, _mode, _out, _sep, *_args = sys.argv[1:]
    _main(_name, _mode, _out, _args)
