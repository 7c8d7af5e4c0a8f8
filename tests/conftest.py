"""How ``make test`` spreads the suite over two workers (pytest-xdist, ``--dist loadgroup``).

Each module is one unit of work, so a module's shared Ray instance (a module-scoped fixture)
starts once; the modules whose tests compare wall times of plain Tune and Fluid form one unit
(``TIMED``), so no two such comparisons run at once.
"""

from __future__ import annotations

import pytest

#: Modules that assert a wall time of Fluid against plain Tune's.
TIMED = frozenset({"tests.tune.test_resources", "tests.dropin.test_dropin",
                   "tests.dropin.test_ray_examples"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if item.module is not None else item.nodeid
        item.add_marker(pytest.mark.xdist_group("timed" if module in TIMED else module))
