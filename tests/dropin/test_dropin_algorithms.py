"""The drop-in conformance suite, algorithms: user scripts of Tune's schedulers and searchers
and other libraries' (``fluid.dropin.suite.ALGORITHMS``: HyperBand on the class API, Ray's and
Fluid's PBT, with and without actor reuse, Optuna with ASHA, HyperOpt behind a
``ConcurrencyLimiter``) under plain Tune and under ``FluidExecutor(<the script's scheduler>)``,
compared on what the runs did: every trial completes, each iteration once in the result files
and for a callback, a ``fluid_shape`` and ``fluid_gpus`` on every row under Fluid, and the same
best config where the metric is deterministic and the searcher seeded."""

from __future__ import annotations

import pytest

from fluid.dropin.suite import ALGORITHMS, LIMIT_S, run, script_problems

pytestmark = pytest.mark.timeout(2 * LIMIT_S + 120)


#: Without actor reuse each of PBT's pauses starts a new actor: ``ray-pbt`` is the longest
#: case (about 95 s for both runs), so it runs with the slow tests; Ray's PBT stays in
#: ``make test`` through ``ray-pbt-reuse``, and Fluid's pauses through ``fluid-pbt``.
SLOW = {"ray-pbt"}


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.slow) if s.name in SLOW
                                    else s for s in ALGORITHMS],
                         ids=[s.name for s in ALGORITHMS])
def test_fluid_runs_the_algorithm_as_tune_does(cluster, tmp_path, script):
    plain = run(script, False, tmp_path)
    fluid = run(script, True, tmp_path)
    assert script_problems(script, plain, fluid) == []
