"""Decoding and streaming: orjson reads the lines, the standard library's reading stays the reference, and a
malformed line anywhere makes the trace ERROR whatever the replay found before it (formats §5, model §2)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from reference_model.state import INITIAL, NO_COOKIE, Buffer, State, evolve
from reference_model.trace import (
    LONG_LINE,
    TraceError,
    _Bad,
    _decode_reference,
    _event,
    parse_line,
    read_events,
)
from reference_model.verdicts import Verdict

from .builder import TB, allocated, teardown
from .parsed_trace import parse_trace


def conforming() -> TB:
    b = TB()
    allocated(b)
    return teardown(b, bufs=["b"], reqs=["r"])


def index_of(lines: list[str], **fields: object) -> int:
    return next(i for i, raw in enumerate(lines) if all(json.loads(raw).get(k) == v for k, v in fields.items()))


def test_integers_beyond_64_bits_keep_their_value():
    b = conforming()
    i = index_of(b.lines, ev="cb", kind="alloc")
    b.lines[i] = b.lines[i].replace('"error":0', '"error":18446744073709551616')
    j = b.judge()
    assert j.verdict is Verdict.ERROR
    assert "found 18446744073709551616" in j.reason  # not 1.8446744073709552e+19


def test_big_integer_argument_is_read_as_an_integer():
    line = '{"ev":"call","step":3,"op":"req_set_size","args":{"req":"r0","size":36893488147419103232}}'
    ev = parse_line(line, 1)
    assert ev.args["size"] == 2**65 and isinstance(ev.args["size"], int)  # type: ignore[union-attr]
    ev = parse_line('{"ev":"ret","step":1,"op":"bind","ret":null,"errno":null,"dur_ns":1,"t":2,"handle":[1.0]}', 1)
    assert ev.extra == {"handle": [1.0]}  # type: ignore[union-attr]


@pytest.mark.parametrize("edit", [
    lambda raw: "\u00a0" + raw + "\u2028",  # whitespace str.strip knows and JSON does not
    lambda raw: raw.replace('"dur_ns":10', '"dur_ns":NaN'),
    lambda raw: raw.replace('"dur_ns":10', '"dur_ns":1e999'),
    lambda raw: raw.replace('"dur_ns":10', '"dur_ns":' + "9" * 2000),
])
def test_lines_only_the_standard_decoder_accepts_are_still_accepted(edit):
    b = conforming()
    i = index_of(b.lines, ev="ret", op="req_create")
    b.lines[i] = edit(b.lines[i])
    assert b.judge().verdict is Verdict.PASS


def test_messages_of_undecodable_lines():
    b = conforming()
    b.lines[2] = b.lines[2] + " x"
    assert b.judge().reason == "trace line 3: extra data after the JSON object"
    b.lines[2] = '{"ev":"ret","step":"\\ud800'
    assert b.judge().reason == "trace line 3: not JSON"
    b.lines[2] = "[" * 5000 + "]" * 5000
    assert b.judge().reason == "trace line 3: JSON nested too deeply"
    assert len(b.lines[2]) > LONG_LINE


def test_a_malformed_line_after_a_divergence_is_the_answer():
    b = conforming()
    i = index_of(b.lines, ev="ret", op="buf_free")
    b.lines[i] = b.lines[i].replace('"ret":0', '"ret":-1')
    assert b.judge().verdict is Verdict.FAIL
    b.lines.insert(len(b.lines) - 1, "garbage")
    j = b.judge()
    assert (j.verdict, j.reason) == (Verdict.ERROR, f"trace line {len(b.lines) - 1}: not JSON")
    b.lines.pop(len(b.lines) - 2)
    b.lines.append('{"ev":"end","scenario":"model.test"}')
    j = b.judge()
    assert (j.verdict, j.reason) == (Verdict.ERROR, f"trace line {len(b.lines)}: event after the exit event")


def test_unknown_profile_raises_unless_the_trace_is_malformed():
    from reference_model.judge import judge

    from .builder import CAPS, CATALOGUE

    b = conforming()
    with pytest.raises(ValueError, match="unknown profile"):
        judge(b.scenario(), b.lines, CAPS, CATALOGUE, "nope")
    assert judge(b.scenario(), b.lines[:-1], CAPS, CATALOGUE, "nope").verdict is Verdict.ERROR


def test_read_events_matches_parse_trace():
    lines = conforming().lines
    parsed = parse_trace(lines)
    assert not isinstance(parsed, TraceError)
    assert tuple(read_events(lines)) == parsed.events
    items = list(read_events(lines[:-1]))
    assert isinstance(items[-1], TraceError) and items[-1] == parse_trace(lines[:-1])


def test_evolve_gives_ordinary_frozen_values():
    s = evolve(INITIAL, next_id=7)
    assert type(s) is State and s == dataclasses.replace(INITIAL, next_id=7) and INITIAL.next_id == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.next_id = 8  # type: ignore[misc]
    b = Buffer("B1", 4096, 3, NO_COOKIE, False, 500)
    assert evolve(b, maps=2) == dataclasses.replace(b, maps=2)
    assert hash(evolve(b, maps=2)) == hash(dataclasses.replace(b, maps=2))
    with pytest.raises(TypeError, match=r"Buffer has no field \['mapz'\]"):
        evolve(b, maps=2, mapz=3)


FREQUENT = {
    "call": {"ev": "call", "step": 3, "op": "buf_map", "args": {"map": "m0", "buf": "B1", "length": 8192, "prot": 3,
                                                                 "flags": 1, "offset": 0}, "t": 7},
    "ret": {"ev": "ret", "step": 3, "op": "map_read", "ret": 0, "errno": None, "dur_ns": 100, "t": 8, "digest": "ab"},
    "cb": {"ev": "cb", "kind": "alloc", "cookie": "c0", "error": 0, "buf": "B1", "thread": "other", "t": 5},
    "preempt": {"ev": "cb", "kind": "preempt", "cookie": None, "thread": "caller", "th": "w1", "cookie_deleted": True},
}
VALUES = [None, True, False, 0, 7, 2**70, 1.5, "", "main", "a/b", "alloc", "preempt", "caller", "ENOENT", [], [1.5],
          ["r0"], {}, {"a": 1.5}]
ABSENT = object()


def _variants(base: dict[str, object]):
    others = [name for line in FREQUENT.values() for name in line]
    fields = [*base, *others, "th", "in_cb", "teardown", "skipped", "dur_ns", "t", "handle", "cookie_deleted"]
    for name in dict.fromkeys(fields):
        for value in [*VALUES, ABSENT]:
            line = dict(base)
            if value is ABSENT:
                line.pop(name, None)
            else:
                line[name] = value
            yield line
    for name in base.get("args", {}):  # type: ignore[attr-defined]
        for value in VALUES:
            yield {**base, "args": {**base["args"], name: value}}  # type: ignore[dict-item]


@pytest.mark.parametrize("kind", sorted(FREQUENT))
def test_orjsons_reading_is_the_reference_decodings(kind):
    """orjson's decoding gives exactly the event (or the refusal) that the standard
    library's decoding, the builders and the schema check give, field by field."""
    for fields in _variants(FREQUENT[kind]):
        raw = json.dumps(fields, separators=(",", ":"))
        try:
            expected: object = _event(_decode_reference(raw), 4)
        except _Bad as exc:
            expected = str(exc)
        try:
            got: object = parse_line(raw, 4)
        except _Bad as exc:
            got = str(exc)
        assert got == expected and repr(got) == repr(expected), raw
