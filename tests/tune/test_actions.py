"""``fluid.tune._actions``: the callback list Fluid gives the experiment (no Ray
started)."""

from __future__ import annotations

from types import SimpleNamespace

from ray.tune import Callback

from fluid.tune._actions import ShapeColumn


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
        return SimpleNamespace(actual=0.5) if trial_id == "packed" else None


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
