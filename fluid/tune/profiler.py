"""Measure a trainable's packing and scaling overheads: ``alpha``, ``c``, ``beta``, ``d``.

"Fluid uses a small fraction of resources to profile current trials and reuse the result
throughout the whole tuning session." The profiler runs the trainable for ``iterations``
iterations

* as ``p = 1 .. max_pack`` copies sharing one GPU (each on a share ``1/p``), giving
  ``avg(T^p)``, from which ``alpha`` (``T^p = T^1 alpha^(p-1)``) and ``c`` (the largest ``p``
  whose marginal benefit ``O_p`` stays above ``O_th``) follow, and
* as a gang of ``w = 1 .. max_workers`` GPUs (elastic trainables only), giving ``T_w``, from
  which ``beta`` (``T_w = T_1 / w * beta^(w-1)``) and ``d`` follow.

The first iteration of every run (start-up, data loading) is left out. Results are cached in
a JSON file keyed by the trainable's name, a signature of its config and the device model, so
a later session reuses them. On a machine without GPUs the same code runs on logical GPUs: the
trials then share CPU cores, and the profile says so (``device`` starts with ``cpu``).

Example:
    >>> prof = profile(my_trainable, {"lr": 0.1}, max_pack=3, max_workers=2)  # doctest: +SKIP
    >>> FluidExecutor(alpha=prof.alpha, beta=prof.beta, c=prof.c, d=prof.d)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import tempfile
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fluid.core import fit_alpha, fit_beta, packing_limit, scaling_limit
from fluid.core.tunables import DEFAULTS
from fluid.gpu.nvml import PEAK_MEMORY_KEY, gpu_nodes
from fluid.tune._gpu_memory import GpuMemory
from fluid.tune._gpu_nodes import GpuNodes, measured
from fluid.tune._options import FluidConfigError
from fluid.tune._placement_groups import is_elastic_class, shape_for

#: Where profiles are cached unless ``cache`` says otherwise.
#: Packing degrees (1..MAX_PACK per GPU) and gang sizes (1..MAX_WORKERS GPUs) measured by
#: default: published training measurements of packing and of small gangs stop about there.
MAX_PACK = 4
MAX_WORKERS = 4
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "fluid", "profiles.json")


@dataclass(frozen=True)
class Profile:
    """Measured overheads of one trainable and config on one device model.

    Attributes:
        alpha: packing overhead of a pair, ``T^2 = T^1 alpha`` (one ``alpha`` fitted across
            degrees would mix the pair with degrees where the GPU has saturated);
            ``c``: most trials worth packing on one GPU, from each degree's own throughput.
        beta: scaling overhead; ``d``: most GPUs worth giving one trial (1 if not elastic).
        pack_times: ``{p: avg(T^p)}`` seconds per iteration with ``p`` trials on one GPU.
        gang_times: ``{w: T_w}`` seconds per iteration on a gang of ``w`` GPUs.
        alphas: ``{p: alpha_p}`` for ``p >= 2`` trials on one GPU, ``T^p = T^1 alpha_p^(p-1)``.
        memory: the largest peak GPU memory a run reported (GB; ``None``: none reported).
        device: the device model the numbers were measured on (``cpu: ...`` without GPUs).
        key: the cache key.
        sharing: how the packed copies shared their GPU: ``"mps"`` (each joined the node's
            MPS daemon, as FluidExecutor's trials do by default) or ``"time-sliced (why)"``.
    """

    alpha: float
    c: int
    beta: float
    d: int
    pack_times: dict[int, float] = field(default_factory=dict)
    gang_times: dict[int, float] = field(default_factory=dict)
    alphas: dict[int, float] = field(default_factory=dict)
    memory: float | None = None
    device: str = ""
    key: str = ""
    sharing: str = ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``fluid profile --json`` prints)."""
        out = asdict(self)
        out["cpu_numbers"] = self.device.startswith("cpu")
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Profile:
        """Inverse of ``to_json``."""
        return cls(
            alpha=float(obj["alpha"]), c=int(obj["c"]), beta=float(obj["beta"]), d=int(obj["d"]),
            pack_times={int(k): float(v) for k, v in obj.get("pack_times", {}).items()},
            gang_times={int(k): float(v) for k, v in obj.get("gang_times", {}).items()},
            alphas={int(k): float(v) for k, v in obj.get("alphas", {}).items()},
            memory=None if obj.get("memory") is None else float(obj["memory"]),
            device=obj.get("device", ""), key=obj.get("key", ""),
            sharing=obj.get("sharing", ""),
        )

    @classmethod
    def of(cls, value: Any) -> Profile:
        """``value`` as a profile: a ``Profile``, the dict ``fluid profile --json`` prints
        (``to_json``), or the path of a JSON file holding it; else ``FluidConfigError`` naming
        ``profile`` and what it accepts."""
        if isinstance(value, Profile):
            return value
        what = "a Profile, the dict `fluid profile --json` prints, or the path of a JSON file"
        if isinstance(value, (str, os.PathLike)):
            try:
                with open(value) as f:
                    value = json.load(f)
            except (OSError, ValueError) as e:
                raise FluidConfigError(f"profile: cannot read {os.fspath(value)!r} ({e}); "
                                       f"profile takes {what}") from None
        if isinstance(value, dict):
            try:
                return cls.from_json(value)
            except (KeyError, TypeError, ValueError) as e:
                raise FluidConfigError(f"profile: not a profile ({type(e).__name__}: {e}); "
                                       f"profile takes {what}") from None
        raise FluidConfigError(f"profile takes {what}, got {type(value).__name__}")

    @classmethod
    def measured(cls, pack_times: dict[int, float], gang_times: dict[int, float],
                 o_th: float = DEFAULTS.makespan_o_th, s_th: float = DEFAULTS.s_th,
                 elastic: bool = True,
                 **kw: Any) -> Profile:
        """The profile of these times: ``alpha`` of the pair, ``alpha_p`` of every degree,
        ``c`` and ``d`` from each degree's and width's own throughput."""
        return cls(
            alpha=fit_alpha({p: pack_times[p] for p in (1, 2) if p in pack_times}),
            c=packing_limit(pack_times, o_th), beta=fit_beta(gang_times),
            d=scaling_limit(gang_times, s_th) if elastic else 1,
            pack_times=pack_times, gang_times=gang_times,
            alphas={p: (t / pack_times[1]) ** (1.0 / (p - 1)) for p, t in pack_times.items()
                    if p > 1},
            **kw)


def device_model() -> str:
    """``"NVIDIA A100-SXM4-40GB"``-style name of GPU 0, or ``"cpu: <model>"`` without GPUs."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
            return name.decode() if isinstance(name, bytes) else str(name)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML, no driver, no GPU: profile on CPU slots
        pass
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"cpu: {model}"


def cache_key(trainable: Any, config: dict[str, Any], device: str) -> str:
    """Trainable name + a hash of its config (sorted JSON) + the device model."""
    name = getattr(trainable, "__qualname__", None) or getattr(trainable, "__name__", "trainable")
    module = getattr(trainable, "__module__", "")
    blob = json.dumps(config, sort_keys=True, default=repr)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return f"{module}.{name}|{digest}|{device}"


def _load_cache(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _store(path: str, key: str, prof: Profile) -> None:
    cache = _load_cache(path)
    cache[key] = prof.to_json()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _mean_iteration_time(analysis: Any) -> tuple[float, float | None]:
    """Mean ``time_this_iter_s`` over all trials, leaving out each trial's first iteration,
    and the largest ``fluid_peak_gpu_memory`` reported (GB; ``None``: none)."""
    times, peaks = [], []
    for df in analysis.trial_dataframes.values():
        col = list(df["time_this_iter_s"])
        times += col[1:] if len(col) > 1 else col
        if PEAK_MEMORY_KEY in df:
            peaks += [float(v) / 2**30 for v in df[PEAK_MEMORY_KEY] if v == v and v]
    if not times:
        raise RuntimeError("the trainable reported no iteration while being profiled")
    return statistics.mean(times), max(peaks, default=None)


def profile(
    trainable: Callable | type,
    config: dict[str, Any],
    *,
    iterations: int = 4,
    max_pack: int = MAX_PACK,
    max_workers: int = MAX_WORKERS,
    cpus_per_trial: float = 0.5,
    o_th: float = DEFAULTS.makespan_o_th,
    s_th: float = DEFAULTS.s_th,
    cache: str | None = DEFAULT_CACHE,
    refresh: bool = False,
    progress: Callable[[str], None] | None = None,
    mps: Any = "auto",
) -> Profile:
    """Measure ``alpha``, ``c``, ``beta``, ``d`` of ``trainable`` with ``config`` (cached).

    Needs a running Ray instance with at least ``max(max_pack > 0, max_workers)`` GPUs (logical
    GPUs work). The trainable must stop on its own or honour ``training_iteration``.

    Args:
        trainable: a Tune trainable (function or class).
        config: the config to profile with (one representative trial).
        iterations: iterations per run (the first is left out of the averages), >= 2.
        max_pack: measure 1 .. max_pack trials on one GPU, >= 1.
        max_workers: measure gangs of 1 .. max_workers GPUs (elastic trainables only), >= 1.
        cpus_per_trial: CPUs of each profiling trial (and of each gang worker).
        o_th, s_th: thresholds for ``c`` and ``d`` (see ``fluid.core.overheads``): what the
            hardware allows for a group's makespan; FluidExecutor packs under its own, stricter
            ``Tunables.o_th`` and takes the profile's ``c`` as a cap (``fluid.core.tunables``).
        cache: JSON cache file; ``None`` disables caching.
        refresh: measure again even when the cache has this key.
        progress: called with a line of text before each measurement.
        mps: as ``FluidExecutor(mps=...)``: by default the packed copies share their GPU
            under MPS where the node has it, as the experiment's trials will
            (``Profile.sharing`` says which; the cache keeps the two apart).
    """
    _check_setup(iterations, max_pack, max_workers)
    device = device_model()
    nodes = GpuNodes(mps, ray_cluster=True)
    nodes.start()  # copies packed on a GPU share it as FluidExecutor's trials would
    nvml_gpus = GpuMemory(None, DEFAULTS).read(gpu_nodes())  # NVML sees GPUs: peaks measured
    try:
        key = cache_key(trainable, config, f"{device} {nodes.sharing()}")
        if cache and not refresh and key in (cached := _load_cache(cache)):
            return Profile.from_json(cached[key])
        cls = _as_class(trainable)
        runnable = measured(cls) if nodes.running or nvml_gpus else trainable
        prof = _measure(runnable, is_elastic_class(cls), config, iterations,
                        max_pack, max_workers, cpus_per_trial, (o_th, s_th), progress)
    finally:
        nodes.stop()
    prof = replace(prof, device=device, key=key, sharing=nodes.sharing())
    if cache:
        _store(cache, key, prof)
    return prof


def _measure(runnable: Any, elastic: bool, config: dict[str, Any], iterations: int,
             max_pack: int, max_workers: int, cpus_per_trial: float,
             thresholds: tuple[float, float], progress: Callable[[str], None] | None,
             ) -> Profile:
    """The profile of ``runnable`` (the trainable as it runs), without device and key."""
    say = progress or (lambda _line: None)
    peaks: list[float] = []

    def timed(copies: int, pgf: Any) -> float:
        # Tune's results of a profiling run are scratch: gone once its time is taken.
        with tempfile.TemporaryDirectory(prefix="fluid-profile-",
                                         ignore_cleanup_errors=True) as storage:
            seconds, peak = _run_copies(runnable, config, copies, pgf, iterations, storage)
        peaks.extend([peak] if peak is not None else [])
        return seconds

    pack_times: dict[int, float] = {}
    for p in range(1, max_pack + 1):
        say(f"profiling: {p} trial(s) sharing one GPU")
        pack_times[p] = timed(p, shape_for(1.0 / p if p > 1 else 1.0, cpus_per_trial, 0))
    gang_times: dict[int, float] = {1: pack_times[1]}
    if elastic:
        for w in range(2, max_workers + 1):
            say(f"profiling: a gang of {w} GPUs")
            gang_times[w] = timed(1, shape_for(float(w), cpus_per_trial, cpus_per_trial))
    return Profile.measured(pack_times, gang_times, *thresholds, elastic,
                            memory=max(peaks, default=None))


def _check_setup(iterations: int, max_pack: int, max_workers: int) -> None:
    """A clear error for a bad argument, no Ray instance or too few GPUs."""
    for name, value, low in (("iterations", iterations, 2), ("max_pack", max_pack, 1),
                             ("max_workers", max_workers, 1)):
        if int(value) != value or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    import ray

    if not ray.is_initialized():
        raise RuntimeError("profile() needs a running Ray instance (ray.init(num_gpus=...))")
    gpus = ray.cluster_resources().get("GPU", 0)
    if gpus < max(1, max_workers):
        raise ValueError(
            f"max_workers={max_workers} needs {max_workers} GPUs; the cluster has {gpus:g}"
        )


def _run_copies(trainable: Any, config: dict[str, Any], copies: int, pgf: Any,
                iterations: int, storage: str) -> tuple[float, float | None]:
    """Mean iteration time of ``copies`` copies of the trial run at once, each in ``pgf``, and
    the largest peak GPU memory they reported (GB)."""
    from ray import tune

    # tune.with_resources marks a function trainable itself; a mark left behind would be a GPU
    # request that FluidExecutor honours later, so the function is given back as it was.
    before = getattr(trainable, "_resources", None)
    try:
        analysis = tune.run(
            tune.with_resources(trainable, pgf),
            config={**config, "_fluid_profile_copy": tune.grid_search(list(range(copies)))},
            stop={"training_iteration": iterations},
            storage_path=storage,
            verbose=0,
        )
    finally:
        if isinstance(trainable, types.FunctionType):
            if before is None:
                vars(trainable).pop("_resources", None)
            else:
                trainable._resources = before
    return _mean_iteration_time(analysis)


def _as_class(trainable: Any) -> type | None:
    from ray.tune.registry import get_trainable_cls
    from ray.tune.trainable import wrap_function

    if isinstance(trainable, str):
        return get_trainable_cls(trainable)
    if isinstance(trainable, type):
        return trainable
    return wrap_function(trainable)
