"""Pair discovery when isSupported legally refuses a long list: smaller batches, down to single requests."""

from __future__ import annotations

import json

from host.probe import ScenarioTrace
from host.run.discovery import BATCHES, DISCOVERY_ID, GRID, discovery_scenario, parse_discovery

SUPPORTED = {(0, 1), (0, 2), (1, 3)}


def trace(limit: int | None) -> ScenarioTrace:
    """The discovery trace of a device whose isSupported returns -1 E2BIG for lists longer than ``limit``."""
    lines = [{"ev": "begin", "scenario": DISCOVERY_ID, "pid": 1, "trace": 2, "t": 0}]
    step = 4 * len(GRID)
    for batch in BATCHES:
        reqs = [f"r{i}" for i in batch]
        lines.append({"ev": "call", "step": step, "op": "is_supported", "th": "main", "args": {"reqs": reqs}, "t": 1})
        ret: dict = {"ev": "ret", "step": step, "op": "is_supported", "th": "main", "dur_ns": 1, "t": 2}
        if limit is not None and len(batch) > limit:
            ret |= {"ret": -1, "errno": "E2BIG"}
        else:
            ret |= {"ret": 0, "errno": None, "canary": True, "results": [GRID[i] in SUPPORTED for i in batch]}
        lines.append(ret)
        step += 1
    lines.append({"ev": "call", "step": step, "op": "vnpu", "th": "main", "args": {"command": "delay_ms=0"}, "t": 3})
    lines.append({"ev": "ret", "step": step, "op": "vnpu", "th": "main", "ret": -1, "errno": "ENOSYS", "t": 3})
    lines.append({"ev": "exit", "scenario": DISCOVERY_ID, "status": "ok", "code": 0, "signal": None, "t": 3})
    return ScenarioTrace(DISCOVERY_ID, tuple(json.dumps(x) for x in lines), 0.0)


def test_the_program_asks_the_grid_then_smaller_batches():
    asked = [st for st in discovery_scenario().steps if st.op == "is_supported"]
    assert len(asked) == len(BATCHES) and [len(b) for b in BATCHES[:4]] == [len(GRID), 8, 8, 4]
    assert all(len(b) == 1 for b in BATCHES[-len(GRID):])


def test_refused_long_lists_fall_back_to_smaller_batches():
    for limit in (None, 8, 4, 1):
        found = parse_discovery(trace(limit))
        assert found.problem is None, (limit, found.problem)
        assert found.supported_pairs == SUPPORTED


def test_discovery_fails_only_when_no_batch_answers():
    found = parse_discovery(trace(0))
    assert found.supported_pairs is None
    assert found.problem is not None and "errno E2BIG" in found.problem and "down to one request" in found.problem
