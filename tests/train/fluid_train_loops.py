"""Training loops and Tune helpers shared by the fluid.train Ray tests."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import ray
import torch
import torch.distributed as dist
from ray import tune
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler
from torch.utils.data import DataLoader, TensorDataset

import fluid.train as ft

GLOBAL_BATCH = 16
SAMPLES = 128  # 8 global steps per epoch


def make_data() -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, 8, generator=g)
    w = torch.randn(8, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(SAMPLES, 1, generator=g)
    return TensorDataset(x, y)


def _forever(loader: ft.ElasticDataLoader) -> Iterator[Any]:
    while True:
        yield from loader


def _all_mean(value: float) -> float:
    if not dist.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item()) / dist.get_world_size()


def _param_spread(model: torch.nn.Module) -> float:
    """Largest difference of any parameter between ranks (0 at world size 1)."""
    flat = torch.cat([p.detach().flatten() for p in ft.unwrap_model(model).parameters()])
    if not dist.is_initialized():
        return 0.0
    gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return max(float((g - gathered[0]).abs().max()) for g in gathered)


def mlp_loop(config: dict[str, Any]) -> None:
    """Tiny MLP regression; one Tune iteration = `steps_per_iter` global steps."""
    ctx = ft.get_context()
    torch.manual_seed(0)
    model = ft.prepare_model(
        torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    )
    opt = torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.2), momentum=0.5)
    loader = ft.prepare_data_loader(
        DataLoader(make_data(), batch_size=config.get("batch", GLOBAL_BATCH), shuffle=True)
    )
    state = ft.load_checkpoint(model=model, optimizer=opt, loader=loader)
    iteration = state["iteration"] if state else 0
    stream = _forever(loader)
    while iteration < config["iterations"]:
        if config.get("fail_rank") == ctx.rank and iteration == config.get("fail_at"):
            raise ValueError(f"boom on rank {ctx.rank}")
        losses = []
        for _ in range(config.get("steps_per_iter", 4)):
            x, y = next(stream)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        iteration += 1
        if config.get("sleep"):
            time.sleep(config["sleep"])
        metrics = {
            "loss": _all_mean(sum(losses) / len(losses)),
            "world_size": ctx.world_size,
            "rank": ctx.rank,
            "param_spread": _param_spread(model),
            "epoch": loader.epoch,
            "batch": loader.batch,
            "gpu_share": ctx.gpu_share,
            "pid": os.getpid(),
        }
        if config.get("node_ids"):
            import ray

            nodes: list[Any] = [None] * ctx.world_size
            dist.all_gather_object(nodes, ray.get_runtime_context().get_node_id())
            metrics["num_nodes"] = len(set(nodes))
            metrics["nodes"] = sorted(set(nodes))
        ckpt = ft.save_checkpoint(model=model, optimizer=opt, loader=loader, iteration=iteration)
        ft.report(metrics, checkpoint=ckpt)


def env_loop(config: dict[str, Any]) -> None:
    """Reports the MPS variables this process got (one iteration)."""
    ctx = ft.get_context()
    ft.report(
        {
            "pct": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", ""),
            "pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY", ""),
            "gpu_share": ctx.gpu_share,
            "world_size": ctx.world_size,
        }
    )


class ResultLog(tune.Callback):
    """Every result Tune processed, in order (the driver's view)."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []
        self.errors: list[float] = []

    def on_trial_result(self, iteration, trials, trial, result, **info):  # noqa: ANN001
        cls = trial.get_trainable_cls()
        self.results.append(
            dict(
                result,
                config=dict(trial.config),
                cls_elastic=ft.is_elastic(cls),
            )
        )

    def on_trial_error(self, iteration, trials, trial, **info):  # noqa: ANN001
        self.errors.append(time.monotonic())


class ResizeAt(FIFOScheduler):
    """Pauses the trial after the given iterations and restarts it with a new shape."""

    def __init__(self, plan: dict[int, tune.PlacementGroupFactory]) -> None:
        super().__init__()
        self.plan = dict(plan)
        self._next: dict[str, tune.PlacementGroupFactory] = {}

    def on_trial_result(self, tune_controller, trial: Trial, result: dict) -> str:  # noqa: ANN001
        pgf = self.plan.pop(result["training_iteration"], None)
        if pgf is not None:
            self._next[trial.trial_id] = pgf
            return TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def choose_trial_to_run(self, tune_controller) -> Trial | None:  # noqa: ANN001
        for trial in tune_controller.get_trials():
            if trial.status == Trial.PENDING:
                return trial
        for trial in tune_controller.get_trials():
            if trial.status == Trial.PAUSED:
                pgf = self._next.pop(trial.trial_id, None)
                if pgf is not None:
                    trial.update_resources(pgf)
                return trial
        return None


def fit(
    trainable: Any,
    pgf: tune.PlacementGroupFactory | Callable[[dict], tune.PlacementGroupFactory],
    config: dict[str, Any],
    storage: str,
    *,
    scheduler: TrialScheduler | None = None,
    callbacks: list[tune.Callback] | None = None,
    max_failures: int = 0,
) -> tune.ResultGrid:
    tuner = tune.Tuner(
        tune.with_resources(trainable, pgf),
        param_space=config,
        tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=False),
        run_config=tune.RunConfig(
            storage_path=storage,
            verbose=0,
            callbacks=callbacks or [],
            failure_config=tune.FailureConfig(max_failures=max_failures),
        ),
    )
    return tuner.fit()


def packed(share: float = 0.5, cpus: float = 0.5) -> tune.PlacementGroupFactory:
    return tune.PlacementGroupFactory([{"CPU": cpus, "GPU": share}])


def gang(width: int, cpus: float = 0.5) -> tune.PlacementGroupFactory:
    return ft.trial_resources(width, cpus_per_worker=cpus, trial_cpus=cpus)


# Ray workers do not have tests/ on sys.path: ship this module's functions by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
