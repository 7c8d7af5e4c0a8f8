"""The profiler finds the overheads a trainable has, and caches them."""

from __future__ import annotations

import json
import tempfile

import pytest

from fluid.cli import main
from fluid.tune.profiler import Profile, cache_key, device_model, profile
from tests.tune.profile_trainables import slowed


def test_profile_recovers_modeled_overheads_and_caches(ray4, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cache = str(tmp_path / "profiles.json")
    config = {"alpha": 1.5, "beta": 1.2}
    prof = profile(slowed, config, iterations=3, max_pack=3, max_workers=3, cache=cache,
                   cpus_per_trial=0.1)
    assert prof.alpha == pytest.approx(1.5, rel=0.1)
    assert prof.beta == pytest.approx(1.2, rel=0.1)
    # O_2 = 1 - 1/2 * 1.5 = 0.25 > 0.1, O_3 = 1 - 2/3 * 1.5 = 0 -> c = 2.
    assert prof.c == 2
    # S_w = 1 - (w-1)/w * 1.2: 0.4, 0.2 -> d = 3 (all measured widths pay).
    assert prof.d == 3
    assert prof.device == device_model() and prof.device.startswith("cpu")
    # The trainable comes back unmarked: no GPU request left for FluidExecutor to honour.
    assert not hasattr(slowed, "_resources")
    assert not list(tmp_path.glob("fluid-profile-*"))  # Tune's results of its runs: removed
    with open(cache) as f:
        stored = json.load(f)
    # kept by trainable, config, device and how packed copies shared a GPU (no MPS here)
    assert prof.sharing.startswith("time-sliced")
    key = cache_key(slowed, config, f"{prof.device} {prof.sharing}")
    assert prof.key == key and Profile.from_json(stored[key]) == prof
    # A second call reuses the cache: no Tune run happens (a cluster-less call would fail).
    again = profile(slowed, config, iterations=3, max_pack=3, max_workers=3, cache=cache)
    assert again == prof


def test_profile_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="iterations must be an integer >= 2"):
        profile(slowed, {}, iterations=1)
    assert main(["profile", "no_colon_here"]) == 2


def test_alpha_is_the_pairs_and_each_degree_has_its_own():
    # Two on a GPU at 1.02x each, three and four on a saturated GPU: one alpha fitted across
    # the degrees would say packing a pair costs far more than it does.
    pack = {1: 1.0, 2: 1.02, 3: 2.0, 4: 3.2}
    prof = Profile.measured(pack, {1: 1.0, 2: 0.6}, memory=3.5, device="test")
    assert prof.alpha == pytest.approx(1.02)
    assert prof.alphas == pytest.approx({2: 1.02, 3: 2.0 ** 0.5, 4: 3.2 ** (1 / 3)})
    assert prof.c == 2 and prof.memory == 3.5  # a third trial adds no throughput
    assert Profile.from_json(json.loads(json.dumps(prof.to_json()))) == prof
