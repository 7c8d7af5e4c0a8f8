"""The parts of ``fluid.tune`` that act on Ray Tune's objects, one job each.

``actions`` (hold a trial, release it with its shape, the callbacks installed at the first
trial), ``admission`` (what is refused, restored and retried), ``base_view`` (what the wrapped
base scheduler sees), ``state_file`` (measurements kept beside the experiment), ``history``
(each iteration once in the result files), ``result_files`` (where Tune keeps them),
``once`` (each iteration once for every other logger), ``plan_lines`` (one line per plan
change), ``resources`` (the cluster's GPUs and CPUs), ``placement_groups`` (widths as
placement groups), ``train_trials`` (Ray Train trials), ``waiting`` (a cluster too small for
now) and ``limits`` (what the Tune set-up already limits). Every Ray-private access they need
goes through ``fluid.tune._ray_compat``.
"""
