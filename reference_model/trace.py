"""Trace parsing (docs/formats.md §5): raw JSON lines -> typed events, or a TraceError with its line.

Parsing never raises: garbage, a missing field, a truncated trace or an out-of-order event (an event
before `begin`, a `ret` without its `call`, anything after `exit`) is returned as a TraceError naming
the 1-based line number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

EMPTY_ARGS: Final[Mapping[str, object]] = {}


class Begin(NamedTuple):
    line: int
    scenario: str


class Call(NamedTuple):
    line: int
    step: int
    op: str
    args: Mapping[str, object]
    teardown: bool


class Ret(NamedTuple):
    line: int
    step: int
    op: str
    ret: int | None
    errno: str | None
    skipped: str | None
    extra: Mapping[str, object]


class Cb(NamedTuple):
    """A callback. ``error`` is None for errorNum 0, else the errno name; None for preempt."""

    line: int
    kind: str
    cookie: str | None
    error: str | None
    buf: str | None
    thread: str
    cookie_deleted: bool


class Deleter(NamedTuple):
    line: int
    cookie: str | None
    thread: str
    cookie_deleted: bool


class Settle(NamedTuple):
    line: int
    what: str
    reached: bool


class End(NamedTuple):
    line: int
    scenario: str


class Exit(NamedTuple):
    line: int
    status: str
    code: int | None
    signal: str | None


class ApiMissing(NamedTuple):
    line: int
    symbols: tuple[str, ...]


Event = Begin | Call | Ret | Cb | Deleter | Settle | End | Exit | ApiMissing


@dataclass(frozen=True, slots=True)
class TraceError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"trace line {self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class Trace:
    events: tuple[Event, ...]
    complete: bool  # an `end` event was seen


CACHE_LIMIT: Final = 4096
CB_KINDS: Final = frozenset({"alloc", "load", "preempt"})
THREADS: Final = frozenset({"caller", "other"})
SETTLE_WHATS: Final = frozenset({"alloc", "load", "deleters"})
EXIT_STATUSES: Final = frozenset({"ok", "code", "signal", "timeout"})


class _Bad(Exception):
    pass


_DECODE: Final = json.JSONDecoder().raw_decode


def _skip_ws(raw: str) -> int:
    return 0 if raw[:1] == "{" else len(raw) - len(raw.lstrip())


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


def _error(obj: Mapping[str, object]) -> str | None:
    v = obj.get("error")
    if v == 0 and not isinstance(v, bool):
        return None
    if isinstance(v, str) and v:
        return v
    raise _Bad(f"field 'error' must be 0 or an errno name, found {v!r}")


def parse_line(raw: str, line: int) -> Event:
    """One raw line -> an event; raises _Bad (internal) on anything malformed."""
    try:
        obj, end = _DECODE(raw, _skip_ws(raw))
    except ValueError:
        raise _Bad("not JSON") from None
    if raw[end:].strip():
        raise _Bad("extra data after the JSON object")
    if not isinstance(obj, dict):
        raise _Bad("not a JSON object")
    ev = obj.get("ev")
    if ev == "call":
        args = obj.get("args")
        if not isinstance(args, dict):
            raise _Bad("field 'args' must be an object")
        step = _int(obj, "step")
        assert step is not None
        op = _str(obj, "op")
        assert op is not None
        return Call(line, step, op, args, obj.get("teardown") is True)
    if ev == "ret":
        step = _int(obj, "step")
        op = _str(obj, "op")
        assert step is not None and op is not None
        skipped = obj.get("skipped")
        errno = _str(obj, "errno", nullable=True)
        extra = {k: v for k, v in obj.items() if k not in _RET_FIELDS} if len(obj) > 7 else EMPTY_ARGS
        return Ret(line, step, op, _int(obj, "ret", nullable=True), errno,
                   skipped if isinstance(skipped, str) else None, extra or EMPTY_ARGS)
    if ev == "cb":
        kind = _str(obj, "kind")
        if kind not in CB_KINDS:
            raise _Bad(f"unknown callback kind {kind!r}")
        thread = _str(obj, "thread")
        if thread not in THREADS:
            raise _Bad(f"field 'thread' must be caller or other, found {thread!r}")
        cookie = _str(obj, "cookie", nullable=True)
        deleted = obj.get("cookie_deleted") is True
        if kind == "preempt":
            return Cb(line, kind, cookie, None, None, thread, deleted)
        return Cb(line, kind, cookie, _error(obj), _str(obj, "buf", nullable=True), thread, deleted)
    if ev == "deleter":
        thread = _str(obj, "thread")
        if thread not in THREADS:
            raise _Bad(f"field 'thread' must be caller or other, found {thread!r}")
        return Deleter(line, _str(obj, "cookie", nullable=True), thread, obj.get("cookie_deleted") is True)
    if ev == "settle":
        what = _str(obj, "what")
        if what not in SETTLE_WHATS:
            raise _Bad(f"unknown settle target {what!r}")
        reached = obj.get("reached")
        if not isinstance(reached, bool):
            raise _Bad("field 'reached' must be true or false")
        return Settle(line, what, reached)
    if ev == "begin":
        scenario = _str(obj, "scenario")
        assert scenario is not None
        return Begin(line, scenario)
    if ev == "end":
        scenario = _str(obj, "scenario")
        assert scenario is not None
        return End(line, scenario)
    if ev == "exit":
        status = _str(obj, "status")
        if status not in EXIT_STATUSES:
            raise _Bad(f"unknown exit status {status!r}")
        return Exit(line, status, _int(obj, "code", nullable=True), _str(obj, "signal", nullable=True))
    if ev == "api_missing":
        symbols = obj.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise _Bad("field 'symbols' must be a list of names")
        return ApiMissing(line, tuple(symbols))
    if ev is None:
        raise _Bad("no 'ev' field")
    raise _Bad(f"unknown event type {ev!r}")


_RET_FIELDS: Final = frozenset({"ev", "step", "op", "ret", "errno", "skipped", "dur_ns", "t"})


def parse_trace(lines: Sequence[str]) -> Trace | TraceError:
    """Parse and check the envelope: begin first, call/ret paired, nothing after exit, exit present."""
    events: list[Event] = []
    cache: dict[str, Event] = {}
    open_call: Call | None = None
    begun = False
    ended = False
    exited = False
    last = 0
    for index, item in enumerate(lines):
        line = index + 1
        raw: object = item
        if not isinstance(raw, str):
            return TraceError(line, "not a text line")
        if not raw.strip():
            continue
        last = line
        # Long traces repeat the same lines but for the timestamp: parse each distinct text once.
        cut = raw.rfind(',"t":')
        key = raw[:cut] if cut > 0 and raw[cut + 5:-1].isdigit() and raw.endswith("}") else raw
        cached = cache.get(key)
        if cached is not None:
            ev = type(cached)(line, *cached[1:])
        else:
            try:
                ev = parse_line(raw, line)
            except _Bad as exc:
                return TraceError(line, str(exc))
            except RecursionError:
                return TraceError(line, "JSON nested too deeply")
            if len(cache) < CACHE_LIMIT:
                cache[key] = ev
        if exited:
            return TraceError(line, "event after the exit event")
        if isinstance(ev, ApiMissing):
            if begun:
                return TraceError(line, "api_missing after begin")
            events.append(ev)
            continue
        if isinstance(ev, Exit):
            exited = True
            events.append(ev)
            continue
        if not begun:
            if not isinstance(ev, Begin):
                return TraceError(line, f"{type(ev).__name__.lower()} event before begin")
            begun = True
            events.append(ev)
            continue
        if isinstance(ev, Begin):
            return TraceError(line, "second begin event")
        if ended:
            return TraceError(line, "event after the end event")
        if isinstance(ev, Call):
            if open_call is not None:
                return TraceError(line, f"call of step {ev.step} while step {open_call.step} has not returned")
            open_call = ev
        elif isinstance(ev, Ret):
            if open_call is None or open_call.step != ev.step or open_call.op != ev.op:
                return TraceError(line, f"ret of step {ev.step} ({ev.op}) without its call")
            open_call = None
        elif isinstance(ev, End):
            if open_call is not None:
                return TraceError(line, f"end while step {open_call.step} has not returned")
            ended = True
        events.append(ev)
    if events and isinstance(events[0], ApiMissing):
        return Trace(tuple(events), False)
    if not begun:
        return TraceError(max(last, 1), "no begin event")
    if not exited:
        return TraceError(last + 1, "truncated: no exit event")
    return Trace(tuple(events), ended)
