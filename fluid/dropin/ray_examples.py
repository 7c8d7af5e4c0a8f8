"""Ray's own Tune examples (``ray/tune/examples`` in the installed wheel), run as shipped under
plain Tune or with only the scheduler line wrapped in ``FluidExecutor``, each in a process of
its own, and what a user would see of them.

``fluid_source`` changes one expression of the example: the ``scheduler=`` argument of its
``TuneConfig`` becomes ``FluidExecutor(<it>)``, or ``scheduler=FluidExecutor()`` is added
where it has none. ``run_example`` runs the example one way in a new process
(``python -m fluid.dropin.ray_examples NAME tune|fluid OUT -- ARGS``): a ``Recorder`` added to
its ``Tuner`` writes what a callback saw and the wall time of ``Tuner.fit`` to ``OUT`` as JSON
(``ExampleRun``). A process still running after ``limit_s`` is killed: a hang.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray.tune.examples

from fluid.dropin.recorder import Recorder, Seen

EXAMPLES = Path(ray.tune.examples.__file__).parent
#: Trials running at once for this long in all under plain Tune must also run at once under
#: Fluid. A shorter level is a race between actor starts: in one run of BOHB's example, plain
#: Tune's 4 at once lasted 1.6 s of 96 s (1 or 2 at once: 17.5 s).
HELD_S = 2.0
#: Seconds an example's process may run before it counts as a hang.
LIMIT_S = 900.0

#: The examples of the drop-in suite, with the arguments Ray's own CI gives them: a PBT example
#: as shipped (the class API, ``reuse_actors=True``), ASHA with a model-based searcher behind a
#: ``ConcurrencyLimiter``, and BOHB (``pip install 'fluid-tune[bohb]'``).
SUITE: dict[str, tuple[str, ...]] = {
    "pbt_example": ("--smoke-test",),
    "optuna_example": ("--smoke-test",),
    "bohb_example": (),
}

#: Ray's examples that run here (no data set to download; packages of the ``test`` extra),
#: with the arguments Ray's own CI gives them. ``optuna_define_by_run_example`` fails under
#: plain Tune with the Optuna of the ``test`` extra: it is not among them.
RUNS_HERE: dict[str, tuple[str, ...]] = {
    "tune_basic_example": ("--smoke-test",),
    "async_hyperband_example": ("--smoke-test",),
    "hyperband_example": ("--smoke-test",),
    "hyperband_function_example": ("--smoke-test",),
    **SUITE,
    "pbt_function": ("--smoke-test",),
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
    seen: Seen
    output: str  # the end of the process's output
    hung: bool = False  # killed at its limit


def run_example(name: str, mode: str, out_dir: Path, args: tuple[str, ...] = (),
                limit_s: float = LIMIT_S) -> ExampleRun:
    """Run Ray's example ``name`` (its file's stem) as shipped (``mode`` ``"tune"``) or with
    its scheduler wrapped (``"fluid"``) in a new process, its working directory
    ``out_dir / mode``, on a Ray instance of its own."""
    where = out_dir / mode
    where.mkdir(parents=True, exist_ok=True)
    out = where / f"{name}.json"
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, RAY_ADDRESS="local",  # its own instance, never a neighbour's
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    hung = False
    with tempfile.TemporaryFile("w+") as log:  # a file: a pipe would block a verbose example
        proc = subprocess.Popen([sys.executable, "-m", "fluid.dropin.ray_examples", name, mode,
                                 str(out), "--", *args], cwd=where, env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            hung = True
        log.seek(0)
        output = log.read()[-8000:] + (f"\n(hang: killed after {limit_s:g} s)" if hung else "")
    if not out.exists():
        return ExampleRun(proc.returncode, 0.0, Seen(), output, hung)
    data = json.loads(out.read_text())
    return ExampleRun(proc.returncode, data["wall_s"], Seen.from_json(data["seen"]), output,
                      hung)


def example_problems(plain: ExampleRun, fluid: ExampleRun) -> list[str]:
    """What Fluid fails to keep of plain Tune's run of an example (none: ``[]``): each run
    exits 0 with every trial TERMINATED and each trial's iterations in order, none lost or
    repeated (a PBT exploit may jump); Fluid's with as many trials, a ``fluid_shape`` on
    every result."""
    problems = []
    for mode, run in (("tune", plain), ("fluid", fluid)):
        if run.hung or run.returncode != 0:
            problems.append(f"{mode}: {'hang' if run.hung else f'exit {run.returncode}'}:\n"
                            f"{run.output[-3000:]}")
            continue
        if not run.seen.ended or set(run.seen.ended.values()) != {"TERMINATED"}:
            problems.append(f"{mode}: ended {run.seen.ended}")
        if run.seen.iteration_breaks():
            problems.append(f"{mode}: results lost or repeated (trial, iteration, next): "
                            f"{run.seen.iteration_breaks()}")
    if len(fluid.seen.ended) != len(plain.seen.ended):
        problems.append(f"{len(fluid.seen.ended)} trials under Fluid, "
                        f"{len(plain.seen.ended)} under plain Tune")
    if None in fluid.seen.shapes:
        problems.append(f"fluid: {fluid.seen.shapes.count(None)} results without fluid_shape")
    return problems


def _main(name: str, mode: str, out: str, args: list[str]) -> None:
    """Run the example in this process, its ``Tuner`` given the recorder and a storage path
    of its own (the working directory)."""
    from ray import tune

    recorder = Recorder()
    init, fit = tune.Tuner.__init__, tune.Tuner.fit

    def tuner_init(self, *a: Any, run_config: Any = None, **kw: Any) -> None:
        run_config = run_config or tune.RunConfig()
        run_config.callbacks = [*(run_config.callbacks or []), recorder]
        run_config.storage_path = os.path.join(os.getcwd(), "results")
        init(self, *a, run_config=run_config, **kw)

    def tuner_fit(self) -> Any:
        start = time.monotonic()
        try:
            return fit(self)
        finally:
            Path(out).write_text(json.dumps({"wall_s": time.monotonic() - start,
                                             "seen": recorder.seen.to_json()}))

    tune.Tuner.__init__, tune.Tuner.fit = tuner_init, tuner_fit
    path = EXAMPLES / f"{name}.py"
    source = path.read_text()
    if mode == "fluid":
        source = fluid_source(source)
    sys.argv = [str(path), *args]
    exec(compile(source, str(path), "exec"), {"__name__": "__main__", "__file__": str(path)})


if __name__ == "__main__":
    _name, _mode, _out, _sep, *_args = sys.argv[1:]
    _main(_name, _mode, _out, _args)
