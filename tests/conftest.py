"""Fixtures shared across the test packages."""

import pytest
import ray


@pytest.fixture(scope="module")
def ray4x4():
    """One local Ray instance per test module: 4 CPUs, 4 logical GPUs."""
    ray.init(address="local", num_cpus=4, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
