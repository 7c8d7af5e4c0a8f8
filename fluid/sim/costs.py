"""What a simulated trial pays besides training: (re)starts, saves and restores."""

from __future__ import annotations

import math
from dataclasses import dataclass

from fluid.core.model import is_packed
from fluid.sim.workloads.base import TrialModel


@dataclass(frozen=True)
class RestartCosts:
    """Seconds a trial spends not training when it (re)starts, saves or restores.

    Attributes:
        actor_start_s: a new Ray actor: process start, ``import torch``, CUDA context,
            dataset loaders (2-5 s measured for the experiment trainables on a warm node;
            5 s, the upper end, calibrated on the paper's Table 2: docs/simulator.md).
        gang_setup_s: extra for a gang: worker actors and the ``torch.distributed`` rendezvous.
        save_fixed_s: Tune's save round trip besides writing the checkpoint.
        restore_fixed_s: Tune's restore round trip besides reading it.
        storage_gbps: checkpoint write/read bandwidth in GB/s (local NVMe or a shared FS).
    """

    actor_start_s: float = 5.0
    gang_setup_s: float = 1.0
    save_fixed_s: float = 0.2
    restore_fixed_s: float = 0.2
    storage_gbps: float = 1.0

    @classmethod
    def zero(cls) -> RestartCosts:
        """Free (re)starts: for scenarios checked against the policy core by hand."""
        return cls(0.0, 0.0, 0.0, 0.0, math.inf)

    def start(self, width: float) -> float:
        """Seconds from placement to a running actor."""
        gang = not is_packed(width) and round(width) > 1
        return self.actor_start_s + (self.gang_setup_s if gang else 0.0)

    def save(self, model: TrialModel) -> float:
        """Seconds to save a checkpoint."""
        return self.save_fixed_s + model.checkpoint_gb / self.storage_gbps

    def restore(self, model: TrialModel) -> float:
        """Seconds to restore a checkpoint."""
        return self.restore_fixed_s + model.checkpoint_gb / self.storage_gbps
