"""The aosp-2026 twin does what the AOSP module's client code does (docs/vnpu.md §5.1), seen in the
traces of the corpus scenarios that show it (F7, F9-F13): one run of those scenarios on the twin."""

from __future__ import annotations

import json

import pytest

from tests.conftest import npuconf

pytestmark = pytest.mark.slow

SCENARIOS = (
    "preemption.map_in_window_before_callback",
    "preemption.window_then_free",
    "preemption.while_allocating",
    "loading.async_fd_negative_seven_then_map_and_load",
    "requests.size_negative",
    "requests.size_int64_max",
    "crashes.set_onalloc_on_null_request",
)


@pytest.fixture(scope="module")
def traces(tmp_path_factory, probe_build) -> dict[str, list[dict]]:
    out = tmp_path_factory.mktemp("twin") / "run"
    args = [a for sid in SCENARIOS for a in ("--scenario", sid)]
    done = npuconf("run", "--target", "local", "--personality", "aosp-2026", "--out", out, "-q", *args)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["scenario"]: [json.loads(t) for t in r["trace"]] for r in records if r["kind"] == "result"}


def _rets(events: list[dict], op: str) -> list[tuple[object, object]]:
    return [(e["ret"], e["errno"]) for e in events if e["ev"] == "ret" and e["op"] == op and not e.get("teardown")]


def _callbacks(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["ev"] == "cb" and e["kind"] == kind]


def test_a_map_before_the_notice_succeeds(traces):
    """F9: the client marks the buffer preempted only when onNotifyPreempted reaches it."""
    events = traces["preemption.map_in_window_before_callback"]
    (mapped,) = [e for e in events if e["ev"] == "ret" and e["op"] == "buf_map"]
    (preempt,) = _callbacks(events, "preempt")
    assert (mapped["ret"], mapped["errno"]) == (0, None)
    assert mapped["t"] < preempt["t"]


def test_b_no_onpreempt_for_a_buffer_freed_before_its_notice(traces):
    """F10: the notice finds no entry in the client map (removed at free) and is ignored."""
    events = traces["preemption.window_then_free"]
    assert _rets(events, "buf_free") == [(0, None)]
    assert _callbacks(events, "preempt") == []


def test_c_an_answered_allocation_gets_its_buffer_then_onpreempt(traces):
    """F11 (D14): the service's reply was on its way before the notice; oneway calls arrive in order."""
    events = traces["preemption.while_allocating"]
    (alloc,) = _callbacks(events, "alloc")
    (preempt,) = _callbacks(events, "preempt")
    assert alloc["error"] == 0 and alloc["buf"] is not None
    assert alloc["t"] < preempt["t"]


def test_d_a_refused_descriptor_leaves_the_buffer_loading(traces):
    """F12 (D25): binder refuses fd -7, translations.rs says ECONNRESET, the client stays Loading."""
    events = traces["loading.async_fd_negative_seven_then_map_and_load"]
    first, second = _callbacks(events, "load")
    assert (first["error"], first["thread"]) == ("ECONNRESET", "caller")
    assert _rets(events, "buf_map") == [(-1, "ENOMEM"), (-1, "ENOMEM")]
    assert second["error"] == "EINVAL"


def test_e_sizes_go_unchecked_to_the_heap(traces):
    """F7: -1 wraps to 0 after page alignment (EINVAL); INT64_MIN and INT64_MAX are more than memory (ENOMEM)."""
    negative = [cb["error"] for cb in _callbacks(traces["requests.size_negative"], "alloc")]
    assert negative == ["EINVAL", "ENOMEM"]
    assert [cb["error"] for cb in _callbacks(traces["requests.size_int64_max"], "alloc")] == ["ENOMEM"]


def test_f_setonalloc_on_a_null_request_faults(traces):
    """F13: setOnAlloc stores through the NULL request reference: SIGSEGV, not an abort."""
    (end,) = [e for e in traces["crashes.set_onalloc_on_null_request"] if e["ev"] == "exit"]
    assert (end["status"], end["signal"]) == ("signal", "SIGSEGV")
