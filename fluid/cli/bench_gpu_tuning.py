"""The tuning part of ``fluid bench gpu``: one real Ray Tune job under plain Tune and under Fluid.

A grid of learning rates (one trial each, same seed) trains ResNet-18 (``--smoke``: a tiny CNN)
on a learnable CIFAR-10-shaped synthetic task: each class is a fixed low-frequency colour
pattern under Gaussian noise, generated on the trial's device step by step (no data loader, no
files), so accuracy on a held-out set climbs over a few iterations. The trainable is
``tune.with_resources(loop, {"gpu": 1})``, an ordinary Tune function trainable; it reports a
checkpoint with every result, so Fluid may pack or restart it. Plain Tune runs it as asked (one
trial per GPU); Fluid runs it as ``FluidExecutor()``, nothing set (MPS by default where the node
has it). Measured per run: wall time, time to the target accuracy, best config and accuracy,
peak GPU memory, and for Fluid each trial's shapes, its resizes, its measured resize cost
``eps``, and how many results of packed trials ran as MPS clients
(``packed_results_under_mps`` of ``packed_results``). The simulator
(``fluid.cli.bench_e2e.predict_modeled``) predicts both runs from the measured one-GPU
iteration time, the measured packing (``alpha`` of a measured pair, from ``2 / ratio``) and the
measured restart cost, Fluid told ``alpha`` as if profiled.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

METRIC = "accuracy"
LRS = (0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)
NOISE = 4.0  # the noise over class patterns of unit scale: learnable in tens of steps, not at once
_VAL = 512  # held-out samples


@dataclass(frozen=True)
class TuningJob:
    """One tuning job: ``trials`` learning rates of ``model`` (``resnet18`` or ``tiny``), each
    ``iterations`` results of ``steps`` SGD steps at ``batch``; ``target`` accuracy defines time
    to target."""

    model: str
    batch: int
    steps: int
    iterations: int
    trials: int
    target: float

    def __post_init__(self) -> None:
        if self.model not in ("resnet18", "tiny"):
            raise ValueError(f"TuningJob: model must be 'resnet18' or 'tiny', got {self.model!r}")
        if not 1 <= self.trials <= len(LRS):
            raise ValueError(f"TuningJob: trials must be in [1, {len(LRS)}], got {self.trials}")
        for name in ("batch", "steps", "iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"TuningJob: {name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.target <= 1:
            raise ValueError(f"TuningJob: target must be in (0, 1], got {self.target}")


#: On a GPU: ~1 s an iteration for ResNet-18 at batch 128 on an H100 alone.
GPU_JOB = TuningJob("resnet18", 128, 100, 8, 8, 0.9)
#: On the CPU (``--smoke``): the same pipeline in seconds.
SMOKE_JOB = TuningJob("tiny", 16, 10, 3, 4, 0.5)


def synthetic_batch(step: int, batch: int, device: Any) -> tuple[Any, Any]:
    """Images ``(batch, 3, 32, 32)`` and labels of step ``step`` of the synthetic task (the same
    for every trial and run; step -1 is the held-out set)."""
    import torch

    patterns = torch.randn(10, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    patterns = patterns.repeat_interleave(8, 2).repeat_interleave(8, 3).to(device)
    gen = torch.Generator(device=device).manual_seed(step + 1)
    labels = torch.randint(0, 10, (batch,), generator=gen, device=device)
    noise = torch.randn(batch, 3, 32, 32, generator=gen, device=device)
    return patterns[labels] + NOISE * noise, labels


def _accuracy(model: Any, x: Any, y: Any) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def tuning_loop(config: dict[str, Any]) -> None:
    """The trial, an ordinary Tune function trainable as a user writes one:
    ``config["iterations"]`` results of ``config["steps"]`` SGD steps on the GPU Ray gives it,
    each with a checkpoint (so that Fluid may pack or restart it)."""
    import torch
    from ray import tune

    from fluid.gpu.workloads import resnet18_cifar, tiny_cnn

    torch.manual_seed(config["seed"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = (resnet18_cifar() if config["model"] == "resnet18" else tiny_cnn()).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    done = 0
    if (ckpt := tune.get_checkpoint()) is not None:
        with ckpt.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"), map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        done = state["iteration"]
    val_x, val_y = synthetic_batch(-1, _VAL, device)
    loss_fn = torch.nn.CrossEntropyLoss()
    while done < config["iterations"]:
        for s in range(config["steps"]):
            x, y = synthetic_batch(done * config["steps"] + s, config["batch"], device)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        done += 1
        metrics = {METRIC: _accuracy(model, val_x, val_y), "loss": loss.item(),
                   "reserved": torch.cuda.max_memory_reserved() if device.type == "cuda" else 0}
        with tempfile.TemporaryDirectory() as d:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "iteration": done}, os.path.join(d, "state.pt"))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def _watcher(target: float, start: float) -> Any:
    """A Tune callback recording the first result at ``target``, peak GPU memory and shapes."""
    from ray.tune import Callback

    class Watch(Callback):
        def __init__(self) -> None:
            self.reached_at: float | None = None
            self.peak_memory: int | None = None
            self.shapes: dict[str, list[str]] = {}
            self.iteration_s: list[float] = []
            self.packed = [0, 0]  # results of packed trials: under MPS, in all

        def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                            **info: Any) -> None:
            if self.reached_at is None and result.get(METRIC, 0.0) >= target:
                self.reached_at = time.monotonic() - start
            peak = result.get("fluid_peak_gpu_memory") or result.get("reserved")
            if peak:
                self.peak_memory = max(self.peak_memory or 0, int(peak))
            if 0 < result.get("fluid_gpus", 1) < 1:
                self.packed[0] += bool(result.get("fluid_mps"))
                self.packed[1] += 1
            shape = result.get("fluid_shape")
            seen = self.shapes.setdefault(trial.trial_id, [])
            if shape is not None and (not seen or seen[-1] != shape):
                seen.append(shape)
            self.iteration_s.append(float(result.get("time_this_iter_s", 0.0)))

    return Watch()


def run_job(job: TuningJob, executor: str, storage: str) -> dict[str, Any]:
    """Run ``job`` under ``executor`` (``plain`` or ``fluid``); what it measured."""
    from ray import tune

    from fluid import FluidExecutor
    from fluid.cli.bench_e2e import ray_costs

    if executor not in ("plain", "fluid"):
        raise ValueError(f"executor must be 'plain' or 'fluid', got {executor!r}")
    fluid = FluidExecutor() if executor == "fluid" else None
    space = {"lr": tune.grid_search(list(LRS[:job.trials])), "seed": 0, "model": job.model,
             "batch": job.batch, "steps": job.steps, "iterations": job.iterations}
    wall0, t0 = time.time(), time.monotonic()
    watch = _watcher(job.target, t0)
    analysis = tune.run(
        tune.with_resources(tuning_loop, {"gpu": 1}), config=space,
        scheduler=fluid, metric=METRIC, mode="max", stop={"training_iteration": job.iterations},
        storage_path=storage, callbacks=[watch], verbose=0)
    out = {"wall_s": time.monotonic() - t0, "time_to_target_s": watch.reached_at,
           "best_config": {"lr": analysis.best_config["lr"]},
           "best_metric": analysis.best_result[METRIC], "peak_gpu_memory": watch.peak_memory,
           "iteration_s": statistics.median(watch.iteration_s) if watch.iteration_s else None,
           "trials": len(analysis.trials),
           "errors": sum(t.status == "ERROR" for t in analysis.trials)}
    out.update(ray_costs(analysis, wall0, out["wall_s"]))
    if fluid is not None:
        out.update(shapes=watch.shapes, restarts=fluid.resizes,
                   eps=fluid.eps if fluid.estimator.eps_samples else None,
                   packed_results_under_mps=watch.packed[0], packed_results=watch.packed[1])
    return out


def simulated(job: TuningJob, plain: dict[str, Any], fluid: dict[str, Any],
              alpha: float | None) -> dict[str, Any]:
    """What the simulator predicts for ``job`` on one GPU with the measured costs and packing
    overhead ``alpha`` (``None``: not measured, nothing predicted)."""
    from fluid.cli.bench_e2e import predict_modeled

    if alpha is None or plain["iteration_s"] is None:
        return {"simulated_speedup": None, "simulated": None, "alpha": alpha}
    start_s = fluid["eps"] if fluid["eps"] is not None else plain["trial_overhead_s"]
    times = predict_modeled("grid", [plain["iteration_s"]] * job.trials, job.iterations, 1,
                            start_s, alpha=alpha, beta=1.0)
    runs = {"tune": plain, "fluid": fluid}
    predicted = {ex: t + runs[ex]["setup_s"] + runs[ex]["teardown_s"] for ex, t in times.items()}
    return {"simulated_speedup": predicted["tune"] / predicted["fluid"],
            "simulated": predicted, "alpha": alpha, "simulated_restart_s": start_s}


def tuning(job: TuningJob, alpha: float | None, log: Callable[[str], None]) -> dict[str, Any]:
    """Both runs of ``job`` on the Ray instance already started, and the simulator's view."""
    runs = {}
    for executor in ("plain", "fluid"):
        log(f"tuning: {job.trials} trials of {job.model} under {executor} ...")
        with tempfile.TemporaryDirectory(prefix="fluid-bench-gpu-",
                                         ignore_cleanup_errors=True) as storage:
            r = runs[executor] = run_job(job, executor, storage)
        log(f"tuning: {executor}: {r['wall_s']:.1f} s, best {METRIC} {r['best_metric']:.3f} "
            f"at lr {r['best_config']['lr']}, target at {r['time_to_target_s']}")
    plain, fluid = runs["plain"], runs["fluid"]
    return {"job": asdict(job), "plain": plain, "fluid": fluid,
            "speedup": plain["wall_s"] / fluid["wall_s"],
            **simulated(job, plain, fluid, alpha)}
