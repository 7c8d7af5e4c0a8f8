"""The time-to-target rules around StaticFluid and DynamicFluid, as pure functions.

Water-filling minimises a group's makespan; users wait for the best trial. These rules decide,
from a frozen view of the trials, the GPUs and the measurements, where StaticFluid and
DynamicFluid may act (every constant is a field of ``Tunables``):

* **limits** (``trial_limits``): a trial's ``c_i`` from its ``alpha_i`` under ``o_th``
  (``makespan_o_th`` where trials pack for throughput alone: a grid under FIFO after its first
  wave), ``c_max``; ``d_i`` from its ``beta_i`` under ``s_th``, at most ``probe_d`` until its own
  ``beta_i`` is measured and one GPU until its iteration time is; a *leader* (``is_leader``:
  a trial the algorithm waits on, priority > 0, or one whose budget runs to its own stop)
  runs alone unless its own ``alpha_i < priority_alpha``; a ``keep_shape`` trial (a PBT
  member) gets plain Tune's shape and nothing else; a Ray Train trial is never packed (its
  workers take whole GPUs) and gets no more GPUs than its workers' range allows; a share the
  trial asked for (``w_min < 1``) is exactly what it gets;
* **leaders unpacked** (``unpack_leaders``): a running leader on a share (it was promoted
  while packed) takes a whole GPU as soon as one is there, before any waiting trial starts;
* **resizes** (``resize_group``): DynamicFluid's plan is applied only where each resize gains
  ``resize_gain`` x ``eps`` (``idle_gain`` x ``eps`` for a plan that only grows trials into
  GPUs nobody waits for nor will) with every unmeasured ``beta_i`` at the slow end of its
  range (``judged_beta``), each trial at most ``max_resizes`` times per rung, and only if the
  guard (``fluid.core.guard.is_safe``) finds the leading trials no later;
* **failed gangs** (``undo_slow_gangs``): a gang its own ``beta_i`` shows slower than one GPU,
  even counting a restart, goes back to one GPU;
* **probes** (``probe_gangs``): idle GPUs nobody waits for make the longest elastic trial whose
  ``beta_i`` is unmeasured a gang of ``probe_d`` (under the prior a gang gains nothing, so no
  plan would ever measure it);
* **rounds** (``replan_due``, ``first_result_due``): when a change re-plans its group at once
  and when it waits for a round of them.

Every function takes a ``GpuPool`` and returns its decisions and the pool after them; the pool
given is never changed.

Example (a gang of 4 that its own ``beta_i`` shows slower than one GPU):
    >>> from fluid.core.pool import GpuPool
    >>> pool = GpuPool(4)
    >>> _ = pool.place("g", 4.0)
    >>> gang = LiveTrial.of(TrialSpec("g", 100.0, beta=1.9), 4.0, Tunables(), pausable=True,
    ...                     beta_measured=True)
    >>> undone, after = undo_slow_gangs([gang], pool, eps=5.0, tunables=Tunables())
    >>> [(z.trial_id, z.new_width, z.gpus) for z in undone], pool.where("g")
    ([('g', 1.0, (0,))], (0, 1, 2, 3))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from fluid.core.config import PolicyConfig
from fluid.core.dynamic import DynamicPlan, Resize, RunningTrial, dynamic_fluid
from fluid.core.estimates import Z975
from fluid.core.guard import is_safe
from fluid.core.model import TrialSpec, is_packed, request_width, slowdown
from fluid.core.overheads import c_from_alpha, d_from_beta
from fluid.core.packing import is_leader
from fluid.core.pool import GpuPool
from fluid.core.tolerances import CPU_TOL, WIDTH_TOL
from fluid.core.tunables import Tunables


@dataclass(frozen=True)
class TrialFacts:
    """What is known of one trial, as the limits read it.

    Attributes:
        alpha, beta: ``alpha_i``, ``beta_i`` (the prior, sharpened by its own measurements).
        alpha_measured, beta_measured: whether its own ``alpha_i`` / ``beta_i`` is measured.
        measured: whether its one-GPU iteration time is measured.
        elastic: it may run as a gang.
        priority: what the algorithm waits on (its rung; 0: a fresh trial).
        min_share: least GPU share it fits in (it ran out of GPU memory below); ``None``.
        w_min: least width honouring what it asked for; ``None``: sized freely.
        keeps_shape: its TrialGroup keeps plain Tune's shapes (a PBT population).
        asked: GPUs its own placement group asked for (0: none).
        own_request: it runs in its own placement group at ``w_min`` (not elastic).
        runs_to_end: its budget reaches its own stop (no rung decides on it again).
        probe: it is packed to measure packing (``pair_probes``) while that is undecided
            and until the estimate has what it takes from it (two of its iterations).
        packing_measured: the experiment's packing cost is measured on this hardware (a
            profile, a given ``alpha``, or an in-session estimate whose interval decides
            packing), so its ``alpha`` is a measurement, not the conservative prior.
        ray_train: it runs a Ray Train trainer, one worker per GPU (``fluid.shapes.train_workers``).
        w_max: most width it allows (``None``: no bound of its own).
        throughput_only: trials pack for throughput alone: every trial of the experiment runs
            its whole budget (nothing stops one early: a grid or a random search under FIFO)
            and one has ended, so the answer comes when the last one ends and the makespan's
            threshold applies (``Tunables.makespan_o_th``).
    """

    alpha: float
    beta: float
    alpha_measured: bool = False
    beta_measured: bool = False
    measured: bool = False
    elastic: bool = False
    priority: int = 0
    min_share: float | None = None
    w_min: float | None = None
    keeps_shape: bool = False
    asked: float = 0.0
    own_request: bool = False
    runs_to_end: bool = False
    probe: bool = False
    packing_measured: bool = False
    ray_train: bool = False
    w_max: float | None = None
    throughput_only: bool = False


def trial_limits(facts: TrialFacts, config: PolicyConfig, tunables: Tunables, gpus: float,
                 exact: bool = True) -> tuple[int, int, float | None]:
    """``c_i``, ``d_i`` and the least width of a trial on a cluster of ``gpus`` GPUs.

    ``exact``: the group's ``c`` and ``d`` are the user's and apply as given (else, from a
    profile, they only cap what the trial's own overheads allow).

    Example (an unmeasured elastic trial: alone, on one GPU, as under plain Tune):
        >>> trial_limits(TrialFacts(2.0, 2.0, elastic=True), PolicyConfig(), Tunables(), 8)
        (1, 1, None)
    """
    if facts.elastic and config.d is not None and exact:
        d = config.d  # the user's own d
    elif facts.elastic:
        d = d_from_beta(facts.beta, config.s_th, max(1, int(gpus)))
        d = d if config.d is None else min(d, config.d)
        if not facts.beta_measured:
            # One GPU until its iteration time is known, then a gang of ``probe_d`` (the
            # probe) before its own beta_i decides more.
            d = min(d, tunables.probe_d if facts.measured else 1)
    else:  # a trainable that is not elastic: one GPU, or the GPUs it asked for
        d = max(1, int(facts.w_min or 1))
    # Packing delays a trial that reaches the target, unless every trial runs to its end
    # anyway: then only throughput counts, and a pair packs as soon as it adds some.
    o_th = tunables.makespan_o_th if facts.throughput_only else config.o_th
    c = c_from_alpha(facts.alpha, o_th, config.c_max)
    if config.c is not None:
        c = config.c if exact else min(c, config.c)
    if facts.probe and not (facts.alpha_measured or facts.packing_measured):
        c = max(c, 2)  # a packing probe shares its GPU while packing is undecided
    measured = facts.alpha_measured or facts.packing_measured
    if (is_leader(facts.priority, facts.runs_to_end)
            and (not measured or facts.alpha >= tunables.priority_alpha)):
        c = 1  # a leader runs alone unless its packing is measured free
    if facts.min_share is not None:
        c = min(c, int(math.floor(1 / facts.min_share + WIDTH_TOL)))
    if facts.ray_train:  # its workers take whole GPUs: never packed
        c = 1
    if facts.w_max is not None:
        d = min(d, max(1, int(facts.w_max)))
    w_min = facts.w_min
    if facts.keeps_shape:
        # Plain Tune's shape: what it asked for (a share, one GPU, or several only as its own
        # placement group or, elastic, a gang); the only width allowed, so Fluid never packs
        # it beyond its request, gangs or resizes it.
        whole = (facts.elastic or facts.own_request) and facts.asked > 0
        w_min = request_width(facts.asked) if whole else 1.0
        c, d = 1, int(w_min)
    if w_min is not None and is_packed(w_min):
        # A share the user asked for is a packing decision made: exactly that share, as
        # many to a GPU as it allows, whatever the measurements say.
        c, d = int(round(1 / w_min)), 1
    return max(1, c), d, w_min


@dataclass(frozen=True)
class LiveTrial:
    """A running trial as the re-sizing rules see it.

    Attributes:
        trial: what DynamicFluid reads: the spec (remaining ``h_i1``, ``alpha_i``, ``beta_i``,
            ``c_i``, ``d_i``), the width in the plan and whether it may be resized now.
        priority: what the algorithm waits on (the leaders of a group have the highest).
        pausable: it runs now (not restarting) and checkpoints, so a pause restarts it.
        resizes: Fluid's resizes of it since its budget (rung) last changed.
        beta_measured: its own ``beta_i`` is measured.
        elastic: it may run as a gang.
        measured: its one-GPU iteration time is measured.
        keeps_shape: its TrialGroup keeps plain Tune's shapes.
    """

    trial: RunningTrial
    priority: int = 0
    pausable: bool = False
    resizes: int = 0
    beta_measured: bool = False
    elastic: bool = False
    measured: bool = False
    keeps_shape: bool = False

    @classmethod
    def of(cls, spec: TrialSpec, width: float, tunables: Tunables, *, pausable: bool = False,
           resizes: int = 0, **facts: int | bool) -> LiveTrial:
        """A running trial at ``width``; resizable while pausable and resized fewer than
        ``max_resizes`` times in its rung (anti-oscillation), unless on a ``fixed_share``."""
        running = RunningTrial(spec, width, pausable and resizes < tunables.max_resizes
                               and not spec.fixed_share)
        return cls(running, pausable=pausable, resizes=resizes, **facts)  # type: ignore[arg-type]

    @property
    def id(self) -> str:
        """The trial's id."""
        return self.trial.spec.id


def undo_slow_gangs(live: Sequence[LiveTrial], pool: GpuPool, eps: float,
                    tunables: Tunables) -> tuple[list[Resize], GpuPool]:
    """Gangs whose own measured ``beta_i`` makes them slower than one GPU, even counting a
    restart (``h_i(1) + eps < h_i(w)``), back to one GPU; the resizes and the pool after them.

    DynamicFluid only shrinks to free GPUs that others need, and a failed probe must not run on
    at its slow width, so this is its own rule; it may undo a gang once more than
    ``max_resizes`` allows (the undo of the probe itself).
    """
    undone: list[Resize] = []
    for t in live:
        w, spec = t.trial.width, t.trial.spec
        if (w < 2 or not t.beta_measured or not t.pausable
                or t.resizes >= tunables.max_resizes + 1):
            continue
        if spec.runtime_at(1.0) + eps < spec.runtime_at(w):
            if not undone:
                pool = pool.copy()
            undone.append(Resize(t.id, w, 1.0, pool.shrink_gang(t.id, 1)))
    return undone, pool


def unpack_leaders(live: Sequence[LiveTrial], pool: GpuPool, eps: float,
                   ) -> tuple[list[Resize], GpuPool]:
    """Running trials on a share whose own ``c_i`` is now 1 (a leader: promoted while packed,
    or its measured ``alpha_i`` makes packing it cost too much) onto a whole GPU: their own if
    they are alone on it, else an idle one; the resizes and the pool after them.

    Leaders come before any waiting trial (the planner asks this first), highest priority and
    then the most work left first; each must gain more than ``eps``, its restart
    (``h_i(w) - h_i(1) > eps``). A trial alone on a share would still get a co-runner from Ray
    (fractional GPUs fill one GPU before the next), so only a whole GPU keeps it alone.
    """
    found = [t for t in live if t.trial.resizable and is_packed(t.trial.width)
             and t.trial.spec.c == 1
             and t.trial.spec.runtime_at(t.trial.width) - t.trial.spec.runtime_at(1.0) > eps]
    found.sort(key=lambda t: (-t.priority, -t.trial.spec.runtime))
    moved: list[Resize] = []
    for t in found:
        if not (pool.idle_count() or pool.alone(t.id)):
            continue
        if not moved:
            pool = pool.copy()
        gpus = pool.move(t.id, 1.0, 1, t.trial.spec.memory)
        if gpus is not None:
            moved.append(Resize(t.id, t.trial.width, 1.0, gpus))
    return moved, pool


def group_load(live: Sequence[LiveTrial], pool: GpuPool) -> float:
    """``sum_j h_j1 / n``: the group's one-GPU work per GPU it holds or could get (a trial
    gets a GPU or more from water-filling only if its ``h_i1`` is at least this)."""
    work = sum(t.trial.spec.runtime for t in live)
    return work / (sum(t.trial.width for t in live) + pool.free_capacity())


def judged_beta(t: LiveTrial, beta_spread: float) -> RunningTrial:
    """The trial as a resize judges it: a ``beta_i`` it has not measured (the experiment's,
    measured on other configurations) at the slow end of its 95% range, ``beta_spread`` the
    standard deviation of ``log beta_i`` across configurations; its own as it is."""
    if t.beta_measured or beta_spread <= 0:
        return t.trial
    # Kept on the (frozen) view: a re-plan judges every live trial of the group, and the
    # adapter hands the same view again until the trial changes.
    kept = t.__dict__.get("_judged")
    if kept is not None and kept[0] == beta_spread:
        return kept[1]
    spec = t.trial.spec
    judged = replace(t.trial, spec=replace(spec, beta=spec.beta * math.exp(Z975 * beta_spread)))
    object.__setattr__(t, "_judged", (beta_spread, judged))
    return judged


def resize_group(live: Sequence[LiveTrial], pool: GpuPool, config: PolicyConfig,
                 tunables: Tunables, eps: float, search_done: bool,
                 beta_spread: float = 0.0) -> DynamicPlan | None:
    """DynamicFluid over a group's running trials, where it pays; ``None``: keep the plan.

    A resize must gain ``resize_gain`` x ``eps``; when none does, a plan that only grows trials
    into idle GPUs needs ``idle_gain`` x ``eps`` once the search algorithm will add no more
    trials (``search_done``: before that, idle GPUs are soon a new trial's). A trial whose own
    ``beta_i`` is unmeasured is judged at the slow end of its range (``judged_beta``): the
    margins pay for a resize and its undoing, the range for a ``beta`` the trial never showed.
    The plan is kept only if the leaders (the trials of the group's highest priority) end no
    later than now.
    """
    running = [judged_beta(t, beta_spread) for t in live]
    plan = dynamic_fluid(running, [], pool, replace(config, eps=tunables.resize_gain * eps))
    if not plan.resized and search_done and pool.idle_count():
        plan = dynamic_fluid(running, [], pool, replace(config, eps=tunables.idle_gain * eps),
                             target=plan.target)
        if any(z.new_width <= z.old_width for z in plan.resized):
            return None
    if not plan.resized:
        return None
    specs = {r.spec.id: r.spec for r in running}
    current = {r.spec.id: r.width for r in running}
    widths = {**current, **{z.trial_id: z.new_width for z in plan.resized}}
    top = max(t.priority for t in live)
    leaders = [t.id for t in live if t.priority == top]
    return plan if is_safe(specs, widths, current, leaders, eps) else None


def may_probe(pool: GpuPool, config: PolicyConfig, tunables: Tunables,
              measured_beta: float | None) -> bool:
    """Whether any gang probe can be made: GPUs idle for one, a user's ``d`` that allows
    gangs, and gangs of the trials measured so far (median ``beta``) not too slow."""
    if pool.idle_count() < tunables.probe_d - 1:
        return False
    if config.d is not None and config.d < tunables.probe_d:
        return False
    return measured_beta is None or slowdown(tunables.probe_d, beta=measured_beta) <= tunables.probe_stop


def is_probe_candidate(t: LiveTrial) -> bool:
    """An elastic trial on one GPU, resizable, its iteration time measured but not its
    ``beta_i``, outside a ``keep_shape`` group."""
    r = t.trial
    return (t.elastic and r.width == 1.0 and not t.beta_measured and t.measured
            and r.resizable and not t.keeps_shape)


def probe_gangs(live: Sequence[LiveTrial], pool: GpuPool, config: PolicyConfig,
                tunables: Tunables, eps: float, measured_beta: float | None,
                free_cpus: float | None = None, extra_cpus: Mapping[str, float] | None = None,
                iteration_times: Mapping[str, float] | None = None,
                ) -> tuple[list[Resize], GpuPool]:
    """Idle GPUs nobody waits for as gang probes of ``probe_d``: the probes and the pool.

    Candidates (``is_probe_candidate``) go by priority first (what a rung waits on), then the
    longest ``h_i1`` (the straggler), each with at least ``probe_min_eps / 2`` x ``probe_cost``
    of work left. The guard is not asked: under the prior a gang gains nothing, which is what the
    probe tests. ``free_cpus``: CPUs free now (``None``: not counted); ``extra_cpus``: the CPUs
    a candidate's gang would need beyond its own now; ``iteration_times``: a candidate's
    one-GPU seconds per iteration (``None``: not counted).
    """
    if not may_probe(pool, config, tunables, measured_beta):
        return [], pool
    candidates = sorted((t for t in live if is_probe_candidate(t)),
                        key=lambda t: (-t.priority, -t.trial.spec.runtime))
    probes: list[Resize] = []
    for t in candidates:
        if pool.idle_count() < tunables.probe_d - 1:
            break
        extra = extra_cpus[t.id] if free_cpus is not None and extra_cpus is not None else 0.0
        iteration = iteration_times[t.id] if iteration_times is not None else 0.0
        if (t.trial.spec.runtime < tunables.probe_min_eps * probe_cost(eps, iteration) / 2
                or (free_cpus is not None and extra > free_cpus + CPU_TOL)):
            continue
        if not probes:
            pool = pool.copy()
        gpus = pool.grow_gang(t.id, tunables.probe_d - 1)
        assert gpus is not None  # idle GPUs were counted
        probes.append(Resize(t.id, 1.0, float(tunables.probe_d), gpus))
        if free_cpus is not None:
            free_cpus -= extra
    return probes, pool


def probe_cost(eps: float, iteration: float) -> float:
    """What a gang probe that gains nothing costs: two restarts (into the gang and back) and,
    until its first result shows the gang slow, one iteration at the gang's pace: one more
    iteration's time where a gang of two runs at half one GPU's speed (``beta = 4``; a gang
    slower still is undone after that same iteration)."""
    return 2 * eps + iteration


def replan_due(changes: int, running: int, tunables: Tunables) -> bool:
    """Whether small changes since a group's last re-plan (a first iteration at a new share, a
    trial leaving a GPU it shared) are enough to re-plan it: ``round_share`` of its running
    trials (each re-plan visits all of them); a small group is re-planned at each."""
    return changes >= tunables.round_share * running


def first_result_due(runtime: float, load: float | None, idle_gpus: int) -> bool:
    """Whether a trial's first measured ``h_i1`` re-plans its group at once: with a GPU idle,
    before the group's first re-plan (``load`` unknown), or when water-filling may give the
    trial a whole GPU (``h_i1 >= sum_j h_j1 / n``, the ``load`` at its last re-plan)."""
    return load is None or idle_gpus > 0 or runtime >= load
