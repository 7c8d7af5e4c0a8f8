"""The Ray versions Fluid supports (``fluid.tune._ray_versions``): the range, pinned alike
everywhere, and each gate matching the installed Ray. No Ray instance is started."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import ray

from fluid.tune import _ray_compat as compat
from fluid.tune import _ray_versions as versions

ROOT = Path(__file__).resolve().parents[2]


def test_installed_ray_is_supported():
    versions.check_ray_version()  # what `import fluid.tune` ran


@pytest.mark.parametrize("version", ["2.50.0", "2.55.1", "2.59.0", "2.60.0"])
def test_every_minor_from_2_50_to_2_60_is_supported(version):
    versions.check_ray_version(version)


@pytest.mark.parametrize("version", ["2.49.2", "2.61.0", "3.0.0"])
def test_unsupported_ray_is_refused_naming_the_range(monkeypatch, version):
    monkeypatch.setattr(ray, "__version__", version)
    with pytest.raises(ImportError, match=rf"supports ray\[tune\]{versions.SUPPORTED_RAY}, "
                                          rf"found ray {version}"):
        versions.check_ray_version()


def test_import_fluid_tune_under_an_unsupported_ray_fails_clearly():
    code = "import ray; ray.__version__ = '2.49.0'; import fluid.tune"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert done.returncode != 0
    assert f"ImportError: fluid.tune supports ray[tune]{versions.SUPPORTED_RAY}" in done.stderr


def test_pyproject_pins_the_supported_range():
    import re

    text = (ROOT / "pyproject.toml").read_text()
    assert f'"ray[tune]{versions.SUPPORTED_RAY}"' in text
    pins = re.findall(r'"ray\[\w+\]([^"]*)"', text)
    assert pins and set(pins) == {versions.SUPPORTED_RAY}, pins  # every extra: the same range


def test_ci_tests_the_oldest_supported_ray():
    oldest = versions.SUPPORTED_RAY.split(",")[0].removeprefix(">=")
    assert f"OLDEST_RAY := {oldest}." in (ROOT / "Makefile").read_text()
    assert "make test-oldest-ray" in (ROOT / ".ci" / "run").read_text()


def test_each_gate_is_inside_the_range_and_ordered():
    low = versions.SUPPORTED_RAY.split(",")[0].removeprefix(">=")
    assert versions.since(low, "2.50.0") and not versions.since("2.51", "2.50.1")
    for release in (versions.TRAIN_V2_DEFAULT, versions.TRAIN_ELASTIC, versions.SESSION_NAME,
                    versions.TUNE_BOHB_CONFIGSPACE_1, versions.GCS_ACCESSOR):
        assert versions.since(release, "2.60.0") and not versions.since(release, low + ".0")


def test_train_v2_default_gate_matches_ray(monkeypatch):
    # Ray's own rule (RAY_TRAIN_V2_ENABLED, its default moved in 2.51) is what Fluid asks.
    monkeypatch.delenv("RAY_TRAIN_V2_ENABLED", raising=False)
    assert compat.train_v2_enabled() is versions.since(versions.TRAIN_V2_DEFAULT)
    monkeypatch.setenv("RAY_TRAIN_V2_ENABLED", "1")
    assert compat.train_v2_enabled() is True


def test_train_elastic_gate_matches_rays_scaling_config():
    from ray.train.v2.api.config import ScalingConfig

    assert hasattr(ScalingConfig, "elasticity_enabled") is versions.since(versions.TRAIN_ELASTIC)


def test_session_name_gate_matches_rays_runtime_context():
    from ray.runtime_context import RuntimeContext

    assert hasattr(RuntimeContext, "get_session_name") is versions.since(versions.SESSION_NAME)


def test_gcs_accessor_gate_and_placement_group_fields_match_ray():
    from ray._private.state import GlobalState, actors
    from ray.core.generated.gcs_pb2 import PlacementGroupTableData

    lazy = hasattr(GlobalState, "_connect_and_get_accessor")
    assert lazy is versions.since(versions.GCS_ACCESSOR)
    assert lazy or hasattr(GlobalState, "_check_connected")
    fields = {f.name for f in PlacementGroupTableData.DESCRIPTOR.fields}
    assert {"creator_job_id", "creator_actor_id", "creator_actor_dead", "is_detached"} <= fields
    assert "actor_id" in inspect.signature(actors).parameters


def test_bohb_configspace_gate_matches_rays_tune_bohb():
    # Ray's TuneBOHB before 2.56 passes ConfigSpace 0.x's `q=` (quantization) argument, which
    # ConfigSpace 1.x (the one that installs beside numpy 2) refuses.
    source = (Path(ray.__file__).parent / "tune" / "search" / "bohb" / "bohb_search.py")
    old_api = "q=quantize" in source.read_text()
    assert old_api is not versions.since(versions.TUNE_BOHB_CONFIGSPACE_1)


def test_simulator_gate_matches_the_controllers_pending_trials():
    # fluid.sim mirrors _get_max_pending_trials walking a ConcurrencyLimiter (Ray 2.57 on).
    from ray.tune.execution import tune_controller

    walks = "ConcurrencyLimiter" in inspect.getsource(tune_controller._get_max_pending_trials)
    assert (versions.simulator_problem() is None) is walks
    assert versions.simulator_problem("2.60.0") is None
    problem = versions.simulator_problem("2.50.1")
    assert problem and "found ray 2.50.1" in problem and "\n" not in problem
