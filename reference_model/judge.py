"""The judge: replay a trace through the model and say PASS / FAIL / CRASH / TIMEOUT / ERROR.

Algorithm (docs/model.md §Judge): carry a set of candidate model states through the events as they are
parsed; any malformed line, wherever it is, makes the trace an ERROR with its line number (after the
replay stops, the rest of the trace is still parsed). A transition returns the
successor states (several where the spec leaves a choice: which submission a callback answers, which
buffer was preempted, ...) or a rejection. Candidates are deduplicated; more than ``AMBIGUITY_BOUND``
is an ERROR, never a silent PASS. The first event no candidate accepts is the divergence. With one
candidate — the usual case — a step costs one transition and no deduplication.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from . import allocation, cookies, crashes, free, loading, mapping, preemption, priority, requests, support, threads
from ._context import Ctx, Out, arg_list, arg_slot
from .caps import DeviceCaps
from .errors import ModelCrash, Unjudgeable
from .policies import declared as declared_policy
from .profiles import get_profile
from .readings import READINGS
from .rules import Reject
from .scenario import Scenario
from .state import INITIAL, Inflight, State, done, evolve_state, live_bytes
from .trace import (
    TRACE_V1,
    ApiMissing,
    Begin,
    Call,
    Cb,
    CbReturn,
    Deleter,
    End,
    Event,
    Exit,
    Ret,
    Settle,
    TraceError,
    first_error,
    read_events,
)
from .verdicts import Verdict
from .vocabulary import OPS, ArgKind, Op

AMBIGUITY_BOUND: Final = 256
PUBLISHED: Final = "published-37"
AOSP: Final = "aosp-2026"


@dataclass(frozen=True, slots=True)
class Divergence:
    step: int | None
    event: int
    observed: str
    allowed: tuple[str, ...]
    clause: str
    quote: str
    message: str


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str
    divergence: Divergence | None
    discrepancy: str | None


CallHandler = Callable[[Ctx, State, Call], Out]
RetHandler = Callable[[Ctx, State, Call, Ret], Out]

CALL_HANDLERS: Final[dict[str, CallHandler]] = {
    "req_free": requests.call_free,
    "req_free_null": requests.free_null,
    "req_set_cookie": cookies.call_set_cookie,
    "req_set_onalloc": crashes.setonalloc_null_crashes,
    "req_set_onalloc_null_req": crashes.null_request_crashes,
    "alloc": allocation.call_alloc,
    "buf_free": free.call_free,
    "buf_unmap": mapping.call_unmap,
    "map_read": mapping.call_access,
    "map_write": mapping.call_access,
    "buf_map": mapping.call_access,
    "buf_load": loading.call_load,
    "await_closed": loading.call_await_closed,
    "vnpu": preemption.call_vnpu,
}


def _ret_bind(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    handle = ret.extra.get("handle")
    if ret.skipped is not None or not 0 <= call.step < len(ctx.steps):
        return [done(s)]
    name = dict(ctx.steps[call.step].args).get("buf")
    slot = ctx.names.get(name, "") if isinstance(name, str) else ""
    slots = dict(s.slots)
    if isinstance(handle, str):
        slots[slot] = handle
    else:
        slots.pop(slot, None)
    return [evolve_state(s, slots=slots, inflight=None)]


RET_HANDLERS: Final[dict[str, RetHandler]] = {
    "req_create": requests.ret_create,
    **{op: requests.ret_setter for op in ("req_set_device", "req_set_type", "req_set_size", "req_set_priority",
                                          "req_set_prot", "req_set_onpreempt", "req_set_onalloc", "req_set_file")},
    "req_set_cookie": cookies.ret_set_cookie,
    "is_supported": support.ret_is_supported,
    "alloc": allocation.ret_alloc,
    "buf_free": free.ret_free,
    "buf_map": mapping.ret_map,
    "buf_unmap": mapping.ret_unmap,
    "buf_set_priority": priority.ret_set_priority,
    "buf_load": loading.ret_load,
    "map_write": mapping.ret_map_write,
    "map_read": mapping.ret_map_read,
    "file_new": loading.ret_file_new,
    "file_seek": loading.ret_file_seek,
    "fd_check": loading.ret_fd_check,
    "await_closed": loading.ret_fd_check,
    "sleep_ms": loading.ret_sleep,
    "bind": _ret_bind,
    "vnpu": preemption.ret_vnpu,
}

CB_HANDLERS: Final[dict[str, Callable[[Ctx, State, Cb], Out]]] = {
    "alloc": allocation.on_alloc,
    "load": loading.on_load,
    "preempt": preemption.on_preempt,
}

SETTLE_HANDLERS: Final[dict[str, Callable[[Ctx, State], Out]]] = {
    "alloc": allocation.settle_alloc,
    "load": loading.settle_load,
    "preempt": preemption.settle_preempt,
    "deleters": preemption.settle_deleters,
}


def _step_call(ctx: Ctx, s: State, ev: Call, call: Call | None) -> Out:
    handler = CALL_HANDLERS.get(ev.op)
    if handler is None:
        return [s]  # nothing happens before the ret of this op: no call state to keep
    return handler(ctx, s, ev)


def _step_ret(ctx: Ctx, s: State, ev: Ret, call: Call | None) -> Out:
    inflight = s.inflight
    if call is None:
        raise ModelCrash(f"line {ev.line}: ret of step {ev.step} with no call in flight")
    if inflight is not None and inflight.crash is not None:
        if ev.skipped is not None:
            return [done(s)]
        return crashes.returned_from_crash(inflight)
    if ev.skipped is not None:
        if inflight is not None and inflight.applied:
            raise Unjudgeable(ev.line, f"the probe skipped step {ev.step} ({ev.op}): {ev.skipped}")
        return [done(s)]
    ret_handler = RET_HANDLERS.get(ev.op)
    if ret_handler is None:
        return [done(s)]
    return ret_handler(ctx, s, call, ev)


def _step_cb(ctx: Ctx, s: State, ev: Cb, call: Call | None) -> Out:
    return CB_HANDLERS[ev.kind](ctx, s, ev)


def _step_cb_return(ctx: Ctx, s: State, ev: CbReturn, call: Call | None) -> Out:
    return cookies.on_cb_return(ctx, s, ev)


def _step_deleter(ctx: Ctx, s: State, ev: Deleter, call: Call | None) -> Out:
    return cookies.on_deleter(ctx, s, ev)


def _step_settle(ctx: Ctx, s: State, ev: Settle, call: Call | None) -> Out:
    return SETTLE_HANDLERS[ev.what](ctx, s)


def _step_end(ctx: Ctx, s: State, ev: End, call: Call | None) -> Out:
    return preemption.on_end(ctx, s, ev)


def _step_unexpected(ctx: Ctx, s: State, ev: Event, call: Call | None) -> Out:
    raise ModelCrash(f"line {ev.line}: unexpected {type(ev).__name__} event in the body of a trace")


# One transition per event type (the body of a trace holds only these; anything else is a model bug).
STEPPERS: Final[dict[type, Callable[[Ctx, State, Any, Call | None], Out]]] = {
    Call: _step_call,
    Ret: _step_ret,
    Cb: _step_cb,
    CbReturn: _step_cb_return,
    Deleter: _step_deleter,
    Settle: _step_settle,
    End: _step_end,
}


def step(ctx: Ctx, s: State, ev: Event, call: Call | None) -> Out:
    """One transition of the model: the successor states, or the rejection."""
    return STEPPERS.get(type(ev), _step_unexpected)(ctx, s, ev, call)


_STAY: Final = ""  # the lane of an event judged on the candidates' current lane

# Call-time effects that may be placed anywhere between call and ret (threads.py). The crash
# handlers only mark an expected death of the calling thread: they stay at the call.
# map_read / map_write / buf_map only mark the access in flight (an onLoad observed meanwhile is recorded
# on it).
DEFERRABLE: Final = frozenset(CALL_HANDLERS) - {"req_set_onalloc", "req_free_null", "req_set_onalloc_null_req",
                                                "map_read", "map_write", "buf_map"}
_OBSERVERS: Final = (Cb, Deleter, Settle, End)


def _defers(s: State, call: Call) -> bool:
    """Whether the call's call-time effects stay pending (a call on a lane other than main)."""
    if call.lane == threads.MAIN or call.op not in DEFERRABLE:
        return False
    if call.op == "alloc":
        return crashes.alloc_without_onalloc_crashes(s, call) is None
    if call.op == "buf_load":
        return crashes.load_without_onload_crashes(call) is None
    return True


def _apply(ctx: Ctx, s: State, call: Call) -> Out:
    """The call-time effects of ``call`` on ``s`` (whose lane is the call's, nothing in flight there)."""
    return CALL_HANDLERS[call.op](ctx, evolve_state(s, inflight=None), call)


def _lane_step(ctx: Ctx, s: State, ev: Event, call: Call | None) -> Out:
    """``step`` on the event's lane, with the call-time effects of a call on another lane kept pending,
    and applied at its ret."""
    if isinstance(ev, Call) and _defers(s, ev):
        return [evolve_state(s, inflight=threads.deferred(ev.step, ev.op))]
    if isinstance(ev, Ret) and s.inflight is not None and s.inflight.pending:
        if ev.skipped is not None or call is None:
            return [done(s)]
        applied = _apply(ctx, s, call)
        if isinstance(applied, Reject):
            return applied
        return _each(ctx, applied, ev, call, step)
    return step(ctx, s, ev, call)


def _each(ctx: Ctx, states: list[State], ev: Event, call: Call | None,
          fn: Callable[[Ctx, State, Event, Call | None], Out], last_reject: bool = False) -> Out:
    """``fn`` on every state; the successors of all, or a rejection when none survives (the first, or
    with ``last_reject`` the last: the placement with the most effects applied explains best). An
    Unjudgeable in one branch only kills that branch."""
    if len(states) == 1:
        return fn(ctx, states[0], ev, call)
    out: list[State] = []
    first: Reject | None = None
    unjudgeable: Unjudgeable | None = None
    for st in states:
        try:
            res = fn(ctx, st, ev, call)
        except Unjudgeable as exc:
            unjudgeable = unjudgeable or exc
            continue
        if isinstance(res, Reject):
            first = res if last_reject else first or res
        else:
            out.extend(res)
    if out:
        return out
    if first is not None:
        return first
    assert unjudgeable is not None
    raise unjudgeable


def _observes(s: State, ev: Event) -> bool:
    """Whether the event's transition reads state another lane's pending effect may change. Events that
    do not commute with every pending effect; placing the effect before the others changes nothing."""
    if isinstance(ev, Call):
        return ev.op in CALL_HANDLERS and not _defers(s, ev)
    if isinstance(ev, Ret):
        return ev.op in RET_HANDLERS or (s.inflight is not None and s.inflight.pending)
    return isinstance(ev, _OBSERVERS)


Footprint = frozenset[str] | None  # None: the whole state
CAP_READ: Final = "cap?"  # reads the live bytes (the capacity prediction)
CAP_WRITE: Final = "cap!"  # changes them
_CAP_EFFECT: Final = {"alloc": CAP_READ, "buf_free": CAP_WRITE, "buf_unmap": CAP_WRITE}
_SUPPORT_EFFECT: Final = {"alloc": "support?", "is_supported": "support!"}


def _meets(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two footprints conflict: a shared name, unless both only read it (``x?`` reads x, ``x!``
    changes it, a plain name does both)."""
    for name in a:
        if name.endswith("?"):
            if name[:-1] + "!" in b:
                return True
        elif name in b or (name.endswith("!") and name[:-1] + "?" in b):
            return True
    return False


def _capacity_matters(ctx: Ctx, s: State, calls: Mapping[str, Call]) -> bool:
    """Whether the live bytes can decide an allocation: even if every pending submission and every
    pending allocAsync became a buffer, could an answer be ENOMEM? If not, their order is moot."""
    if ctx.capacity is None or s.relaxed_capacity:
        return False
    worst = live_bytes(s) + sum(max(sub.attrs.size, 0) for sub in s.subs.values())
    for lane in threads.pending_lanes(s):
        call = calls.get(lane)
        if call is not None and call.op == "alloc":
            for slot in arg_list(call, "reqs"):
                req = s.reqs.get(slot) if slot is not None else None
                worst += max(req.attrs.size, 0) if req is not None else 0
    return worst > ctx.capacity


def _call_footprint(ctx: Ctx, s: State, call: Call, cap: bool) -> Footprint:
    """What a call reads or changes: its slots and handles, the cookies they hold, the files, and the
    live bytes when they are predicted (``cap``). A vnpu command may touch every buffer."""
    if call.op == "vnpu":
        return None
    names: set[str] = set()
    for key, value in call.args.items():
        for v in value if isinstance(value, list) else [value]:
            if key == "cookie":
                names.add(f"c:{v}")
            elif key in ("fd", "file"):
                names.add("file")
            elif isinstance(v, str):
                names.add(v)
                names |= _holds(s, v, call.op)
    if cap and call.op in _CAP_EFFECT:
        names.add(_CAP_EFFECT[call.op])
    if call.op in _SUPPORT_EFFECT:
        names.add(_SUPPORT_EFFECT[call.op])  # isSupported's false answers decide later submissions
    return frozenset(names)


def _holds(s: State, name: str, op: str) -> set[str]:
    """The cookie (and mapped buffer, and whether a file is involved) a slot or handle leads to. A
    request's cookie matters to a submission (callbacks are attributed by cookie), otherwise only when
    it was handed over with a deleter."""
    req = s.reqs.get(name)
    if req is not None:
        names = {"file"} if req.attrs.file is not None else set()
        if op == "alloc" or req.cookie.token is not None:
            names.add(f"c:{req.cookie.value}")
        return names
    m = s.maps.get(name)
    if m is not None:
        b = s.bufs.get(m.buf)
        return {m.buf} | ({f"c:{b.cookie.value}"} if b is not None else set())
    b = s.bufs.get(name)
    if b is not None:
        return {f"c:{b.cookie.value}"}
    return set()


def _event_footprint(ctx: Ctx, s: State, ev: Event, calls: Mapping[str, Call], cap: bool) -> Footprint:
    if isinstance(ev, Cb):
        names = {f"c:{ev.cookie}"} | ({ev.buf} if ev.buf is not None else set())
        if ev.kind == "alloc":
            names |= {CAP_READ, CAP_WRITE} if cap else set()
            names |= {"file"} if any(sub.attrs.file is not None for sub in s.subs.values()) else set()
        return frozenset(names)
    if isinstance(ev, Deleter):
        return frozenset({f"c:{ev.cookie}"})
    if isinstance(ev, Call):
        return _call_footprint(ctx, s, ev, cap)
    if isinstance(ev, Ret):
        call = calls.get(ev.lane)
        return _call_footprint(ctx, s, call, cap) if call is not None else None
    return None


def _relevant(ctx: Ctx, s: State, ev: Event, lane: str, calls: Mapping[str, Call]) -> list[str]:
    """The pending lanes whose effects may be placed before ``ev``: those whose footprint meets the
    event's, transitively. The others commute with it and stay pending."""
    own = not isinstance(ev, (Call, Ret))
    lanes = [other for other in threads.pending_lanes(s) if own or other != lane]
    if not lanes:
        return lanes
    cap = _capacity_matters(ctx, s, calls)
    reach = _event_footprint(ctx, s, ev, calls, cap)
    if reach is None:
        return lanes
    prints = {other: _call_footprint(ctx, threads.switch(s, other), calls[other], cap) for other in lanes}
    chosen: list[str] = []
    grew = True
    while grew:
        grew = False
        for other in lanes:
            fp = prints[other]
            if other not in chosen and (fp is None or _meets(fp, reach)):
                chosen.append(other)
                if fp is None:
                    return lanes
                reach = reach | fp
                grew = True
    return chosen


def _placements(ctx: Ctx, s: State, ev: Event, lane: str, calls: Mapping[str, Call]) -> list[State]:
    """``s`` and every state reached from it by applying pending call-time effects of other lanes (and of
    the event's own lane, for a callback or deleter that may run inside that call), in any order —
    those that can matter to the event (``_relevant``)."""
    relevant = _relevant(ctx, s, ev, lane, calls)
    if not relevant:
        return [s]
    seen: dict[tuple[object, ...], State] = {s.key(): s}
    frontier = [s]
    while frontier:
        grown: list[State] = []
        for v in frontier:
            for other in threads.pending_lanes(v):
                if other not in relevant:
                    continue
                try:
                    res = _apply(ctx, threads.switch(v, other), calls[other])
                except Unjudgeable:
                    continue  # this placement makes the scenario undefined: it did not happen
                if isinstance(res, Reject):
                    continue
                for w in res:
                    w = threads.switch(w, lane)
                    k = w.key()
                    if k not in seen:
                        seen[k] = w
                        grown.append(w)
        frontier = grown
        if len(seen) > AMBIGUITY_BOUND:
            break  # the caller reports the bound
    return list(seen.values())


def _transition(ctx: Ctx, cand: State, ev: Event, lane: str, calls: Mapping[str, Call]) -> Out:
    """One candidate through one event on ``lane``: ``step`` when nothing is pending (one thread), else
    one branch per placement of the pending effects (threads.py)."""
    if lane is _STAY:
        lane = cand.lane
    s = cand if cand.lane == lane else threads.switch(cand, lane)
    call = calls.get(lane)
    if not s.parked and (s.inflight is None or not s.inflight.pending):
        return _lane_step(ctx, s, ev, call)
    if not threads.has_pending(s) or not _observes(s, ev):
        return _lane_step(ctx, s, ev, call)
    return _each(ctx, _placements(ctx, s, ev, lane, calls), ev, call, _lane_step, last_reject=True)


# Per op, the arguments that name handles: (position, slot prefix, shape). Shapes: one name, a tuple of
# names, a descriptor selector (a file name or "fd:N"), a bind selector (pairs, cookies name handles).
_ONE: Final = "one"
_MANY: Final = "many"
_FDSEL: Final = "fdsel"
_BINDSEL: Final = "bindsel"
_SHAPES: Final = {ArgKind.REQ: ("r", _ONE), ArgKind.BUF: ("b", _ONE), ArgKind.MAP: ("m", _ONE),
                  ArgKind.FILE: ("f", _ONE), ArgKind.REQS: ("r", _MANY), ArgKind.BUFS: ("b", _MANY),
                  ArgKind.COOKIE: ("c", _ONE), ArgKind.FDSEL: ("f", _FDSEL), ArgKind.BINDSEL: ("c", _BINDSEL)}
_HANDLE_ARGS: dict[object, tuple[tuple[int, str, str], ...]] = {}


def slot_names(scenario: Scenario) -> dict[str, str]:
    """Scenario handle name -> probe slot, assigned like the program compiler does (first use, per kind)."""
    names: dict[str, str] = {}
    counters: dict[str, int] = {}

    def take(name: object, prefix: str) -> None:
        if isinstance(name, str) and name not in names:
            names[name] = f"{prefix}{counters.get(prefix, 0)}"
            counters[prefix] = counters.get(prefix, 0) + 1

    for st in scenario.steps:
        plan = _HANDLE_ARGS.get(st.op)
        if plan is None:
            plan = _HANDLE_ARGS[st.op] = tuple((i, *_SHAPES[a.kind]) for i, a in enumerate(OPS[st.op].args)
                                               if a.kind in _SHAPES)
        for i, prefix, shape in plan:
            value = st.args[i][1]
            if shape == _ONE:
                if isinstance(value, str) and value not in names:  # most names are already assigned
                    take(value, prefix)
            elif shape == _MANY and isinstance(value, tuple):
                for v in value:
                    take(v, prefix)
            elif shape == _FDSEL and isinstance(value, str):
                take(value, prefix)
            elif shape == _BINDSEL and isinstance(value, tuple):
                for how, what in value:
                    if how == "cookie":
                        take(what, prefix)
    return names


def make_ctx(scenario: Scenario, caps: DeviceCaps, profile: str, *, returns: bool = False) -> Ctx:
    capacity = caps.capacity_bytes if caps.policy in (None, "budget") else None
    return Ctx(
        profile=get_profile(profile),
        caps=caps,
        names=slot_names(scenario),
        steps=scenario.steps,
        spontaneous=caps.capacity_bytes is None,
        capacity=capacity,
        policy=declared_policy(caps.policy, caps.capacity_bytes),
        returns=returns,
    )


@dataclass(frozen=True, slots=True)
class _Result:
    verdict: Verdict
    reason: str
    reject: Reject | None = None
    line: int = 0
    step: int | None = None
    dids: frozenset[str] = frozenset()


def _fail(reject: Reject, line: int, step_index: int | None) -> _Result:
    return _Result(Verdict.FAIL, f"{reject.clause}: observed {reject.observed}", reject, line, step_index)


def _replay(scenario: Scenario, stream: Iterator[Event | TraceError], caps: DeviceCaps, profile: str) -> _Result:
    """Replay the events as the stream yields them. A malformed line found later still makes the trace
    ERROR: the caller reads the rest of the stream (``_safe_replay``)."""
    first = next(stream)
    if isinstance(first, TraceError):
        return _Result(Verdict.ERROR, str(first))
    if isinstance(first, ApiMissing):
        return _Result(Verdict.ERROR, "the implementation lacks public functions: " + ", ".join(first.symbols))
    if not isinstance(first, Begin):  # an exit before begin: the stream ends with its TraceError
        error = first_error(stream)
        assert error is not None
        return _Result(Verdict.ERROR, str(error))
    if first.scenario != scenario.id:
        return _Result(Verdict.ERROR, f"trace line {first.line}: the trace is of scenario {first.scenario!r}, "
                                      f"not {scenario.id!r}")
    ctx = make_ctx(scenario, caps, profile, returns=first.version > TRACE_V1)
    steps = scenario.steps
    nsteps = len(steps)
    steppers = STEPPERS
    call_handlers = CALL_HANDLERS
    main = threads.MAIN
    candidates: list[State] = [INITIAL]
    calls: dict[str, Call] = {}  # the call in flight, by lane
    last_call: Call | None = None
    step_index: int | None = None
    complete = False
    # Per thread, the callbacks that wrote their cb_return (by the line of their cb): the thread's next
    # event shows that they have returned (cookies.returned).
    returning: dict[str, frozenset[int]] = {}
    for ev in stream:
        kind = type(ev)
        lane = main
        if returning and kind in _THREADED and cast(_Threaded, ev).th in returning:
            lines = returning.pop(cast(_Threaded, ev).th)
            candidates = [cookies.returned(c, lines, ev.line) for c in candidates]
        if kind is CbReturn:
            assert isinstance(ev, CbReturn)
            returning[ev.th] = returning.get(ev.th, frozenset()) | {ev.opened}
            lane = _STAY
        elif kind is Call:
            assert isinstance(ev, Call)
            if not ev.teardown:
                # StrEnum ops compare equal to their names.
                st = steps[ev.step] if 0 <= ev.step < nsteps else None
                if st is None or st.op != ev.op or st.thread is not None or ev.th != main or ev.in_cb is not None:
                    bad = _envelope(scenario, nsteps, ev)
                    if bad is not None:
                        return _Result(Verdict.ERROR, f"trace line {ev.line}: {bad}")
                    if ev.in_cb is not None and ev.op in ("buf_map", "buf_unmap") and ev.args.get("map") is None:
                        ev = ev._replace(args={**ev.args, "map": f"~{ev.lane}"})  # a callback's mapping: no slot
            lane = ev.lane
            calls[lane] = last_call = ev
            step_index = ev.step
            if ev.op not in call_handlers:
                continue  # no call-time effect: every candidate stays as it is
        elif kind is Ret:
            assert isinstance(ev, Ret)
            lane = ev.lane
        elif kind is Cb or kind is Deleter:
            assert isinstance(ev, (Cb, Deleter))
            # A callback on another thread than the caller's sees no call in flight: judged where the
            # candidates are. One running inside a call is judged on that call's lane.
            lane = ev.lane if ev.thread == "caller" else _STAY
        elif kind is Exit:
            assert isinstance(ev, Exit)
            open_call = last_call if last_call is not None and last_call.lane in calls else next(
                iter(calls.values()), None)
            return _ending(scenario, ev, complete, candidates, open_call, ctx, calls)
        elif kind is TraceError:
            return _Result(Verdict.ERROR, str(ev))
        elif kind is End:
            complete = True
        stepper = steppers.get(kind, _step_unexpected)
        try:
            if len(candidates) == 1:
                cand = candidates[0]
                if (lane == main or lane is _STAY) and cand.lane == main and not cand.parked and (
                        cand.inflight is None or not cand.inflight.pending):
                    out = stepper(ctx, cand, ev, calls.get(main))  # one thread: the plain model
                else:
                    out = _transition(ctx, cand, cast(Event, ev), lane, calls)
                if isinstance(out, Reject):
                    return _fail(out, ev.line, step_index)
                candidates = out if len(out) == 1 else _dedupe(out)
            else:
                successors: list[State] = []
                first_reject: Reject | None = None
                unjudgeable: Unjudgeable | None = None
                for cand in candidates:
                    try:
                        res = _transition(ctx, cand, cast(Event, ev), lane, calls)
                    except Unjudgeable as exc:
                        unjudgeable = unjudgeable or exc  # only this candidate's history is undefined
                        continue
                    if isinstance(res, Reject):
                        first_reject = first_reject or res
                    else:
                        successors.extend(res)
                if not successors:
                    if first_reject is None and unjudgeable is not None:
                        raise unjudgeable
                    assert first_reject is not None
                    return _fail(first_reject, ev.line, step_index)
                candidates = _dedupe(successors)
        except Unjudgeable as exc:
            return _Result(Verdict.ERROR, f"trace line {exc.line}: {exc.message}")
        except ModelCrash as exc:
            return _Result(Verdict.ERROR, f"reference model bug at trace line {ev.line}: {exc} (please file a bug)")
        if len(candidates) > AMBIGUITY_BOUND:
            return _Result(Verdict.ERROR, f"trace line {ev.line}: ambiguity bound exceeded ({len(candidates)} "
                                          f"candidate states > {AMBIGUITY_BOUND})")
        if kind is Ret:
            calls.pop(lane, None)
    raise AssertionError("the event stream ended without exit or error")


_Threaded = Call | Ret | Cb | CbReturn | Deleter
_THREADED: Final = frozenset({Call, Ret, Cb, CbReturn, Deleter})


def _envelope(scenario: Scenario, nsteps: int, ev: Call) -> str | None:
    """Why a call cannot belong to the scenario (ERROR), or None. Teardown calls continue the numbering;
    a callback's calls carry the step of the cb_action that armed them."""
    if ev.teardown:
        return None
    st = scenario.steps[ev.step] if 0 <= ev.step < nsteps else None
    if ev.in_cb is not None:
        if st is None or st.op is not Op.CB_ACTION:
            return f"step {ev.step} ({ev.op}) is made by a callback, but step {ev.step} is not a cb_action"
        return None
    if st is None or st.op.value != ev.op:
        expected = st.op.value if st is not None else "no such step"
        return f"step {ev.step} is {ev.op} in the trace but {expected} in scenario {scenario.id}"
    th = threads.MAIN if st.thread is None else f"t{st.thread}"
    if ev.th != th:
        return f"step {ev.step} ({ev.op}) runs on thread {ev.th} in the trace but on {th} in scenario {scenario.id}"
    return None


def _ending(scenario: Scenario, last: Exit, complete: bool, candidates: list[State], call: Call | None,
            ctx: Ctx | None = None, calls: Mapping[str, Call] | None = None) -> _Result:
    if last.status == "timeout":
        return _Result(Verdict.TIMEOUT, f"scenario {scenario.id} exceeded its time budget")
    died = last.status == "signal" or (last.status == "code" and last.code not in (0, None))
    if died:
        how = last.signal if last.status == "signal" and last.signal else f"exit code {last.code}"
        for cand in candidates:
            for inflight in _in_flight(cand, ctx, calls or {}):
                if inflight.crash is None:
                    continue
                dids = frozenset({inflight.crash_did}) if inflight.crash_did else frozenset()
                return _Result(Verdict.PASS, f"expected death in {inflight.op} at step {inflight.step} ({how}): "
                                             f"{inflight.crash}", dids=dids | cand.dids)
        where = f"during step {call.step} ({call.op})" if call is not None else "outside any call"
        return _Result(Verdict.CRASH, f"the probe died {where}: {how}")
    if not complete:
        return _Result(Verdict.ERROR, f"trace line {last.line}: the probe exited normally without an end event")
    return _passed(candidates)


def _passed(candidates: list[State]) -> _Result:
    """PASS, or WARN when every surviving history departs from a reading of silent text (tags ``R<n>``,
    docs/model.md §4): the history with the fewest departures is the one reported."""
    best = min(candidates, key=lambda c: len(readings_of(c.dids)))
    warns = readings_of(best.dids)
    if warns:
        return _Result(Verdict.WARN, "allowed by the text, but departs from the kit's reading(s) "
                                     + ", ".join(f"{w} ({READINGS.get(w, '?')})" for w in warns), dids=best.dids)
    return _Result(Verdict.PASS, "every event is allowed by the model", dids=best.dids)


def readings_of(tags: frozenset[str]) -> list[str]:
    """The reading IDs (``R<n>``) among a history's tags, in order."""
    return sorted((t for t in tags if t.startswith("R")), key=lambda t: (len(t), t))


def discrepancies_of(tags: frozenset[str]) -> list[str]:
    """The AOSP discrepancy IDs (``D<n>``) among a history's tags, in order."""
    return sorted((t for t in tags if t.startswith("D")), key=_did_order)


def _in_flight(s: State, ctx: Ctx | None, calls: Mapping[str, Call]) -> list[Inflight]:
    """The calls in flight on every lane (a pending one as its call-time effects would make it)."""
    if not s.parked and (s.inflight is None or not s.inflight.pending):
        return [s.inflight] if s.inflight is not None else []
    out: list[Inflight] = []
    for lane, inflight in threads.inflights(s):
        if inflight.pending and ctx is not None and lane in calls:
            try:
                res = _apply(ctx, threads.switch(s, lane), calls[lane])
            except Unjudgeable:
                continue
            if not isinstance(res, Reject):
                out += [r.inflight for r in res if r.inflight is not None]
        else:
            out.append(inflight)
    return out


def _dedupe(states: list[State]) -> list[State]:
    if len(states) == 1:
        return states
    seen: dict[tuple[object, ...], State] = {}
    for st in states:
        seen.setdefault(st.key(), st)
    return list(seen.values())


def _did_order(did: str) -> tuple[int, str]:
    digits = did.lstrip("D")
    return (int(digits), did) if digits.isdigit() else (1 << 30, did)


def judge(
    scenario: Scenario,
    trace: Sequence[str],
    caps: DeviceCaps,
    catalogue: Mapping[str, str],
    profile: str = PUBLISHED,
) -> Judgement:
    """Judge one scenario's raw trace (docs/formats.md §7). Never raises on any trace content."""
    result = _safe_replay(scenario, trace, caps, profile)
    discrepancy = None
    if profile == PUBLISHED and result.verdict in (Verdict.FAIL, Verdict.CRASH):
        other = _safe_replay(scenario, trace, caps, AOSP)
        if other.verdict in (Verdict.PASS, Verdict.WARN) and discrepancies_of(other.dids):
            discrepancy = ",".join(discrepancies_of(other.dids))
    elif profile != PUBLISHED and result.verdict in (Verdict.PASS, Verdict.WARN) and discrepancies_of(result.dids):
        discrepancy = ",".join(discrepancies_of(result.dids))
    divergence = None
    reason = result.reason
    if result.reject is not None:
        r = result.reject
        allowed = ", ".join(r.allowed) if r.allowed else "nothing"
        message = f"observed {r.observed}, allowed {allowed}: {r.why}"
        divergence = Divergence(result.step, result.line, r.observed, r.allowed, r.clause,
                                catalogue.get(r.clause, ""), message)
        reason = f"trace line {result.line}: {r.clause}: {message}"
    return Judgement(result.verdict, reason, divergence, discrepancy)


def _safe_replay(scenario: Scenario, trace: Sequence[str], caps: DeviceCaps, profile: str) -> _Result:
    stream = read_events(trace)
    try:
        result = _replay(scenario, stream, caps, profile)
    except RecursionError:
        result = _Result(Verdict.ERROR, "trace nested too deeply")
    except (ModelCrash, KeyError, ValueError, TypeError, AttributeError, AssertionError, IndexError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith("unknown profile"):
            if (error := first_error(stream)) is not None:
                return _Result(Verdict.ERROR, str(error))
            raise
        result = _Result(Verdict.ERROR, f"reference model bug: {type(exc).__name__}: {exc} (please file a bug)")
    # A malformed line anywhere makes the trace ERROR, whatever the replay met before it.
    error = first_error(stream)
    return result if error is None else _Result(Verdict.ERROR, str(error))


__all__ = ["Divergence", "Judgement", "arg_slot", "judge", "slot_names", "step"]
