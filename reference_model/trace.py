"""Trace parsing (docs/formats.md §5): raw JSON lines -> typed events, or a TraceError with its line.

This is the kit's one reader of trace lines: ``read_events`` for a whole trace,
``read_line`` for one line out of context, ``closing_scenario`` for the stream reader, and
``exit_line`` the one writer (the host's timeout marker). Every event is checked against the schema
generated from ndk_probe/vocabulary.yaml (``TRACE_EVENTS``): each declared field has a declared type.
A line is bounded (``MAX_LINE_CHARS``), bytes are decoded with replacement, and an integer too long
for Python's int-string limit is a TraceError, not a ValueError.

Parsing never raises: garbage, a missing field, a truncated trace or an out-of-order event (an event
before `begin`, a `ret` without its `call`, anything after `exit`) is returned as a TraceError naming
the 1-based line number.

Decoding: lines are decoded by orjson. The standard library's decoder stays the reference for what a
line *means*: it decodes every line orjson refuses (so the error messages, and its extensions such as
NaN, lone surrogates or non-JSON whitespace around the object, are unchanged), every line longer than
``LONG_LINE`` (its nesting and integer-digit limits apply exactly), a line whose event does not
validate (messages quote values as it decodes them), and a call's arguments or a ret's extra fields
holding a float (orjson reads integers beyond 64 bits as floats). On the probe's ordinary lines none of
these happens and orjson's result is the event.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple, NoReturn

import orjson

from .vocabulary import (
    CALLBACK_KINDS,
    CALLBACK_THREADS,
    EXIT_STATUSES,
    SETTLE_TARGETS,
    TRACE_EVENTS,
    EventKind,
    FieldSpec,
)

EMPTY_ARGS: Final[Mapping[str, object]] = {}


class Begin(NamedTuple):
    """``version``: the trace format (formats §5; the ``trace`` field, 1 when absent). From version 2 every
    callback writes a ``cb_return`` event just before it returns."""

    line: int
    scenario: str
    version: int = 1


TRACE_V1: Final = 1


MAIN: Final = "main"


class Call(NamedTuple):
    """An op starts. ``th`` is the thread that wrote it (formats §5; "main" when absent), ``in_cb`` the
    callback kind for an API call a cb_action made, ``strand`` where the judge pairs it: ``th``, or
    ``th/<depth>`` for a call nested inside another call of the same thread."""

    line: int
    step: int
    op: str
    args: Mapping[str, object]
    teardown: bool
    th: str = MAIN
    in_cb: str | None = None
    strand: str = MAIN
    t: int | None = None  # the probe's clock, ns (informational)


class Ret(NamedTuple):
    line: int
    step: int
    op: str
    ret: int | None
    errno: str | None
    skipped: str | None
    extra: Mapping[str, object]
    th: str = MAIN
    strand: str = MAIN


class Cb(NamedTuple):
    """A callback. ``error`` is None for errorNum 0, else the errno name; None for preempt. ``strand`` is
    the innermost open call of its thread (the call it runs inside, for ``thread: caller``)."""

    line: int
    kind: str
    cookie: str | None
    error: str | None
    buf: str | None
    thread: str
    cookie_deleted: bool
    th: str = MAIN
    strand: str = MAIN
    t: int | None = None  # the probe's clock, ns (informational)


class CbReturn(NamedTuple):
    """A callback's last act before it returns (trace version 2). ``opened``: the line of its ``cb`` event
    (the innermost callback of ``th`` not returned yet)."""

    line: int
    kind: str
    cookie: str | None
    th: str = MAIN
    opened: int = 0


class Deleter(NamedTuple):
    """A deleter call. ``fn``: which of the probe's deleter functions ran (None when not recorded)."""

    line: int
    cookie: str | None
    thread: str
    cookie_deleted: bool
    th: str = MAIN
    strand: str = MAIN
    fn: int | None = None


class Settle(NamedTuple):
    line: int
    what: str
    reached: bool


class End(NamedTuple):
    line: int
    scenario: str


class Exit(NamedTuple):
    """``host``: written by the host (its timeout or error marker, with its ``reason``), not by the probe."""

    line: int
    status: str
    code: int | None
    signal: str | None
    scenario: str | None = None
    host: bool = False
    reason: str | None = None


class ApiMissing(NamedTuple):
    line: int
    symbols: tuple[str, ...]


Event = Begin | Call | Ret | Cb | CbReturn | Deleter | Settle | End | Exit | ApiMissing


@dataclass(frozen=True, slots=True)
class TraceError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"trace line {self.line}: {self.message}"


LONG_LINE: Final = 1024
# The longest line read (the host's default trace_line_bytes): a longer one is a TraceError, unread.
MAX_LINE_CHARS: Final = 1 << 20
CB_KINDS: Final = frozenset(CALLBACK_KINDS)
THREADS: Final = frozenset(CALLBACK_THREADS)
SETTLE_WHATS: Final = frozenset(SETTLE_TARGETS)
EXITS: Final = frozenset(EXIT_STATUSES)


class _Bad(Exception):
    pass


_DECODE: Final = json.JSONDecoder().raw_decode
_LOADS: Final = orjson.loads


def _skip_ws(raw: str) -> int:
    return 0 if raw[:1] == "{" else len(raw) - len(raw.lstrip())


def _decode_reference(raw: str) -> object:
    """The standard library's reading of a line (see the module docstring); raises _Bad or RecursionError."""
    try:
        obj, end = _DECODE(raw, _skip_ws(raw))
    except json.JSONDecodeError:
        raise _Bad("not JSON") from None
    except ValueError:  # the int-string conversion limit: the only other ValueError decoding raises
        raise _Bad(f"an integer of more than {sys.get_int_max_str_digits()} digits") from None
    if raw[end:].strip():
        raise _Bad("extra data after the JSON object")
    return obj


def _holds_float(values: Iterable[object]) -> bool:
    """Whether decoded values hold a float, at any depth (a plain loop: it runs on every call's arguments)."""
    for v in values:
        kind = type(v)  # decoded JSON holds exact builtin types: a scalar needs this one look
        if kind is float:
            return True
        if kind is list:
            if isinstance(v, list) and _holds_float(v):  # isinstance narrows the type for mypy
                return True
        elif kind is dict and isinstance(v, dict) and _holds_float(v.values()):
            return True
    return False


def _int(obj: Mapping[str, object], key: str, *, nullable: bool = False) -> int | None:
    v = obj.get(key)
    if v is None and nullable:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(f"field {key!r} must be an integer, found {v!r}")
    return v


def _str(obj: Mapping[str, object], key: str, *, nullable: bool = False) -> str | None:
    v = obj.get(key)
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        raise _Bad(f"field {key!r} must be a string, found {v!r}")
    return v


def _th(obj: Mapping[str, object]) -> str:
    """The ``th`` field: a thread name (formats §5), "main" when absent."""
    v = obj.get("th", MAIN)
    if type(v) is str and v and "/" not in v:
        return v
    raise _Bad(f"field 'th' must be a thread name, found {v!r}")


def _error(obj: Mapping[str, object]) -> str | None:
    v = obj.get("error")
    if v == 0 and not isinstance(v, bool):
        return None
    if isinstance(v, str) and v:
        return v
    raise _Bad(f"field 'error' must be 0 or an errno name, found {v!r}")


# Builders, one per event type. Decoded JSON holds exact builtin types, so ``type(v) is int`` is the
# integer check (bool excluded); the _int/_str helpers run only to word a rejection. The three frequent
# events are built with ``tuple.__new__`` (the NamedTuple constructor is a Python-level wrapper of it).
_new: Final = tuple.__new__


def _call(obj: dict[str, object], line: int) -> Call:
    args = obj.get("args")
    if not isinstance(args, dict):
        raise _Bad("field 'args' must be an object")
    step = obj.get("step")
    if type(step) is not int:
        step = _int(obj, "step")
        assert step is not None
    op = obj.get("op")
    if type(op) is not str:
        op = _str(obj, "op")
        assert op is not None
    th = obj.get("th", MAIN)
    if th is not MAIN and th != MAIN:
        th = _th(obj)
    in_cb = obj.get("in_cb")
    if in_cb is not None and (type(in_cb) is not str or in_cb not in CB_KINDS):  # a list or object is unhashable
        raise _Bad(f"field 'in_cb' must be a callback kind, found {in_cb!r}")
    if in_cb is None and "in_cb" in obj:
        _refuse(EventKind.CALL, "in_cb", None)
    teardown = obj.get("teardown", False)
    if type(teardown) is not bool:
        _refuse(EventKind.CALL, "teardown", teardown)
    return _new(Call, (line, step, op, args, teardown, th, in_cb, th, _time(obj, EventKind.CALL)))


_RET_FIELDS: Final = frozenset({"ev", "step", "op", "ret", "errno", "skipped", "dur_ns", "t", "th", "in_cb"})


def _ret(obj: dict[str, object], line: int) -> Ret:
    step = obj.get("step")
    if type(step) is not int:
        step = _int(obj, "step")
    op = obj.get("op")
    if type(op) is not str:
        op = _str(obj, "op")
    assert step is not None and op is not None
    skipped = obj.get("skipped")
    errno = obj.get("errno")
    if errno is not None and type(errno) is not str:
        errno = _str(obj, "errno", nullable=True)
    th = obj.get("th", MAIN)
    if th is not MAIN and th != MAIN:
        th = _th(obj)
    # The op-specific results: the fields beyond those every ret may carry.
    extra = EMPTY_ARGS if _RET_FIELDS.issuperset(obj) else {k: v for k, v in obj.items() if k not in _RET_FIELDS}
    ret = obj.get("ret")
    if ret is not None and type(ret) is not int:
        ret = _int(obj, "ret", nullable=True)
    if type(skipped) is not str and "skipped" in obj:
        _refuse(EventKind.RET, "skipped", skipped)
    dur = obj.get("dur_ns", 0)
    if type(dur) is not int and type(dur) is not float:
        _refuse(EventKind.RET, "dur_ns", dur)
    in_cb = obj.get("in_cb", "")
    if type(in_cb) is not str:
        _refuse(EventKind.RET, "in_cb", in_cb)
    t = obj.get("t", 0)
    if type(t) is not int:
        _refuse(EventKind.RET, "t", t)
    return _new(Ret, (line, step, op, ret, errno, skipped if isinstance(skipped, str) else None, extra or EMPTY_ARGS,
                      th, th))


def _cb(obj: dict[str, object], line: int) -> Cb:
    kind = obj.get("kind")
    if type(kind) is not str:
        kind = _str(obj, "kind")
    if kind not in CB_KINDS:
        raise _Bad(f"unknown callback kind {kind!r}")
    thread = obj.get("thread")
    if type(thread) is not str:
        thread = _str(obj, "thread")
    if thread not in THREADS:
        raise _Bad(f"field 'thread' must be caller or other, found {thread!r}")
    assert kind is not None and thread is not None
    cookie = obj.get("cookie")
    if cookie is not None and type(cookie) is not str:
        cookie = _str(obj, "cookie", nullable=True)
    th = obj.get("th", MAIN)
    if th is not MAIN and th != MAIN:
        th = _th(obj)
    if kind == "preempt":  # onPreempt has neither an error nor a buffer: only their types are checked
        error = None
        buf = None
        unread = obj.get("error", 0)
        if type(unread) is not int and type(unread) is not str:
            _refuse(EventKind.CB, "error", unread)
        unread = obj.get("buf")
        if unread is not None and type(unread) is not str:
            _refuse(EventKind.CB, "buf", unread)
    else:
        error = _error(obj)
        buf = obj.get("buf")
        if buf is not None and type(buf) is not str:
            buf = _str(obj, "buf", nullable=True)
    deleted = obj.get("cookie_deleted", False)
    if type(deleted) is not bool:
        _refuse(EventKind.CB, "cookie_deleted", deleted)
    return _new(Cb, (line, kind, cookie, error, buf, thread, deleted, th, th, _time(obj, EventKind.CB)))


def _cb_return(obj: dict[str, object], line: int) -> CbReturn:
    kind = _str(obj, "kind")
    if kind not in CB_KINDS:
        raise _Bad(f"unknown callback kind {kind!r}")
    assert kind is not None
    return CbReturn(line, kind, _str(obj, "cookie", nullable=True), _th(obj))


def _deleter(obj: dict[str, object], line: int) -> Deleter:
    thread = _str(obj, "thread")
    if thread not in THREADS:
        raise _Bad(f"field 'thread' must be caller or other, found {thread!r}")
    assert thread is not None
    th = _th(obj)
    fn = obj.get("fn")
    if fn is not None and type(fn) is not int:
        raise _Bad(f"field 'fn' must be an integer, found {fn!r}")
    return Deleter(line, _str(obj, "cookie", nullable=True), thread, obj.get("cookie_deleted") is True, th, th, fn)


def _settle(obj: dict[str, object], line: int) -> Settle:
    what = _str(obj, "what")
    if what not in SETTLE_WHATS:
        raise _Bad(f"unknown settle target {what!r}")
    assert what is not None
    reached = obj.get("reached")
    if not isinstance(reached, bool):
        raise _Bad("field 'reached' must be true or false")
    return Settle(line, what, reached)


def _begin(obj: dict[str, object], line: int) -> Begin:
    scenario = _str(obj, "scenario")
    assert scenario is not None
    version = obj.get("trace", TRACE_V1)
    if type(version) is not int or version < TRACE_V1:
        raise _Bad(f"field 'trace' must be a format version, found {version!r}")
    return Begin(line, scenario, version)


def _end(obj: dict[str, object], line: int) -> End:
    scenario = _str(obj, "scenario")
    assert scenario is not None
    return End(line, scenario)


def _exit(obj: dict[str, object], line: int) -> Exit:
    status = _str(obj, "status")
    if status not in EXITS:
        raise _Bad(f"unknown exit status {status!r}")
    assert status is not None
    return Exit(line, status, _int(obj, "code", nullable=True), _str(obj, "signal", nullable=True),
                _str(obj, "scenario", nullable=True), obj.get("host") is True, _str(obj, "reason", nullable=True))


def _api_missing(obj: dict[str, object], line: int) -> ApiMissing:
    symbols = obj.get("symbols")
    if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
        raise _Bad("field 'symbols' must be a list of names")
    return ApiMissing(line, tuple(symbols))


_BUILDERS: Final[dict[str, Callable[[dict[str, object], int], Event]]] = {
    EventKind.CALL: _call, EventKind.RET: _ret, EventKind.CB: _cb, EventKind.CB_RETURN: _cb_return,
    EventKind.DELETER: _deleter, EventKind.SETTLE: _settle, EventKind.BEGIN: _begin, EventKind.END: _end,
    EventKind.EXIT: _exit, EventKind.API_MISSING: _api_missing,
}
assert set(_BUILDERS) == set(TRACE_EVENTS), "every event kind of the schema has its builder"

# The schema compiled for the check: per kind, (field, the Python types it may hold, required, in words).
_JSON_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "int": (int,), "str": (str,), "bool": (bool,), "null": (type(None),), "object": (dict,), "list": (list,),
    "number": (int, float),
}
_JSON_WORDS: Final[dict[str, str]] = {
    "int": "an integer", "str": "a string", "bool": "true or false", "null": "null", "object": "an object",
    "list": "a list", "number": "a number",
}
_ABSENT: Final = object()


def _compiled(fields: tuple[FieldSpec, ...]) -> tuple[tuple[str, frozenset[type], bool, str], ...]:
    return tuple(
        (f.name, frozenset(t for name in f.types for t in _JSON_TYPES[name]), not f.optional,
         " or ".join(_JSON_WORDS[name] for name in f.types))
        for f in fields
    )


# The builders of the three frequent kinds hold every field of theirs to its schema type themselves
# (tests/model/test_trace_reader.py tries every field); the schema check reads the other kinds' lines.
# The fields each of those builders checks: a field the schema adds to one of them fails the import.
_BUILDER_CHECKED: Final = {
    EventKind.CALL: frozenset({"step", "op", "args", "th", "in_cb", "teardown", "t"}),
    EventKind.RET: frozenset({"step", "op", "ret", "errno", "th", "skipped", "dur_ns", "in_cb", "t"}),
    EventKind.CB: frozenset({"kind", "cookie", "error", "buf", "thread", "th", "cookie_deleted", "t"}),
}
_SCHEMA: Final = {str(kind): _compiled(fields) for kind, fields in TRACE_EVENTS.items()}
assert all({f[0] for f in _SCHEMA[kind]} == names for kind, names in _BUILDER_CHECKED.items())


def _time(obj: Mapping[str, object], kind: str) -> int | None:
    """The optional ``t`` field of a call or callback (None when absent)."""
    t = obj.get("t", _ABSENT)
    if t is _ABSENT:
        return None
    if type(t) is not int:
        _refuse(kind, "t", t)
    return t


def _refuse(kind: str, name: str, value: object) -> NoReturn:
    """Refuse field ``name`` of a ``kind`` event as the schema check words it."""
    words = next(f[3] for f in _SCHEMA[kind] if f[0] == name)
    raise _Bad(f"field {name!r} of the {kind} event must be {words}, found {_shown(value)}")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _conform(obj: dict[str, object], kind: str) -> None:
    """Raise _Bad unless every field the schema declares for ``kind`` has a declared type (or is absent
    where the schema allows it). Fields the schema does not declare are left to the CI check of the probe."""
    for name, types, required, words in _SCHEMA[kind]:
        v = obj.get(name, _ABSENT)
        if v is _ABSENT:
            if required:
                raise _Bad(f"{kind} event lacks field {name!r}")
        elif type(v) not in types:
            raise _Bad(f"field {name!r} of the {kind} event must be {words}, found {_shown(v)}")


def _event(obj: object, line: int) -> Event:
    if not isinstance(obj, dict):
        raise _Bad("not a JSON object")
    ev = obj.get("ev")
    build = _BUILDERS.get(ev) if isinstance(ev, str) else None
    if build is not None:
        event = build(obj, line)
        if ev not in _BUILDER_CHECKED:
            _conform(obj, ev)  # type: ignore[arg-type]  # ev is a str whenever build is found
        return event
    if ev is None:
        raise _Bad("no 'ev' field")
    raise _Bad(f"unknown event type {ev!r}")


def parse_line(raw: str, line: int) -> Event:
    """One raw line -> an event; raises _Bad (internal) on anything malformed.

    The standard library's decoding is the reference; orjson's is taken where it is the same: a line
    orjson decodes to an object whose event is valid, with no float among the values the schema leaves
    untyped (orjson reads an integer beyond 64 bits as a float). Anything else, refusals included, is
    read again from the reference, which words them."""
    if len(raw) <= LONG_LINE:
        try:
            obj = _LOADS(raw)
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is dict:  # decoded JSON holds exact builtin types
            try:
                event = _event(obj, line)
            except _Bad:
                pass
            else:
                if not _float_untyped(event):
                    return event
    if len(raw) > MAX_LINE_CHARS:
        raise _Bad(f"a line of {len(raw)} characters, longer than the {MAX_LINE_CHARS} a trace line may hold")
    return _event(_decode_reference(raw), line)


def _float_untyped(event: Event) -> bool:
    """Whether a float is among an event's values the schema leaves untyped: a call's arguments, a ret's
    op-specific results."""
    if type(event) is Call:
        return _holds_float(event.args.values())
    return type(event) is Ret and _holds_float(event.extra.values())


def _text(raw: object) -> str | None:
    """A line as text: str as it is, bytes decoded with replacement (bounded first), else None."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes | bytearray):
        if len(raw) > MAX_LINE_CHARS:
            raise _Bad(f"a line of {len(raw)} bytes, longer than the {MAX_LINE_CHARS} a trace line may hold")
        return bytes(raw).decode("utf-8", errors="replace")
    return None


def read_line(raw: str | bytes, line: int = 1) -> Event | TraceError:
    """One line on its own, without the envelope checks of ``read_events`` (an event is not checked
    against its neighbours): the event, or a TraceError naming ``line``."""
    try:
        text = _text(raw)
        if text is None:
            return TraceError(line, "not a text line")
        return parse_line(text, line)
    except _Bad as exc:
        return TraceError(line, str(exc))
    except RecursionError:
        return TraceError(line, "JSON nested too deeply")


_EXIT_MARK: Final = json.dumps(EventKind.EXIT.value)  # every exit line spells its kind so


def closing_scenario(raw: str) -> str | None:
    """The scenario an ``exit`` line closes, or None for any other line. A malformed exit event that
    still names its scenario closes it too: the stream moves on and the judge reports the line."""
    if _EXIT_MARK not in raw:
        return None
    event = read_line(raw)
    if isinstance(event, Exit):
        return event.scenario
    try:
        obj = _decode_reference(raw) if len(raw) <= MAX_LINE_CHARS else None
    except (_Bad, RecursionError):
        return None
    if isinstance(obj, dict) and obj.get("ev") == EventKind.EXIT:
        scenario = obj.get("scenario")
        return scenario if isinstance(scenario, str) else None
    return None


def exit_line(scenario: str, status: str, *, host: bool, t: int, reason: str | None = None) -> str:
    """An ``exit`` event as one line: the host's markers (`timeout`, `error`, with the host's reason) are
    the only exits the kit writes itself."""
    if status not in EXITS:
        raise ValueError(f"unknown exit status {status!r}")
    fields: dict[str, object] = {"ev": EventKind.EXIT.value, "scenario": scenario, "status": status, "code": None,
                                 "signal": None}
    if host:
        fields["host"] = True
    if reason is not None:
        fields["reason"] = reason
    fields["t"] = t
    return json.dumps(fields, separators=(",", ":"))


def read_events(lines: Iterable[object]) -> Iterator[Event | TraceError]:
    """The events of a trace one at a time, with the envelope checks (begin first, call and ret paired,
    nothing after exit, exit present). A malformed line (or, at the end, a missing begin or exit) ends the
    stream with its TraceError. Events before it are yielded as they are read, so a consumer that must
    answer ERROR for any malformed line reads the stream to its end (``first_error``).

    Calls pair per thread (``th``); a call inside another call of its thread is allowed only from a
    callback (``in_cb``) and gets the strand ``th/<depth>``; a callback or deleter gets the strand of the
    innermost call in flight on its thread. From trace version 2 each ``cb_return`` closes the innermost
    open callback of its thread (same kind and cookie; ``opened`` names its line); it may follow ``end``."""
    stacks: dict[str, list[Call]] = {}
    open_cbs: dict[str, list[Cb]] | None = None  # version 2: the callbacks of each thread not returned yet
    open_calls = 0
    first: type | None = None
    begun = False
    ended = False
    body = False  # begun and not ended
    exited = False
    last = 0
    for line, raw in enumerate(lines, 1):
        if not isinstance(raw, str):
            try:
                text = _text(raw)
            except _Bad as exc:
                yield TraceError(line, str(exc))
                return
            if text is None:
                yield TraceError(line, "not a text line")
                return
            raw = text
        if not raw or raw.isspace():  # a blank line (isspace, unlike strip, copies nothing)
            continue
        last = line
        try:
            ev = parse_line(raw, line)
        except _Bad as exc:
            yield TraceError(line, str(exc))
            return
        except RecursionError:
            yield TraceError(line, "JSON nested too deeply")
            return
        if exited:
            yield TraceError(line, "event after the exit event")
            return
        # The common cases first: a call or a ret in the body (neither is the first event, nor a callback's
        # return; the chain below makes the same checks for them outside the body).
        if body and type(ev) is Call:
            stack = stacks.get(ev.th)
            if stack is None:
                stack = stacks[ev.th] = []
            elif stack:
                if ev.in_cb is None:
                    yield TraceError(line, f"call of step {ev.step} while step {stack[-1].step} has not returned")
                    return
                ev = ev._replace(strand=f"{ev.th}/{len(stack)}")
            stack.append(ev)
            open_calls += 1
            yield ev
            continue
        if body and type(ev) is Ret:
            stack = stacks.get(ev.th)
            if not stack or stack[-1].step != ev.step or stack[-1].op != ev.op:
                yield TraceError(line, f"ret of step {ev.step} ({ev.op}) without its call")
                return
            strand = stack.pop().strand
            open_calls -= 1
            yield ev if strand == ev.strand else ev._replace(strand=strand)
            continue
        if first is None:
            first = type(ev)
        if open_cbs is not None and isinstance(ev, (Cb, CbReturn)) and begun and not exited:
            opened = open_cbs.setdefault(ev.th, [])
            if isinstance(ev, Cb):
                if not ended:
                    opened.append(ev)
            else:
                top = opened.pop() if opened else None
                if top is None or top.kind != ev.kind or top.cookie != ev.cookie:
                    yield TraceError(line, f"cb_return ({ev.kind}) without its cb on thread {ev.th}")
                    return
                yield ev._replace(opened=top.line)
                continue
        elif isinstance(ev, CbReturn):
            yield TraceError(line, "cb_return in a trace of version 1" if begun else "cb_return event before begin")
            return
        if open_calls and isinstance(ev, (Cb, Deleter)):
            stack = stacks.get(ev.th)
            if stack and stack[-1].strand != ev.strand:
                ev = ev._replace(strand=stack[-1].strand)
        elif isinstance(ev, ApiMissing):
            if begun:
                yield TraceError(line, "api_missing after begin")
                return
        elif isinstance(ev, Exit):
            exited = True
        elif not begun:
            if not isinstance(ev, Begin):
                yield TraceError(line, f"{type(ev).__name__.lower()} event before begin")
                return
            begun = body = True
            if ev.version > TRACE_V1:
                open_cbs = {}
        elif isinstance(ev, Begin):
            yield TraceError(line, "second begin event")
            return
        elif ended:
            yield TraceError(line, "event after the end event")
            return
        elif isinstance(ev, End):
            if open_calls:
                pending = next(st[-1] for st in stacks.values() if st)
                yield TraceError(line, f"end while step {pending.step} has not returned")
                return
            ended = True
            body = False
        yield ev
    if first is ApiMissing:
        return
    if not begun:
        yield TraceError(max(last, 1), "no begin event")
    elif not exited:
        yield TraceError(last + 1, "truncated: no exit event")


def missing_functions(lines: Iterable[str]) -> tuple[str, ...] | None:
    """The functions the implementation lacks when the trace opens with ``api_missing`` (the probe writes it
    instead of running anything: formats §5), else None. Only the first line that is not blank is read; an
    ``api_missing`` anywhere else is a malformed trace, which the judge answers."""
    for raw in lines:
        if raw and not raw.isspace():
            event = read_line(raw)
            return event.symbols if isinstance(event, ApiMissing) else None
    return None


def first_error(stream: Iterator[Event | TraceError]) -> TraceError | None:
    """Read the rest of a ``read_events`` stream: its TraceError, if any."""
    for item in stream:
        if isinstance(item, TraceError):
            return item
    return None
