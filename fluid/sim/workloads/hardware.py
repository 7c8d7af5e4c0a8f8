"""GPU and interconnect presets (datasheet numbers; sources next to each entry).

Example:
    >>> GPUS["rtx6000"].fp32_tflops
    16.3
    >>> INTERCONNECTS[GPUS["rtx6000"].interconnect].gbytes_per_s
    1.25
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model.

    Attributes:
        name: marketing name.
        fp32_tflops: peak dense FP32 throughput in TFLOPS (the experiment scripts train in FP32).
        memory_gb: device memory in GB.
        interconnect: default key in ``INTERCONNECTS`` between the GPUs of a gang.
        source: where the numbers come from.
    """

    name: str
    fp32_tflops: float
    memory_gb: float
    interconnect: str
    source: str


@dataclass(frozen=True)
class Interconnect:
    """Link between the GPUs of a data-parallel gang (ring all-reduce over it).

    Attributes:
        name: description.
        gbytes_per_s: usable bandwidth per direction in GB/s.
        latency_s: per-message latency of one ring step in seconds.
        source: where the numbers come from.
    """

    name: str
    gbytes_per_s: float
    latency_s: float
    source: str


GPUS: dict[str, GpuSpec] = {
    # The paper's testbed (section 6.1): one Quadro RTX 6000 per node, 10 GbE between nodes.
    "rtx6000": GpuSpec(
        "Quadro RTX 6000", 16.3, 24.0, "10gbe",
        "NVIDIA Quadro RTX 6000 datasheet: 16.3 TFLOPS FP32, 24 GB GDDR6",
    ),
    "a100": GpuSpec(
        "A100 SXM4 40GB", 19.5, 40.0, "nvlink3",
        "NVIDIA A100 datasheet: 19.5 TFLOPS FP32 (156 TF32 with tensor cores), 40 GB HBM2, "
        "NVLink 600 GB/s bidirectional",
    ),
    "h100": GpuSpec(
        "H100 SXM5 80GB", 66.9, 80.0, "nvlink4",
        "NVIDIA H100 datasheet: 67 TFLOPS FP32 (SXM5), 80 GB HBM3, NVLink 900 GB/s bidirectional",
    ),
}

INTERCONNECTS: dict[str, Interconnect] = {
    "10gbe": Interconnect(
        "10 Gigabit Ethernet", 1.25, 50e-6,
        "10 Gbit/s line rate = 1.25 GB/s; ~50 us TCP round trip (the paper's testbed)",
    ),
    "100gbe": Interconnect(
        "100 Gigabit Ethernet / EDR InfiniBand", 12.5, 5e-6, "100 Gbit/s line rate = 12.5 GB/s",
    ),
    "nvlink3": Interconnect(
        "NVLink 3 (A100 HGX)", 300.0, 5e-6,
        "A100: 600 GB/s bidirectional NVLink = 300 GB/s per direction",
    ),
    "nvlink4": Interconnect(
        "NVLink 4 (H100 HGX)", 450.0, 5e-6,
        "H100: 900 GB/s bidirectional NVLink = 450 GB/s per direction",
    ),
}


def get_gpu(name: str) -> GpuSpec:
    """The preset ``name`` (``KeyError`` lists the known ones)."""
    try:
        return GPUS[name]
    except KeyError:
        raise KeyError(f"unknown GPU {name!r}; known: {sorted(GPUS)}") from None


def get_interconnect(name: str) -> Interconnect:
    """The preset ``name`` (``KeyError`` lists the known ones)."""
    try:
        return INTERCONNECTS[name]
    except KeyError:
        raise KeyError(f"unknown interconnect {name!r}; known: {sorted(INTERCONNECTS)}") from None
