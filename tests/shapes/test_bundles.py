"""The one shape rule: widths to bundles, bundles back to widths and process layouts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluid.shapes.bundles import (
    ElasticTrainable,
    bundles_for,
    head_cpus,
    is_elastic,
    label,
    process_shape,
    width_of,
)


@given(
    st.one_of(st.floats(0.05, 0.95), st.integers(1, 16).map(float)),
    st.floats(0.1, 4),
    st.floats(0.1, 4),
)
def test_bundles_round_trip_to_the_width_and_the_process_layout(width, cpus, worker_cpus):
    bundles = bundles_for(width, cpus, worker_cpus)
    assert width_of(bundles) == pytest.approx(width)
    assert head_cpus(bundles) == pytest.approx(cpus)
    shape = process_shape(bundles)
    if width <= 1:
        assert (shape.in_process, shape.world_size, shape.gpu_share) == (True, 1, width)
    else:
        assert (shape.in_process, shape.world_size, shape.gpu_share) == (False, int(width), 1.0)
        assert all(b == {"CPU": worker_cpus, "GPU": 1.0} for b in shape.worker_bundles)


def test_gang_without_head_cpus_has_an_empty_head_bundle():
    assert bundles_for(2, 0, 1) == [{}, {"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0, "GPU": 1.0}]


def test_process_shape_of_cpu_gangs_and_bad_shapes():
    s = process_shape([{"CPU": 1}] + [{"CPU": 1}] * 2)
    assert (s.in_process, s.world_size, s.gpu_share) == (False, 2, 0.0)
    with pytest.raises(ValueError, match="no bundles"):
        process_shape([])
    with pytest.raises(ValueError, match="GPU=2"):
        process_shape([{"CPU": 1, "GPU": 2}])
    with pytest.raises(ValueError, match="whole GPU"):
        process_shape([{"CPU": 1}, {"CPU": 1, "GPU": 0.5}])
    with pytest.raises(ValueError, match="same GPU count"):
        process_shape([{"CPU": 1}, {"CPU": 1, "GPU": 1}, {"CPU": 1}])


def test_labels():
    assert [label(w) for w in (None, 0.5, 1.0, 3.0)] == ["-", "0.5 GPU", "1 GPU", "gang of 3 GPU"]
    # one process holding several GPUs (a trainable that is not elastic) is not a gang
    assert [label(w, gang=False) for w in (0.5, 1.0, 2.0)] == ["0.5 GPU", "1 GPU", "2 GPU"]


def test_the_elastic_marker_is_seen_on_functions_wrappers_and_classes():
    def fn(config):
        pass

    assert not is_elastic(fn)
    fn.__mixins__ = (ElasticTrainable,)
    assert is_elastic(fn)

    def wrapper(config):
        pass

    wrapper.__wrapped__ = fn
    assert is_elastic(wrapper)
    assert is_elastic(type("Cls", (ElasticTrainable,), {}))
    assert not is_elastic(None)


def test_docstring_examples():
    import doctest

    import fluid.shapes.bundles

    assert doctest.testmod(fluid.shapes.bundles).failed == 0
