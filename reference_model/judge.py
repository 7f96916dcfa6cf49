"""The judge: replay a trace through the model and say PASS / FAIL / CRASH / TIMEOUT / ERROR.

Algorithm (docs/model.md §Judge): parse the whole trace first (any malformed line is an ERROR with its
line number), then carry a set of candidate model states through the events. A transition returns the
successor states (several where the spec leaves a choice: which submission a callback answers, which
buffer was preempted, ...) or a rejection. Candidates are deduplicated; more than ``AMBIGUITY_BOUND``
is an ERROR, never a silent PASS. The first event no candidate accepts is the divergence. With one
candidate — the usual case — a step costs one transition and no deduplication.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from . import allocation, cookies, crashes, free, loading, mapping, preemption, priority, requests, support
from ._context import Ctx, Out, arg_slot
from .caps import DeviceCaps
from .errors import ModelCrash, Unjudgeable
from .profiles import get_profile
from .rules import Reject
from .scenario import Scenario
from .state import INITIAL, State, done, evolve
from .trace import ApiMissing, Begin, Call, Cb, Deleter, End, Event, Exit, Ret, Settle, TraceError, parse_trace
from .verdicts import Verdict
from .vocabulary import OPS, ArgKind

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
    "alloc": allocation.call_alloc,
    "buf_free": free.call_free,
    "buf_unmap": mapping.call_unmap,
    "buf_load": loading.call_load,
    "vnpu": preemption.call_vnpu,
}


def _ret_bind(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    handle = ret.extra.get("handle")
    if ret.skipped is not None or not 0 <= call.step < len(ctx.step_args):
        return [done(s)]
    name = ctx.step_args[call.step].get("buf")
    slot = ctx.names.get(name, "") if isinstance(name, str) else ""
    slots = dict(s.slots)
    if isinstance(handle, str):
        slots[slot] = handle
    else:
        slots.pop(slot, None)
    return [evolve(s, slots=slots, inflight=None)]


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
    "deleters": cookies.settle_deleters,
}


def step(ctx: Ctx, s: State, ev: Event, call: Call | None) -> Out:
    """One transition of the model: the successor states, or the rejection."""
    if isinstance(ev, Call):
        handler = CALL_HANDLERS.get(ev.op)
        if handler is None:
            return [s]  # nothing happens before the ret of this op: no call state to keep
        return handler(ctx, s, ev)
    if isinstance(ev, Ret):
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
    if isinstance(ev, Cb):
        return CB_HANDLERS[ev.kind](ctx, s, ev)
    if isinstance(ev, Deleter):
        return cookies.on_deleter(ctx, s, ev)
    if isinstance(ev, Settle):
        return SETTLE_HANDLERS[ev.what](ctx, s)
    if isinstance(ev, End):
        return preemption.on_end(ctx, s, ev)
    raise ModelCrash(f"line {ev.line}: unexpected {type(ev).__name__} event in the body of a trace")


_NAMED_KINDS: Final = frozenset({ArgKind.REQ, ArgKind.BUF, ArgKind.MAP, ArgKind.FILE, ArgKind.REQS, ArgKind.BUFS,
                                 ArgKind.COOKIE, ArgKind.FDSEL, ArgKind.BINDSEL})
_HANDLE_ARGS: dict[object, tuple[tuple[int, ArgKind], ...]] = {}
_PREFIX: Final = {ArgKind.REQ: "r", ArgKind.BUF: "b", ArgKind.MAP: "m", ArgKind.FILE: "f",
                  ArgKind.REQS: "r", ArgKind.BUFS: "b"}


def slot_names(scenario: Scenario) -> dict[str, str]:
    """Scenario handle name -> probe slot, assigned like the program compiler does (first use, per kind)."""
    names: dict[str, str] = {}
    counters: dict[str, int] = {}

    def take(name: object, prefix: str) -> None:
        if isinstance(name, str) and name not in names:
            names[name] = f"{prefix}{counters.get(prefix, 0)}"
            counters[prefix] = counters.get(prefix, 0) + 1

    for st in scenario.steps:
        kinds = _HANDLE_ARGS.get(st.op)
        if kinds is None:
            kinds = _HANDLE_ARGS[st.op] = tuple((i, a.kind) for i, a in enumerate(OPS[st.op].args)
                                                 if a.kind in _NAMED_KINDS)
        for i, kind in kinds:
            value = st.args[i][1]
            if kind in (ArgKind.REQ, ArgKind.BUF, ArgKind.MAP, ArgKind.FILE):
                take(value, _PREFIX[kind])
            elif kind in (ArgKind.REQS, ArgKind.BUFS) and isinstance(value, tuple):
                for v in value:
                    take(v, _PREFIX[kind])
            elif kind is ArgKind.COOKIE:
                take(value, "c")
            elif kind is ArgKind.FDSEL and isinstance(value, str):
                take(value, "f")
            elif kind is ArgKind.BINDSEL and isinstance(value, tuple):
                for how, what in value:
                    if how == "cookie":
                        take(what, "c")
    return names


def make_ctx(scenario: Scenario, caps: DeviceCaps, profile: str) -> Ctx:
    capacity = caps.capacity_bytes if caps.policy in (None, "budget") else None
    return Ctx(
        profile=get_profile(profile),
        caps=caps,
        names=slot_names(scenario),
        step_args=tuple(dict(st.args) for st in scenario.steps),
        spontaneous=caps.capacity_bytes is None,
        capacity=capacity,
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


def _replay(scenario: Scenario, lines: Sequence[str], caps: DeviceCaps, profile: str) -> _Result:
    parsed = parse_trace(lines)
    if isinstance(parsed, TraceError):
        return _Result(Verdict.ERROR, str(parsed))
    events = parsed.events
    first = events[0]
    if isinstance(first, ApiMissing):
        return _Result(Verdict.ERROR, "the implementation lacks public functions: " + ", ".join(first.symbols))
    assert isinstance(first, Begin)
    if first.scenario != scenario.id:
        return _Result(Verdict.ERROR, f"trace line {first.line}: the trace is of scenario {first.scenario!r}, "
                                      f"not {scenario.id!r}")
    last = events[-1]
    assert isinstance(last, Exit)
    ctx = make_ctx(scenario, caps, profile)
    nsteps = len(scenario.steps)
    candidates: list[State] = [INITIAL]
    call: Call | None = None
    step_index: int | None = None
    for ev in events[1:-1]:
        if isinstance(ev, Call):
            if not ev.teardown and (not 0 <= ev.step < nsteps or scenario.steps[ev.step].op.value != ev.op):
                expected = scenario.steps[ev.step].op.value if 0 <= ev.step < nsteps else "no such step"
                return _Result(Verdict.ERROR, f"trace line {ev.line}: step {ev.step} is {ev.op} in the trace "
                                              f"but {expected} in scenario {scenario.id}")
            call = ev
            step_index = ev.step
        try:
            if len(candidates) == 1:
                out = step(ctx, candidates[0], ev, call)
                if isinstance(out, Reject):
                    return _fail(out, ev.line, step_index)
                candidates = out if len(out) == 1 else _dedupe(out)
            else:
                successors: list[State] = []
                first_reject: Reject | None = None
                for cand in candidates:
                    res = step(ctx, cand, ev, call)
                    if isinstance(res, Reject):
                        first_reject = first_reject or res
                    else:
                        successors.extend(res)
                if not successors:
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
        if isinstance(ev, Ret):
            call = None
    return _ending(scenario, last, parsed.complete, candidates, call)


def _ending(scenario: Scenario, last: Exit, complete: bool, candidates: list[State], call: Call | None) -> _Result:
    if last.status == "timeout":
        return _Result(Verdict.TIMEOUT, f"scenario {scenario.id} exceeded its time budget")
    died = last.status == "signal" or (last.status == "code" and last.code not in (0, None))
    if died:
        how = last.signal if last.status == "signal" and last.signal else f"exit code {last.code}"
        for cand in candidates:
            inflight = cand.inflight
            if inflight is not None and inflight.crash is not None:
                dids = frozenset({inflight.crash_did}) if inflight.crash_did else frozenset()
                return _Result(Verdict.PASS, f"expected death in {inflight.op} at step {inflight.step} ({how}): "
                                             f"{inflight.crash}", dids=dids | cand.dids)
        where = f"during step {call.step} ({call.op})" if call is not None else "outside any call"
        return _Result(Verdict.CRASH, f"the probe died {where}: {how}")
    if not complete:
        return _Result(Verdict.ERROR, f"trace line {last.line}: the probe exited normally without an end event")
    return _Result(Verdict.PASS, "every event is allowed by the model", dids=candidates[0].dids)


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
        if other.verdict is Verdict.PASS and other.dids:
            discrepancy = ",".join(sorted(other.dids, key=_did_order))
    elif profile != PUBLISHED and result.verdict is Verdict.PASS and result.dids:
        discrepancy = ",".join(sorted(result.dids, key=_did_order))
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
    try:
        return _replay(scenario, trace, caps, profile)
    except RecursionError:
        return _Result(Verdict.ERROR, "trace nested too deeply")
    except (ModelCrash, KeyError, ValueError, TypeError, AttributeError, AssertionError, IndexError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith("unknown profile"):
            raise
        return _Result(Verdict.ERROR, f"reference model bug: {type(exc).__name__}: {exc} (please file a bug)")


__all__ = ["Divergence", "Judgement", "arg_slot", "judge", "slot_names", "step"]
