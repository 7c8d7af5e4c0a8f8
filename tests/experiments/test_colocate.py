"""experiments/colocate.py (over fluid.gpu.colocate and fluid.gpu.workloads): the published
workloads' models, a CPU measurement written in the packing-reference schema, MPS reported as
skipped where there is none, bad options refused."""

from __future__ import annotations

import json
import shutil

import pytest

from experiments import colocate
from fluid.gpu import workloads
from fluid.sim.packing_refs import check_point, family


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_models_are_the_published_architectures() -> None:
    # Parameter counts of kuangliu's ResNet18, PyTorch's word_language_model (LSTM, 200/200,
    # WikiText-2's 33,278 words, untied) and PyTorch's DCGAN example: the FLOPs per sample
    # taken from the shipped references are those models'.
    assert _params(workloads.resnet18_cifar()) == 11_173_962
    assert _params(workloads.WordLM()) == 13_987_678
    assert [_params(m) for m in workloads.dcgan_pair()] == [3_576_704, 2_765_568]


@pytest.mark.parametrize("workload", sorted(workloads.WORKLOADS))
def test_a_training_step_returns_a_finite_loss(workload: str) -> None:
    loss = workloads.training_step(workload, 2, "cpu")()
    assert loss == loss and abs(loss) < 1e6


def test_unknown_workload_is_refused() -> None:
    with pytest.raises(ValueError, match="workload must be one of"):
        workloads.training_step("bert", 2, "cpu")


def test_a_cpu_run_writes_valid_points_and_skips_mps_without_it(tmp_path, capsys) -> None:
    if shutil.which("nvidia-cuda-mps-control"):
        pytest.fail("this test expects a machine without MPS")
    out = tmp_path / "refs.json"
    code = colocate.main(["--gpu-name", "CPU", "--gpu-fp32-peak-tflops", "0.1", "--out",
                          str(out), "--workloads", "lstm", "--batches", "lstm=1", "--k", "2",
                          "--seconds", "0.3", "--warmup", "0.1", "--repeats", "2", "--device", "cpu"])
    assert code == 0
    doc = json.loads(out.read_text())
    [point] = doc["points"]
    check_point(point)
    assert (point["k"], point["batch"], point["mode_inferred"], family(point)) == (
        2, 1, "time-slicing", "RNN")
    measured = doc["context"]["measured"][0]
    assert [len(r) for r in measured["samples_per_s"]] == [2, 2]  # 2 processes, 2 windows
    alone = doc["context"]["alone"]["lstm"]["samples_per_s"]
    ratios = [sum(r[i] for r in measured["samples_per_s"]) / alone for i in range(2)]
    assert point["throughput_ratio"] == pytest.approx(sum(ratios) / 2, rel=1e-3)
    assert point["throughput_ratio_spread"] == pytest.approx(sorted(ratios), rel=1e-3)
    assert point["repeats"] == 2 and point["source"].startswith("python -m experiments.colocate")
    assert doc["context"]["skipped"] == [
        {"mode": "mps", "reason": "nvidia-cuda-mps-control is not on PATH"}]
    assert "no MPS (nvidia-cuda-mps-control is not on PATH)" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--k", "0", r"each of --k must be in \[1, 8\]"),
    ("--k", "two", "--k must be integers"),
    ("--modes", "mig", "--modes must be among"),
    ("--workloads", "bert", "--workloads must be among"),
    ("--seconds", "0", "--seconds must be > 0"),
    ("--repeats", "0", r"--repeats must be in \[1, 100\]"),
])
def test_bad_options_are_refused_naming_them(tmp_path, option: str, value: str,
                                             message: str) -> None:
    args = ["--gpu-name", "G", "--gpu-fp32-peak-tflops", "1", "--out", str(tmp_path / "o.json"),
            option, value]
    with pytest.raises(SystemExit, match=message):
        colocate.main(args)
