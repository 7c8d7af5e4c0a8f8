"""``fluid.core`` exports what users of the policy need (the paper's model, StaticFluid,
DynamicFluid, the group simulation, the overhead fits, the constants); the rules the Tune
adapter builds on stay importable from their modules, not exported."""

from __future__ import annotations

import fluid.core


def test_fluid_core_exports_few_documented_names():
    exported = fluid.core.__all__
    assert len(exported) <= 35, len(exported)
    assert len(set(exported)) == len(exported)
    undocumented = [n for n in exported if not isinstance(getattr(fluid.core, n), dict)
                    and not (getattr(fluid.core, n).__doc__ or "").strip()]
    assert undocumented == []
