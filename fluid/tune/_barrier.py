"""The barrier of a ``sync`` TrialGroup: its members stay in step.

Fluid's own PBT does not use it (its population keeps plain Tune's shapes and timing,
``fluid.schedulers.pbt``); it is there for a scheduler whose members must not drift apart.

Fluid sizes members by their measured speed and packs or gangs them, so without a barrier they
progress at very different rates, and a member that races ahead clones (at its exploit) a donor
checkpointed intervals behind, re-running those iterations. Plain Tune keeps a population in
step only through scarcity (a member waits in PENDING while others run).

The rule: a member of a ``sync`` group that reached its budget ``until`` (its next perturbation)
with a checkpoint waits (WAITING: paused, its GPUs given to the others) while any other
unfinished member has not reached its iteration; then it is planned again. A member the base
scheduler paused there (PBT's exploit, or PBT's own PAUSE) restarts under the same condition.
Every member runs to its next perturbation only once all have reached the last one, so the
most and the least advanced unfinished members are at most one perturbation interval apart.
"""

from __future__ import annotations

import math

from fluid.tune._records import Phase, TrialRecord, TrialStore

_WAITING = frozenset({Phase.WAITING})


def must_wait(store: TrialStore, rec: TrialRecord, until: int | None) -> bool:
    """Whether ``rec``, whose budget before its latest result was ``until``, waits now."""
    group = store.groups.get(rec.group)
    if group is None or not group.sync or until is None or rec.iteration < until:
        return False
    return _slowest_other(store, rec) < rec.iteration


def released(store: TrialStore) -> list[TrialRecord]:
    """Waiting members whose group caught up: every other unfinished member reached them."""
    if not store.count(_WAITING):  # asked at every controller step; almost always none
        return []
    return [r for r in store.in_phase(_WAITING) if _slowest_other(store, r) >= r.iteration]


def stays_paused(store: TrialStore, rec: TrialRecord) -> bool:
    """Whether a member the base scheduler paused (PBT pauses at a perturbation: an exploit,
    or others waiting) must not restart yet: some other unfinished member is behind it."""
    group = store.groups.get(rec.group)
    return (group is not None and group.sync and rec.phase is Phase.PAUSED
            and _slowest_other(store, rec) < rec.iteration)


def _slowest_other(store: TrialStore, rec: TrialRecord) -> float:
    """Least iteration of the other unfinished members of ``rec``'s group (inf: none)."""
    return min((r.iteration for r in store.records.values()
                if r.group == rec.group and r is not rec and r.phase is not Phase.DONE),
               default=math.inf)
