import logging

import pytest


@pytest.fixture(autouse=True)
def _quiet():
    for name in ("ray", "ray.tune", "fluid"):
        logging.getLogger(name).setLevel(logging.WARNING)
