"""What the wrapped base scheduler sees: every trial with the status it expects.

Fluid holds new trials PAUSED in Tune and pauses running ones to resize them; the base
scheduler must not notice. While it runs, a held trial shows the status the base last gave it
(PENDING until started) and a resizing trial shows RUNNING. The base still decides which held
trial starts next (``eligible``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, HyperBandScheduler, TrialScheduler

from fluid.tune import _ray_compat as compat
from fluid.tune._records import MASKED, STARTABLE, Phase, TrialRecord, TrialStore, is_starting

#: Planned to start, waiting for their GPUs or for Tune: PENDING under plain Tune.
_PLANNED = frozenset({Phase.QUEUED, Phase.READY})


@contextmanager
def base_view(store: TrialStore, extra: dict[str, str] | None = None,
              base: TrialScheduler | None = None) -> Iterator[None]:
    """Show the base scheduler every held trial with the status it expects.

    ``extra`` (trial id to status) masks more trials; real statuses come back afterwards,
    except where the base changed a status meanwhile (it stopped the trial). ``base``: the
    scheduler about to look; a ``FIFOScheduler``'s hooks other than ``choose_trial_to_run``
    read no status, so nothing is masked for them (every result would visit every held trial).
    """
    if type(base) is FIFOScheduler and not extra:
        yield
        return
    shown: list[tuple[Trial, str, str]] = []
    # Each trial is masked and restored on its own: their order does not matter.
    for rec in store.unordered(MASKED):
        want = rec.base_status if rec.phase is not Phase.RESIZING else Trial.RUNNING
        if rec.trial.status != want:
            shown.append((rec.trial, rec.trial.status, want))
    for trial, status in (extra or {}).items():
        rec = store[trial]
        shown.append((rec.trial, rec.trial.status, status))
    with compat.statuses_shown(shown):
        yield


def eligible(base: TrialScheduler, store: TrialStore, tc: Any, scan: int,
             after_call: Callable[[], None]) -> tuple[list[TrialRecord], bool]:
    """Held or base-paused trials the base scheduler would start now, in its order, and
    whether to ask it again at the next step. The base is asked about at most ``scan`` trials
    (bounds the work with huge groups); ``after_call`` runs after each question (the groups
    the base declared meanwhile are taken). A trial outside ``keep_shape`` groups that Tune
    is still starting, when the base chooses it, is looked past without counting as one of
    those questions (``_starting``). A trial the base paused resumes only as the base's first
    answer of a step where the base answers idempotently (``chooses_idempotently``).

    Members of a ``keep_shape`` group start when plain Tune would start them: new ones at
    once (Tune starts its PENDING trials in order), a member the base paused (PBT's exploit,
    its turn) only as the trial the base chooses, one per step, as Tune's controller asks its
    scheduler once per step. A member restarted later than under Tune changes what the
    algorithm does (PBT pauses members for their turn while another waits to restart, and
    the pauses cascade); one restarted sooner does too. So once the base chooses such a
    member (one to start, or one Tune is still starting or Fluid holds until GPUs free up,
    both PENDING under Tune), the scan stops and the base is asked again at the next step.
    """
    waiting = store.in_phase(STARTABLE)
    if not waiting:
        return [], False
    if type(base) is FIFOScheduler:
        return _fifo(store, waiting)
    masked: dict[str, str] = {}
    found: list[TrialRecord] = []
    questions = min(len(waiting), scan)
    idempotent = chooses_idempotently(base)
    while questions:
        with base_view(store, masked):
            trial = base.choose_trial_to_run(tc)
            after_call()
        rec = store.get(trial.trial_id) if trial is not None else None
        if rec is not None and rec.phase is Phase.PAUSED and masked and idempotent:
            return found, True  # not its turn yet (see ``chooses_idempotently``)
        if rec is None or rec.phase is Phase.HELD or not store.groups[rec.group].keep_shape:
            if _starting(rec, masked):
                masked[rec.trial_id] = Trial.RUNNING  # look past it, as Tune does
                continue
            questions -= 1
            if rec is None or rec.phase not in STARTABLE:
                break
            found.append(rec)
            masked[trial.trial_id] = Trial.RUNNING  # so the next call returns another
            continue
        found += [rec] if rec.phase is Phase.PAUSED else []
        found += [r for r in waiting if r.phase is Phase.HELD and r not in found
                  and store.groups[r.group].keep_shape]  # Tune starts new ones anyway
        return found, True
    return found, False


def chooses_idempotently(base: TrialScheduler) -> bool:
    """Whether ``base.choose_trial_to_run`` answers the same until statuses change, as Tune's
    interface asks; HyperBand's is not: it takes the paused trial it returns off its list of
    trials to resume, so a trial it answered must start (or it would stay paused for good).

    Why it matters: plain Tune asks its scheduler once per step and resumes only a PAUSED
    trial it answered, with every PENDING trial (for Fluid, every held one) counting as an
    answer before it where the scheduler prefers them (FIFO, ASHA). A base-paused trial that
    an idempotent base would name only once the trials shown before it were out of the way
    therefore waits for a later step, where it is the first answer: trials resume in plain
    Tune's order, so an actor cached at a pause goes to the trial plain Tune gives it to.
    """
    return not isinstance(base, HyperBandScheduler)


def _fifo(store: TrialStore, waiting: list[TrialRecord]) -> tuple[list[TrialRecord], bool]:
    """``eligible`` for FIFO, without asking it: every held trial, in order; the first trial
    it paused only once no trial is held, planned or still starting (FIFO answers those
    first, see ``chooses_idempotently``), and then one per step."""
    held = [r for r in waiting if r.phase is Phase.HELD]
    if len(held) == len(waiting):
        return held, False
    if held or store.count(_PLANNED) or store.first_starting() is not None:
        return held, True
    paused = [r for r in waiting if r.phase is Phase.PAUSED]
    return paused[:1], len(paused) > 1


def _starting(rec: TrialRecord | None, masked: dict[str, str]) -> bool:
    """Whether the base chose a trial already handed to Tune whose actor is still starting
    (PENDING in Tune, as under plain Tune, where the base may choose it again too). Plain Tune
    then starts every other PENDING trial anyway, whatever its scheduler chose (Ray's
    ``TuneController._maybe_add_actors``); HyperBandForBOHB chooses the first PENDING trial of
    its brackets, so stopping there would hold every new trial until that actor started."""
    return rec is not None and rec.trial_id not in masked and is_starting(rec)
