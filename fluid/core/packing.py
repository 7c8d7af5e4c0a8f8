"""Which trials share a GPU, how packing is measured, and how many trials a searcher has out.

The rules of packing for the time to target (every constant a field of ``Tunables``):

* **leaders** (``is_leader``): a trial the algorithm waits on (promoted past a rung) or one
  whose budget runs to its end leads; it shares a GPU only where a measured ``alpha`` (its
  own ``alpha_i``, else the experiment's: a profile, a given ``alpha``, the in-session estimate)
  says packing costs it next to nothing (``fluid.core.policy.trial_limits``), and one packed
  when it was promoted gets a whole GPU first (``fluid.core.policy.unpack_leaders``);
* **probes** (``pair_probes``): without a profile nothing says packing is cheap, so while its
  estimate is undecided a few pairs of the trials the algorithm does not wait on, drawn at
  random, are packed to measure it against the trials alone, while more trials wait than
  idle GPUs hold whole;
* **admission** (``in_flight_bound``): a model-based searcher suggests a trial only when the
  GPUs can run it at the speed of a trial alone (packed trials counted by their throughput).
"""

from __future__ import annotations

import math
import zlib
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


def pair_probes(candidates: Sequence[TrialSpec], pool: GpuPool, wanted: int,
                ) -> tuple[list[Assignment], GpuPool]:
    """Trials packed in pairs to measure packing while its estimate is undecided (no profile):
    up to ``wanted`` of ``candidates`` (waiting trials the algorithm does not wait on), each
    on half a GPU, a pair to a GPU (a half GPU already holding one is filled first).

    Packing is measured across trials (``fluid.core.estimates.exposure_slope``): some of a
    wave run packed, the rest alone, and no trial needs iterations of its own at both. Which
    trials are packed is drawn by a hash of their ids, not taken in the searcher's order (a
    grid's first trials share values: packing them would mistake their cost for packing's).
    A probe starts only while more candidates wait than idle GPUs hold whole (with a GPU for
    each, packing would never be used, and the probe would only slow its trials).
    Returns the trials to start and the pool after them.

    Example (two probes wanted, three trials waiting on 2 GPUs):
        >>> specs = [TrialSpec(t, 10.0) for t in ("a", "b", "c")]
        >>> starts, after = pair_probes(specs, GpuPool(2), wanted=2)
        >>> sorted((a.trial_id, a.width, a.gpus) for a in starts)
        [('b', 0.5, (0,)), ('c', 0.5, (0,))]
    """
    starts: list[Assignment] = []
    work = pool.copy()
    left = len(candidates)
    for spec in sorted(candidates, key=lambda s: zlib.crc32(s.id.encode())):
        if len(starts) >= wanted or not left > work.idle_count() > 0:
            break
        left -= 1
        gpus = work.place(spec.id, PROBE_SHARE, PROBE_PAIR, spec.memory)
        if gpus is not None:
            starts.append(Assignment(spec.id, PROBE_SHARE, gpus))
    return starts, work if starts else pool


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
