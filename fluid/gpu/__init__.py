"""GPU-node services: NVIDIA MPS daemons (`fluid.gpu.mps`) and NVML sampling (`fluid.gpu.nvml`).

Both degrade to a clear message on machines without a GPU.
"""

from fluid.gpu.mps import MPSDaemon, MPSManager, client_env, client_state, thread_percentage
from fluid.gpu.nvml import ClusterGPUSampler, GPURecord, GPUSampler, gpu_count, peak_gpu_memory

__all__ = [
    "ClusterGPUSampler",
    "GPURecord",
    "GPUSampler",
    "MPSDaemon",
    "MPSManager",
    "client_env",
    "client_state",
    "gpu_count",
    "peak_gpu_memory",
    "thread_percentage",
]
