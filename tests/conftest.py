"""Fixtures shared across the test packages, and the order ``make test`` runs modules in."""

import pytest
import ray


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules holding a test marked ``slow`` first, every module's tests in their order.

    ``make test`` hands whole modules to two workers (``--dist loadfile``) in this order:
    the long ones started first leave the short ones to even out the end, where in file order
    the Tune modules, long ones among them, came last and one worker ran them alone.
    """
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="module")
def ray4x4():
    """One local Ray instance per test module: 4 CPUs, 4 logical GPUs."""
    ray.init(address="local", num_cpus=4, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
