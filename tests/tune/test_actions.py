"""``fluid.tune._actions``: the callback list Fluid gives the experiment (no Ray
started)."""

from __future__ import annotations

from types import SimpleNamespace

from ray.tune import Callback

from fluid.tune._actions import ShapeColumn
from fluid.tune._records import TrialRecord


class Stateful(Callback):
    """A user's callback: the results it is handed, and a state of its own."""

    def __init__(self):
        self.seen = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen.append(dict(result))

    def get_state(self):
        return {"seen": len(self.seen)}


class Store:
    def get(self, trial_id):
        return TrialRecord(trial=SimpleNamespace(trial_id=trial_id), group=0, until=None, actual=0.5) \
            if trial_id == "packed" else None


def test_each_result_has_its_shape_before_any_callback_sees_it():
    mine = Stateful()
    column = ShapeColumn([mine], store=Store(), mps=None, controller=None)
    for tid in ("packed", "unknown"):
        column.on_trial_result(iteration=1, trials=[], trial=SimpleNamespace(trial_id=tid),
                               result={"training_iteration": 1})
    assert mine.seen == [{"training_iteration": 1, "fluid_shape": "0.5 GPU", "fluid_gpus": 0.5},
                         {"training_iteration": 1}]


def test_every_callback_keeps_its_place_and_mps_stops_after_the_callbacks_end():
    mine, order = Stateful(), []
    mine.on_experiment_end = lambda **info: order.append("callback")
    mps = SimpleNamespace(stop=lambda: order.append("mps"))
    column = ShapeColumn([mine], store=Store(), mps=mps, controller=None)
    assert column.get_state() == {0: {"seen": 0}}  # the states Tune saves, by place
    column.on_experiment_end(trials=[])
    assert order == ["callback", "mps"]


def test_no_hook_for_the_experiments_end_is_said_only_where_fluid_runs_mps_daemons(caplog):
    import logging

    from fluid.tune._actions import install_callbacks
    from fluid.tune._gpu_nodes import GpuNodes

    controller = SimpleNamespace()  # no callback list (the simulator's controller)
    with caplog.at_level(logging.WARNING, logger="fluid"):
        install_callbacks(controller, Store(), GpuNodes("auto", ray_cluster=False))
        install_callbacks(controller, Store(), GpuNodes(False, ray_cluster=True))
        assert not caplog.records
        install_callbacks(controller, Store(), GpuNodes("auto", ray_cluster=True))
    assert [r.getMessage() for r in caplog.records] == [
        "Fluid: cannot hook the experiment's end; the MPS daemons stop when this process exits"]


def test_a_searcher_suggests_only_below_its_bound_and_each_new_bound_is_said(caplog):
    import logging

    from fluid.tune._actions import OutstandingLimit

    class Searcher:
        def suggest(self, trial_id):
            return {"id": trial_id}

    state = {"in_flight": 0, "bound": (2, "what fits at once on the CPUs")}
    limit = OutstandingLimit(Searcher(), lambda: state["in_flight"], lambda: state["bound"])
    with caplog.at_level(logging.INFO, logger="fluid"):
        assert limit.suggest("a") == {"id": "a"}
        state["in_flight"] = 2
        assert limit.suggest("b") is None
        state["bound"] = (3, "what fits at once under plain Tune")
        assert limit.suggest("b") == {"id": "b"}
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "Fluid: the searcher may have 2 trials held or running at once "
        "(what fits at once on the CPUs)",
        "Fluid: the searcher may have 3 trials held or running at once "
        "(what fits at once under plain Tune)"]
