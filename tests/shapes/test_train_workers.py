"""The shape of a Ray Train trial: the driver's bundle and one CPU bundle per worker."""

import pytest

from fluid.shapes.train_workers import (
    RAY_TRAIN_ATTR,
    WorkerRange,
    driver_bundles,
    worker_range,
    workers_in,
)


def test_worker_count_is_the_number_of_cpu_only_worker_bundles():
    for w in (1, 2, 5):
        bundles = driver_bundles(w, 1, 0.5)
        assert workers_in(bundles) == w
        assert not any("GPU" in b for b in bundles)  # the GPUs are left to Train's workers
    assert workers_in([{"CPU": 1}]) is None  # plain Tune's default: not Fluid's shape
    assert workers_in([{"CPU": 1}, {"CPU": 1, "GPU": 1}]) is None  # a gang holds its GPUs


def test_a_shape_without_worker_cpus_cannot_say_its_workers():
    with pytest.raises(ValueError, match="cpus_per_worker > 0"):
        driver_bundles(2, 1, 0)


@pytest.mark.parametrize(("num_workers", "expected"), [
    (None, WorkerRange(1, None)), (3, WorkerRange(3, 3)), ((1, 4), WorkerRange(1, 4))])
def test_worker_ranges_as_ray_train_spells_them(num_workers, expected):
    assert WorkerRange.of(num_workers) == expected
    assert WorkerRange.of(num_workers).fixed == (isinstance(num_workers, int))


@pytest.mark.parametrize("bad", [0, (3, 2), (0, 2), "2", 1.5])
def test_bad_worker_ranges_name_num_workers(bad):
    with pytest.raises(ValueError, match="num_workers"):
        WorkerRange.of(bad)


def test_the_mark_is_found_through_wrappers_and_mixins():
    mark = WorkerRange(2, 2)

    def driver(config):
        pass

    setattr(driver, RAY_TRAIN_ATTR, mark)

    def wrapped(config):
        pass

    wrapped.__wrapped__ = driver
    holder = type("Mixin", (), {RAY_TRAIN_ATTR: mark})

    def mixed(config):
        pass

    mixed.__mixins__ = (holder,)
    assert worker_range(driver) is mark
    assert worker_range(wrapped) is mark
    assert worker_range(mixed) is mark
    assert worker_range(type("Cls", (holder,), {})) is mark
    assert worker_range(lambda c: None) is None
