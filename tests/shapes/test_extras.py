"""A request's accelerator type and custom resources stay in every shape Fluid builds."""

from fluid.shapes.bundles import bundles_for
from fluid.shapes.extras import Extras, extras_of, with_extras


def test_extras_split_into_the_trainables_bundle_and_every_gpu_bundle():
    request = [{"CPU": 2, "lic": 1}, {"CPU": 1, "GPU": 1, "accelerator_type:A100": 0.001,
                                     "fast_disk": 2}]
    extras = extras_of(request)
    assert extras.head == {"lic": 1.0}
    assert extras.per_gpu == {"accelerator_type:A100": 0.001, "fast_disk": 2.0}
    assert not extras_of([{"CPU": 1, "GPU": 1}])  # nothing beside CPUs and GPUs


def test_every_width_keeps_them():
    extras = extras_of([{"CPU": 1, "GPU": 1, "accelerator_type:A100": 0.001, "lic": 1}])
    packed = with_extras(bundles_for(0.5, 1, 1), extras)
    assert packed == [{"CPU": 1.0, "GPU": 0.5, "lic": 1.0, "accelerator_type:A100": 0.001}]
    gang = with_extras(bundles_for(3, 1, 0.5), extras)
    assert gang[0] == {"CPU": 1.0, "lic": 1.0}  # the trainable's bundle: its own extras
    assert all(b == {"CPU": 0.5, "GPU": 1.0, "accelerator_type:A100": 0.001} for b in gang[1:])


def test_no_extras_leave_the_bundles_as_they_are():
    bundles = bundles_for(2, 1, 1)
    assert with_extras(bundles, Extras()) is bundles
    assert with_extras(bundles, None) is bundles


def test_docstring_example():
    import doctest

    import fluid.shapes.extras
    import fluid.shapes.train_workers

    assert doctest.testmod(fluid.shapes.extras).failed == 0
    assert doctest.testmod(fluid.shapes.train_workers).failed == 0
