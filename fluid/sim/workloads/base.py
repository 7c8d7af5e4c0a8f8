"""What the simulator needs to know about a workload, and the model shared by the three tasks.

A ``Workload`` answers, for any config of its search space:

* ``trial_model(config)``: seconds per iteration on one GPU alone, ``alpha``, ``beta``, GPU
  memory, the share of the GPU one trial uses, and the checkpoint size (``TrialModel``);
* ``curve(config)``: its learning curve (``fluid.sim.workloads.curves.Curve``);

plus its metric, mode, target, search space, a grid for grid search and the full budget
``max_t`` in iterations.

``task_workload`` builds the paper's three tasks: it derives a config's trial model from the
FLOPs, parameters and activations counted on their real modules (``profile.py``) and a GPU
preset: its ``work`` is what the ground truth (``fluid.sim.truth``) runs.

Example:
    >>> from fluid.sim.workloads import get_workload
    >>> w = get_workload("cifar10")
    >>> m = w.trial_model(w.default_config)
    >>> 5 < m.iteration_time < 60 and m.work is not None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fluid.sim.truth import DeclaredLaw, PerfParams, Work, memory_gb
from fluid.sim.workloads.curves import Curve
from fluid.sim.workloads.hardware import (
    GPUS,
    INTERCONNECTS,
    GpuSpec,
    Interconnect,
    get_gpu,
    get_interconnect,
)
from fluid.sim.workloads.model_costs import ModelProfile, arch_key, profile
from fluid.sim.workloads.spaces import TaskSpace


@dataclass(frozen=True)
class TrialModel:
    """How one config runs.

    Attributes:
        iteration_time: seconds per iteration on one GPU, alone.
        alpha: declared packing overhead (synthetic and replayed workloads only: their truth
            is a ``DeclaredLaw``); unused when ``work`` is set.
        beta: declared scaling overhead (as ``alpha``).
        memory_gb: peak GPU memory of one replica.
        gpu_share: share of time a kernel runs when it is alone on a GPU (utilisation).
        checkpoint_gb: size of a checkpoint (weights + optimizer state).
        work: what an iteration does on the hardware (the mechanistic truth), or ``None``.
    """

    iteration_time: float
    alpha: float = 1.0
    beta: float = 1.0
    memory_gb: float = 1.0
    gpu_share: float = 1.0
    checkpoint_gb: float = 0.1
    work: Work | None = None

    @property
    def truth(self) -> Work | DeclaredLaw:
        """What ``fluid.sim.truth.iteration_time`` runs for this config."""
        return self.work if self.work is not None else DeclaredLaw(
            self.iteration_time, self.alpha, self.beta)


@dataclass
class Workload:
    """A tuning workload as the simulator sees it (see module docstring).

    Attributes:
        name: ``cifar10``, ``wlm``, ``dcgan``, ``synthetic`` or a replay.
        metric, mode, target: the objective and the target that defines time to target.
        space: Ray Tune search space (random search, HyperOpt, BOHB, ...).
        grid: Ray Tune space with ``grid_search`` entries (grid search).
        max_t: iterations of a full budget (the stop criterion and ``max_t`` of schedulers).
        default_config: values of keys the space does not set.
        model: ``config -> TrialModel``.
        curve_of: ``config -> Curve``.
        mutations: PBT's ``hyperparam_mutations``.
        description: one line for reports.
        gpu_memory_gb: memory of the GPU the model assumes (``None``: not checked).
        configs: the workload's only configs, when it has a fixed list (a replay).
    """

    name: str
    metric: str
    mode: str
    target: float
    space: dict[str, Any]
    grid: dict[str, Any]
    max_t: int
    default_config: dict[str, Any]
    model: Callable[[Mapping[str, Any]], TrialModel]
    curve_of: Callable[[Mapping[str, Any]], Curve]
    mutations: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    gpu_memory_gb: float | None = None
    configs: list[dict[str, Any]] | None = None
    _cache: dict[Any, TrialModel] = field(default_factory=dict, repr=False)

    def trial_model(self, config: Mapping[str, Any]) -> TrialModel:
        """The ``TrialModel`` of a config (cached by the config's values)."""
        key = tuple(sorted((k, repr(v)) for k, v in config.items()))
        m = self._cache.get(key)
        if m is None:
            m = self._cache[key] = self.model({**self.default_config, **dict(config)})
        return m

    def curve(self, config: Mapping[str, Any]) -> Curve:
        """The learning curve of a config."""
        return self.curve_of({**self.default_config, **dict(config)})

    def reached(self, value: float) -> bool:
        """Whether a metric value meets the target."""
        return value >= self.target if self.mode == "max" else value <= self.target


@dataclass(frozen=True)
class Hardware:
    """The GPU, the interconnect between a gang's GPUs and the model constants."""

    gpu: GpuSpec = GPUS["rtx6000"]
    link: Interconnect = INTERCONNECTS["10gbe"]
    perf: PerfParams = PerfParams()

    @classmethod
    def preset(cls, gpu: str = "rtx6000", link: str | None = None,
               perf: PerfParams | None = None) -> Hardware:
        """A GPU preset with its default interconnect (or ``link``)."""
        spec = get_gpu(gpu)
        return cls(spec, get_interconnect(link or spec.interconnect), perf or PerfParams())


def task_workload(task: TaskSpace, curve: Callable[[Mapping[str, Any]], Curve],
                  hardware: Hardware | None, *, optimizer_slots: int, description: str,
                  per_token: bool = False) -> Workload:
    """One of the paper's tasks (its ``spaces`` entry and learning ``curve``) on ``hardware``
    (default: the paper's RTX 6000 + 10 GbE), ``max_t`` 27 iterations.

    A config's trial model is derived from the counts of its architecture (``profile.py``)
    and the GPU preset by the ground truth (``fluid.sim.truth``), with ``optimizer_slots``
    optimizer states per parameter. ``per_token``: the task is profiled per token and a
    sample is a ``bptt``-token window (the word language model). ``description`` is completed
    with the GPU and the link.
    """
    hw = hardware or Hardware()
    defaults = dict(task.defaults)

    def model(c: Mapping[str, Any]) -> TrialModel:
        tokens, batch = int(c["bptt"]) if per_token else 1, int(c["batch_size"])
        prof: ModelProfile = profile(task.name, c, defaults)
        memory = memory_gb(prof.params, optimizer_slots, prof.activations_per_sample * tokens,
                           batch, hw.perf)
        work = Work(task.train_samples // tokens, batch, prof.flops_per_sample * tokens,
                    hw.gpu.fp32_tflops * 1e12, 4.0 * prof.params, hw.link.gbytes_per_s * 1e9,
                    hw.link.latency_s, memory, hw.perf)
        return TrialModel(
            iteration_time=work.steps() * work.step.seconds,
            memory_gb=memory,
            gpu_share=work.step.duty,
            checkpoint_gb=4.0 * prof.params * (1 + optimizer_slots) / 1e9,
            work=work,
        )

    return Workload(
        name=task.name, metric=task.metric, mode=task.mode, target=task.target,
        space=dict(task.space), grid=dict(task.grid), max_t=27, default_config=dict(defaults),
        model=model, curve_of=curve, mutations=dict(task.mutations),
        gpu_memory_gb=hw.gpu.memory_gb,
        description=f"{description}, {hw.gpu.name}, {hw.link.name}",
    )


__all__ = ["Hardware", "TrialModel", "Workload", "arch_key", "task_workload"]
