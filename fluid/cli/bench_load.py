"""``fluid bench load``: many zero-work trials under FluidExecutor and under plain Tune.

One local Ray instance with logical GPUs runs the same job twice: ``--trials`` trials that each
report one result and end. With ``--nodes N`` (N > 1) the instance is a Ray cluster of ``N``
nodes on this machine (``ray.cluster_utils.Cluster``: a raylet each, the driver on the head),
the GPUs and CPUs dealt out among them as evenly as they go, so that the hooks run against the
control store and the scheduling of a multi-node cluster.

Plain Tune gives each trial one GPU; Fluid packs them. Trial processes are bounded by logical
CPUs (one per trial, ``--cpus`` in all) so that both runs start the same number of processes at
once and the machine's memory holds. Printed: wall clock of each, Fluid's time in its own hooks
(its overhead on the driver) and its resizes (restarts it caused), and the driver's memory
before and after, to show it stays bounded. Plain Tune's results are let go (and collected)
before the Fluid run, as a script moving on to its next experiment would; Fluid's executor,
with every trial's record, stays alive and counted.

``--json`` prints one object: ``trials``, ``gpus``, ``cpus``, ``nodes`` and ``node_gpus`` (the
logical GPUs of each node); ``tune`` and ``fluid``, each with ``wall_clock`` (s),
``completed`` (trials that ended normally) and ``nodes_used`` (the nodes they ran on),
``fluid`` also with ``vs_tune`` (its wall clock over Tune's), ``hook_seconds``,
``hook_ms_per_trial``, ``resizes`` and ``resizes_per_trial``; ``driver_peak_rss_mb`` and
``driver_rss_mb`` (peak and current resident memory of the driver, MB) at ``start``,
``after_tune`` and ``after_fluid``.
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fluid.cli import print_result, ray_instance
from fluid.core.checks import check_number


def register(subparsers: Any) -> None:
    """Add ``fluid bench load``."""
    p = subparsers.add_parser("load", help="many zero-work trials: Fluid vs plain Tune",
                          description=__doc__)
    p.add_argument("--trials", type=int, default=1000,
                   help="zero-work trials, 1 to 10,000 or more (default %(default)s)")
    p.add_argument("--gpus", type=int, default=64, help="logical GPUs (default %(default)s)")
    p.add_argument("--cpus", type=int, default=16,
                   help="logical CPUs = trial processes at once (default %(default)s)")
    p.add_argument("--nodes", type=int, default=1,
                   help="Ray nodes on this machine, 1 to the fewer of --gpus and --cpus (default "
                        "%(default)s: one local instance)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def dealt(total: int, nodes: int) -> list[int]:
    """``total`` dealt out to ``nodes`` as evenly as it goes, the first nodes one more.

    >>> dealt(10, 4)
    [3, 3, 2, 2]
    """
    return [total // nodes + (i < total % nodes) for i in range(nodes)]


@contextmanager
def ray_nodes(gpus: int, cpus: int, nodes: int) -> Iterator[list[int]]:
    """Ray for the block: a local instance for one node, else a ``Cluster`` of ``nodes``
    raylets on this machine with ``gpus`` logical GPUs and ``cpus`` CPUs dealt out among them;
    yields each node's GPUs."""
    if nodes == 1:
        with ray_instance(gpus, cpus, quiet=False):
            yield [gpus]
        return
    from ray.cluster_utils import Cluster

    node_gpus, node_cpus = dealt(gpus, nodes), dealt(cpus, nodes)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": node_cpus[0],
                                                            "num_gpus": node_gpus[0]})
    try:
        for g, c in zip(node_gpus[1:], node_cpus[1:], strict=True):
            cluster.add_node(num_cpus=c, num_gpus=g)
        cluster.wait_for_nodes()
        with ray_instance(address=cluster.address, quiet=False):
            yield node_gpus
    finally:
        cluster.shutdown()


def zero_work(config: dict) -> None:
    """Reports one result, with the Ray node it ran on, and ends."""
    import ray
    from ray import tune

    tune.report({"done_work": 1, "node": ray.get_runtime_context().get_node_id()})


def _figures(analysis: Any) -> dict[str, int]:
    """Trials that ended normally, and the nodes they ran on."""
    done = [t for t in analysis.trials if t.status == "TERMINATED"]
    return {"completed": len(done),
            "nodes_used": len({t.last_result.get("node") for t in done} - {None})}


def _memory_mb() -> tuple[float, float]:
    """The driver's peak resident memory so far and its resident memory now, MB (``ru_maxrss``
    is in KiB on Linux; psutil comes with Ray)."""
    import psutil

    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            psutil.Process().memory_info().rss / 2**20)


def _timed(trainable: Any, trials: int, **kwargs: Any) -> tuple[float, Any]:
    from ray import tune

    t0 = time.monotonic()
    analysis = tune.run(trainable, config={"i": tune.grid_search(list(range(trials)))},
                        verbose=0, raise_on_failed_trial=False, **kwargs)
    return time.monotonic() - t0, analysis


def run(args: argparse.Namespace) -> int:
    """Run both executors; print the figures."""
    for name in ("trials", "gpus", "cpus"):
        check_number(f"--{name}", getattr(args, name), 1)
    check_number("--nodes", args.nodes, 1, min(args.gpus, args.cpus))
    import tempfile

    from ray import tune

    from fluid import FluidExecutor

    storage = tempfile.mkdtemp(prefix="fluid-bench-load-")
    memory = [_memory_mb()]  # at the start, after plain Tune, after Fluid
    trainable = tune.with_resources(zero_work, {"cpu": 1, "gpu": 1})
    try:
        with ray_nodes(args.gpus, args.cpus, args.nodes) as node_gpus:
            print(f"plain Tune: {args.trials} trials, 1 GPU each, on {args.nodes} node(s) ...",
                  file=sys.stderr, flush=True)
            plain_s, plain = _timed(trainable, args.trials, storage_path=storage)
            plain_done = _figures(plain)
            # Plain Tune's results are counted: let them go, as a user's script would between
            # two experiments, so that the Fluid run is not charged for keeping two alive.
            del plain
            gc.collect()
            memory.append(_memory_mb())
            print(f"Fluid: {args.trials} trials ...", file=sys.stderr, flush=True)
            executor = FluidExecutor(cpus_per_trial=1.0, resize_requests=True)
            fluid_s, fluid = _timed(trainable, args.trials, storage_path=storage,
                                    scheduler=executor)
            gc.collect()
            memory.append(_memory_mb())
    finally:
        shutil.rmtree(storage, ignore_errors=True)
    fluid_done = _figures(fluid)
    stages = ("start", "after_tune", "after_fluid")
    peak, now = zip(*memory, strict=True)
    out = {
        "trials": args.trials, "gpus": args.gpus, "cpus": args.cpus, "nodes": args.nodes,
        "node_gpus": node_gpus,
        "tune": {"wall_clock": plain_s, **plain_done},
        "fluid": {"wall_clock": fluid_s, **fluid_done,
                  "hook_seconds": executor.hook_seconds,
                  "hook_ms_per_trial": 1000 * executor.hook_seconds / args.trials,
                  "vs_tune": fluid_s / plain_s, "resizes": executor.resizes,
                  "resizes_per_trial": executor.resizes / args.trials},
        "driver_peak_rss_mb": dict(zip(stages, peak, strict=True)),
        "driver_rss_mb": dict(zip(stages, now, strict=True)),
    }
    return print_result(args, out, lambda: _print_figures(out))


def _print_figures(out: dict[str, Any]) -> None:
    plain_s, fluid = out["tune"]["wall_clock"], out["fluid"]
    print(f"{out['trials']} zero-work trials on {out['gpus']} logical GPUs "
          f"({out['nodes']} node(s): {out['node_gpus']}), {out['cpus']} at once")
    print(f"  plain Tune: {plain_s:8.1f} s  ({out['tune']['completed']} completed on "
          f"{out['tune']['nodes_used']} node(s))")
    print(f"  Fluid:      {fluid['wall_clock']:8.1f} s  ({fluid['completed']} completed on "
          f"{fluid['nodes_used']} node(s)), "
          f"{fluid['hook_seconds']:.2f} s in Fluid's hooks "
          f"({fluid['hook_ms_per_trial']:.2f} ms per trial), {fluid['resizes']} resizes; "
          f"{fluid['vs_tune']:.2f} x plain Tune's wall clock")
    for label, key in (("peak RSS", "driver_peak_rss_mb"), ("RSS", "driver_rss_mb")):
        mb = list(out[key].values())
        print(f"  driver {label}: {mb[0]:.0f} MB at start, {mb[1]:.0f} MB after plain Tune, "
              f"{mb[2]:.0f} MB after Fluid")
