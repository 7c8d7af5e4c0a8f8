"""DynamicFluid (paper Algorithm 2): re-plan a group when a trial leaves or GPUs change.

While trials of the group wait, freed capacity goes to them first (list scheduling with their
planned widths), and a packed trial alone on its GPU takes the whole of it if none of them fits
(``grow_alone``). The last of them to start were sized for a fuller cluster: they get the idle
GPUs and unused shares as at time 0 (``hand_out``, ``widen_shares``). Once nobody waits, the
widths ``w'_i`` are recomputed with the water-filling formula over the remaining runtimes of the
running trials and applied only where they pay for the resize cost ``eps``::

    scale up    if w'_i > w_i and h_i(w'_i) + eps < h_i(w_i)
    scale down  if w'_i < w_i and w'_i * (h_i(w'_i) + eps) < w_i * h_i(w_i)

The new width is ``w'_i`` (Algorithm 2 line 6 says "w_i", a slip; the prose says ``w_i <- w'_i``).
Scale-downs go first so that their GPUs can serve scale-ups; whatever whole GPUs are still idle
are handed to the trial that would end last (``hand_out``), which is what turns the paper's
Figure 5 from 12 s into 10 s. Gangs keep the GPUs they have when they grow or shrink, and
trials whose width does not change are not touched, so a re-plan moves as few trials as it can.

The pool given is never changed: the plan holds the pool after its decisions.

Example (Figure 5 at t = 4 s: a1 and a2 have left, a3 has 8 s and a4 18 s of one-GPU work):
    >>> from fluid.core.pool import GpuPool
    >>> pool = GpuPool(5)
    >>> a3, a4 = TrialSpec("a3", 8.0), TrialSpec("a4", 18.0)
    >>> _ = pool.place("a4", 3.0), pool.place("a3", 1.0)
    >>> plan = dynamic_fluid([RunningTrial(a4, 3.0), RunningTrial(a3, 1.0)], [], pool,
    ...                      PolicyConfig(c=2, d=4))
    >>> [(r.trial_id, r.old_width, r.new_width, r.gpus) for r in plan.resized]
    [('a3', 1.0, 2.0, (3, 4))]
    >>> pool.where("a3"), plan.pool.where("a3")
    ((3,), (3, 4))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fluid.core.config import PolicyConfig
from fluid.core.growth import grow_alone, hand_out
from fluid.core.model import TrialSpec, gpus_of, is_packed
from fluid.core.pool import GpuPool
from fluid.core.static import (
    Assignment,
    _size_started,
    _start_in_order,
    water_fill,
)
from fluid.core.tolerances import WIDTH_TOL


@dataclass(frozen=True)
class RunningTrial:
    """A running trial: ``spec.runtime`` is its *remaining* one-GPU runtime ``h_i1``.

    ``resizable`` is False for trials that cannot checkpoint: they keep their shape.
    """

    spec: TrialSpec
    width: float
    resizable: bool = True


@dataclass(frozen=True)
class Resize:
    """Restart a running trial at ``new_width`` on ``gpus`` (costs ``eps``)."""

    trial_id: str
    old_width: float
    new_width: float
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class DynamicPlan:
    """What DynamicFluid decided: resizes of running trials and starts of waiting ones.

    Attributes:
        pool: the GPUs after the plan (trials started and resized).
        resized: running trials to restart at another width (or on other GPUs).
        started: waiting trials placed now.
        waiting: trials still waiting, with their planned widths, in start order.
        target: the water-filling widths ``w'_i`` aimed at (empty when trials still wait).
    """

    pool: GpuPool
    resized: list[Resize] = field(default_factory=list)
    started: list[Assignment] = field(default_factory=list)
    waiting: list[tuple[TrialSpec, float]] = field(default_factory=list)
    target: Mapping[str, float] = field(default_factory=dict)


def _benefit(spec: TrialSpec, w: float, w_new: float, eps: float) -> bool:
    h, h_new = spec.runtime_at(w), spec.runtime_at(w_new)
    if w_new > w:
        return h_new + eps < h - WIDTH_TOL
    return w_new * (h_new + eps) < w * h - WIDTH_TOL


def _area_saving(spec: TrialSpec, w: float, w_new: float, eps: float) -> float:
    return w * spec.runtime_at(w) - w_new * (spec.runtime_at(w_new) + eps)


def _regrow(spec: TrialSpec, old: float, new: float, pool: GpuPool, config: PolicyConfig) -> bool:
    """Move a placed trial from width ``old`` to ``new`` in ``pool``, the working copy; False
    (the pool as it was) if there is no room."""
    if not is_packed(old) and not is_packed(new):
        if new < old:
            pool.shrink_gang(spec.id, int(round(new)))
            return True
        return pool.grow_gang(spec.id, int(round(new - old))) is not None
    if not is_packed(new) and pool.idle_count() + pool.alone(spec.id) < gpus_of(new):
        return False  # too few GPUs even with its own: no need to take it off and put it back
    return pool.move(spec.id, new, config.c_of(spec), spec.memory) is not None


def dynamic_fluid(
    running: Sequence[RunningTrial],
    waiting: Sequence[tuple[TrialSpec, float]],
    pool: GpuPool,
    config: PolicyConfig,
    target: Mapping[str, float] | None = None,
) -> DynamicPlan:
    """Algorithm 2 over a group's running trials (``pool`` is not changed: see the plan's).

    Args:
        running: the group's running trials, placed in ``pool`` at their widths.
        waiting: the group's waiting trials with their planned widths, in start order.
        pool: every GPU the group may use; departed trials already released from it.
        config: the policy parameters (``eps`` is the resize cost).
        target: ``DynamicPlan.target`` of a call on the same trials and the same pool with
            another ``eps`` (the widths ``w'_i`` do not depend on ``eps``: not computed again).
    """
    pool = pool.copy()
    started, still = _start_in_order(waiting, pool, config)
    if still:
        return _while_trials_wait(running, waiting, started, still, pool, config)
    if started:
        started = _size_started(started, {spec.id: spec for spec, _ in waiting}, pool, config,
                                waits=False)
    if not running:
        return DynamicPlan(pool, [], started, still)
    # Water-fill over what the group holds plus what is free (slip 2: not the whole cluster).
    n = sum(r.width for r in running) + pool.free_capacity()
    held = pool.placements()
    if target is None:
        target = water_fill([r.spec for r in running], n, config)
    current, touched = _resize_towards(running, target, pool, config)
    # A gang shrunk and then grown back by hand_out can end at its old width on other GPUs:
    # that is a restart too, so report every trial whose GPUs changed, not only its width.
    # Only trials the pool was asked to move can have (the others kept width and GPUs).
    resized = []
    for r in running if touched else ():
        tid = r.spec.id
        if tid not in touched:
            continue
        gpus = pool.where(tid)
        if abs(current[tid] - r.width) > WIDTH_TOL or gpus != held.get(tid, ()):
            resized.append(Resize(tid, r.width, current[tid], gpus))
    return DynamicPlan(pool, resized, started, still, target)


def _while_trials_wait(running: Sequence[RunningTrial], waiting: Sequence[tuple[TrialSpec, float]],
                       started: list[Assignment], still: list[tuple[TrialSpec, float]],
                       pool: GpuPool, config: PolicyConfig) -> DynamicPlan:
    """Trials still wait: no resize but a packed trial alone on its GPU taking the whole of it
    (``grow_alone``). Changes ``pool``, the working copy."""
    alone = pool.alone_packed()  # (most re-plans: none, and the running are not visited)
    if not alone:
        return DynamicPlan(pool, [], started, still)
    specs = {spec.id: spec for spec, _ in waiting}
    grown = grow_alone(
        [(r.spec, r.width, config.eps) for r in running if r.spec.id in alone and r.resizable]
        + [(specs[a.trial_id], a.width, 0.0) for a in started if a.trial_id in alone],
        pool, config)
    resized = [Resize(r.spec.id, r.width, 1.0, grown[r.spec.id])
               for r in running if r.spec.id in grown]
    started = [Assignment(a.trial_id, 1.0, grown[a.trial_id]) if a.trial_id in grown else a
               for a in started]
    return DynamicPlan(pool, resized, started, still)


def _resize_towards(running: Sequence[RunningTrial], target: Mapping[str, float],
                    pool: GpuPool, config: PolicyConfig) -> tuple[dict[str, float], set[str]]:
    """Apply the widths ``w'_i`` that pay for ``eps``, then hand out the idle GPUs left.
    Changes ``pool``, the working copy; returns every running trial's width after and the
    trials the pool was asked to move (the only ones whose GPUs can have changed)."""
    current = {r.spec.id: r.width for r in running}
    changes = [
        r
        for r in running
        if r.resizable
        and abs(target[r.spec.id] - r.width) > WIDTH_TOL
        and _benefit(r.spec, r.width, target[r.spec.id], config.eps)
    ]
    ups = [r for r in changes if target[r.spec.id] > r.width]
    downs = [r for r in changes if target[r.spec.id] < r.width]
    # Scale down only to free GPUs that scale-ups need and the idle ones cannot give: a
    # shrink into capacity nobody uses only slows the trial down. Biggest area saving first.
    need = sum(gpus_of(target[r.spec.id]) - gpus_of(r.width) for r in ups)
    downs.sort(key=lambda r: -_area_saving(r.spec, r.width, target[r.spec.id], config.eps))
    shrunk: set[str] = set()
    # Nor may a shrink make the trial the group's new straggler: it would end the group later.
    last_end = max(r.spec.runtime_at(r.width) for r in running) if downs else 0.0
    touched: set[str] = set()
    for r in downs:
        if pool.idle_count() >= need:
            break
        if r.spec.runtime_at(target[r.spec.id]) + config.eps > last_end:
            continue
        touched.add(r.spec.id)
        if _regrow(r.spec, r.width, target[r.spec.id], pool, config):
            current[r.spec.id] = target[r.spec.id]
            shrunk.add(r.spec.id)
    for r in sorted(ups, key=lambda r: -r.spec.runtime):  # longest trial first
        touched.add(r.spec.id)
        if _regrow(r.spec, r.width, target[r.spec.id], pool, config):
            current[r.spec.id] = target[r.spec.id]
    # Leftover idle GPUs go to whoever would end last, but never back to a trial just shrunk
    # to make room (that would be a restart for nothing).
    candidates = [
        (r.spec, current[r.spec.id], 0.0 if current[r.spec.id] != r.width else config.eps)
        for r in running
        if r.resizable and r.spec.id not in shrunk
    ]
    grown = hand_out(candidates, pool, config)
    current.update(grown)
    touched.update(grown)
    return current, touched
