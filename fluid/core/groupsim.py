"""Play one TrialGroup out on ``n`` GPUs and measure its makespan.

Policies:

* ``fifo``: plain Tune, one trial per GPU, trials in the order given, each on the earliest
  free GPU;
* ``static``: StaticFluid at time 0, waiting trials start (at their planned widths) as
  capacity frees; nobody is resized;
* ``dynamic``: StaticFluid, then DynamicFluid at every departure; a resize stalls the trial for
  ``eps`` seconds on its new GPUs.

A trial at width ``w`` completes one-GPU work at rate ``1 / f(w)`` (``fluid.core.model``).

Example (the paper's Figure 5):
    >>> trials = [TrialSpec(f"a{i}", h) for i, h in enumerate([4, 4, 12, 30], start=1)]
    >>> cfg = PolicyConfig(c=2, d=4)
    >>> [simulate_group(trials, 5, cfg, p).makespan for p in ("fifo", "static", "dynamic")]
    [30.0, 12.0, 9.5]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fluid.core.config import PolicyConfig
from fluid.core.dynamic import RunningTrial, dynamic_fluid
from fluid.core.model import TrialSpec
from fluid.core.pool import GpuPool
from fluid.core.static import Assignment, start_in_order, static_fluid
from fluid.core.tolerances import WORK_TOL

POLICIES = ("fifo", "static", "dynamic")


@dataclass(frozen=True)
class Segment:
    """A trial ran at ``width`` on ``gpus`` from ``start`` to ``end`` seconds."""

    trial_id: str
    start: float
    end: float
    width: float
    gpus: tuple[int, ...]


@dataclass
class GroupSchedule:
    """The outcome of playing a group out.

    Attributes:
        makespan: time the last trial ends.
        finish: end time of each trial.
        segments: every stretch a trial ran at one shape, in start order.
        resizes: number of resizes (DynamicFluid only).
        widths: the initial plan's width of each trial.
        placement: ``{gpu: [(trial id, share), ...]}`` of the trials started at time 0.
    """

    makespan: float
    finish: dict[str, float]
    segments: list[Segment]
    resizes: int = 0
    widths: dict[str, float] = field(default_factory=dict)
    placement: dict[int, list[tuple[str, float]]] = field(default_factory=dict)


@dataclass
class _Run:
    spec: TrialSpec
    remaining: float
    width: float
    gpus: tuple[int, ...]
    since: float
    resume: float

    def finish_time(self, now: float) -> float:
        return max(now, self.resume) + self.remaining * self.spec.slowdown(self.width)


def _play(
    trials: Sequence[TrialSpec],
    pool: GpuPool,
    config: PolicyConfig,
    started: Sequence[Assignment],
    waiting: list[tuple[TrialSpec, float]],
    dynamic: bool,
    widths: dict[str, float],
) -> GroupSchedule:
    """The group played out from the trials ``started`` on ``pool`` (which it takes over:
    departures are released from it); ``widths``: the plan's, kept in the schedule."""
    placement = pool.placement()
    by_id = {t.id: t for t in trials}
    running: dict[str, _Run] = {}
    segments: list[Segment] = []
    finish: dict[str, float] = {}
    resizes = 0
    now = 0.0

    def begin(a: Assignment, resume: float) -> None:
        spec = by_id[a.trial_id]
        left = running[a.trial_id].remaining if a.trial_id in running else spec.runtime
        running[a.trial_id] = _Run(spec, left, a.width, a.gpus, now, resume)

    def close(r: _Run) -> None:
        segments.append(Segment(r.spec.id, r.since, now, r.width, r.gpus))

    for a in started:
        begin(a, now)
    while running:
        nxt = min(r.finish_time(now) for r in running.values())
        for r in running.values():
            ran = max(0.0, nxt - max(now, r.resume))
            r.remaining -= ran / r.spec.slowdown(r.width)
        now = nxt
        for r in [r for r in running.values() if r.remaining <= WORK_TOL * r.spec.runtime]:
            close(r)
            pool.release(r.spec.id)
            finish[r.spec.id] = now
            del running[r.spec.id]
        if dynamic:
            live = [RunningTrial(r.spec.with_runtime(r.remaining), r.width) for r in running.values()]
            plan = dynamic_fluid(live, waiting, pool, config)
            for z in plan.resized:
                close(running[z.trial_id])
                begin(Assignment(z.trial_id, z.new_width, z.gpus), now + config.eps)
            resizes += len(plan.resized)
            new, waiting, pool = plan.started, plan.waiting, plan.pool
        else:
            new, waiting, pool = start_in_order(waiting, pool, config)
        for a in new:
            begin(a, now)
    if waiting:
        spec, width = waiting[0]
        raise ValueError(
            f"trial {spec.id!r} at width {width:g} can never be placed on {pool.n} GPUs"
            + (f" of {pool.memory:g} GB" if pool.memory is not None else "")
        )
    return GroupSchedule(max(finish.values(), default=0.0), finish, segments, resizes, widths,
                         placement)


def play_fixed(
    trials: Sequence[TrialSpec],
    n: int,
    config: PolicyConfig,
    widths: Mapping[str, float],
    order: Sequence[str] | None = None,
) -> GroupSchedule:
    """List-schedule trials at fixed ``widths`` in ``order`` (default: as given), no resizes."""
    by_id = {t.id: t for t in trials}
    order = [t.id for t in trials] if order is None else list(order)
    started, waiting, pool = start_in_order([(by_id[i], widths[i]) for i in order],
                                            GpuPool(n, config.gpu_memory), config)
    return _play(trials, pool, config, started, waiting, dynamic=False, widths=dict(widths))


def simulate_group(
    trials: Sequence[TrialSpec],
    n: int,
    config: PolicyConfig | None = None,
    policy: str = "dynamic",
) -> GroupSchedule:
    """Play ``trials`` out on ``n`` GPUs under ``policy`` (one of ``POLICIES``)."""
    config = config or PolicyConfig()
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if n < 1:
        raise ValueError(f"gpus must be >= 1, got {n}")
    if policy == "fifo":
        return play_fixed(trials, n, config, {t.id: 1.0 for t in trials})
    plan = static_fluid(trials, GpuPool(n, config.gpu_memory), config)
    by_id = {t.id: t for t in trials}
    waiting = [(by_id[i], plan.widths[i]) for i in plan.waiting]
    return _play(trials, plan.pool, config, plan.started, waiting, dynamic=policy == "dynamic",
                 widths=plan.widths)
