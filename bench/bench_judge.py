"""Judge throughput on long synthetic conforming traces (1e5 and 1e6 events, side by side).

Each cycle allocates a buffer, binds it, maps it, writes and reads 64 bytes, unmaps and frees it, so
the live state stays bounded however long the trace. Prints events/s for both sizes and the ratio
t(1e6) / t(1e5) (linear scaling gives 10).

    python bench/bench_judge.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reference_model.caps import DeviceCaps
from reference_model.content import fnv1a64, pattern_bytes
from reference_model.judge import judge
from reference_model.scenario import Scenario, parse_scenario
from reference_model.verdicts import Verdict

SETUP = [
    {"req_create": {"req": "r"}},
    {"req_set_device": {"req": "r", "device": 0}},
    {"req_set_type": {"req": "r", "type": 1}},
    {"req_set_size": {"req": "r", "size": 8192}},
    {"req_set_prot": {"req": "r", "prot": ["READ", "WRITE"]}},
    {"cookie_new": {"cookie": "c"}},
    {"req_set_cookie": {"req": "r", "cookie": "c", "deleter": True}},
    {"req_set_onalloc": {"req": "r", "set": True}},
]
CYCLE = [
    {"alloc": {"reqs": ["r"]}},
    {"bind": {"buf": "b", "select": {"cookie": "c"}}},
    {"buf_map": {"map": "m", "buf": "b", "length": 8192, "prot": ["READ", "WRITE"], "flags": ["SHARED"], "offset": 0}},
    {"map_write": {"map": "m", "offset": 0, "length": 64, "seed": 7}},
    {"map_read": {"map": "m", "offset": 0, "length": 64}},
    {"buf_unmap": {"map": "m", "offset": 0, "length": 8192}},
    {"buf_free": {"bufs": ["b"]}},
]
DIGEST = f"{fnv1a64(pattern_bytes(7, 0, 64)):016x}"
EVENTS_PER_CYCLE = 15


def build(events: int) -> tuple[Scenario, list[str]]:
    cycles = max(1, (events - 40) // EVENTS_PER_CYCLE)
    steps = SETUP + CYCLE * cycles
    scenario = parse_scenario({"id": "bench.cycles", "title": "bench", "clauses": ["alloc-async"], "steps": steps},
                              "<bench>", "bench")
    t = 0
    lines: list[str] = []

    def emit(obj: dict[str, object]) -> None:
        nonlocal t
        t += 1
        obj["t"] = t
        lines.append(json.dumps(obj, separators=(",", ":")))

    def op(step: int, name: str, args: dict[str, object], ret: object = None,
           during: tuple[dict[str, object], ...] = (), **extra: object) -> None:
        emit({"ev": "call", "step": step, "op": name, "args": args})
        for ev in during:
            emit(dict(ev))
        emit({"ev": "ret", "step": step, "op": name, "ret": ret, "errno": None, "dur_ns": 100, **extra})

    emit({"ev": "begin", "scenario": "bench.cycles", "pid": 1})
    op(0, "req_create", {"req": "r0"})
    op(1, "req_set_device", {"req": "r0", "device": 0})
    op(2, "req_set_type", {"req": "r0", "type": 1})
    op(3, "req_set_size", {"req": "r0", "size": 8192})
    op(4, "req_set_prot", {"req": "r0", "prot": 3})
    op(5, "cookie_new", {"cookie": "c0"})
    op(6, "req_set_cookie", {"req": "r0", "cookie": "c0", "deleter": True})
    op(7, "req_set_onalloc", {"req": "r0", "set": True})
    step = len(SETUP)
    for i in range(cycles):
        handle = f"B{i + 1}"
        cb = {"ev": "cb", "kind": "alloc", "cookie": "c0", "error": 0, "buf": handle, "thread": "other"}
        op(step, "alloc", {"reqs": ["r0"]}, during=(cb,))
        op(step + 1, "bind", {"buf": None, "select": {"cookie": "c0"}}, handle=handle)
        op(step + 2, "buf_map", {"map": "m0", "buf": handle, "length": 8192, "prot": 3, "flags": 1, "offset": 0}, 0)
        op(step + 3, "map_write", {"map": "m0", "offset": 0, "length": 64, "seed": 7})
        op(step + 4, "map_read", {"map": "m0", "offset": 0, "length": 64}, digest=DIGEST)
        op(step + 5, "buf_unmap", {"map": "m0", "offset": 0, "length": 8192}, 0)
        op(step + 6, "buf_free", {"bufs": [handle]}, 0)
        step += len(CYCLE)
    emit({"ev": "settle", "what": "alloc", "expected": cycles, "got": cycles, "reached": True})
    emit({"ev": "settle", "what": "load", "expected": 0, "got": 0, "reached": True})
    op(step, "req_free", {"req": "r0"}, during=({"ev": "deleter", "cookie": "c0", "thread": "caller"},), teardown=None)
    lines[-3] = lines[-3].replace('"op":"req_free"', '"op":"req_free","teardown":true', 1)
    emit({"ev": "settle", "what": "deleters", "expected": 1, "got": 1, "reached": True})
    emit({"ev": "end", "scenario": "bench.cycles"})
    emit({"ev": "exit", "scenario": "bench.cycles", "status": "ok", "code": 0, "signal": None})
    return scenario, lines


def run(events: int) -> tuple[int, float]:
    scenario, lines = build(events)
    caps = DeviceCaps(supported_pairs=frozenset({(0, 1)}))
    t0 = time.perf_counter()
    result = judge(scenario, lines, caps, {})
    elapsed = time.perf_counter() - t0
    if result.verdict is not Verdict.PASS:
        raise SystemExit(f"bench trace did not PASS: {result.reason}")
    return len(lines), elapsed


def main() -> None:
    small_n, small_t = run(100_000)
    large_n, large_t = run(1_000_000)
    # The interpreter's build matters (a tenth between Debian's python3 and a build without profile-guided
    # optimisation): the figures name it.
    print(f"python {sys.version.split()[0]} at {Path(sys.executable).resolve()}")
    print(f"{'events':>10} {'seconds':>9} {'events/s':>10}")
    print(f"{small_n:>10} {small_t:>9.2f} {small_n / small_t:>10.0f}")
    print(f"{large_n:>10} {large_t:>9.2f} {large_n / large_t:>10.0f}")
    print(f"ratio t(1e6)/t(1e5) = {large_t / small_t:.2f}")


if __name__ == "__main__":
    main()
