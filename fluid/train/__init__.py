"""What runs inside a trial: elastic data-parallel training loops for Fluid.

Names follow Ray Train's so they read familiar::

    import fluid.train as ft

    def loop(config):
        ctx = ft.get_context()
        model = ft.prepare_model(Net())
        opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
        loader = ft.prepare_data_loader(DataLoader(ds, batch_size=config["batch"], shuffle=True))
        state = ft.load_checkpoint(model=model, optimizer=opt, loader=loader)
        start = state["epoch"] if state else 0
        for epoch in range(start, config["epochs"]):
            for x, y in loader:
                ...
            ft.report({"loss": loss.item()},
                      checkpoint=ft.save_checkpoint(model=model, optimizer=opt, loader=loader))

    tune.Tuner(tune.with_resources(ft.elastic(loop), ft.trial_resources(2))).fit()

A trial that runs a Ray Train trainer instead is marked with ``ft.ray_train`` and builds its
trainer with ``ft.scaling_config()`` and ``ft.run_config()`` (``docs/ray-train.md``).
"""

import importlib
from typing import Any

# Lazy: ``fluid.train.modeled`` and the driver must not pay for importing torch.
_LAZY = {
    "PEAK_MEMORY_KEY": "_api",
    "get_checkpoint": "_api",
    "report": "_api",
    "load_checkpoint": "_checkpoint",
    "save_checkpoint": "_checkpoint",
    "TrainContext": "_context",
    "get_context": "_context",
    "ElasticDataLoader": "_data",
    "prepare_data_loader": "_data",
    "prepare_model": "_data",
    "unwrap_model": "_data",
    "TrainingWorkerError": "_elastic",
    "elastic": "_elastic",
    "is_elastic": "_elastic",
    "trial_resources": "_elastic",
    "ray_train": "_ray_train",
    "run_config": "_ray_train",
    "scaling_config": "_ray_train",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"fluid.train.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'fluid.train' has no attribute {name!r}")


__all__ = list(_LAZY)
