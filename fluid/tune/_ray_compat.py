"""Every use of Ray's private API in Fluid, and the Ray versions Fluid supports.

Fluid plugs into Ray Tune as a ``TrialScheduler``; a few things it needs have no public API.
Each is reached through one function here, with a comment on why, and
``tests/tune/test_ray_compat.py`` asserts that each still exists with the shape used here, so a
Ray release that moves one fails that test by name instead of failing a run.

Importing this module (and so ``fluid.tune``) with a Ray outside the supported range raises
``ImportError`` naming it; each difference between the supported Ray releases is a gate of
``fluid.tune._ray_versions``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ray
from ray.tune.callback import CallbackList
from ray.tune.experiment import Trial

# Why: Tune's output engine (its progress reporters) is experimental API: no stable import path.
from ray.tune.experimental.output import ProgressReporter as ProgressReporter
from ray.tune.experimental.output import TuneReporterBase

from fluid.tune._ray_versions import GCS_ACCESSOR, since


def train_v2_enabled() -> bool:
    """Whether Ray Train runs V2 trainers here. Why: Ray decides it in the private
    ``ray.train.v2._internal.constants.is_v2_enabled`` (its default changed in 2.51)."""
    from ray.train.v2._internal.constants import is_v2_enabled

    return bool(is_v2_enabled())


def remove_orphaned_train_groups() -> int:
    """Remove this job's Ray Train worker groups whose controller died; return how many.

    Why: a Ray Train V2 controller that dies with its trial leaves its workers' placement
    group until the job ends; Ray Train's cleaner needs the dashboard (State API). The GCS
    tables say who made a group.
    """
    from ray._private import state
    from ray.core.generated.gcs_pb2 import PlacementGroupTableData
    from ray.util.placement_group import PlacementGroup, PlacementGroupID

    if since(GCS_ACCESSOR):
        tables = state.state._connect_and_get_accessor()
    else:
        state.state._check_connected()
        tables = state.state.global_state_accessor
    job, removed = ray.get_runtime_context().get_job_id(), 0
    for raw in tables.get_placement_group_table():
        pg = PlacementGroupTableData.FromString(raw)
        if (pg.state == PlacementGroupTableData.REMOVED or pg.is_detached
                or not pg.creator_actor_dead or pg.creator_job_id.hex() != job):
            continue
        creator = state.actors(actor_id=pg.creator_actor_id.hex())
        if creator.get("ActorClassName", "").split(".")[-1] == "TrainController":
            ray.util.remove_placement_group(PlacementGroup(PlacementGroupID(pg.placement_group_id)))
            removed += 1
    return removed


# ---------------------------------------------------------------------- the Tune controller
@contextmanager
def statuses_shown(shown: list[tuple[Any, str, str]]) -> Iterator[None]:
    """Show each ``(trial, real, want)`` trial with status ``want`` while inside, then its
    ``real`` one again (unless something changed it meanwhile: the base stopped the trial).

    Why: Tune's schedulers decide by ``trial.status``; Fluid holds trials PAUSED that the base
    scheduler must see PENDING (RUNNING while resized). No API shows a scheduler another status.
    """
    for trial, _real, want in shown:
        trial.status = want
    try:
        yield
    finally:
        for trial, real, want in shown:
            if trial.status == want:
                trial.status = real


def name_variants(search: Any, prefix: str) -> None:
    """Name the trials a ``BasicVariantGenerator`` makes ``prefix`` + their index. Why: its
    private ``_uuid_prefix`` is random; the simulator needs the same ids for the same seed."""
    search._uuid_prefix = prefix


@contextmanager
def trial_ids(make: Callable[[], str]) -> Iterator[None]:
    """New Tune trials take their id from ``make()`` while inside.

    Why: Tune gives a trial a random id in the private ``Trial.generate_id``; the simulator
    needs the same ids for the same seed (the scoreboard compares executors trial by trial).
    """
    original = Trial.__dict__["generate_id"]
    Trial.generate_id = classmethod(lambda cls: make())
    try:
        yield
    finally:
        Trial.generate_id = original


def controller_of(tc: Any) -> Any:
    """The ``TuneController`` behind the argument of a scheduler hook.

    Why: Tune hands schedulers a ``TrialRunnerWrapper`` (its ``_tune_controller`` is the
    controller); a simulated controller is passed as is, and returned unchanged.
    """
    return getattr(tc, "_tune_controller", tc)


def search_finished(controller: Any) -> bool:
    """Whether the experiment's search algorithm will add no more trials.

    Why: only ``TuneController._search_alg`` says so (a controller without one counts as not
    finished).
    """
    search_alg = getattr(controller, "_search_alg", None)
    return search_alg is not None and bool(search_alg.is_finished())


def set_trial_status(controller: Any, trial: Any, status: str) -> None:
    """Move a trial the controller already filed to another status set. Why:
    ``Trial.set_status`` leaves the controller's per-status sets as they were; only
    ``TuneController._set_trial_status`` re-files a trial (as PAUSED, so Fluid holds it)."""
    controller._set_trial_status(trial, status)


def drop_stale_decision(controller: Any, trial: Any) -> None:
    """Forget the decision Tune cached for a save of ``trial`` that can no longer arrive.

    Why: ``TuneController._schedule_trial_stop`` caches STOP in ``_cached_trial_decisions`` for
    a saving trial. PBT's exploit pauses a trial whose own pause still saves: the save is
    dropped with the actor, the STOP is not, and the restarted trial ends at its first
    checkpoint (ray issue 57906).
    """
    cached = getattr(controller, "_cached_trial_decisions", None)
    if cached and not trial.is_saving:
        cached.pop(trial.trial_id, None)


def callback_list(controller: Any) -> list | None:
    """The experiment's callbacks, a list whose entries Fluid may wrap in place or append to
    (``None``: unknown). Why: Tune keeps no other handle on them than
    ``TuneController._callbacks._callbacks``."""
    callbacks = getattr(getattr(controller, "_callbacks", None), "_callbacks", None)
    return callbacks if isinstance(callbacks, list) else None


def replace_callback_list(controller: Any, make: Callable[[list], CallbackList]) -> bool:
    """Replace the experiment's ``CallbackList`` with ``make(its callbacks)``, a list over the
    same callbacks (``False``: the controller has none).

    Why: a scheduler gets no callback hook, and Tune restores its callbacks' states by their
    place in ``TuneController._callbacks``: a callback inserted there would shift them.
    """
    callbacks = getattr(controller, "_callbacks", None)
    if not isinstance(callbacks, CallbackList):
        return False
    controller._callbacks = make(callbacks._callbacks)
    return True


def tune_verbosity(controller: Any) -> int:
    """The experiment's verbosity: 0 silent, 1 default, 2 and more verbose.

    Why: private: the new output engine's reporter callback has it (the old engine's global is
    then 0); the old engine (``RAY_AIR_NEW_OUTPUT=0``) keeps it in ``ray.tune.utils.log``.
    """
    for callback in callback_list(controller) or []:
        if isinstance(callback, ProgressReporter):
            return int(callback.verbosity)
    from ray.tune.utils import log

    return int(log.verbosity)


def show_result_column(controller: Any, key: str) -> None:
    """Add ``key`` (a result entry) to the columns of the experiment's progress table.

    Why: the new output engine's reporter picks its columns once, from the first numeric
    entries of the results (``_inferred_metric``): a text entry never shows unless appended.
    """
    for callback in callback_list(controller) or []:
        columns = getattr(callback, "_inferred_metric", None)
        if isinstance(callback, TuneReporterBase) and columns and key not in columns:
            columns.append(key)


def experiment_dir(controller: Any) -> str | None:
    """The driver's staging directory of the experiment (``None``: none), where Fluid keeps
    its measurements beside Tune's state. Why: only ``TuneController._storage`` knows it."""
    storage = getattr(controller, "_storage", None)
    path = getattr(storage, "experiment_driver_staging_path", None)
    return str(path) if path else None


def snapshot_experiment(controller: Any) -> None:
    """Save the experiment state now and wait until storage has it (may raise). Why: Tune
    syncs its state only periodically, with no public call to force one."""
    controller.checkpoint(force=True)
    wait_for_storage_sync(controller)


def wait_for_storage_sync(controller: Any) -> None:
    """Wait for an upload of the experiment under way (Tune's private ``_storage.syncer``)."""
    controller._storage.syncer.wait()


# ---------------------------------------------------------------------- Ray's schedulers
# Fluid's adapted schedulers (``fluid.schedulers``) subclass Ray's and name each trial's budget
# (its next rung, its next perturbation) from the state Ray keeps private.

def time_attr(scheduler: Any) -> str:
    """The result key a Ray scheduler counts budgets in (kept in ``_time_attr``)."""
    return scheduler._time_attr


def asha_rungs(scheduler: Any, trial: Any) -> tuple[list[float], float] | None:
    """The rung milestones of ``trial``'s ASHA bracket and ``max_t`` (``None``: untracked).

    Why: ``ASHAScheduler._trial_info`` maps a trial id to its ``_Bracket``, whose ``_rungs``
    are ``(milestone, recorded)`` pairs; ``_max_t`` ends the last rung.
    """
    bracket = scheduler._trial_info.get(trial.trial_id)
    return None if bracket is None else ([m for m, _ in bracket._rungs], scheduler._max_t)


def hyperband_bracket(scheduler: Any, trial: Any) -> Any:
    """``trial``'s bracket in Ray's HyperBand (``_trial_info[trial]``: ``(bracket, band)``)."""
    return scheduler._trial_info[trial][0]


def bracket_milestone(bracket: Any) -> float:
    """The milestone a HyperBand bracket's current rung runs to (``_Bracket._cumul_r``)."""
    return bracket._cumul_r


class RungHalving:
    """Put before a Ray HyperBand class: ``rung_halved(bracket)`` runs after each halving.

    Why: Ray's HyperBand halves a complete rung in its private ``_process_bracket`` (from its
    result, removal and choose hooks); no public hook says that a rung was halved.
    """

    def _process_bracket(self, tune_controller: Any, bracket: Any) -> str:
        milestone = bracket._cumul_r
        action = super()._process_bracket(tune_controller, bracket)  # type: ignore[misc]
        if bracket._cumul_r != milestone:
            self.rung_halved(bracket)
        return action

    def process_bracket(self, tune_controller: Any, bracket: Any) -> str:
        """Ray's step for a bracket whose trial reached its milestone (may halve the rung)."""
        return self._process_bracket(tune_controller, bracket)

    def rung_halved(self, bracket: Any) -> None:
        """Called after Ray halved ``bracket``'s rung (its milestone moved on)."""


def pbt_next_perturbation(scheduler: Any, trial: Any) -> float | None:
    """When Ray's PBT next perturbs ``trial``, in its ``time_attr`` (``None``: untracked).

    Why: ``_trial_state[trial].last_perturbation_time`` plus ``_perturbation_interval``.
    """
    state = scheduler._trial_state.get(trial)
    if state is None:
        return None
    return state.last_perturbation_time + scheduler._perturbation_interval


#: Each controller's ``forgive`` (kept outside the controller: Tune saves its ``__dict__``).
_FORGIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def forgive_failures(controller: Any, forgive: Callable[[Any, Exception], bool]) -> None:
    """Have the controller retry a failed trial without counting the failure when
    ``forgive(trial, exception)`` says so (the trial is then requeued as a retry would be).

    Why: Tune counts every trial error against ``max_failures`` in
    ``TuneController._process_trial_failure`` before any scheduler hook sees it; no public hook
    can say a failure was the scheduler's doing (a packed trial out of GPU memory). The
    controller's class becomes a subclass whose ``_process_trial_failure`` lifts
    ``max_failures`` for that call and puts the count back (not an instance attribute: Tune
    pickles the controller's ``__dict__`` into the experiment state).
    """
    cls = type(controller)
    if not hasattr(cls, "_process_trial_failure"):  # a simulated controller: no such failures
        return
    if not issubclass(cls, _Forgiving):
        controller.__class__ = type(f"Forgiving{cls.__name__}", (_Forgiving, cls), {})
    _FORGIVE[controller] = forgive


class _Forgiving:
    """Mixed into the controller's class by ``forgive_failures``."""

    def _process_trial_failure(self, trial: Any, exception: Exception) -> None:
        original = super()._process_trial_failure  # type: ignore[misc]
        forgive = _FORGIVE.get(self)
        if forgive is None or not forgive(trial, exception):
            original(trial, exception=exception)
            return
        failures, limit = trial.run_metadata.num_failures, trial.max_failures
        if limit >= 0:
            trial.max_failures = max(limit, failures + 1)
        try:
            original(trial, exception=exception)
        finally:
            trial.max_failures = limit
            trial.run_metadata.num_failures = failures
            trial.run_metadata.invalidate_cache()


# Why: Tune makes each trial's actor from one ``ray.remote(runtime_env=...)`` class per
# trainable (``_ActorClassCache``, asked in ``_schedule_trial_actor``); the environment a
# process starts with is the only one CUDA reads before the user's module runs.
from ray.tune.execution import class_cache as _tune_class_cache  # noqa: E402


class _TrialEnvCache(_tune_class_cache._ActorClassCache):
    """Tune's actor class cache, with one class per trainable and ``env_for(trial)`` (of the
    ``trial`` being started) over Tune's own environment."""

    def __init__(self, env_for: Callable[[Any], dict[str, str]]) -> None:
        super().__init__()
        self.env_for, self.trial, self._with_env = env_for, None, {}

    def get(self, trainable_cls: type) -> Any:
        extra = self.env_for(self.trial) if self.trial is not None else {}
        key = (trainable_cls, tuple(sorted(extra.items())))
        if extra and key not in self._with_env:
            env = {**_tune_class_cache.DEFAULT_ENV_VARS, **{
                k: v for k, v in os.environ.items() if k in _tune_class_cache.ENV_VARS_TO_PROPAGATE},
                **extra}
            self._with_env[key] = ray.remote(runtime_env={"env_vars": env})(trainable_cls)
        return self._with_env[key] if extra else super().get(trainable_cls)


class _TrialEnvironments:
    """Mixed into the controller's class by ``trial_actor_env``."""

    def _schedule_trial_actor(self, trial: Any) -> None:
        self._class_cache.trial = trial  # type: ignore[attr-defined]
        try:
            super()._schedule_trial_actor(trial)  # type: ignore[misc]
        finally:
            self._class_cache.trial = None  # type: ignore[attr-defined]


def trial_actor_env(controller: Any, env_for: Callable[[Any], dict[str, str]]) -> bool:
    """Start each trial's actor with ``env_for(trial)`` in its environment (Ray expands
    ``${VAR}`` there); False where the controller makes no actors (simulated). The controller's
    class becomes a subclass, as in ``forgive_failures``."""
    cls = type(controller)
    if not hasattr(cls, "_schedule_trial_actor"):
        return False
    if not issubclass(cls, _TrialEnvironments):
        controller.__class__ = type(f"Env{cls.__name__}", (_TrialEnvironments, cls), {})
    controller._class_cache = _TrialEnvCache(env_for)
    return True


#: The ``TrialScheduler`` class attribute by which a scheduler refuses buffered results.
#: Why: Tune may deliver several results of a trial at once (``TUNE_RESULT_BUFFER_LENGTH``);
#: a Fluid resize must PAUSE right after the result it follows, so FluidExecutor sets it False.
BUFFERED_RESULTS_ATTR = "_supports_buffered_results"


def refuse_buffered_results(cls: type) -> type:
    """Class decorator: Tune delivers the scheduler's trials' results one at a time."""
    setattr(cls, BUFFERED_RESULTS_ATTR, False)
    return cls


# ---------------------------------------------------------------------- fluid.sim only
# The simulator (fluid.sim) replays Tune's controller loop without actors; it builds the
# objects the real controller builds, some of which Ray keeps private.

# Why: a trial's save resolves to a ``_FutureTrainingResult`` of a ``_TrainingResult``
# (checkpoint + metrics); the simulated controller hands Tune's schedulers (PBT) the same types.
from ray.train._internal.session import (  # noqa: E402
    _FutureTrainingResult as _FutureTrainingResult,
)
from ray.train._internal.session import _TrainingResult as _TrainingResult  # noqa: E402

# Why: the replay builds trials outside a Tune run, and a ``Trial`` needs a ``StorageContext``
# for its paths (nothing is written).
from ray.train._internal.storage import StorageContext as StorageContext  # noqa: E402

# Why: ``ray.shutdown`` empties Tune's trainable registry and only the private
# ``_global_registry`` answers "is this name registered?" without raising.
from ray.tune.registry import _global_registry as _global_registry  # noqa: E402
