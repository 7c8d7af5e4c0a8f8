"""The drop-in scripts (``SCRIPTS``, ``RAY_TRAIN``): user scripts as Ray's docs and other
libraries write them, each run under plain Tune or under ``FluidExecutor()`` with no option
(``run``), and what a user would see of the run (``Outcome``): trial statuses, the result
files, what a callback got, the best config.

A scenario is a ``Script``: the trainable (with its request), the search space, and the
scheduler and searcher as factories (each run gets fresh ones). ``run(script, fluid=...)``
wraps the scheduler in ``FluidExecutor`` (or runs it as is) and bounds the run with Tune's own
``time_budget_s`` (``limit_s``): a run that reaches it is a hang (``Outcome.hung``), a limit
far above what a slow machine takes, so that it stops a hang and never a slow start.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune import RunConfig, TuneConfig, Tuner
from ray.tune.schedulers import ASHAScheduler, HyperBandScheduler
from ray.tune.schedulers import PopulationBasedTraining as RayPBT
from ray.tune.search import ConcurrencyLimiter

from fluid import FluidExecutor
from fluid.dropin import scripts
from fluid.dropin.recorder import Recorder, Seen
from fluid.schedulers import PopulationBasedTraining as FluidPBT

#: Seconds a run may take before it counts as a hang (Tune's ``time_budget_s``).
LIMIT_S = 300.0


@dataclass(frozen=True)
class Script:
    """One user script: what it trains, on what, with which algorithm."""

    name: str
    trainable: Any
    space: dict
    trials: int  # trials the experiment has in all
    scheduler: Callable[[], Any] | None = None
    search: Callable[[], Any] | None = None
    samples: int = 1
    stop: dict | None = None
    expect: int = 0  # trials that can run at once under plain Tune (0: not counted)
    deterministic: bool = True  # the best config is the same under any scheduler
    reuse_actors: bool = False
    options: dict = field(default_factory=dict)  # FluidExecutor's keyword arguments
    wall_bound: float | None = None  # fluid_wall_s / tune_wall_s at most (benchmark)
    limit_s: float = LIMIT_S


@dataclass
class Outcome:
    """What one run showed."""

    wall_s: float
    seen: Seen  # what a callback got
    rows: dict[str, list[dict]]  # trial id -> its result.json rows
    best_q: float | None
    limit_s: float
    errors: list = field(default_factory=list)

    @property
    def hung(self) -> bool:
        """The run reached its limit: a hang, not a slow start (the limit is far above)."""
        return self.wall_s >= self.limit_s

    def column(self, key: str) -> list:
        """Every row's ``key`` (``None`` where a row lacks it)."""
        return [row.get(key) for rows in self.rows.values() for row in rows]


def _rows(path: str) -> list[dict]:
    file = Path(path) / "result.json"
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]


def run(script: Script, fluid: bool, storage: Path, count_at_once: bool = False) -> Outcome:
    """Run ``script`` under plain Tune, or under ``FluidExecutor(base, **script.options)``;
    ``count_at_once``: its trials wait at their start for as many as plain Tune runs at once
    (``scripts.rendezvous``), so that the count is of what the cluster holds."""
    mode = "fluid" if fluid else "tune"
    base = script.scheduler() if script.scheduler else None
    scheduler = FluidExecutor(base, **script.options) if fluid else base
    recorder = Recorder()
    space = dict(script.space)
    if count_at_once and script.expect:
        folder = storage / f"{script.name}-{mode}-at-once"
        folder.mkdir(parents=True)
        space.update(rendezvous=str(folder), expect=script.expect)
    tuner = Tuner(
        script.trainable, param_space=space,
        tune_config=TuneConfig(metric="score", mode="max", scheduler=scheduler,
                               search_alg=script.search() if script.search else None,
                               num_samples=script.samples, time_budget_s=script.limit_s,
                               reuse_actors=script.reuse_actors),
        run_config=RunConfig(name=f"{script.name}-{mode}", storage_path=str(storage),
                             stop=script.stop, verbose=0, callbacks=[recorder]),
    )
    start = time.monotonic()
    grid = tuner.fit()
    wall = time.monotonic() - start
    rows = {r.metrics.get("trial_id", r.path): _rows(r.path) for r in grid}
    best = grid.get_best_result(scope="all") if len(grid) else None
    q = None if best is None or best.config is None else best.config.get("q")
    return Outcome(wall, recorder.seen, rows, q, script.limit_s, list(grid.errors))


def _asking(resources: dict) -> Any:
    """``function_trial`` with its own request: ``tune.with_resources`` marks the function
    object it is given, so each request needs a function of its own."""
    def trial(config: dict) -> None:
        scripts.function_trial(config)

    return tune.with_resources(trial, resources)


def _hyperband() -> Any:
    return HyperBandScheduler(max_t=4, reduction_factor=2)


def _pbt(cls: type) -> Callable[[], Any]:
    return lambda: cls(time_attr="training_iteration", perturbation_interval=2, synch=True,
                       hyperparam_mutations={"q": [0.2, 0.4, 0.6, 0.8]})


def _asha() -> Any:
    return ASHAScheduler(max_t=4, grace_period=1, reduction_factor=2)


def _optuna() -> Any:
    from ray.tune.search.optuna import OptunaSearch

    return OptunaSearch(seed=0)


def _hyperopt() -> Any:
    from ray.tune.search.hyperopt import HyperOptSearch

    # Every config from the seed (n_initial_points >= samples): the same trials in both runs.
    return ConcurrencyLimiter(HyperOptSearch(random_state_seed=0, n_initial_points=8),
                              max_concurrent=2)


def _grid(*qs: float, iters: int = 3, t: float = 0.3) -> dict:
    return {"q": tune.grid_search(list(qs)), "iters": iters, "t": t}


_ONE_GPU = _asking({"gpu": 1})
_HALF = _asking({"cpu": 0.5, "gpu": 0.5})
_EIGHT = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
_PBT_SPACE = _grid(0.2, 0.4, 0.6, 0.8, iters=4, t=0.2)
_SEARCHED = {"q": tune.uniform(0.1, 1.0), "iters": 4, "t": 0.2}

#: The drop-in scripts of what a trial asks for, on a cluster of 8 CPUs and 4 GPUs (``expect``
#: is for that cluster), under FIFO.
REQUESTS = [
    Script("cpu", scripts.cpu_trial, _grid(0.1, 0.3, 0.5, 0.7, 0.9, 1.0), trials=6, expect=6),
    Script("fractional", _HALF, _grid(*_EIGHT), trials=8, expect=8),
    # Fewer shares than fit: each still on exactly its 0.5 GPU, all at once (none widened).
    Script("fractional-6", _HALF, _grid(*_EIGHT[:6]), trials=6, expect=6),
    Script("fractional-kept", _HALF, _grid(*_EIGHT), trials=8, expect=8,
           options={"resize_requests": False}),
    Script("one-gpu", _ONE_GPU, _grid(0.2, 0.4, 0.6, 0.8), trials=4, expect=4),
    Script("two-gpus", _asking({"gpu": 2}), _grid(0.3, 0.6), trials=2, expect=2),
]

#: The drop-in scripts of Tune's schedulers and searchers and other libraries' (one GPU each).
ALGORITHMS = [
    Script("class-hyperband", tune.with_resources(scripts.ClassTrial, {"gpu": 1}),
           {"q": tune.grid_search([0.2, 0.4, 0.6, 0.8]), "t": 0.2}, trials=4,
           scheduler=_hyperband, stop={"training_iteration": 4}),
    Script("ray-pbt", _ONE_GPU, _PBT_SPACE, trials=4, scheduler=_pbt(RayPBT),
           deterministic=False),
    # Actors reused as under Tune: PBT's exploit keeps the shape; ASHA's trials get shapes
    # of Fluid's, each a fresh actor where the shape changed.
    Script("ray-pbt-reuse", _ONE_GPU, _PBT_SPACE, trials=4, scheduler=_pbt(RayPBT),
           deterministic=False, reuse_actors=True),
    Script("optuna-asha-reuse", _ONE_GPU, _SEARCHED, trials=6, samples=6, search=_optuna,
           reuse_actors=True, scheduler=_asha),
    Script("fluid-pbt", _ONE_GPU, _PBT_SPACE, trials=4, scheduler=_pbt(FluidPBT),
           deterministic=False),
    Script("optuna-asha", _ONE_GPU, _SEARCHED, trials=4, samples=4, search=_optuna,
           scheduler=_asha),
    Script("hyperopt-limiter", _ONE_GPU, {**_SEARCHED, "iters": 3}, trials=4, samples=4,
           search=_hyperopt),
]

SCRIPTS = REQUESTS + ALGORITHMS

#: An unmarked Ray Train trial: its driver asks for no GPU; its trainer's 2 workers take one
#: each, outside Tune's placement group. Fluid must not give the driver a GPU its workers then
#: wait for (two such trials fill the 4 GPUs). Its wall time was a promise of the suite:
#: at most 1.5x plain Tune's.
RAY_TRAIN = Script("ray-train", scripts.ray_train_trial, _grid(0.2, 0.6, iters=2, t=0.2),
                   trials=2, wall_bound=1.5)


def run_problems(script: Script, out: Outcome, mode: str, files: bool = True) -> list[str]:
    """What is wrong with one run of ``script`` (none: ``[]``): a hang, an error, a trial not
    completed, an iteration a callback got twice, and (``files``) result files that differ
    from what the callback got. Plain Tune's ``result.json`` of a PBT member loses the rows
    before its exploit (Tune's logger replaces the file with the copy in storage at the
    restore): its files are not compared."""
    ended = out.seen.ended
    if out.hung:
        return [f"{mode}: hang: {len(ended)} of {script.trials} trials ended within "
                f"the limit of {out.limit_s:g} s"]
    problems = [f"{mode}: {e!r}" for e in out.errors]
    if len(ended) != script.trials or set(ended.values()) != {"TERMINATED"}:
        problems.append(f"{mode}: {script.trials} trials, ended: {ended}")
    problems += [f"{mode}: {tid} reported iterations {its} twice"
                 for tid, its in out.seen.repeats().items()]
    if files:
        seen = {tid: sorted(i for i, _tag in rows) for tid, rows in out.seen.results.items()}
        problems += [f"{mode}: {tid}'s result file has iterations {got}, a callback got "
                     f"{seen.get(tid)}" for tid, rows in out.rows.items()
                     if (got := sorted(r["training_iteration"] for r in rows)) != seen.get(tid)]
    return problems


def script_problems(script: Script, plain: Outcome, fluid: Outcome) -> list[str]:
    """What Fluid fails to keep of plain Tune's run of ``script`` (none: ``[]``): both runs
    complete each iteration once, every row under Fluid has ``fluid_shape`` and
    ``fluid_gpus``, and a deterministic script's best config is plain Tune's."""
    problems = run_problems(script, plain, "tune", files=False)
    problems += run_problems(script, fluid, "fluid")
    missing = sum(None in (r.get("fluid_shape"), r.get("fluid_gpus"))
                  for rows in fluid.rows.values() for r in rows)
    if missing:
        problems.append(f"fluid: {missing} result rows without fluid_shape or fluid_gpus")
    if script.deterministic and fluid.best_q != plain.best_q:
        problems.append(f"best q {fluid.best_q} under Fluid, {plain.best_q} under plain Tune")
    return problems
