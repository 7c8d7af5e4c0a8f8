"""Co-located training throughput on one GPU, written as packing-reference points.

Runs ``k`` identical training processes of a published workload on one GPU, time-sliced
(separate CUDA contexts) and under NVIDIA MPS (`fluid.gpu.mps.MPSDaemon`), and writes every
``(workload, k >= 2, mode)`` as a point of the schema of ``fluid/sim/references/packing.json``.
``fluid simulate --validate --references OUT`` then scores the simulator's packing model on a
GPU, and at ``k`` per GPU, that no shipped reference covers. The ratio's denominator is one
job alone without MPS (how it runs without Fluid); every job trains in FP32 on synthetic data
at PyTorch's defaults, calling ``loss.item()`` each step as a training loop that logs does.

The workloads are the published ones, so ``flops_per_sample`` (forward + backward) comes from
the shipped references of the same workload: ``resnet18`` (kuangliu's CIFAR-10 ResNet-18),
``lstm`` (PyTorch's word language model: 2 layers of 200, 33,278 words, bptt 35) and
``dcgan`` (PyTorch's DCGAN example, 64x64, ngf = ndf = 64).

Example (on a GPU node; needs torch, not Ray)::

    python -m experiments.colocate --gpu-name "NVIDIA H200" --gpu-fp32-peak-tflops 67 \\
        --out h200.json
    fluid simulate --validate --references h200.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fluid.gpu.mps import CONTROL_BINARY, MPSDaemon
from fluid.gpu.nvml import GPUSampler

WORKLOADS = {
    "resnet18": "ResNet-18 (kuangliu) CIFAR-10, PyTorch",
    "lstm": "2-layer LSTM 200/200 word LM, WikiText-2, bptt 35",
    "dcgan": "DCGAN (PyTorch example, 64x64, ngf=ndf=64) LSUN",
}
DEFAULT_BATCH = {"resnet18": 128, "lstm": 20, "dcgan": 64}
MODES = ("time-slicing", "mps")
_REFERENCES = Path(__file__).resolve().parent.parent / "fluid" / "sim" / "references"
_VOCAB, _BPTT, _NZ = 33278, 35, 100


def _block(cin: int, cout: int, stride: int) -> nn.Module:
    body = nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
        nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
    short = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
        nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    return _Residual(body, short)


class _Residual(nn.Module):
    def __init__(self, body: nn.Module, short: nn.Module) -> None:
        super().__init__()
        self.body, self.short = body, short

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


def resnet18_cifar() -> nn.Module:
    """kuangliu's CIFAR-10 ResNet-18: a 3x3 stem, no max-pool, four stages of two blocks."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [_block(cin, cout, stride), _block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers)


class _WordLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(_VOCAB, 200)
        self.rnn = nn.LSTM(200, 200, 2, dropout=0.2)
        self.decode = nn.Linear(200, _VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.rnn(self.embed(x))[0])


def _dcgan_pair() -> tuple[nn.Module, nn.Module]:
    def up(cin: int, cout: int, stride: int, pad: int) -> list[nn.Module]:
        return [nn.ConvTranspose2d(cin, cout, 4, stride, pad, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU()]

    def down(cin: int, cout: int, norm: bool) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False),
                *([nn.BatchNorm2d(cout)] if norm else []), nn.LeakyReLU(0.2)]

    g = nn.Sequential(*up(_NZ, 512, 1, 0), *up(512, 256, 2, 1), *up(256, 128, 2, 1),
                      *up(128, 64, 2, 1), nn.ConvTranspose2d(64, 3, 4, 2, 1, bias=False), nn.Tanh())
    d = nn.Sequential(*down(3, 64, False), *down(64, 128, True), *down(128, 256, True),
                      *down(256, 512, True), nn.Conv2d(512, 1, 4, 1, 0, bias=False), nn.Flatten())
    return g, d


def _classifier_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    return step


def _gan_step(batch: int, device: str) -> Callable[[], float]:
    g, d = (m.to(device) for m in _dcgan_pair())
    opt_g = torch.optim.Adam(g.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), 2e-4, betas=(0.5, 0.999))
    real = torch.rand(batch, 3, 64, 64, device=device) * 2 - 1
    ones, zeros = torch.ones(batch, 1, device=device), torch.zeros(batch, 1, device=device)
    bce = nn.BCEWithLogitsLoss()

    def step() -> float:
        fake = g(torch.randn(batch, _NZ, 1, 1, device=device))
        opt_d.zero_grad(set_to_none=True)
        (bce(d(real), ones) + bce(d(fake.detach()), zeros)).backward()
        opt_d.step()
        opt_g.zero_grad(set_to_none=True)
        loss = bce(d(fake), ones)
        loss.backward()
        opt_g.step()
        return loss.item()

    return step


def training_step(workload: str, batch: int, device: str) -> Callable[[], float]:
    """One training step of ``workload`` on synthetic data; returns the step's loss."""
    torch.manual_seed(0)
    if workload == "resnet18":
        x = torch.randn(batch, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        return _classifier_step(resnet18_cifar().to(device), x, y)
    if workload == "lstm":
        x = torch.randint(0, _VOCAB, (_BPTT, batch), device=device)
        y = torch.randint(0, _VOCAB, (_BPTT, batch), device=device)
        return _classifier_step(_WordLM().to(device), x, y)
    if workload == "dcgan":
        return _gan_step(batch, device)
    raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, got {workload!r}")


@dataclass(frozen=True)
class Settings:
    """What one measurement runs: ``seconds`` timed after ``warmup_s`` on ``device``."""

    device: str
    warmup_s: float
    seconds: float


def _worker(workload: str, batch: int, settings: Settings, barrier: Any, results: Any) -> None:
    try:
        if settings.device == "cpu":
            torch.set_num_threads(1)
        step = training_step(workload, batch, settings.device)
        end = time.perf_counter() + settings.warmup_s
        while time.perf_counter() < end:
            step()
        barrier.wait(timeout=600)
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < settings.seconds:
            step()
            n += 1
        results.put(("ok", n * batch / (time.perf_counter() - start)))
    except BaseException as e:  # noqa: BLE001 -- reported to the parent, which raises it
        barrier.abort()
        results.put(("error", f"{type(e).__name__}: {e}"))


def measure(workload: str, batch: int, k: int, settings: Settings,
            env: dict[str, str] | None = None) -> list[float]:
    """Samples per second of each of ``k`` processes training ``workload`` together.

    ``env`` is added to the processes' environment (the MPS client variables)."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(k), ctx.Queue()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        procs = [ctx.Process(target=_worker, args=(workload, batch, settings, barrier, results))
                 for _ in range(k)]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        out = [results.get(timeout=settings.warmup_s + settings.seconds + 300) for _ in procs]
    except Exception as e:  # noqa: BLE001 -- queue.Empty: a process died without a word
        raise RuntimeError(f"{workload} x{k}: a process gave no result ({e!r})") from e
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    errors = [msg for status, msg in out if status == "error"]
    if errors:
        raise RuntimeError(f"{workload} x{k}: {errors[0]}")
    return [float(v) for _, v in out]


def flops_per_sample(workload: str) -> float:
    """Forward + backward FLOPs per sample of ``workload``, from the shipped references."""
    points = json.loads((_REFERENCES / "packing.json").read_text())["points"]
    for pt in points:
        if pt["workload"] == WORKLOADS[workload] and pt.get("flops_per_sample"):
            return float(pt["flops_per_sample"])
    raise LookupError(f"no shipped reference states flops_per_sample for {WORKLOADS[workload]!r}")


def _alone(workload: str, batch: int, settings: Settings) -> dict[str, Any]:
    """One job alone, without MPS, and NVML's utilisation over its timed window."""
    sampler = GPUSampler(interval_s=0.2, node="colocate")
    sampler.start()
    rate = measure(workload, batch, 1, settings)[0]
    end = time.time()
    sampler.stop()
    index = int(settings.device.split(":")[1]) if ":" in settings.device else 0
    util = [r.util_percent for r in sampler.records()
            if r.gpu_index == index and end - settings.seconds <= r.time <= end - 0.2]
    return {"samples_per_s": rate,
            "nvml_utilization": statistics.fmean(util) / 100 if util else None}


@contextlib.contextmanager
def _sharing(mode: str) -> Iterator[tuple[dict[str, str] | None, str | None]]:
    """While the block runs: the environment the jobs of ``mode`` need (an MPS daemon runs
    for ``mps``), or ``None`` and why there is no such sharing here."""
    if mode != "mps":
        yield {}, None
        return
    with tempfile.TemporaryDirectory(prefix="mps-", dir="/tmp") as directory:
        daemon = MPSDaemon("local", directory, CONTROL_BINARY, True, False)
        status = daemon.start()
        try:
            if status["running"]:
                yield daemon.client_env(1.0), None
            else:
                yield None, str(status["reason"])
        finally:
            daemon.stop()


@dataclass(frozen=True)
class Plan:
    """What `run` measures: workloads with their batch, jobs per GPU, sharing modes."""

    batches: dict[str, int]
    ks: tuple[int, ...]
    modes: tuple[str, ...]


def _point(workload: str, batch: int, k: int, mode: str, ratio: float,
           gpu: tuple[str, float], flops: float, alone: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": f"experiments/colocate.py on {gpu[0]} (torch {torch.__version__}, "
                  f"{time.strftime('%Y-%m-%d')}): k processes, synthetic data, FP32",
        "gpu": gpu[0], "gpu_fp32_peak_tflops": gpu[1], "workload": WORKLOADS[workload],
        "flops_per_sample": flops, "batch": batch, "k": k,
        "mode_inferred": mode, "throughput_ratio": round(ratio, 4),
        "nvml_solo_utilization": alone["nvml_utilization"],
    }


def run(plan: Plan, settings: Settings, gpu: tuple[str, float],
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure ``plan`` on ``gpu`` (name, FP32 peak TFLOPS); return the reference document."""
    alone = {w: _alone(w, b, settings) for w, b in plan.batches.items()}
    for w, a in alone.items():
        log(f"colocate: {w} batch {plan.batches[w]} alone: {a['samples_per_s']:.0f} samples/s")
    points: list[dict[str, Any]] = []
    measured: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    flops = {w: flops_per_sample(w) for w in plan.batches}
    for mode in plan.modes:
        with _sharing(mode) as (env, why_not):
            if env is None:
                log(f"colocate: no MPS ({why_not}); its points are skipped")
                skipped.append({"mode": mode, "reason": str(why_not)})
                continue
            for w, b in plan.batches.items():
                for k in plan.ks:
                    if k == 1 and mode == "time-slicing":
                        continue
                    rates = measure(w, b, k, settings, env)
                    ratio = sum(rates) / alone[w]["samples_per_s"]
                    measured.append({"workload": w, "batch": b, "k": k, "mode": mode,
                                     "samples_per_s": rates, "ratio": ratio})
                    log(f"colocate: {w} batch {b} x{k} {mode}: ratio {ratio:.3f}")
                    if k >= 2:
                        points.append(_point(w, b, k, mode, ratio, gpu, flops[w], alone[w]))
    return {
        "description": "Aggregate throughput of k co-located training processes over one alone "
                       "(no MPS), measured by experiments/colocate.py. nvml_solo_utilization is "
                       "informational: renamed solo_utilization, the validator scores the "
                       "sharing model alone instead of the step-length model.",
        "context": {"command": sys.argv, "torch": torch.__version__, "device": settings.device,
                    "seconds": settings.seconds, "warmup_s": settings.warmup_s,
                    "alone": alone, "measured": measured, "skipped": skipped},
        "points": points,
    }


def _ints(text: str, name: str, low: int, high: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise SystemExit(
            f"colocate: {name} must be integers separated by commas, got {text!r}") from None
    if not values or any(not low <= v <= high for v in values):
        raise SystemExit(f"colocate: each of {name} must be in [{low}, {high}], got {text!r}")
    return values


def _choices(text: str, name: str, allowed: Sequence[str]) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(","))
    bad = [v for v in values if v not in allowed]
    if bad:
        raise SystemExit(f"colocate: {name} must be among {list(allowed)}, got {bad}")
    return values


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m experiments.colocate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu-name", required=True, help="the GPU's name, written into each point")
    ap.add_argument("--gpu-fp32-peak-tflops", type=float, required=True,
                    help="the GPU's datasheet FP32 peak (H100/H200 SXM: 67)")
    ap.add_argument("--out", required=True, help="reference file to write (JSON)")
    ap.add_argument("--workloads", default="resnet18,lstm,dcgan")
    ap.add_argument("--batches", default="", help="e.g. resnet18=32,lstm=20 (defaults: "
                    + ", ".join(f"{w}={b}" for w, b in DEFAULT_BATCH.items()) + ")")
    ap.add_argument("--k", default="2,3,4", help="jobs per GPU (1-8), comma-separated")
    ap.add_argument("--modes", default="time-slicing,mps")
    ap.add_argument("--seconds", type=float, default=6.0, help="timed seconds per run (> 0)")
    ap.add_argument("--warmup", type=float, default=3.0, help="untimed seconds first (>= 0)")
    ap.add_argument("--device", default="cuda")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: measure, write ``--out``, print one line per run."""
    args = _parser().parse_args(argv)
    if not args.gpu_fp32_peak_tflops > 0 or not args.seconds > 0 or not args.warmup >= 0:
        raise SystemExit("colocate: --gpu-fp32-peak-tflops and --seconds must be > 0, "
                         "--warmup >= 0")
    workloads = _choices(args.workloads, "--workloads", sorted(WORKLOADS))
    batches = {w: DEFAULT_BATCH[w] for w in workloads}
    for item in filter(None, args.batches.split(",")):
        name, _, value = item.partition("=")
        batches[_choices(name, "--batches", workloads)[0]] = _ints(value, "--batches", 1, 65536)[0]
    plan = Plan(batches, _ints(args.k, "--k", 1, 8), _choices(args.modes, "--modes", MODES))
    settings = Settings(args.device, args.warmup, args.seconds)
    doc = run(plan, settings, (args.gpu_name, args.gpu_fp32_peak_tflops),
              log=lambda line: print(line, file=sys.stderr, flush=True))
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"colocate: {len(doc['points'])} points written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
