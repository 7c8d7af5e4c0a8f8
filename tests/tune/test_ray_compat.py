"""Each Ray-private thing Fluid uses (``fluid.tune._ray_compat``) is still where Fluid reaches it.

A Ray release that moves one fails here, by name, instead of failing an experiment. No Ray
instance is started.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

from ray.tune.callback import Callback, CallbackList
from ray.tune.execution.tune_controller import TrialRunnerWrapper, TuneController
from ray.tune.registry import TRAINABLE_CLASS
from ray.tune.schedulers import TrialScheduler

from fluid.tune import _ray_compat as compat

ROOT = Path(__file__).resolve().parents[2]


def _params(fn):
    return list(inspect.signature(fn).parameters)


def _init_assigns(attr):
    return f"self.{attr} =" in inspect.getsource(TuneController.__init__)


def test_scheduler_hooks_get_a_wrapper_around_the_controller():
    controller = object()
    wrapper = TrialRunnerWrapper(tune_controller=controller, trial_executor=None)
    assert compat.controller_of(wrapper) is controller
    assert compat.controller_of(controller) is controller


def test_controller_keeps_callbacks_and_storage():
    for attr in ("_callbacks", "_storage"):
        assert _init_assigns(attr), f"TuneController.__init__ no longer sets {attr}"


def test_set_trial_status_signature():
    assert _params(TuneController._set_trial_status) == ["self", "trial", "status"]
    seen = []
    compat.set_trial_status(SimpleNamespace(_set_trial_status=lambda t, s: seen.append((t, s))),
                            "trial", "PAUSED")
    assert seen == [("trial", "PAUSED")]


def test_a_decision_cached_for_a_dropped_save_is_forgotten():
    assert _init_assigns("_cached_trial_decisions")
    # Tune caches STOP for a saving trial and cancels the save with the actor (issue 57906).
    stop = inspect.getsource(TuneController._schedule_trial_stop)
    assert "if trial.is_saving:" in stop and "self._cached_trial_decisions[" in stop
    assert "clear_actor_task_futures" in stop
    cached = {"a": TrialScheduler.STOP, "b": TrialScheduler.STOP}
    controller = SimpleNamespace(_cached_trial_decisions=cached)
    compat.drop_stale_decision(controller, SimpleNamespace(trial_id="a", is_saving=False))
    compat.drop_stale_decision(controller, SimpleNamespace(trial_id="b", is_saving=True))
    assert cached == {"b": TrialScheduler.STOP}  # a save still under way keeps its decision
    compat.drop_stale_decision(SimpleNamespace(), SimpleNamespace(trial_id="a", is_saving=False))


def test_failures_are_counted_where_fluid_forgives_them():
    assert _params(TuneController._process_trial_failure) == ["self", "trial", "exception"]
    source = inspect.getsource(TuneController._process_trial_failure)
    assert "trial.handle_error(" in source and "trial.should_recover()" in source
    from ray.tune.experiment import Trial

    assert "run_metadata.num_failures += 1" in inspect.getsource(Trial._handle_ray_task_error)
    assert "self.max_failures" in inspect.getsource(Trial.should_recover)

    class Controller:
        def _process_trial_failure(self, trial, exception):  # Tune: count, then decide
            trial.run_metadata.num_failures += 1
            seen.append(trial.run_metadata.num_failures <= trial.max_failures)

    seen = []
    trial = SimpleNamespace(max_failures=0, run_metadata=SimpleNamespace(
        num_failures=0, invalidate_cache=lambda: None))
    controller = Controller()
    compat.forgive_failures(controller, lambda t, e: "forgive" in str(e))
    assert "_process_trial_failure" not in vars(controller)  # Tune pickles vars(controller)
    controller._process_trial_failure(trial, exception=RuntimeError("forgive me"))
    assert seen == [True] and (trial.max_failures, trial.run_metadata.num_failures) == (0, 0)
    controller._process_trial_failure(trial, exception=RuntimeError("count me"))
    assert seen == [True, False] and trial.run_metadata.num_failures == 1


def test_callback_list_is_a_mutable_list():
    ours = Callback()
    callbacks = CallbackList([ours])
    found = compat.callback_list(SimpleNamespace(_callbacks=callbacks))
    assert found is not None and found[0] is ours
    assert compat.callback_list(SimpleNamespace()) is None


def test_the_callback_list_is_replaced_over_the_same_callbacks():
    ours = Callback()
    controller = SimpleNamespace(_callbacks=CallbackList([ours]))
    assert compat.replace_callback_list(controller, CallbackList)
    assert isinstance(controller._callbacks, CallbackList)
    assert controller._callbacks._callbacks == [ours]
    assert not compat.replace_callback_list(SimpleNamespace(), CallbackList)


def test_storage_has_staging_path_and_syncer(tmp_path):
    staging = inspect.getattr_static(compat.StorageContext, "experiment_driver_staging_path")
    assert isinstance(staging, property)
    fake_storage = SimpleNamespace(experiment_driver_staging_path=tmp_path)
    assert compat.experiment_dir(SimpleNamespace(_storage=fake_storage)) == str(tmp_path)
    assert compat.experiment_dir(SimpleNamespace()) is None
    storage = compat.StorageContext(storage_path=str(tmp_path), experiment_dir_name="exp")
    assert callable(storage.syncer.wait)
    assert "force" in _params(TuneController.checkpoint)
    calls = []
    fake = SimpleNamespace(checkpoint=lambda force: calls.append(force),
                           _storage=SimpleNamespace(syncer=SimpleNamespace(
                               wait=lambda: calls.append("waited"))))
    compat.snapshot_experiment(fake)
    assert calls == [True, "waited"]


def test_buffered_results_switch():
    assert getattr(TrialScheduler, compat.BUFFERED_RESULTS_ATTR) is True

    @compat.refuse_buffered_results
    class Unbuffered(TrialScheduler):
        pass

    assert Unbuffered().supports_buffered_results is False


def test_fluid_executor_refuses_buffered_results():
    from fluid import FluidExecutor

    assert FluidExecutor().supports_buffered_results is False


def test_training_result_types_for_the_simulator():
    result = compat._TrainingResult(checkpoint=None, metrics={"loss": 1.0})
    assert (result.checkpoint, result.metrics) == (None, {"loss": 1.0})
    assert _params(compat._FutureTrainingResult.__init__) == ["self", "future"]
    assert _params(compat._FutureTrainingResult.resolve)[:2] == ["self", "block"]


def test_trainable_registry_lookup_for_the_simulator():
    assert compat._global_registry.contains(TRAINABLE_CLASS, "fluid-no-such-trainable") is False


def test_search_finished_reads_the_controllers_search_algorithm():
    # Where Tune keeps the search algorithm, and what a real one answers.
    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.search import BasicVariantGenerator

    assert "_search_alg" in TuneController.__init__.__code__.co_names
    gen = BasicVariantGenerator()
    assert compat.search_finished(SimpleNamespace(_search_alg=gen)) is gen.is_finished()
    assert not compat.search_finished(SimpleNamespace())


def test_only_ray_compat_overrides_rays_private_methods():
    # A class of fluid that subclasses one of Ray's and defines a private method Ray's class
    # has is reaching into Ray's internals: that lives in _ray_compat (RungHalving).
    import importlib
    import pkgutil

    import fluid

    overrides = []
    for info in pkgutil.walk_packages(fluid.__path__, "fluid."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if not (isinstance(cls, type) and cls.__module__ == info.name):
                continue
            ray_bases = [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] == "ray"]
            overrides += [f"{cls.__module__}.{cls.__qualname__}.{name}"
                          for name, value in vars(cls).items()
                          if name.startswith("_") and not name.startswith("__")
                          and callable(value) and any(name in vars(b) for b in ray_bases)]
    assert overrides == []
    # RungHalving (mixed before Ray's HyperBand classes) is compat's override of that kind.
    assert "_process_bracket" in vars(compat.RungHalving)


def test_rays_scheduler_state_is_where_compat_reads_it():
    from ray.tune.schedulers import ASHAScheduler, HyperBandScheduler, PopulationBasedTraining
    from ray.tune.schedulers.async_hyperband import _Bracket as AshaBracket
    from ray.tune.schedulers.hyperband import _Bracket as HyperBandBracket

    asha = ASHAScheduler(time_attr="epoch", max_t=9, grace_period=1, reduction_factor=3)
    assert compat.time_attr(asha) == "epoch" and asha._max_t == 9
    assert "_rungs" in vars(AshaBracket(1, 9, 3, 0))
    trial = type("FakeTrial", (), {"trial_id": "t"})()  # hashable, as a Trial
    assert compat.asha_rungs(asha, trial) is None  # not tracked
    asha._trial_info["t"] = AshaBracket(1, 9, 3, 0)
    assert compat.asha_rungs(asha, trial) == ([9, 3, 1], 9)
    assert _params(HyperBandScheduler._process_bracket) == ["self", "tune_controller", "bracket"]
    assert "self._cumul_r =" in inspect.getsource(HyperBandBracket.__init__)
    pbt = PopulationBasedTraining(time_attr="epoch", perturbation_interval=4,
                                  hyperparam_mutations={"lr": [0.1, 0.2]})
    assert compat.pbt_next_perturbation(pbt, trial) is None
    pbt._trial_state[trial] = SimpleNamespace(last_perturbation_time=2)
    assert compat.pbt_next_perturbation(pbt, trial) == 6


def test_statuses_shown_to_the_base_come_back_unless_changed_meanwhile():
    held, stopped = SimpleNamespace(status="PAUSED"), SimpleNamespace(status="PAUSED")
    with compat.statuses_shown([(held, "PAUSED", "PENDING"), (stopped, "PAUSED", "PENDING")]):
        assert (held.status, stopped.status) == ("PENDING", "PENDING")
        stopped.status = "TERMINATED"  # the base stopped it while it looked
    assert (held.status, stopped.status) == ("PAUSED", "TERMINATED")


def test_trial_ids_come_from_the_given_maker_inside_only():
    from ray.tune.experiment import Trial

    assert isinstance(inspect.getattr_static(Trial, "generate_id"), classmethod)
    made = iter(["a1", "a2"])
    with compat.trial_ids(lambda: next(made)):
        assert [Trial.generate_id(), Trial.generate_id()] == ["a1", "a2"]
    assert Trial.generate_id() not in ("a1", "a2")


def test_variant_names_follow_the_given_prefix():
    from ray.tune.experiment import Experiment
    from ray.tune.search import BasicVariantGenerator

    search = BasicVariantGenerator(random_state=1)
    compat.name_variants(search, "s1_")
    search.add_configurations([Experiment("e", lambda config: None, config={"x": 1})])
    assert search.next_trial().trial_id.startswith("s1_")


def test_trial_actors_are_made_from_the_controllers_class_cache():
    """``trial_actor_env`` gives each trial's actor its environment through the class the
    controller's ``_class_cache`` returns while ``_schedule_trial_actor`` runs."""
    source = inspect.getsource(TuneController._schedule_trial_actor)
    assert "self._class_cache.get(" in source
    cache = compat._TrialEnvCache(lambda trial: {"A": "1"} if trial == "t" else {})
    plain = cache.get(_Plain)
    cache.trial = "t"
    with_env = cache.get(_Plain)
    assert with_env is not plain and cache.get(_Plain) is with_env  # one class per environment
    assert with_env._default_options["runtime_env"]["env_vars"]["A"] == "1"


class _Plain:
    pass
