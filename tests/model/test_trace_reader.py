"""The one reader of trace lines on hostile input: the schema's types, bounded lines, bytes, huge integers,
and the writer of the host's timeout marker (formats §5)."""

from __future__ import annotations

import json

import pytest

from reference_model.trace import (
    MAX_LINE_CHARS,
    Call,
    Cb,
    Exit,
    TraceError,
    closing_scenario,
    exit_line,
    read_events,
    read_line,
)
from reference_model.vocabulary import TRACE_EVENTS, EventKind

from .builder import TB, allocated, teardown

CB = '{"ev":"cb","kind":"alloc","cookie":"c0","error":0,"buf":"B1","thread":"other","th":"main","t":5}'


def test_fields_of_the_wrong_type_are_refused_by_the_schema():
    assert read_line('{"ev":"begin","scenario":"s","pid":"12"}', 3) == TraceError(
        3, "field 'pid' of the begin event must be an integer, found '12'")
    assert read_line(CB.replace('"t":5', '"t":"late"')) == TraceError(
        1, "field 't' of the cb event must be an integer, found 'late'")
    assert read_line('{"ev":"call","step":1,"op":"alloc","args":{},"teardown":1}') == TraceError(
        1, "field 'teardown' of the call event must be true or false, found 1")
    assert read_line('{"ev":"exit","status":"ok","host":"yes"}') == TraceError(
        1, "field 'host' of the exit event must be true or false, found 'yes'")


def test_the_same_fields_pass_in_a_whole_trace_through_read_events():
    b = TB()
    allocated(b)
    lines = teardown(b, bufs=["b"], reqs=["r"]).lines
    assert not any(isinstance(item, TraceError) for item in read_events(lines))
    begin = json.loads(lines[0])
    lines[0] = json.dumps({**begin, "pid": [1]})
    last = list(read_events(lines))[-1]
    assert last == TraceError(1, "field 'pid' of the begin event must be an integer, found [1]")


def test_a_call_whose_in_cb_is_a_list_or_an_object_is_a_trace_error():
    for value, shown in (("[1]", "[1]"), ("{}", "{}"), ('"none"', "'none'")):
        line = '{"ev":"call","step":1,"op":"alloc","args":{},"in_cb":' + value + "}"
        assert read_line(line, 2) == TraceError(2, f"field 'in_cb' must be a callback kind, found {shown}")
    b = TB()
    allocated(b)
    lines = teardown(b, bufs=["b"], reqs=["r"]).lines
    lines[1] = lines[1].replace('"args":', '"in_cb":[],"args":', 1)
    assert b.judge().reason == "trace line 2: field 'in_cb' must be a callback kind, found []"


def test_an_integer_beyond_the_int_string_limit_is_a_trace_error():
    line = '{"ev":"ret","step":1,"op":"alloc","ret":0,"errno":null,"dur_ns":' + "9" * 5000 + ',"t":1}'
    assert read_line(line, 4) == TraceError(4, "an integer of more than 4300 digits")
    assert list(read_events([line])) == [TraceError(1, "an integer of more than 4300 digits")]


def test_an_over_long_line_is_refused_unread():
    line = '{"ev":"call","step":1,"op":"vnpu","args":{"command":"' + "x" * MAX_LINE_CHARS + '"}}'
    error = read_line(line, 2)
    assert isinstance(error, TraceError) and error.line == 2
    assert error.message == f"a line of {len(line)} characters, longer than the {MAX_LINE_CHARS} a trace line may hold"
    assert isinstance(read_line(line.encode()), TraceError)


def test_bytes_are_decoded_with_replacement():
    event = read_line(CB.replace("c0", "c\xff").encode("latin-1"))
    assert isinstance(event, Cb) and event.cookie == "c\ufffd" and event.t == 5
    assert read_line(b"\xff\xfe") == TraceError(1, "not JSON")
    assert next(read_events([b'{"ev":"begin","scenario":"s"}'])).scenario == "s"  # type: ignore[union-attr]


def test_calls_and_callbacks_carry_the_probe_clock():
    event = read_line('{"ev":"call","step":1,"op":"alloc","args":{"reqs":["r0"]},"t":77}')
    assert isinstance(event, Call) and event.t == 77


def test_the_timeout_marker_round_trips_and_quotes_its_scenario():
    line = exit_line('odd"id', "timeout", host=True, t=9)
    assert json.loads(line) == {"ev": "exit", "scenario": 'odd"id', "status": "timeout", "code": None,
                                "signal": None, "host": True, "t": 9}
    event = read_line(line)
    assert isinstance(event, Exit) and event.host and event.scenario == 'odd"id' and event.status == "timeout"
    assert closing_scenario(line) == 'odd"id'
    with pytest.raises(ValueError, match="unknown exit status"):
        exit_line("s", "late", host=True, t=0)


def test_a_malformed_exit_still_closes_its_scenario():
    assert closing_scenario('{"ev":"exit","scenario":"s1","status":"bogus"}') == "s1"
    assert closing_scenario('{"ev":"end","scenario":"s1"}') is None
    assert closing_scenario('{"ev":"exit","scenario":') is None


def test_every_schema_kind_has_a_reader():
    for kind in EventKind:
        assert kind in TRACE_EVENTS
        assert "unknown event type" not in str(read_line(json.dumps({"ev": kind.value})))


def test_a_ret_without_timing_fields_keeps_its_results():
    event = read_line('{"ev":"ret","step":8,"op":"is_supported","ret":0,"errno":null,"results":[true,false]}')
    assert event.extra == {"results": [True, False]}  # type: ignore[union-attr]
    event = read_line('{"ev":"ret","step":8,"op":"is_supported","ret":0,"errno":null,"dur_ns":1,"t":2}')
    assert event.extra == {}  # type: ignore[union-attr]
