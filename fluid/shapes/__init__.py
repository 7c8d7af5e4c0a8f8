"""Trial shapes as Ray's placement-group bundles, for the driver and the trial alike.

``bundles`` (a width as bundles and back, its label, a process's shape, the gang mark),
``extras`` (a request's accelerator type and custom resources, kept in every shape) and
``train_workers`` (a Ray Train trial's worker range, widths and driver bundles). Bundles are
plain ``list[dict[str, float]]``: ``fluid.tune`` wraps them in Ray's ``PlacementGroupFactory``,
``fluid.train`` reads them back from a trial's resources. Pure Python on ``fluid.core``: no Ray,
no torch, so both may import it.
"""
