"""Every tuning constant is a documented, checked field of ``Tunables``."""

from __future__ import annotations

from dataclasses import fields

import pytest

from fluid.core import Tunables


@pytest.mark.parametrize("name", [f.name for f in fields(Tunables)])
def test_every_field_is_documented_and_refuses_a_negative_value(name):
    assert f"\n        {name}: " in (Tunables.__doc__ or ""), name
    with pytest.raises(ValueError, match=name):
        Tunables(**{name: -1})
