"""The behaviour atlas: per device, the choices it made where the published text leaves it free.

Computed from the traces a run recorded (results.jsonl), never from new device runs, through the one
trace reader (reference_model.trace). Each device answers questions, grouped by aspect (`Aspect`):

- `errno`: the errno of each public call that failed (the call and the step it ran at);
- `callback-error`: the errorNum of each onAlloc or onLoad that reported an error;
- `callback-thread`: which thread each kind of callback (and the cookie deleter) ran on: the caller's
  (inside the API call that triggered it), one device thread, several device threads (counted per
  scenario: the distinct threads the probe did not start), or an app thread outside any API call;
- `callback-order`: whether the onAlloc callbacks of independent requests came in request order, within
  one allocAsync and between allocAsync calls pending together (requests told apart by their cookies:
  only a cookie that one request of the scenario carries and one onAlloc delivers is used);
- `latency`: the delay from allocAsync to each onAlloc and from loadAsync to each onLoad
  (reports.recorded.results.callback_latencies), answered by the decade of its median; the figures are its detail;
- `descriptor`: what fd_check and await_closed saw of a handed-over descriptor (closed, still open,
  closed only after waiting; the file position);
- `deleter`: where each cookie deleter ran: inside which API call, or on which thread after which call
  that lets a cookie go (ANpuBuffer_free, ANpuBuffer_unmap, ANpuManager_AllocRequest_free);
- `preemption`: after each vnpu preempt or pressure command, the callbacks it caused in order
  (onPreempt, and onAlloc or onLoad with ECANCELED), by the scenario's names for the cookies;
- `is-supported`: the answer of isSupported per (device, type, size) request, in the scenarios and in the
  run's discovery of the device;
- `reading`: each reading of silent text (reference_model.readings) a WARN of the device needed.

An entry holds the device's choices (a value, how often, and the scenarios and 1-based trace lines it
comes from). Devices are compared by their answer (the values, without counts): `side_by_side` puts
devices in columns and marks the rows where the answers differ; `atlas_changes` lists what changed
between two atlases of a device (`npuconf report --baseline`, the dashboard's consecutive builds).
A device that has no entry for a question answers "—": for a per-call question, the call did not fail
there or was not reached; for the others, it never happened.

The atlas is values only: atlas.json is reports/renderers/atlas_json.py's, the view the pages show
reports/renderers/atlas_view.py's, and the results store keeps each device's entries.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from reference_model.readings import READINGS
from reference_model.trace import (
    Begin,
    Call,
    Cb,
    CbReturn,
    Deleter,
    Event,
    Ret,
    TraceError,
    read_events,
)
from reference_model.verdicts import Verdict
from reference_model.vocabulary import OPS, Op

from ..recorded.results import ResultRecord, RunResults, callback_latencies, format_ns, percentile
from .clause_answers import readings_of_reason

ABSENT: Final = "—"


class Aspect(StrEnum):
    ERRNO = "errno"
    CALLBACK_ERROR = "callback-error"
    THREAD = "callback-thread"
    ORDER = "callback-order"
    LATENCY = "latency"
    DESCRIPTOR = "descriptor"
    DELETER = "deleter"
    PREEMPTION = "preemption"
    SUPPORT = "is-supported"
    READING = "reading"


ASPECT_TITLES: Final[Mapping[Aspect, str]] = {
    Aspect.ERRNO: "errno of each failed call",
    Aspect.CALLBACK_ERROR: "errorNum of each failed onAlloc and onLoad",
    Aspect.THREAD: "the thread callbacks and cookie deleters run on",
    Aspect.ORDER: "onAlloc order between independent requests",
    Aspect.LATENCY: "callback latency",
    Aspect.DESCRIPTOR: "when handed-over descriptors are closed",
    Aspect.DELETER: "where cookie deleters run",
    Aspect.PREEMPTION: "preemption: the victims and their callbacks",
    Aspect.SUPPORT: "isSupported answers per request",
    Aspect.READING: "readings of silent text a WARN needed",
}
_ASPECT_ORDER: Final = {aspect: index for index, aspect in enumerate(Aspect)}

# The source of the discovery trace kept in the device record (host/run/discovery.py DISCOVERY_ID).
DISCOVERY: Final = "npuconf.discovery"
# Calls after which a cookie deleter may run on another thread (the context named for such a deleter).
_LETTING_GO: Final = frozenset({Op.BUF_FREE, Op.BUF_UNMAP, Op.REQ_FREE, Op.REQ_FREE_NULL, Op.REQ_SET_COOKIE})
_PREEMPTING: Final = ("preempt=", "preempt_late=", "pressure=")
_KIND_NAMES: Final = {"alloc": "onAlloc", "load": "onLoad", "preempt": "onPreempt"}
# Latency answers: the decade of the median.
_DECADES_NS: Final = (10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)


@dataclass(frozen=True, slots=True)
class Source:
    scenario: str
    lines: tuple[int, ...]  # 1-based lines of the scenario's trace on that device


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    count: int
    sources: tuple[Source, ...]


@dataclass(frozen=True, slots=True)
class Entry:
    """One device's answer to one question."""

    aspect: Aspect
    question: str
    choices: tuple[Choice, ...]  # by value
    detail: str = ""  # shown, never compared (latency figures, the reading's words)
    note: str = ""  # e.g. the model refused it: a FAIL names the clause

    @property
    def answer(self) -> str:
        """What devices are compared by: the values, without their counts."""
        return " | ".join(c.value for c in self.choices)

    def text(self) -> str:
        """The answer with counts where a value was seen more than once."""
        return " | ".join(c.value + (f" ({c.count}×)" if c.count > 1 else "") for c in self.choices)

    def to_json(self) -> dict[str, object]:
        return {
            "answer": self.answer,
            "choices": [
                {"value": c.value, "count": c.count,
                 "sources": [{"scenario": s.scenario, "lines": list(s.lines)} for s in c.sources]}
                for c in self.choices
            ],
            "detail": self.detail,
            "note": self.note,
        }


def entry_from_json(aspect: str, question: str, choices: object, detail: str, note: str) -> Entry | None:
    """An entry as the results store keeps it (`choices`: the `choices` list of `Entry.to_json`); None when
    it is not one (an aspect this kit does not know, a damaged row)."""
    try:
        kind = Aspect(aspect)
    except ValueError:
        return None
    if not isinstance(choices, list):
        return None
    out: list[Choice] = []
    for item in choices:
        if not isinstance(item, dict) or not isinstance(item.get("value"), str):
            return None
        count = item.get("count")
        sources = item.get("sources")
        out.append(Choice(item["value"], count if isinstance(count, int) else 1, tuple(
            Source(str(s.get("scenario", "")), tuple(n for n in s.get("lines", ()) if isinstance(n, int)))
            for s in (sources if isinstance(sources, list) else ()) if isinstance(s, dict)
        )))
    return Entry(kind, question, tuple(out), detail, note)


@dataclass(frozen=True, slots=True)
class DeviceAtlas:
    device: str
    entries: tuple[Entry, ...]  # by aspect, then question

    def get(self, aspect: Aspect, question: str) -> Entry | None:
        return next((e for e in self.entries if e.aspect is aspect and e.question == question), None)

    def by_key(self) -> dict[tuple[Aspect, str], Entry]:
        return {(e.aspect, e.question): e for e in self.entries}


@dataclass(frozen=True, slots=True)
class AtlasRow:
    aspect: Aspect
    question: str
    cells: tuple[Entry | None, ...]  # one per column; None: the device has no entry ("—")
    differs: bool


@dataclass(frozen=True, slots=True)
class Atlas:
    columns: tuple[str, ...]
    rows: tuple[AtlasRow, ...]

    def row(self, aspect: Aspect, question: str) -> AtlasRow | None:
        return next((r for r in self.rows if r.aspect is aspect and r.question == question), None)

    def differing(self) -> tuple[AtlasRow, ...]:
        return tuple(r for r in self.rows if r.differs)


@dataclass(frozen=True, slots=True)
class AtlasChange:
    aspect: Aspect
    question: str
    before: str
    now: str

    def line(self) -> str:
        return f"{self.aspect}: {self.question}: {self.before} -> {self.now}"


def answer_of(entry: Entry | None) -> str:
    return entry.answer if entry is not None else ABSENT


def side_by_side(columns: Sequence[tuple[str, DeviceAtlas]]) -> Atlas:
    """Devices in columns (in the order given); every question any of them answered is a row."""
    keyed = [atlas.by_key() for _, atlas in columns]
    keys = sorted({k for entries in keyed for k in entries}, key=lambda k: (_ASPECT_ORDER[k[0]], k[1]))
    rows = []
    for aspect, question in keys:
        cells = tuple(entries.get((aspect, question)) for entries in keyed)
        rows.append(AtlasRow(aspect, question, cells, len({answer_of(c) for c in cells}) > 1))
    return Atlas(tuple(name for name, _ in columns), tuple(rows))


def atlas_changes(before: DeviceAtlas, now: DeviceAtlas) -> tuple[AtlasChange, ...]:
    """The questions whose answer differs between two atlases of a device (`before` first)."""
    atlas = side_by_side((("before", before), ("now", now)))
    return tuple(AtlasChange(r.aspect, r.question, answer_of(r.cells[0]), answer_of(r.cells[1]))
                 for r in atlas.differing())


# ---------------------------------------------------------------------------------------------
# computing one device's atlas


class _Collector:
    """Observations by (aspect, question) -> value -> scenario -> lines."""

    def __init__(self) -> None:
        self.seen: dict[tuple[Aspect, str], dict[str, dict[str, list[int]]]] = {}
        self.counts: Counter[tuple[Aspect, str, str]] = Counter()
        self.details: dict[tuple[Aspect, str], str] = {}
        self.notes: dict[tuple[Aspect, str], str] = {}

    def add(self, aspect: Aspect, question: str, value: str, scenario: str, lines: Iterable[int]) -> None:
        by_value = self.seen.setdefault((aspect, question), {})
        by_value.setdefault(value, {}).setdefault(scenario, []).extend(lines)
        self.counts[(aspect, question, value)] += 1

    def entries(self) -> tuple[Entry, ...]:
        out = []
        for (aspect, question), by_value in self.seen.items():
            choices = tuple(
                Choice(value, self.counts[(aspect, question, value)],
                       tuple(Source(s, tuple(sorted(set(lines)))) for s, lines in by_scenario.items()))
                for value, by_scenario in sorted(by_value.items())
            )
            key = (aspect, question)
            out.append(Entry(aspect, question, choices, self.details.get(key, ""), self.notes.get(key, "")))
        return sorted_entries(out)


def sorted_entries(entries: Iterable[Entry]) -> tuple[Entry, ...]:
    """Entries in the atlas's order: by aspect, then question."""
    return tuple(sorted(entries, key=lambda e: (_ASPECT_ORDER[e.aspect], e.question)))


def _api(op: str) -> str | None:
    """The public function an op calls (None for probe helpers and the vnpu control entry point)."""
    try:
        spec = OPS[Op(op)]
    except ValueError:
        return None
    return spec.api if spec.op is not Op.VNPU else None


def _nth(counter: Counter[tuple[object, ...]], key: tuple[object, ...]) -> str:
    counter[key] += 1
    return f" #{counter[key]}" if counter[key] > 1 else ""


def _thread_kind(thread: str, th: str, device_threads: int) -> str:
    if thread == "caller":
        return "caller's thread (inside the API call)"
    if th.startswith("w"):
        return "one device thread" if device_threads <= 1 else "several device threads"
    return "an app thread outside any API call"


def _decade(ns: float) -> str:
    lower = 0
    for edge in _DECADES_NS:
        if ns < edge:
            return f"under {format_ns(edge)}" if not lower else f"{format_ns(lower)} to {format_ns(edge)}"
        lower = edge
    return f"{format_ns(lower)} or more"


@dataclass(slots=True)
class _Walk:
    """One trace read for the atlas (internal state of `_walk_trace`)."""

    scenario: str
    names: Mapping[str, str]  # probe name (r0, c1, b0, f0) -> the scenario's name
    refused_line: int | None
    refused_clause: str
    open_calls: dict[str, Call] = field(default_factory=dict)  # strand -> the call in flight
    calls: Counter[tuple[object, ...]] = field(default_factory=Counter)
    cbs: Counter[tuple[object, ...]] = field(default_factory=Counter)
    deleters: Counter[tuple[object, ...]] = field(default_factory=Counter)
    cookies: dict[str, str | None] = field(default_factory=dict)  # request -> its cookie
    attrs: dict[str, dict[str, object]] = field(default_factory=dict)  # request -> device, type, size
    submitted: list[tuple[int, str, str]] = field(default_factory=list)  # (its allocAsync call's line, th, cookie)
    delivered: list[tuple[int, str]] = field(default_factory=list)  # (cb line, cookie) of onAlloc
    threaded: list[tuple[str, str, str, int]] = field(default_factory=list)  # (question, thread, th, line)
    letting_go: list[tuple[int, str]] = field(default_factory=list)  # (line, function) of calls letting a cookie go
    returned: dict[str, int] = field(default_factory=dict)  # th -> its cb_return line, while its last event
    commands: list[tuple[int, str]] = field(default_factory=list)  # vnpu preempt/pressure: (call line, text)
    victims: list[tuple[int, str]] = field(default_factory=list)  # (cb line, onPreempt(c) or onX(ECANCELED, c))

    def name(self, probe_name: str | None) -> str:
        if probe_name is None:
            return "NULL"
        return self.names.get(probe_name, probe_name)


def _walk_trace(lines: Sequence[str], scenario: str, record: ResultRecord | None, out: _Collector) -> None:
    names = {v: k for k, v in record.slots.items() if isinstance(v, str)} if record is not None else {}
    divergence = record.divergence if record is not None and record.verdict is Verdict.FAIL else None
    walk = _Walk(scenario, names, divergence.event if divergence else None, divergence.clause if divergence else "")
    for event in read_events(lines):
        if isinstance(event, TraceError):
            break  # the events before a malformed line stand
        _event(walk, event, out)
    _preemption(walk, out)
    device_threads = len({th for _, thread, th, _ in walk.threaded if thread != "caller" and th.startswith("w")})
    for question, thread, th, line in walk.threaded:
        out.add(Aspect.THREAD, question, _thread_kind(thread, th, device_threads), scenario, (line,))
    _order(walk, out)


def _refused(walk: _Walk, line: int, aspect: Aspect, question: str, out: _Collector) -> None:
    if walk.refused_line == line:
        out.notes[(aspect, question)] = f"the model refused it: FAIL on {walk.refused_clause}"


def _event(walk: _Walk, event: Event, out: _Collector) -> None:
    if isinstance(event, Begin):
        walk.scenario = walk.scenario or event.scenario
    elif isinstance(event, Call):
        walk.open_calls[event.strand] = event
        _call(walk, event, out)
    elif isinstance(event, Ret):
        call = walk.open_calls.pop(event.strand, None)
        if call is not None:
            _ret(walk, call, event, out)
    elif isinstance(event, Cb):
        _callback(walk, event, out)
    elif isinstance(event, Deleter):
        _deleter(walk, event, out)
    th = getattr(event, "th", None)
    if isinstance(event, CbReturn):
        walk.returned[event.th] = event.line
    elif isinstance(th, str):
        walk.returned.pop(th, None)


def _call(walk: _Walk, call: Call, out: _Collector) -> None:
    args = call.args
    req = args.get("req")
    if call.op == Op.REQ_CREATE and isinstance(req, str):
        walk.cookies[req] = None
        walk.attrs[req] = {}
    elif call.op == Op.REQ_SET_COOKIE and isinstance(req, str):
        cookie = args.get("cookie")
        walk.cookies[req] = cookie if isinstance(cookie, str) else None
    elif call.op in (Op.REQ_SET_DEVICE, Op.REQ_SET_TYPE, Op.REQ_SET_SIZE) and isinstance(req, str):
        field_name = {Op.REQ_SET_DEVICE: "device", Op.REQ_SET_TYPE: "type", Op.REQ_SET_SIZE: "size"}[Op(call.op)]
        walk.attrs.setdefault(req, {})[field_name] = args.get(field_name)
    elif call.op == Op.ALLOC:
        reqs = args.get("reqs")
        for r in reqs if isinstance(reqs, list) else ():
            cookie = walk.cookies.get(r) if isinstance(r, str) else None
            if cookie is not None:
                walk.submitted.append((call.line, call.th, cookie))
    elif call.op == Op.VNPU:
        command = args.get("command")
        if isinstance(command, str) and command.startswith(_PREEMPTING):
            walk.commands.append((call.line, command))
    if call.op in _LETTING_GO:
        walk.letting_go.append((call.line, _api(call.op) or call.op))


def _ret(walk: _Walk, call: Call, ret: Ret, out: _Collector) -> None:
    api = _api(ret.op)
    if api is not None:
        where = f"{api}() at {walk.scenario} step {ret.step}"
        if call.in_cb is not None:
            where += f" in {_KIND_NAMES.get(call.in_cb, call.in_cb)}"
        where += _nth(walk.calls, (ret.step, ret.op, call.in_cb))
        if ret.errno is not None:
            out.add(Aspect.ERRNO, where, ret.errno, walk.scenario, (call.line, ret.line))
            _refused(walk, ret.line, Aspect.ERRNO, where, out)
        if ret.op == Op.IS_SUPPORTED:
            _support(walk, call, ret, out)
    elif ret.op in (Op.FD_CHECK, Op.AWAIT_CLOSED):
        file = call.args.get("file")
        shown = walk.name(file if isinstance(file, str) else None)
        question = f"{ret.op} of {shown} at {walk.scenario} step {ret.step}"
        question += _nth(walk.calls, (ret.step, ret.op))
        closed = ret.extra.get("closed") is True
        waited = ret.extra.get("waited_ms")
        if not closed:
            state = "still open"
        elif ret.op == Op.AWAIT_CLOSED and isinstance(waited, int) and waited > 0:
            state = "closed only after waiting"
        else:
            state = "closed"
        position = ret.extra.get("position")
        value = f"{state}, position {position}" if isinstance(position, int) else state
        out.add(Aspect.DESCRIPTOR, question, value, walk.scenario, (call.line, ret.line))
        if isinstance(waited, int):
            out.details[(Aspect.DESCRIPTOR, question)] = f"waited {waited} ms"
    elif ret.op == Op.VNPU:
        for index, (line, command) in enumerate(walk.commands):
            if line == call.line:
                walk.commands[index] = (line, f"{command}: {'refused, ' + str(ret.errno) if ret.ret == -1 else 'done'}")


def _support(walk: _Walk, call: Call, ret: Ret, out: _Collector) -> None:
    reqs = call.args.get("reqs")
    results = ret.extra.get("results")
    for index, req in enumerate(reqs if isinstance(reqs, list) else ()):
        attrs = walk.attrs.get(req, {}) if isinstance(req, str) else {}
        shown = ", ".join(f"{k} {attrs.get(k, 'unset')}" for k in ("device", "type", "size"))
        question = f"isSupported({shown})"
        if ret.ret == 0 and isinstance(results, list) and index < len(results):
            value = "true" if results[index] is True else "false"
        else:
            value = f"the call failed ({ret.errno})"
        out.add(Aspect.SUPPORT, question, value, walk.scenario, (call.line, ret.line))


def _callback(walk: _Walk, cb: Cb, out: _Collector) -> None:
    kind = _KIND_NAMES.get(cb.kind, cb.kind)
    cookie = walk.name(cb.cookie)
    nth = _nth(walk.cbs, (cb.kind, cb.cookie))
    if cb.kind == "preempt":
        label = "onPreempt"
    else:
        label = f"{kind} with an error" if cb.error is not None else f"{kind}, success"
    walk.threaded.append((label, cb.thread, cb.th, cb.line))
    if cb.error is not None:
        question = f"{kind} for {cookie} in {walk.scenario}{nth}"
        out.add(Aspect.CALLBACK_ERROR, question, cb.error, walk.scenario, (cb.line,))
        _refused(walk, cb.line, Aspect.CALLBACK_ERROR, question, out)
    if cb.kind == "alloc" and cb.cookie is not None:
        walk.delivered.append((cb.line, cb.cookie))
    if cb.kind == "preempt" or cb.error == "ECANCELED":
        victim = f"onPreempt({cookie})" if cb.kind == "preempt" else f"{kind}(ECANCELED, {cookie})"
        walk.victims.append((cb.line, victim))


def _deleter(walk: _Walk, deleter: Deleter, out: _Collector) -> None:
    """At which call a deleter ran: the one it ran inside; on another thread, the latest call that lets a
    cookie go before it, or, when it is the first thing its thread did after a callback's last act (a cookie
    released while that callback still ran is let go as it returns), every such call made since that act."""
    cookie = walk.name(deleter.cookie)
    question = f"deleter of {cookie} in {walk.scenario}" + _nth(walk.deleters, (deleter.cookie,))
    walk.threaded.append(("cookie deleter", deleter.thread, deleter.th, deleter.line))
    enclosing = walk.open_calls.get(deleter.strand)
    thread = "on a device thread" if deleter.th.startswith("w") else "on an app thread outside any API call"
    if deleter.thread == "caller" and enclosing is not None:
        calls, how = [_api(enclosing.op) or enclosing.op], "inside the call"
    elif len(since := [f for line, f in walk.letting_go if line > walk.returned.get(deleter.th, deleter.line)]) > 1:
        calls, how = list(dict.fromkeys(since)), f"{thread}, as a callback returned"
    else:
        calls, how = [f for _, f in walk.letting_go[-1:]], thread
    value = f"at {' or '.join(calls)}" if calls else "before any call let it go"
    out.add(Aspect.DELETER, question, value, walk.scenario, (deleter.line,))
    out.details[(Aspect.DELETER, question)] = how


def _preemption(walk: _Walk, out: _Collector) -> None:
    """A scenario that commands preemption: its preemption callbacks in order (the vnpu commands and their
    answers are the entry's detail: they are the kit's control, not the API)."""
    if not walk.commands:
        return
    question = f"preemption in {walk.scenario}"
    value = ", ".join(victim for _, victim in walk.victims) or "no callback"
    lines = sorted([line for line, _ in walk.commands] + [line for line, _ in walk.victims])
    out.add(Aspect.PREEMPTION, question, value, walk.scenario, lines)
    out.details[(Aspect.PREEMPTION, question)] = "; ".join(command for _, command in walk.commands)


def _order(walk: _Walk, out: _Collector) -> None:
    """In-order or not, within one allocAsync and between allocAsync calls pending together (see the module
    docstring); a scenario answers each question at most once."""
    once = {c for c, n in Counter(c for _, _, c in walk.submitted).items() if n == 1}
    once &= {c for c, n in Counter(c for _, c in walk.delivered).items() if n == 1}
    position = {cookie: (line, index, th) for index, (line, th, cookie) in enumerate(walk.submitted) if cookie in once}
    arrived = [(line, position[cookie]) for line, cookie in walk.delivered if cookie in once]
    verdicts: dict[str, tuple[bool, list[int]]] = {}
    for i, (first_line, first) in enumerate(arrived):
        for second_line, second in arrived[i + 1:]:
            if first[0] == second[0]:
                question = "within one allocAsync"
            elif first[2] == second[2] and max(first[0], second[0]) < first_line:
                question = "between allocAsync calls pending together"
            else:
                continue  # calls of two threads, or the later call came after the first callback: no order
            ok, lines = verdicts.get(question, (True, []))
            verdicts[question] = (ok and first[1] < second[1], [*lines, first[0], second[0], first_line, second_line])
    for question, (ok, lines) in verdicts.items():
        value = "in request order" if ok else "not in request order"
        out.add(Aspect.ORDER, f"onAlloc order {question}", value, walk.scenario, lines)


def _latencies(records: Sequence[ResultRecord], out: _Collector) -> None:
    for op, kind, question in ((Op.ALLOC, "alloc", "onAlloc after allocAsync"),
                               (Op.BUF_LOAD, "load", "onLoad after loadAsync")):
        values: list[int] = []
        sources: dict[str, list[int]] = {}
        for record in records:
            for latency in callback_latencies(record, op, kind):
                values.append(latency.ns)
                sources.setdefault(record.scenario, []).extend((latency.call_line, latency.cb_line))
        if not values:
            continue
        median = statistics.median(values)
        key = (Aspect.LATENCY, question)
        for scenario, lines in sources.items():
            out.add(Aspect.LATENCY, question, f"median {_decade(median)}", scenario, lines)
        out.counts[(Aspect.LATENCY, question, f"median {_decade(median)}")] = len(values)
        out.details[key] = (f"median {format_ns(median)}, p95 {format_ns(percentile(values, 0.95))}, "
                            f"max {format_ns(max(values))} over {len(values)} callbacks")


def _readings(records: Sequence[ResultRecord], out: _Collector) -> None:
    for record in records:
        if record.verdict is not Verdict.WARN:
            continue
        for reading in readings_of_reason(record.reason):
            out.add(Aspect.READING, reading, "needed", record.scenario, ())
            out.details[(Aspect.READING, reading)] = READINGS.get(reading, "")


def device_atlas(run: RunResults, serial: str) -> DeviceAtlas:
    """The atlas of one device of a run (see the module docstring)."""
    out = _Collector()
    records = [r for r in run.for_device(serial) if r.recorded and r.trace]
    discovery = run.devices.get(serial, {}).get("discovery_trace")
    if isinstance(discovery, list) and all(isinstance(line, str) for line in discovery):
        _walk_trace(discovery, DISCOVERY, None, out)
    for record in records:
        _walk_trace(record.trace, record.scenario, record, out)
    _latencies(records, out)
    _readings(run.for_device(serial), out)
    return DeviceAtlas(serial, out.entries())


def run_atlas(run: RunResults) -> Atlas:
    """The run's devices side by side."""
    return side_by_side([(serial, device_atlas(run, serial)) for serial in run.device_serials])
