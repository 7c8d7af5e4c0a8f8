"""The tolerances of Fluid's arithmetic, each named once: how close two values must be to count
as the same.

* ``WIDTH_TOL``: widths (``1/3`` as a float, sums of shares on a GPU);
* ``CPU_TOL``: CPU counts (sums of fractional CPUs of placement-group bundles);
* ``TIME_TOL``: predicted times the guard compares, relative and absolute (round-off of
  ``h_i(w)`` for the same widths);
* ``ITERATION_TOL``: a budget within this of a whole iteration is that iteration;
* ``WORK_TOL``: remaining work within this share of a trial's total is done (round-off of a
  played-out schedule).
"""

WIDTH_TOL = 1e-9
CPU_TOL = 1e-6
TIME_TOL = 1e-6
ITERATION_TOL = 1e-9
WORK_TOL = 1e-9
