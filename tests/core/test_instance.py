"""Instance files: parsing, defaults, figure5, and every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fluid.core import PolicyConfig
from fluid.core.instance import (
    Instance,
    InstanceError,
    figure5,
    load_instance,
    parse_instance,
)


def _obj(**top: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "gpus": 8,
        "c": 4,
        "d": 4,
        "eps": 0.0,
        "trials": [
            {"id": "t0", "runtime": 30.0, "alpha": 1.1, "beta": 1.05},
            {"id": "t1", "runtime": 12},
        ],
    }
    obj.update(top)
    return obj


def _trial(**fields: Any) -> dict[str, Any]:
    return _obj(trials=[{"id": "t0", "runtime": 10.0, **fields}])


def test_parse_the_documented_format() -> None:
    inst = parse_instance(_obj())
    assert inst.gpus == 8
    assert inst.config == PolicyConfig(c=4, d=4, eps=0.0)
    t0, t1 = inst.trials
    assert (t0.id, t0.runtime, t0.alpha, t0.beta) == ("t0", 30.0, 1.1, 1.05)
    assert (t1.alpha, t1.beta, t1.c, t1.d, t1.memory) == (1.0, 1.0, None, None, None)
    assert isinstance(t1.runtime, float)


def test_c_and_d_absent_are_derived_from_the_overheads() -> None:
    inst = parse_instance(
        {"gpus": 64, "trials": [{"id": "a", "runtime": 1, "alpha": 1.5, "beta": 1.1}]}
    )
    assert (inst.config.c, inst.config.d, inst.config.eps) == (None, None, 0.0)
    spec = inst.trials[0]
    assert inst.config.c_of(spec) == 2 and inst.config.d_of(spec, 64) == 7
    nulls = parse_instance(_obj(c=None, d=None, eps=None))
    assert (nulls.config.c, nulls.config.d, nulls.config.eps) == (None, None, 0.0)


def test_optional_fields() -> None:
    inst = parse_instance(
        _obj(
            gpu_memory=80,
            o_th=0.2,
            s_th=0.1,
            c_max=4,
            trials=[{"id": "a", "runtime": 5, "c": 2, "d": 3, "memory": 40}],
        )
    )
    assert inst.config.gpu_memory == 80.0
    assert (inst.config.o_th, inst.config.s_th, inst.config.c_max) == (0.2, 0.1, 4)
    assert (inst.trials[0].c, inst.trials[0].d, inst.trials[0].memory) == (2, 3, 40.0)
    assert parse_instance(_obj(gpus=8.0)).gpus == 8  # an integral float is an integer


def test_figure5() -> None:
    fig = figure5()
    assert isinstance(fig, Instance)
    assert fig.gpus == 5 and [t.id for t in fig.trials] == ["a1", "a2", "a3", "a4"]
    assert [t.runtime for t in fig.trials] == [4.0, 4.0, 12.0, 30.0]
    assert all(t.alpha == 1.0 and t.beta == 1.0 for t in fig.trials)
    assert (fig.config.c, fig.config.d, fig.config.eps) == (2, 4, 0.0)


BAD = [
    # (instance, field, words the message must contain)
    (_obj(gpus=0), "gpus", "gpus must be >= 1, got 0"),
    (_obj(gpus=-2), "gpus", "gpus must be >= 1, got -2"),
    (_obj(gpus="8"), "gpus", 'gpus must be an integer >= 1, got "8"'),
    (_obj(gpus=2.5), "gpus", "gpus must be an integer >= 1, got 2.5"),
    (_obj(gpus=True), "gpus", "gpus must be an integer >= 1, got true"),
    (_obj(c=0), "c", "c must be >= 1, got 0"),
    (_obj(d=0), "d", "d must be >= 1, got 0"),
    (_obj(d="4"), "d", 'd must be an integer >= 1, got "4"'),
    (_obj(eps=-1), "eps", "eps must be >= 0 seconds, got -1"),
    (_obj(gpu_memory=0), "gpu_memory", "gpu_memory must be > 0 GB, got 0"),
    (_obj(o_th=1.0), "o_th", "o_th must be a number in [0, 1), got 1.0"),
    (_obj(c_max=0), "c_max", "c_max must be >= 1, got 0"),
    (_trial(runtime=0), "trials[0].runtime", "trials[0].runtime must be > 0 seconds, got 0"),
    (_trial(runtime=-5.0), "trials[0].runtime", "trials[0].runtime must be > 0 seconds"),
    (
        _trial(runtime="30"),
        "trials[0].runtime",
        'trials[0].runtime must be a number > 0 seconds, got "30"',
    ),
    (_trial(runtime=None), "trials[0].runtime", "trials[0].runtime must be a number > 0"),
    (
        _trial(runtime=float("nan")),
        "trials[0].runtime",
        "trials[0].runtime must be > 0 seconds, got NaN",
    ),
    (
        _trial(runtime=float("inf")),
        "trials[0].runtime",
        "trials[0].runtime must be > 0 seconds, got Infinity",
    ),
    (_trial(alpha=0.5), "trials[0].alpha", "trials[0].alpha must be >= 1, got 0.5"),
    (_trial(alpha="high"), "trials[0].alpha", 'trials[0].alpha must be a number >= 1, got "high"'),
    (_trial(beta=0.99), "trials[0].beta", "trials[0].beta must be >= 1, got 0.99"),
    (_trial(c=0), "trials[0].c", "trials[0].c must be >= 1, got 0"),
    (_trial(d=-1), "trials[0].d", "trials[0].d must be >= 1, got -1"),
    (_trial(memory=0), "trials[0].memory", "trials[0].memory must be > 0 GB, got 0"),
    (_trial(id=""), "trials[0].id", 'trials[0].id must be a non-empty string, got ""'),
    (_trial(id=7), "trials[0].id", "trials[0].id must be a non-empty string, got 7"),
    (_trial(color="red"), "trials[0].color", "unknown field 'trials[0].color'"),
    (
        _obj(
            trials=[{"id": "a", "runtime": 1}, {"id": "b", "runtime": 2}, {"id": "a", "runtime": 3}]
        ),
        "trials[2].id",
        "trials[2].id 'a' duplicates trials[0].id; trial ids must be unique",
    ),
    (_obj(trials=[{"id": "a"}]), "trials[0].runtime", "trials[0].runtime is missing (required)"),
    (_obj(trials=[{"runtime": 1}]), "trials[0].id", "trials[0].id is missing (required)"),
    (_obj(trials=["a"]), "trials[0]", "trials[0] must be an object"),
    (_obj(trials=[]), "trials", "trials must be a non-empty list"),
    (_obj(trials={"id": "a"}), "trials", "trials must be a non-empty list"),
    ({"gpus": 4}, "trials", "trials is missing (required)"),
    ({"trials": [{"id": "a", "runtime": 1}]}, "gpus", "gpus is missing (required)"),
    (_obj(gpu=4), "gpu", "unknown field 'gpu'; allowed fields: gpus, trials"),
    (
        _obj(gpu_memory=16, trials=[{"id": "a", "runtime": 1, "memory": 20}]),
        "trials[0].memory",
        "trials[0].memory must be <= gpu_memory (16 GB), got 20",
    ),
]


@pytest.mark.parametrize(("obj", "field", "message"), BAD)
def test_bad_input_names_the_field_and_the_range(obj: Any, field: str, message: str) -> None:
    with pytest.raises(InstanceError) as info:
        parse_instance(obj)
    assert message in str(info.value)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("obj", [[], "x", 3, None])
def test_an_instance_must_be_an_object(obj: Any) -> None:
    with pytest.raises(InstanceError, match="an instance must be a JSON object"):
        parse_instance(obj)


def test_load_instance_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_obj()))
    assert load_instance(path) == parse_instance(_obj())
    assert load_instance(str(path)).gpus == 8


def test_load_instance_prefixes_errors_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_trial(alpha=0.5)))
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert str(info.value) == f"{path}: trials[0].alpha must be >= 1, got 0.5"
    assert info.value.field == "trials[0].alpha"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (
            "{",
            "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("", "not valid JSON"),
        ("gpus: 4", "not valid JSON"),
        (b"\xff\xfe\x00", "not a JSON file (not UTF-8 text)"),
        ("[1, 2]", "an instance must be a JSON object, got list"),
    ],
)
def test_load_instance_file_errors(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    path = tmp_path / "x.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_load_instance_of_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InstanceError, match="is a directory"):
        load_instance(tmp_path)
