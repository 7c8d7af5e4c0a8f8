"""The drop-in suites' Ray: one local instance per test module, 8 logical CPUs, 4 logical GPUs
(the cluster the scripts' ``expect`` is for)."""

import pytest
import ray


@pytest.fixture(scope="module")
def cluster():
    """One local Ray for the module: 8 logical CPUs, 4 logical GPUs."""
    ray.init(address="local", num_cpus=8, num_gpus=4, include_dashboard=False,
             log_to_driver=False)
    yield
    ray.shutdown()
