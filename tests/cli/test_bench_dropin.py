"""``fluid bench dropin``: its selection, its bounds, its table and JSON, its page section."""

from __future__ import annotations

import json

import pytest

from fluid.cli import bench_dropin, main
from fluid.cli.benchmarks_page import Results
from fluid.dropin.ray_examples import ExampleRun
from fluid.dropin.recorder import Seen
from fluid.dropin.suite import RAY_TRAIN, SCRIPTS

FIELDS = {"script", "tune_wall_s", "fluid_wall_s", "ratio", "tune_at_once", "fluid_at_once",
          "ok"}


def test_only_selects_scripts_and_examples_and_names_an_unknown_one():
    scripts, examples = bench_dropin._names()
    assert [s.name for s in scripts] == [s.name for s in SCRIPTS] + ["ray-train"]
    picked = bench_dropin.selected("cpu, bohb_example", scripts, examples)
    assert ([s.name for s in picked[0]], picked[1]) == (["cpu"], ["bohb_example"])
    with pytest.raises(ValueError, match="--only: unknown script nope; one of cpu, "):
        bench_dropin.selected("cpu,nope", scripts, examples)


def test_list_names_every_script(capsys):
    assert main(["bench", "dropin", "--list"]) == 0
    names = capsys.readouterr().out.split()
    assert names[0] == "cpu" and "ray-train" in names and "bohb_example" in names


def test_an_unknown_script_is_a_usage_error(capsys):
    assert main(["bench", "dropin", "--only", "nope"]) == 2
    assert "--only: unknown script nope" in capsys.readouterr().err


def _example(wall_s: float, iterations: int, at_once: int, held: dict) -> ExampleRun:
    seen = Seen({"a": "TERMINATED"}, {"a": [[i, "t"] for i in range(1, iterations + 1)]},
                ["0 GPU"] * iterations, at_once, held)
    return ExampleRun(0, wall_s, seen, "")


def _pair(walls: tuple[float, float], at_once: tuple[int, int]) -> tuple[ExampleRun, ...]:
    return tuple(_example(w, 1, n, {n: 1.0}) for w, n in zip(walls, at_once, strict=True))


def test_a_counting_script_passes_only_where_fluid_runs_as_many_at_once_as_tune():
    cpu = SCRIPTS[0]
    assert cpu.expect == 6
    held = bench_dropin.script_bounds(cpu, [], *_pair((10.0, 30.0), (6, 6)))
    assert [ok for _b, ok in held] == [True, True, True]  # no wall bound: ratio printed only
    fewer = bench_dropin.script_bounds(cpu, [], *_pair((10.0, 9.0), (6, 5)))
    assert [ok for _b, ok in fewer] == [True, True, False]
    broken = bench_dropin.script_bounds(cpu, ["fluid: hang"], *_pair((10.0, 9.0), (5, 6)))
    assert [ok for _b, ok in broken] == [False, False, True]
    assert "(fluid: hang)" in broken[0][0]


def test_the_ray_train_trial_is_bounded_at_one_and_a_half_times_tunes_wall():
    assert bench_dropin.script_bounds(RAY_TRAIN, [], *_pair((10.0, 15.0), (2, 2)))[-1][1]
    assert not bench_dropin.script_bounds(RAY_TRAIN, [], *_pair((10.0, 15.5), (2, 2)))[-1][1]


def test_an_example_is_bounded_by_tunes_wall_scaled_up_to_more_work_never_down():
    plain = _example(40.0, 10, 2, {0: 8.0, 1: 1.9, 2: 2.0})
    twice = _example(114.0, 20, 2, {2: 30.0})  # twice the work: up to 1.3 x 40 x 2 + 10 s
    assert [ok for _b, ok in bench_dropin.example_bounds([], plain, twice)] == [True] * 3
    twice.wall_s = 114.5
    assert not bench_dropin.example_bounds([], plain, twice)[2][1]
    less = _example(62.0, 3, 2, {2: 30.0})  # less work: up to plain Tune's own 52 + 10 s
    assert bench_dropin.example_bounds([], plain, less)[2][1]
    less.wall_s = 62.5
    assert not bench_dropin.example_bounds([], plain, less)[2][1]


def test_an_example_must_hold_as_many_at_once_as_tune_held_for_seconds():
    plain = _example(40.0, 10, 3, {1: 8.0, 2: 2.5, 3: 0.1})  # 3 for a moment, 2 for 2.6 s
    assert bench_dropin.example_bounds([], plain, _example(40.0, 10, 2, {2: 9.0}))[1][1]
    assert not bench_dropin.example_bounds([], plain, _example(40.0, 10, 1, {1: 9.0}))[1][1]


def _rows() -> list[dict]:
    ok = bench_dropin.row("cpu", _example(10.0, 18, 6, {6: 3.0}), _example(12.0, 18, 6, {6: 2.5}),
                          [("plain Tune runs 6 at once", True)])
    bad = bench_dropin.row("ray-train", _example(10.0, 2, 2, {2: 5.0}),
                           _example(20.0, 2, 1, {1: 1.0}),
                           [("Fluid's wall at most 1.5x plain Tune's", False)])
    return [ok, bad]


def test_rows_carry_the_documented_fields_and_the_report_says_pass_and_fail():
    rows = _rows()
    assert set(rows[0]) >= FIELDS and rows[0]["ratio"] == pytest.approx(1.2)
    assert (rows[0]["ok"], rows[1]["ok"]) == (True, False)
    json.dumps(rows)
    text = bench_dropin.report(rows)
    assert "PASS cpu: plain Tune runs 6 at once" in text
    assert "FAIL ray-train: Fluid's wall at most 1.5x plain Tune's" in text
    assert "1 of 2 scripts within their bounds" in text
    assert "6/6" in text and "1.20" in text


def test_the_page_section_shows_each_script_and_names_failed_bounds(tmp_path):
    (tmp_path / "dropin.json").write_text(json.dumps(
        {"command": "fluid bench dropin --json", "commit": "abc1234", "output": _rows()}))
    lines = bench_dropin.page_section(Results(tmp_path))
    text = "\n".join(lines)
    assert "`fluid bench dropin --json`, at `abc1234`." in text
    assert "| cpu | 10.0 | 12.0 | 1.20 | 6 / 6 | 3.0 / 2.5 | all held |" in text
    assert "FAIL: Fluid's wall at most 1.5x plain Tune's" in text
    missing = "\n".join(bench_dropin.page_section(Results(tmp_path / "none")))
    assert "Not run yet: dropin." in missing


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_bench_runs_a_script_both_ways_and_prints_its_json(capsys):
    assert main(["bench", "dropin", "--only", "cpu", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert set(row) >= FIELDS and row["script"] == "cpu"
    assert row["tune_iterations"] == row["fluid_iterations"] == 18
    assert row["bounds"][0] == {"bound": "each run completes each iteration once", "ok": True}
