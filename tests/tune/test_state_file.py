"""``fluid_state.json`` (no Ray instance): writes throttled by their own cost, forced ones
always made."""

from __future__ import annotations

from fluid.core import Tunables


def test_state_writes_are_throttled_by_their_own_cost_and_forced_ones_always_happen(
        tmp_path, monkeypatch):
    # Writes of a large state (it grows with every trial) take at most 1 / save_share of the
    # wall clock; a forced write (the last trial out) is never skipped.
    import json

    from fluid.tune import _state_file as state_file

    now = [0.0]
    store = state_file.StateFile(lambda: now[0], Tunables())
    store.directory = str(tmp_path)
    ticks = iter([0.0, 0.05] + [10.0, 10.0] * 10)  # the first write takes 50 ms
    monkeypatch.setattr(state_file.time, "perf_counter", lambda: next(ticks))
    writes = []

    def state() -> dict:
        writes.append(now[0])
        return {"n": len(writes)}

    store.save(state)
    for now[0] in (2.0, 10.0, 49.9):  # past save_every_s, but not 1000 x 50 ms
        store.save(state)
    assert writes == [0.0]
    now[0] = 50.0
    store.save(state)
    store.save(state, force=True)
    assert writes == [0.0, 50.0, 50.0]
    assert json.loads((tmp_path / state_file.STATE_FILE).read_text()) == {"n": 3}
