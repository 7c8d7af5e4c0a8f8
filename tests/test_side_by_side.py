"""``run_at_once``: the processes of a side-by-side comparison run at once, whatever they print."""

from __future__ import annotations

from tests.side_by_side import run_at_once

#: Prints 1 MiB (many times a pipe's buffer), then marks that it got past its output.
TALKER = ("import pathlib, sys; sys.stdout.write('x' * 2**20 + '\\n'); sys.stdout.flush(); "
          "pathlib.Path('talked').touch()")
#: Waits (up to 120 s) for the talker's mark, then says whether it came.
WAITER = ("import pathlib, time\nend = time.monotonic() + 120\n"
          "while not pathlib.Path('talked').exists() and time.monotonic() < end:\n"
          "    time.sleep(0.05)\nprint('talked' if pathlib.Path('talked').exists() else 'silent')")
SLEEPER = "import time; time.sleep(60)"


def test_a_process_that_prints_much_does_not_wait_for_the_one_before_it(tmp_path):
    # The waiter is read first: were the talker's output a pipe read only after the waiter
    # ended, the talker would block on its output and never mark, and the waiter say so.
    done = run_at_once({"waiter": (["-c", WAITER], tmp_path),
                        "talker": (["-c", TALKER], tmp_path)}, timeout_s=300)
    assert done["waiter"] == (0, "talked\n")
    assert done["talker"][0] == 0
    assert done["talker"][1].count("x") == 2**20  # all of its output, none lost


def test_a_process_past_the_timeout_is_killed_and_says_so(tmp_path):
    done = run_at_once({"sleeper": (["-c", SLEEPER], tmp_path)}, timeout_s=1)
    assert done["sleeper"][0] < 0
    assert "killed after 1 s" in done["sleeper"][1]
