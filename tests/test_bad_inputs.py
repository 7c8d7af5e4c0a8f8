"""Bad inputs, everywhere a user gives one: a one-line error naming the parameter and what is
allowed, or Ray's own behaviour where Ray has one.

Covers FluidExecutor's options (its public constructor), every ``fluid`` subcommand's
arguments, bad files for ``fluid plan`` / ``fluid report`` / ``fluid simulate --replay``, the
schedulers' settings (as Ray's classes), cluster states met at the first trial (no GPUs, a
trial larger than the cluster) and bad trainables (against plain Tune).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from ray.tune.execution.placement_groups import PlacementGroupFactory
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler as RayASHA
from ray.tune.schedulers import PopulationBasedTraining as RayPBT

from fluid import FluidExecutor
from fluid.cli import main
from fluid.cli.profile import _import
from fluid.schedulers import ASHAScheduler, PopulationBasedTraining
from fluid.tune import FluidConfigError

# --------------------------------------------------------------------------- FluidExecutor


def _one_line_naming(message: str, name: str) -> None:
    assert "\n" not in message, message
    assert message.startswith(f"{name} must be "), message
    assert ", got " in message, message


#: (option, bad value): refused with FluidConfigError naming the option. The second half was
#: accepted (or refused with a TypeError) before the options were checked with
#: fluid.core.checks.check_number (finite, range, integer) and the flags as bools.
EXECUTOR_REFUSED = [
    ("alpha", 0.5), ("alpha", math.nan), ("beta", 0.9), ("c", 0), ("c", 2.5), ("c", math.inf),
    ("d", 0), ("d", 1.5), ("eps", -1.0), ("eps", math.nan), ("o_th", 1.5), ("o_th", -0.1),
    ("s_th", 1.0), ("c_max", 0), ("c_max", math.inf), ("gpu_memory", 0.0),
    ("gpu_memory", math.inf), ("trial_memory", 0.0), ("max_outstanding", 0),
    ("cpus_per_trial", -1.0), ("cpus_per_worker", -1.0), ("cpus_per_worker", math.nan),
    ("default_iteration_time", 0.0),
    ("alpha", math.inf), ("alpha", "1.2"), ("beta", math.inf),  # alpha=None: the prior
    ("eps", math.inf), ("trial_memory", math.inf), ("max_outstanding", 1.5),
    ("max_outstanding", math.inf), ("cpus_per_trial", math.inf),
    ("default_iteration_time", math.inf), ("elastic", "yes"), ("dynamic", "no"),
    ("refine", 1), ("resize_requests", "no"), ("verbose", 0),
]


@pytest.mark.parametrize(("name", "value"), EXECUTOR_REFUSED)
def test_executor_options_out_of_range(name, value):
    with pytest.raises(FluidConfigError) as e:
        FluidExecutor(**{name: value})
    _one_line_naming(str(e.value), name)


@pytest.mark.parametrize(("kwargs", "text"), [
    ({"base_scheduler": "asha"}, "base_scheduler must be a ray.tune TrialScheduler"),
    ({"mps": object()}, "mps must be .auto., False or a fluid.gpu.MPSManager"),
])
def test_executor_objects_of_the_wrong_kind(kwargs, text):
    with pytest.raises(FluidConfigError, match=text):
        FluidExecutor(**kwargs)


def test_an_unknown_executor_option_is_named_with_the_options_there_are():
    with pytest.raises(FluidConfigError, match=r"no option alpah; its options are: "
                       r"base_scheduler, profile, alpha, beta"):
        FluidExecutor(alpah=1.2)


def test_executor_cannot_wrap_itself():
    with pytest.raises(FluidConfigError, match="other than FluidExecutor"):
        FluidExecutor(FluidExecutor())


# --------------------------------------------------------------------------- cluster states


class _Gpus:
    def __init__(self, n: float) -> None:
        self.n = n

    def gpus(self) -> float:
        return self.n


def _controller() -> SimpleNamespace:
    return SimpleNamespace()


def _trial(gpus: float = 0.0) -> Trial:
    trial = Trial("__fake", stub=True)
    trial.placement_group_factory = PlacementGroupFactory([{"CPU": 1, "GPU": gpus}])
    return trial


@pytest.mark.parametrize(("gpus", "asks", "text"), [
    (0, 1, "the Ray cluster has no GPUs; .* ray.init\\(num_gpus=N\\).*wait_for_nodes"),
    (2, 3, "asks for 3 GPUs but the cluster has 2"),
])
def test_cluster_states_at_the_first_trial(gpus, asks, text):
    ex = FluidExecutor(resources=_Gpus(gpus), wait_for_nodes=False)
    with pytest.raises(FluidConfigError, match=text) as e:
        ex.on_trial_add(_controller(), _trial(asks))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("gpus", "asks", "line"), [
    (0, 1, "waiting for GPU nodes to join: the Ray cluster has no GPU yet"),
    (2, 3, "needs 3 GPUs, the cluster has 2; it starts when enough join"),
])
def test_a_cluster_too_small_for_now_waits_with_one_line(gpus, asks, line, caplog):
    ex = FluidExecutor(resources=_Gpus(gpus))
    with caplog.at_level(logging.WARNING, logger="fluid"):
        for _ in range(3):  # the same wait is said once
            ex.on_trial_add(_controller(), _trial(asks))
    said = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert len(said) == 1 and line in said[0], said
    assert ex.debug_string().startswith(f"Fluid: {gpus:g} GPUs, running none; queued")


def test_a_trial_without_gpu_needs_no_gpu_in_the_cluster(caplog):
    ex = FluidExecutor(resources=_Gpus(0), wait_for_nodes=False)
    with caplog.at_level(logging.WARNING, logger="fluid"):
        ex.on_trial_add(_controller(), _trial(0))  # a CPU trial: no error, no wait
    assert not [r for r in caplog.records if "waiting for" in r.getMessage()]
    assert ex.records[next(iter(ex.records))].no_gpu


def test_wait_for_nodes_is_a_flag():
    with pytest.raises(FluidConfigError, match="wait_for_nodes must be True or False"):
        FluidExecutor(wait_for_nodes="yes")


# --------------------------------------------------------------------------- schedulers


@pytest.mark.parametrize(("make", "kwargs"), [
    ("asha", {"grace_period": 0}),
    ("asha", {"grace_period": 5, "max_t": 2}),
    ("asha", {"reduction_factor": 1}),
    ("asha", {"mode": "maximum"}),
    ("pbt", {"perturbation_interval": 0}),
    ("pbt", {"quantile_fraction": 0.7}),
])
def test_scheduler_settings_fail_as_in_ray(make, kwargs):
    ours, theirs = {"asha": (ASHAScheduler, RayASHA),
                    "pbt": (PopulationBasedTraining, RayPBT)}[make]
    extra = {"hyperparam_mutations": {"lr": [0.1, 0.2]}} if make == "pbt" else {}
    outcomes = []
    for cls in (theirs, ours):
        try:
            cls(**kwargs, **extra)
            outcomes.append(None)
        except Exception as e:  # noqa: BLE001 - Ray's exception is what is compared
            outcomes.append((type(e), str(e)))
    assert outcomes[0] is not None, "Ray accepts it: not a bad input"
    assert outcomes[1] == outcomes[0]


# --------------------------------------------------------------------------- CLI


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "text"), [
    (["plan", "--example", "bogus"], "argument --example: invalid choice: 'bogus'"),
    (["plan"], "one of the arguments INSTANCE.json --example is required"),
    (["bench"], "the following arguments are required: TARGET"),
    (["bench", "policy", "--repeat", "0"], "--repeat must be >= 1, got 0"),
    (["bench", "sim", "--trials", "0"], "--trials must be >= 1, got 0"),
    (["bench", "sim", "--gpus", "0"], "--gpus must be >= 1, got 0"),
    (["bench", "sim", "--executors", "bogus"], "unknown executor 'bogus'; known: "),
    (["bench", "load", "--trials", "0"], "--trials must be >= 1, got 0"),
    (["bench", "load", "--cpus", "0"], "--cpus must be >= 1, got 0"),
    (["bench", "load", "--gpus", "8", "--cpus", "4", "--nodes", "5"],
     "--nodes must be in \\[1, 4\\], got 5"),
    (["bench", "e2e", "--trials", "0"], "--trials must be in \\[1, 10\\], got 0"),
    (["bench", "e2e", "--quick", "--trials", "8"], "--trials must be in \\[1, 7\\], got 8"),
    (["bench", "e2e", "--quick", "--load", "-1"], "--load must be in \\[0, 64\\], got -1"),
    (["demo", "--gpus", "0"], "--gpus must be >= 1, got 0"),
    (["demo", "--gpus", "four"], "argument --gpus: invalid int value: 'four'"),
    (["profile", "nocolon"], "trainable must be MODULE:NAME, got 'nocolon'"),
    (["profile", "no_such_module_xyz:fn"], "cannot import trainable 'no_such_module_xyz:fn'"),
    (["profile", "json:no_such_fn"], "cannot import trainable 'json:no_such_fn'"),
    (["profile", "json:dumps", "--config", "[1]"], "--config must be a JSON object, got '\\[1\\]'"),
    (["profile", "json:dumps", "--config", "lr=1"], "--config must be a JSON object, got 'lr=1'"),
    (["profile", "json:dumps", "--gpus", "0"], "--gpus must be >= 1, got 0"),
    (["profile", "json:dumps", "--iterations", "1"], "--iterations must be >= 2, got 1"),
    (["profile", "json:dumps", "--max-pack", "0"], "--max-pack must be >= 1, got 0"),
    (["profile", "json:dumps", "--max-workers", "8"], "--max-workers must be <= --gpus \\(4\\)"),
    (["report", "--mode", "best", "x"], "argument --mode: invalid choice: 'best'"),
    (["simulate"], "give --algorithm and --workload \\(or --replay DIR, or --paper\\)"),
    (["simulate", "--gpus", "0"], "--gpus must be >= 1, got 0"),
    (["simulate", "--seeds", "0"], "--seeds must be >= 1, got 0"),
    (["simulate", "--algorithm", "sgd"], "argument --algorithm: invalid choice: 'sgd'"),
])
def test_cli_arguments(capsys, argv, text):
    code, err = _cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith(("fluid: error: ", f"fluid {argv[0]}")), err
    assert re.search(text, lines[-1]), lines[-1]
    if lines[-1].startswith("fluid: error: "):
        assert len(lines) == 1, err  # our own errors: one line, no traceback


# --------------------------------------------------------------------------- files


@pytest.mark.parametrize(("content", "text"), [
    ("{bad", "not valid JSON"),
    ("[]", "an instance must be a JSON object"),
    (json.dumps({"gpus": 2, "trials": [{"id": "a", "runtime": 1, "alpha": "inf"}]}),
     'trials\\[0\\].alpha must be a number >= 1, got "inf"'),
    (json.dumps({"gpus": 2, "trials": [{"id": "a", "runtime": 1e999}]}),
     "trials\\[0\\].runtime must be > 0 seconds, got Infinity"),
])
def test_bad_plan_files(capsys, tmp_path, content, text):
    path = tmp_path / "inst.json"
    path.write_text(content)
    code, err = _cli(capsys, "plan", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert re.search(text, err), err


def test_missing_plan_file(capsys, tmp_path):
    code, err = _cli(capsys, "plan", str(tmp_path / "none.json"))
    assert (code, err) == (2, f"fluid: error: {tmp_path / 'none.json'}: no such file\n")


def _tune_dir(tmp_path, rows: str, state: dict | None = None):
    root = tmp_path / "exp"
    (root / "trial_0").mkdir(parents=True)
    (root / "trial_0" / "result.json").write_text(rows)
    if state is not None:
        (root / "experiment_state-x.json").write_text(json.dumps(state))
    return root


@pytest.mark.parametrize(("make", "args", "text"), [
    (lambda p: p / "none", [], "neither a run record \\(run.json"),
    (lambda p: (p / "empty").mkdir() or p / "empty", [], "nor a Ray Tune experiment directory"),
    (lambda p: _tune_dir(p, '{"acc": 1}\n'), [], "records no metric; give --metric NAME"),
    (lambda p: _tune_dir(p, '{"acc": 1}\n', {"runner_data": {"_metric": "acc"}}), [],
     "records no mode; give --metric NAME and --mode max\\|min"),
    (lambda p: _tune_dir(p, "{oops\n"), ["--metric", "acc", "--mode", "max"],
     "trial_0/result.json:1: not a JSON result row"),
    (lambda p: _tune_dir(p, '{"acc": 1}\n'), ["--metric", "acc", "--mode", "max"],
     "result rows without timestamp/time_since_restore"),
])
def test_bad_report_directories(capsys, tmp_path, make, args, text):
    code, err = _cli(capsys, "report", str(make(tmp_path)), *args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert re.search(text, err), err


def test_bad_run_record(capsys, tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"task": "x"}))
    code, err = _cli(capsys, "report", str(tmp_path))
    assert code == 2 and "not a run record (missing executor, metric, mode" in err


@pytest.mark.parametrize("make", [lambda p: p / "none",
                                  lambda p: (p / "empty").mkdir() or p / "empty"])
def test_bad_replay_directories(capsys, tmp_path, make):
    code, err = _cli(capsys, "simulate", "--replay", str(make(tmp_path)), "--no-progress")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no such file" in err or "no result.json files" in err


def test_profile_imports_from_the_current_folder(tmp_path, monkeypatch):
    """As the ``fluid`` console script runs it: the current folder is not on sys.path."""
    (tmp_path / "my_local_trainable.py").write_text("def loop(config):\n    return 7\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    monkeypatch.delitem(sys.modules, "my_local_trainable", raising=False)
    assert _import("my_local_trainable:loop")({}) == 7


# --------------------------------------------------------------------------- trainables


def _raises(config):
    raise RuntimeError("bad trainable")


@pytest.mark.slow
def test_bad_trainables_behave_as_under_plain_tune(tmp_path):
    """A trainable that fails, and something that is not a trainable, as plain Tune has them."""
    import ray

    from fluid import tune

    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False,
             log_to_driver=False)
    try:
        outcomes = []
        for executor in (None, FluidExecutor(cpus_per_trial=0.1)):
            analysis = tune.run(_raises, storage_path=str(tmp_path), verbose=0,
                                raise_on_failed_trial=False, trial_executor=executor)
            (trial,) = analysis.trials
            with pytest.raises(Exception) as e:
                tune.run(42, storage_path=str(tmp_path), verbose=0, trial_executor=executor)
            error = Path(trial.error_file).read_text() if trial.error_file else ""
            outcomes.append((trial.status, "bad trainable" in error, type(e.value),
                             str(e.value)))
    finally:
        ray.shutdown()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][:2] == ("ERROR", True)
