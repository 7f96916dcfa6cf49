"""Trace parsing, envelope checks and the verdict table (formats §5, §7)."""

from __future__ import annotations

import datetime as dt

import pytest

from reference_model.caps import DeviceCaps
from reference_model.errors import ScenarioInvalid
from reference_model.trace import missing_functions
from reference_model.verdicts import Verdict
from reference_model.waivers import find_waiver, parse_waivers

from .builder import PAIR, TB, allocated, teardown
from .coverage import covers
from .parsed_trace import parse_trace


def conforming() -> TB:
    b = TB()
    allocated(b)
    return teardown(b, bufs=["b"], reqs=["r"])


def test_pass():
    assert conforming().judge().verdict is Verdict.PASS


@pytest.mark.parametrize("mutate, line", [
    (lambda ls: ls.insert(3, "garbage"), 4),
    (lambda ls: ls.insert(0, '{"ev":"end","scenario":"x"}'), 1),
    (lambda ls: ls.__setitem__(2, '{"step":0}'), 3),
    (lambda ls: ls.pop(), None),
    (lambda ls: ls.pop(2), 3),
    (lambda ls: ls.append('{"ev":"cb","kind":"alloc","cookie":null,"error":0,"buf":null,"thread":"other"}'), None),
])
def test_bad_traces_are_errors_with_a_line(mutate, line):
    b = conforming()
    mutate(b.lines)
    j = b.judge()
    assert j.verdict is Verdict.ERROR
    assert "line" in j.reason
    if line is not None:
        assert f"line {line}:" in j.reason


def test_wrong_scenario_and_step_mismatch():
    b = conforming()
    b.lines[0] = b.lines[0].replace("model.test", "other")
    assert b.judge().verdict is Verdict.ERROR
    b = conforming()
    b.lines[1] = b.lines[1].replace('"req_create"', '"req_free"')
    assert b.judge().verdict is Verdict.ERROR


def test_timeout_and_exit_without_end():
    b = TB()
    allocated(b)
    b.exit("timeout", None)
    assert b.judge().verdict is Verdict.TIMEOUT
    b = TB()
    allocated(b)
    b.exit("ok", 0)
    assert b.judge().verdict is Verdict.ERROR


def test_nonzero_exit_is_crash():
    b = TB()
    allocated(b)
    b.exit("code", 3)
    j = b.judge()
    assert j.verdict is Verdict.CRASH and "exit code 3" in j.reason


def test_api_missing_is_error():
    lines = ['{"ev":"api_missing","symbols":["ANpuBuffer_loadAsync"]}']
    from reference_model.judge import judge

    from .builder import CAPS, CATALOGUE

    j = judge(TB().scenario(), lines, CAPS, CATALOGUE)
    assert j.verdict is Verdict.ERROR and "ANpuBuffer_loadAsync" in j.reason


def test_only_a_trace_that_opens_with_api_missing_lacks_functions():
    """The probe writes api_missing instead of running anything; one met later is a malformed trace (the
    judge's ERROR), never a way for a device to turn its trace into NOT_APPLICABLE."""
    missing = '{"ev":"api_missing","symbols":["ANpuBuffer_loadAsync"]}'
    assert missing_functions(["", " ", missing]) == ("ANpuBuffer_loadAsync",)
    b = teardown(TB())
    assert missing_functions(b.lines) is None
    assert missing_functions([*b.lines[:-1], missing, b.lines[-1]]) is None
    b.lines.insert(len(b.lines) - 1, missing)
    j = b.judge()
    assert j.verdict is Verdict.ERROR and "api_missing after begin" in j.reason


def test_skipped_op_without_effect():
    b = TB()
    b.call("buf_map", map="m", buf="b", length=4096, prot=["READ"], flags=["SHARED"], offset=0, ret=None,
           skipped="buffer slot b0 is not bound")
    assert teardown(b).judge().verdict is Verdict.PASS


def test_parse_trace_returns_typed_events():
    parsed = parse_trace(conforming().lines)
    assert not hasattr(parsed, "message")
    assert parsed.complete  # type: ignore[union-attr]


def test_waivers():
    ws = parse_waivers({"waivers": [
        {"scenario": "cookies.*", "device": "google/*", "reason": "b/1", "expires": "2030-01-01"},
        {"clause": "map-prot-subset", "device": "*", "reason": "b/2", "expires": dt.date(2020, 1, 1)},
    ]}, "w.yaml")
    today = dt.date(2026, 6, 1)
    assert find_waiver(ws, "cookies.x", ["a"], "google/cf/1", today) is ws[0]
    assert find_waiver(ws, "alloc.x", ["map-prot-subset"], "google/cf/1", today) is None  # expired
    assert find_waiver(ws, "cookies.x", ["a"], "acme/1", today) is None
    for bad in ({"waivers": [{"device": "*", "reason": "r", "expires": "2030-01-01"}]},
                {"waivers": [{"scenario": "x", "device": "*", "reason": "r", "expires": "soon"}]},
                {"waivers": [{"scenario": "x", "device": "*", "expires": "2030-01-01"}]},
                {"nope": []}):
        with pytest.raises(ScenarioInvalid) as exc:
            parse_waivers(bad, "w.yaml")
        assert "w.yaml" in str(exc.value)


@covers("verdict_assembly.stuck_in_onpreempt")
def test_call_stuck_inside_onpreempt_fails_the_sentence_inviting_it():
    def build(stuck_op: str | None) -> TB:
        b = TB()
        allocated(b, cookie="c", onpreempt=True)
        b.call("cb_action", kind="preempt", action="new_request", count=1)
        arm = len(b.steps) - 1
        during = [b.cb("preempt", "c", th="w1")]
        if stuck_op is not None:
            during.append({"ev": "call", "step": arm, "op": stuck_op, "args": {"req": None}, "th": "w1",
                           "in_cb": "preempt"})
        b.call("vnpu", command="preempt=b", during=during)
        return b.exit("timeout", None)

    j = build("req_create").judge(DeviceCaps(supported_pairs=frozenset({PAIR}), vnpu_control=True))
    assert j.verdict is Verdict.FAIL, j.reason
    assert j.divergence is not None and j.divergence.clause == "cookie-shared-refcounted"
    assert "req_create" in j.divergence.observed
    assert build(None).judge(DeviceCaps(supported_pairs=frozenset({PAIR}), vnpu_control=True)).verdict \
        is Verdict.TIMEOUT
