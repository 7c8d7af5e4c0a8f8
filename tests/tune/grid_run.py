"""A grid experiment on 4 logical GPUs under plain Tune and under Fluid at once, each in a
process of its own on a Ray cluster of its own (``tests.side_by_side``), for the tests that
compare what the two runs did: at once, the pair takes about the time of one run.

``run_both(directory, spec)`` runs ``python -m tests.tune.grid_run tune|fluid OUT SPEC`` both
ways. ``SPEC`` (JSON): ``trials``, the grid's size; ``config``, every trial's config beside
its grid index ``n``; ``trainable``: ``"modeled_trainable"`` (Fluid's elastic modeled
trainable, ``fluid.train.modeled``) or ``"ordinary"`` (``tests.tune.trainables.modeled``, a
trainable Fluid knows nothing of), asking for one GPU and 0.1 CPU; ``fluid``: keyword
arguments of ``FluidExecutor`` besides ``cpus_per_trial=0.1``.

What each run showed (``OUT``, JSON): per trial in grid order its ``status``, ``rows``
(results) and ``least_gpus`` (the fewest GPUs a result of it ran on); under Fluid also its
packing ``estimates`` (the plan log's entries, each saying whether it ``decided`` packing),
``probes`` and ``probe_pairs``, and ``start``, ``packed`` and ``end``: when the first trial started, the
first packed one started (null if none did) and the last ended, from Fluid's shape timelines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ray

from fluid import FluidExecutor, tune
from fluid.train.modeled import modeled_trainable
from tests.side_by_side import run_at_once
from tests.tune.trainables import modeled


def ordinary(config: dict) -> None:
    """``tests.tune.trainables.modeled`` as a function of the user's own: not elastic."""
    modeled(config)


def run_both(directory: Path, spec: dict, timeout_s: float = 600) -> dict[str, dict]:
    """Run ``spec`` under plain Tune and under Fluid at once; ``{mode: what it showed}``.
    Fails with the run's output if either run did not complete."""
    commands = {mode: (["-m", "tests.tune.grid_run", mode, str(directory / f"{mode}.json"),
                        json.dumps(spec)], directory) for mode in ("tune", "fluid")}
    done = run_at_once(commands, timeout_s)
    for mode, (status, log) in done.items():
        assert status == 0, f"{mode}:\n{log[-4000:]}"
    return {mode: json.loads((directory / f"{mode}.json").read_text()) for mode in done}


def _fluid_figures(ex: FluidExecutor, trials: list) -> dict:
    shapes = [s for t in trials for s in ex.shape_timeline(t.trial_id)]
    packed = [at for at, width, _ in shapes if width and width < 1]
    return {
        "estimates": [e for e in ex.plan_log if e["kind"] == "estimate"],
        "probes": sum(r.probe for r in ex.records.values()),
        "probe_pairs": ex.tunables.probe_pairs,
        "start": min(at for at, _, _ in shapes),
        "packed": min(packed, default=None),
        "end": max(at for at, _, _ in shapes),
    }


def main(mode: str, out: str, spec: dict) -> None:
    """Run ``spec`` ``mode``'s way in this process and write what it showed to ``out``."""
    ray.init(num_cpus=4, num_gpus=4, include_dashboard=False, log_to_driver=False)
    fn = {"modeled_trainable": modeled_trainable, "ordinary": ordinary}[spec["trainable"]]
    trainable = ray.tune.with_resources(fn, {"cpu": 0.1, "gpu": 1})
    config = {**spec["config"], "n": tune.grid_search(list(range(spec["trials"])))}
    ex = (FluidExecutor(cpus_per_trial=0.1, **spec.get("fluid", {})) if mode == "fluid"
          else None)
    analysis = tune.run(trainable, config=config, trial_executor=ex, storage_path=out + ".d",
                        verbose=0)
    frames = [analysis.trial_dataframes[t.trial_id] for t in analysis.trials]
    figures = {"status": [t.status for t in analysis.trials],
               "rows": [len(f) for f in frames],
               "least_gpus": [float(min(f["gpus"])) for f in frames]}
    if ex is not None:
        figures |= _fluid_figures(ex, analysis.trials)
    with open(out, "w") as f:
        json.dump(figures, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
