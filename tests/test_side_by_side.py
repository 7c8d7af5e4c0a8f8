"""``run_at_once``: the processes of a side-by-side comparison run at once, whatever they print."""

from __future__ import annotations

from tests.side_by_side import run_at_once

#: Sleeps, then prints when it ended.
SLEEPER = "import time; time.sleep(4); print('end', time.time())"
#: Prints 1 MiB (many times a pipe's buffer), then when it ended.
TALKER = "import sys, time; sys.stdout.write('x' * 2**20 + '\\n'); print('end', time.time())"


def _end(log: str) -> float:
    return float(log.rsplit("end ", 1)[1])


def test_a_process_that_prints_much_does_not_wait_for_the_one_before_it(tmp_path):
    done = run_at_once({"sleeper": (["-c", SLEEPER], tmp_path),
                        "talker": (["-c", TALKER], tmp_path)}, timeout_s=60)
    assert done["sleeper"][0] == done["talker"][0] == 0
    assert done["talker"][1].count("x") == 2**20  # all of its output, none lost
    # Read only after the sleeper ended, a pipe would hold the talker until then.
    assert _end(done["talker"][1]) < _end(done["sleeper"][1]) - 2


def test_a_process_past_the_timeout_is_killed_and_says_so(tmp_path):
    done = run_at_once({"sleeper": (["-c", SLEEPER], tmp_path)}, timeout_s=1)
    assert done["sleeper"][0] < 0
    assert "killed after 1 s" in done["sleeper"][1]
