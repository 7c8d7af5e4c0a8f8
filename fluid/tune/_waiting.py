"""Clusters that grow: what FluidExecutor waits for while the cluster is too small.

An autoscaling cluster may have no GPU when the experiment starts (GPU nodes join on demand),
or fewer GPUs or CPUs than one trial asks for (trials that ask for no GPU need none). Fluid then holds the trials and says, in one
line per thing it waits for, what that is, and asks the autoscaler for it; they are planned as
nodes join (the planner follows the cluster, ``Planner.sync_cluster``). With ``FluidExecutor(wait_for_nodes=False)`` such a
cluster or trial is refused instead, with ``FluidConfigError``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from fluid.core.tolerances import CPU_TOL
from fluid.tune._cpus import CpuAccount
from fluid.tune._options import FluidConfigError
from fluid.tune._records import Phase, TrialRecord, TrialStore

logger = logging.getLogger("fluid")

#: Trials not started yet: held until the base scheduler starts them, or queued for GPUs.
WAITING_TO_START = frozenset({Phase.HELD, Phase.QUEUED})


def ask_autoscaler(bundles: list[dict[str, float]]) -> None:
    """Ask Ray's autoscaler for room for ``bundles`` (none: withdraw the request).

    Held trials are PAUSED in Tune: they ask Ray for nothing, so an autoscaler would never add
    the nodes they wait for. ``request_resources`` is Ray's public call for that; without an
    autoscaler it has no effect. (Not called outside a Ray driver: the simulator.)
    """
    import ray

    if ray.is_initialized():
        from ray.autoscaler.sdk import request_resources

        # Whole units: Ray before 2.60 takes only integer amounts here.
        request_resources(bundles=[{k: math.ceil(v) for k, v in b.items()} for b in bundles])


class NodeWait:
    """Says once what Fluid waits for (or refuses it, when ``refuse``), and asks the autoscaler
    (``ask``) for the nodes it waits for until they are there."""

    def __init__(self, refuse: bool,
                 ask: Callable[[list[dict[str, float]]], None] | None = None) -> None:
        self.refuse = refuse
        self.told: list[str] = []  # the lines said, oldest first
        self._keys: set[tuple[str, float]] = set()
        self._gpus: float | None = None  # the cluster's GPUs at the last review
        self._ask = ask  # None: ask_autoscaler
        self._asked: dict[tuple[str, float], list[dict[str, float]]] = {}  # wait -> bundles

    def _demand(self, key: tuple[str, float], bundles: list[dict[str, float]]) -> None:
        if key not in self._asked:
            self._asked[key] = bundles
            self._send()

    def _say(self, key: tuple[str, float], line: str) -> None:
        if key not in self._keys:
            self._keys.add(key)
            self.told.append(line)
            logger.warning("%s", line)

    def _send(self) -> None:
        (self._ask or ask_autoscaler)([b for wanted in self._asked.values() for b in wanted])

    def _check_gpus(self, gpus: float) -> None:
        """A trial with GPUs on a cluster without: wait for GPU nodes (or refuse)."""
        if gpus > 0:
            return
        if self.refuse:
            raise FluidConfigError(
                "the Ray cluster has no GPUs; FluidExecutor sizes trials in GPUs (on a machine "
                "without GPUs, start Ray with logical ones: ray.init(num_gpus=N); on an "
                "autoscaling cluster, leave wait_for_nodes=True to wait for GPU nodes)")
        self._say(("no GPU", 0.0), "Fluid: waiting for GPU nodes to join: the Ray cluster has "
                  "no GPU yet; trials start as GPUs come")
        self._demand(("no GPU", 0.0), [{"GPU": 1.0}])

    def review(self, store: TrialStore, gpus: float, cpus: CpuAccount) -> None:
        """After the cluster's GPUs changed (now ``gpus``): say what the trials not started yet
        wait for, and withdraw the autoscaler requests the cluster now holds."""
        if gpus == self._gpus:
            return
        self._gpus = gpus
        held = {k: v for k, v in self._asked.items()
                if not (k[0] == "no GPU" and gpus > 0) and not (k[0] == "GPUs" and k[1] <= gpus)}
        if held != self._asked:
            self._asked = held
            self._send()
        for rec in store.in_phase(WAITING_TO_START):
            self.check_trial(rec, gpus, cpus)

    def check_trial(self, rec: TrialRecord, gpus: float, cpus: CpuAccount) -> None:
        """A trial asking for more GPUs or CPUs than the cluster has (``gpus``, ``cpus.total``),
        or any GPU where the cluster has none: it waits (or is refused)."""
        if not rec.no_gpu:
            self._check_gpus(gpus)
        asked = rec.w_min or 0.0  # what it must get (a request Fluid may resize: no floor)
        if gpus > 0 and asked > gpus:
            self._too_large(rec, "GPUs", asked, gpus)
            self._demand(("GPUs", asked), list(cpus.shape(rec, asked).bundles))
        need = cpus.needed(rec)
        if cpus.total is not None and need > cpus.total + CPU_TOL:
            self._too_large(rec, "CPUs", need, cpus.total)

    def _too_large(self, rec: TrialRecord, unit: str, asked: float, have: float) -> None:
        if self.refuse:
            hint = "" if unit == "GPUs" else " (lower cpus_per_trial or the trial's CPU request)"
            raise FluidConfigError(
                f"trial {rec.trial} {'asks for' if unit == 'GPUs' else 'needs'} {asked:g} "
                f"{unit} but the cluster has {have:g}{hint}")
        self._say((unit, asked), f"Fluid: waiting for nodes to join: trial {rec.trial} needs "
                  f"{asked:g} {unit}, the cluster has {have:g}; it starts when enough join")
