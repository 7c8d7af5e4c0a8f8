"""The parts of ``fluid.tune`` that act on Ray Tune's objects, one job each.

``actions`` (hold a trial, release it with its shape, the callbacks installed at the first
trial), ``admission`` (what is refused, restored and retried), ``base`` (what the wrapped base
scheduler sees), ``state`` (measurements kept beside the experiment), ``history`` (each
iteration once in the result files), ``report`` (one line per plan change), ``resources``
(the cluster's GPUs and CPUs) and ``shapes`` (widths as placement groups). Every Ray-private
access they need goes through ``fluid.tune._ray_compat``.
"""
