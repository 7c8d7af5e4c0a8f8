"""A cluster without GPUs is refused with a clear error."""

import pytest
import ray

from fluid import FluidExecutor, tune
from tests.tune.trainables import modeled


@pytest.fixture(scope="module")
def ray_cpu_only():
    ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_cluster_without_gpus(ray_cpu_only, tmp_path):
    with pytest.raises(Exception, match="has no GPUs"):
        tune.run(modeled, trial_executor=FluidExecutor(cpus_per_trial=0.1), verbose=0,
                 storage_path=str(tmp_path))
