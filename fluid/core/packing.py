"""Which trials share a GPU, how packing is measured, and how many trials a searcher has out.

The rules of packing for the time to target (every constant a field of ``Tunables``):

* **leaders** (``is_leader``): a trial the algorithm waits on (promoted past a rung) or one
  whose budget runs to its end leads; it shares a GPU only where a measured ``alpha`` (its
  own ``alpha_i``, else the experiment's: a profile, a given ``alpha``, the probes' median)
  says packing costs it next to nothing (``fluid.core.policy.trial_limits``), and one packed
  when it was promoted gets a whole GPU first (``fluid.core.policy.unpack_leaders``);
* **probes** (``pair_probes``): without a profile nothing says packing is cheap, so a few pairs
  of the trials the algorithm does not wait on are packed to measure it, while more trials
  wait than idle GPUs hold whole;
* **admission** (``in_flight_bound``): a model-based searcher suggests a trial only when the
  GPUs can run it at the speed of a trial alone (packed trials counted by their throughput).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fluid.core.model import TrialSpec
from fluid.core.pool import GpuPool
from fluid.core.static import Assignment
from fluid.core.tolerances import WIDTH_TOL

#: A probe packs a pair on one GPU, each trial on half of it. Not tuning constants: a trial's
#: ``alpha_i`` is by definition its time beside one other trial over its time alone (the
#: paper's ``T^p = T^1 alpha^(p-1)`` at ``p = 2``).
PROBE_PAIR = 2
PROBE_SHARE = 1 / PROBE_PAIR
#: Iterations a probe's host needs left: one alone, one while its mate starts (which measures
#: neither), one beside its mate.
HOST_ITERATIONS = 3


def is_leader(priority: int, runs_to_end: bool) -> bool:
    """Whether a trial leads: the algorithm waits on it (``priority > 0``: promoted past a
    rung) or nothing will decide on it again before its end (its budget reaches its stop).

    A leader may be the trial that reaches the target, and packing slows it for all of its
    budget; the other trials (a low rung's many short ones) end at a rung where the algorithm
    decides on them anyway, so what counts for them is how soon the rung ends.

    Example:
        >>> is_leader(0, False), is_leader(1, False), is_leader(0, True)
        (False, True, True)
    """
    return priority > 0 or runs_to_end


def pair_probes(candidates: Sequence[tuple[TrialSpec, bool]], hosts: Sequence[str],
                pool: GpuPool, wanted: int) -> tuple[list[Assignment], int, GpuPool]:
    """Pairs of trials packed to measure packing, while too few trials have their own
    ``alpha_i`` and none would be packed without it (no profile: the conservative prior).

    A trial's ``alpha_i`` is its time beside one other trial over its time alone (measured by
    who computes on its GPU, not by its share: a share alone on a GPU runs as fast as a whole
    GPU), so a probe has a trial run alone on a half GPU and beside a mate there, in either
    order. ``hosts``: probes alone on their GPU whose time alone is measured: each is given
    the first ``candidates`` trial left as its mate. Then up to ``wanted`` new probes open on
    idle GPUs, each with a *host*: a candidate with iterations enough left (the flag of each
    candidate: one alone, one during which its mate starts, which measures neither degree,
    and one beside the mate). No probe opens without one: two trials too short to be measured
    alone would be measured only once one of them is promoted, on the trial the algorithm
    then waits on, which also restarts to take its whole GPU. ``candidates`` are waiting
    trials the algorithm does not wait on, in start order. A new probe opens only while more
    candidates wait than there are idle GPUs (else none of them would ever be packed).
    Returns the trials to start, how many probes opened, and the pool after them.

    Example (one host ready, one more probe wanted, three trials waiting on 2 GPUs):
        >>> pool = GpuPool(2)
        >>> _ = pool.place("h", 0.5, 1)
        >>> specs = [(TrialSpec(t, 10.0), True) for t in ("a", "b", "c")]
        >>> starts, opened, after = pair_probes(specs, ["h"], pool, wanted=1)
        >>> [(a.trial_id, a.width, a.gpus) for a in starts], opened
        ([('a', 0.5, (0,)), ('b', 0.5, (1,))], 1)
    """
    starts: list[Assignment] = []
    work = pool.copy()
    waiting = list(candidates)
    for host in hosts:
        while waiting:
            spec, _ = waiting.pop(0)
            gpus = work.join(spec.id, host, PROBE_SHARE, PROBE_PAIR, spec.memory)
            if gpus is not None:
                starts.append(Assignment(spec.id, PROBE_SHARE, gpus))
                break
    opened = 0
    # A new probe only while more trials wait than idle GPUs hold whole: with a GPU for each,
    # packing could never be used, and the probe would only slow its trials.
    while opened < wanted and len(waiting) > work.idle_count() > 0:
        k = next((i for i, (_, long_enough) in enumerate(waiting) if long_enough), None)
        if k is None:
            break
        host = waiting.pop(k)[0]
        if (gpus := work.place(host.id, PROBE_SHARE, 1, host.memory)) is None:
            continue
        starts.append(Assignment(host.id, PROBE_SHARE, gpus))
        opened += 1
    return starts, opened, work if starts else pool


def in_flight_bound(gpus: float, c: int, alpha: float = 1.0) -> int:
    """Most trials a model-based searcher may have in flight (held or running): as many as
    the GPUs run at the speed of one trial alone, where a fresh trial would be packed ``c``
    to a GPU at a packing cost ``alpha`` (``c`` trials on a GPU run ``c / alpha^(c-1)`` times
    as fast as one alone; the paper's ``T^p = T^1 alpha^(p-1)``).

    A suggestion made before the GPUs can run it at full speed is made on fewer results than
    one made when they can: the searcher learns less for nothing. Plain Tune with
    ``max_concurrent_trials`` set to the GPUs (what a careful user sets) is the case ``c = 1``;
    packing that is free (``alpha = 1``) doubles it at ``c = 2``, packing that costs a trial
    17% (``alpha = 1.17``) admits 13 on 8 GPUs, not 16.

    Example:
        >>> in_flight_bound(8, 1), in_flight_bound(8, 2), in_flight_bound(8, 2, 1.17)
        (8, 16, 13)
        >>> in_flight_bound(0.5, 1)
        1
    """
    return max(1, int(math.floor(gpus * max(1, c) / alpha ** (max(1, c) - 1) + WIDTH_TOL)))
