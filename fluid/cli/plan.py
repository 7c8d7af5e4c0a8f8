"""``fluid plan``: size and place one TrialGroup and compare makespans.

``fluid plan INSTANCE.json [--json]`` or ``fluid plan --example figure5 [--json]``. Widths and the
placement at time 0 come from StaticFluid (``static_fluid`` on ``GpuPool(gpus, gpu_memory)``);
makespans from playing the group out under FIFO, StaticFluid and StaticFluid + DynamicFluid
(``simulate_group``), with ``lower_bound`` (no schedule of the widths the instance allows ends
sooner) and ``best_found`` (the best list schedule at the policy's widths; ``null`` for groups
too large to search).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from fluid.cli import print_result, text_table
from fluid.core.bounds import best_found, lower_bound
from fluid.core.groupsim import POLICIES, GroupSchedule, simulate_group
from fluid.core.instance import Instance, figure5, load_instance
from fluid.core.model import is_packed
from fluid.core.pool import GpuPool
from fluid.core.static import StaticPlan, static_fluid

#: Built-in instances for ``--example``.
EXAMPLES = {"figure5": figure5}


@dataclass
class PlanResult:
    """Everything ``fluid plan`` reports about one instance.

    Attributes:
        instance: the planned instance.
        plan: StaticFluid's decision at time 0.
        placement: ``{gpu: [(trial id, share), ...]}`` for every GPU (idle ones empty).
        schedules: the played-out group under each policy of ``POLICIES``.
        lower_bound: no schedule ends before this.
        best_found: best list schedule at fixed widths, ``None`` when not computed.
    """

    instance: Instance
    plan: StaticPlan
    placement: dict[int, list[tuple[str, float]]]
    schedules: dict[str, GroupSchedule]
    lower_bound: float
    best_found: float | None

    @property
    def idle_gpus(self) -> list[int]:
        """GPUs with nothing on them at time 0."""
        return [g for g, items in self.placement.items() if not items]

    def makespans(self) -> dict[str, float | None]:
        """``fifo``, ``static``, ``dynamic``, ``lower_bound``, ``best_found`` in seconds."""
        out: dict[str, float | None] = {p: self.schedules[p].makespan for p in POLICIES}
        out["lower_bound"] = self.lower_bound
        out["best_found"] = self.best_found
        return out

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object: ``widths``, ``placement``, ``makespan`` (and ``waiting``)."""
        return {
            "widths": dict(self.plan.widths),
            "placement": {
                str(g): [[tid, share] for tid, share in items]
                for g, items in self.placement.items()
            },
            "makespan": self.makespans(),
            "waiting": list(self.plan.waiting),
            "idle_gpus": self.idle_gpus,
        }


def plan_instance(instance: Instance) -> PlanResult:
    """Plan ``instance`` with StaticFluid and play it out under every policy."""
    trials, n, config = instance.trials, instance.gpus, instance.config
    plan = static_fluid(trials, GpuPool(n, config.gpu_memory), config)
    placement: dict[int, list[tuple[str, float]]] = {g: [] for g in plan.pool.gpu_ids}
    placement.update(plan.pool.placement())
    schedules = {p: simulate_group(trials, n, config, p) for p in POLICIES}
    return PlanResult(instance, plan, placement, schedules,
                      lower_bound(trials, n, config), best_found(trials, n, config))


# -- the readable table ----------------------------------------------------------------------
def _num(x: float | None) -> str:
    """A number in at most 4 significant digits (``-`` for none)."""
    if x is None:
        return "-"
    return f"{x:.4g}"


def _width(w: float) -> str:
    """``1/2`` for a packed share, ``3`` for a gang of three GPUs."""
    if is_packed(w):
        k = round(1 / w)
        return f"1/{k}" if math.isclose(1 / k, w) else f"{w:.3g}"
    return f"{w:g}"


def _gpus(ids: tuple[int, ...]) -> str:
    if not ids:
        return "waiting"
    if len(ids) > 2 and list(ids) == list(range(ids[0], ids[0] + len(ids))):
        return f"{ids[0]}-{ids[-1]}"
    return ",".join(str(g) for g in ids)


def render(result: PlanResult, title: str) -> str:
    """The plan as a readable table, the makespans, the speed-up and the idle GPUs."""
    inst, cfg = result.instance, result.instance.config
    dyn = result.schedules["dynamic"]
    start: dict[str, float] = {}
    for seg in dyn.segments:
        start.setdefault(seg.trial_id, seg.start)
    where: dict[str, tuple[int, ...]] = {}
    for g, items in result.placement.items():
        for tid, _ in items:
            where[tid] = (*where.get(tid, ()), g)
    rows = [[t.id, _num(t.runtime), _num(t.alpha), _num(t.beta), str(cfg.c_of(t)),
             str(cfg.d_of(t, inst.gpus)), _width(result.plan.widths[t.id]),
             _gpus(where.get(t.id, ())), _num(start.get(t.id)), _num(dyn.finish.get(t.id))]
            for t in inst.trials]
    headers = ["trial", "h_i1 s", "alpha", "beta", "c_i", "d_i", "width", "GPUs", "start", "finish"]
    eps = f", eps = {cfg.eps:g} s" if cfg.eps else ""
    mem = f", {cfg.gpu_memory:g} GB each" if cfg.gpu_memory is not None else ""
    out = [
        f"{title}: {len(inst.trials)} trials on {inst.gpus} GPUs{mem}{eps}",
        "",
        text_table(headers, rows, left=len(headers), rule=True),
        "(width and GPUs: StaticFluid at t = 0; start and finish: StaticFluid + DynamicFluid)",
        "",
    ]
    spans = result.makespans()
    labels = {
        "fifo": "fifo (one trial per GPU)",
        "static": "static (StaticFluid)",
        "dynamic": "dynamic (+ DynamicFluid)",
        "lower_bound": "lower bound",
        "best_found": "best found",
    }
    mrows = [[labels[k], _num(v), ""] for k, v in spans.items()]
    mrows[2][2] = f"{dyn.resizes} resizes"
    if spans["best_found"] is None:
        mrows[4][2] = "not computed (group too large to search)"
    out.append(text_table(["makespan", "seconds", "note"], mrows, left=3, rule=True))
    fifo, dynamic = spans["fifo"], spans["dynamic"]
    if fifo is not None and dynamic:
        out.append(f"fifo / dynamic = {fifo / dynamic:.2f}x")
    idle = result.idle_gpus
    if idle:
        out.append(f"idle GPUs at t = 0: {', '.join(map(str, idle))} ({len(idle)} of {inst.gpus})")
    else:
        out.append(f"idle GPUs at t = 0: none (all {inst.gpus} in use)")
    if result.plan.waiting:
        out.append(f"waiting at t = 0: {', '.join(result.plan.waiting)}")
    return "\n".join(out)


# -- the subcommand --------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    """``fluid plan``: print the plan (table or ``--json``); 0 on success."""
    if args.example is not None:
        instance, title = EXAMPLES[args.example](), f"example {args.example}"
    else:
        instance, title = load_instance(args.instance), str(args.instance)
    result = plan_instance(instance)
    return print_result(args, result.to_json(), lambda: print(render(result, title)))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fluid plan`` to the ``fluid`` parser."""
    p = subparsers.add_parser(
        "plan",
        help="size and place one TrialGroup; compare FIFO, StaticFluid, DynamicFluid",
        description=(
            "Size and place one TrialGroup with StaticFluid and report the makespans under "
            "FIFO, StaticFluid and StaticFluid + DynamicFluid, the lower bound and the best "
            "schedule found by search (small groups only)."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("instance", nargs="?", metavar="INSTANCE.json", help="instance file")
    src.add_argument("--example", choices=sorted(EXAMPLES), help="a built-in instance")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)
