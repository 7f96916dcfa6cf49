"""Interleavings: a candidate through one event when several threads run (threads.py, docs/model.md §2a).

A call on a strand other than main keeps its call-time effects pending until its ret; an event that may
observe them is judged once per placement of the pending effects that can matter to it (footprints.py),
in any order. ``advance`` takes every candidate state through one event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from . import crashes, threads
from ._context import Ctx, Out
from .errors import Unjudgeable
from .footprints import relevant
from .rules import Reject
from .state import Inflight, State, done, evolve, merge_shown
from .trace import Call, Cb, CbReturn, Deleter, End, Event, Ret, Settle
from .transitions import CALL_HANDLERS, RET_HANDLERS, STEPPERS, step, unexpected_event

AMBIGUITY_BOUND: Final = 256  # more candidate states is an ERROR, never a silent PASS
STAY: Final = ""  # the strand of an event judged on the candidates' current strand

# Call-time effects that may be placed anywhere between call and ret (threads.py). The crash
# handlers only mark an expected death of the calling thread: they stay at the call.
# map_read / map_write / buf_map only mark the access in flight (an onLoad observed meanwhile is recorded
# on it).
DEFERRABLE: Final = frozenset(CALL_HANDLERS) - {"req_set_onalloc", "req_free_null", "req_set_onalloc_null_req",
                                                "map_read", "map_write", "buf_map"}
_OBSERVERS: Final = (Cb, Deleter, Settle, End)


def _defers(s: State, call: Call) -> bool:
    """Whether the call's call-time effects stay pending (a call on a strand other than main)."""
    if call.strand == threads.MAIN or call.op not in DEFERRABLE:
        return False
    if call.op == "alloc":
        return crashes.alloc_without_onalloc_crashes(s, call) is None
    if call.op == "buf_load":
        return crashes.load_without_onload_crashes(call) is None
    return True


def _apply(ctx: Ctx, s: State, call: Call) -> Out:
    """The call-time effects of ``call`` on ``s`` (whose strand is the call's, nothing in flight there)."""
    return CALL_HANDLERS[call.op](ctx, evolve(s, inflight=None), call)


def _strand_step(ctx: Ctx, s: State, ev: Event, call: Call | None) -> Out:
    """``step`` on the event's strand, with the call-time effects of a call on another strand kept pending,
    and applied at its ret."""
    if isinstance(ev, Call) and s.parked and ev.op in threads.OVERLAP_OPS:
        s = threads.overlapping_calls(s, ev.step, ev.op)
    if isinstance(ev, Call) and _defers(s, ev):
        return [evolve(s, inflight=threads.deferred(ev.step, ev.op))]
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
    """Whether the event's transition reads state another strand's pending effect may change. Events that
    do not commute with every pending effect; placing the effect before the others changes nothing."""
    if isinstance(ev, Call):
        return ev.op in CALL_HANDLERS and not _defers(s, ev)
    if isinstance(ev, Ret):
        return ev.op in RET_HANDLERS or (s.inflight is not None and s.inflight.pending)
    return isinstance(ev, _OBSERVERS)


def _placements(ctx: Ctx, s: State, ev: Event, strand: str, calls: Mapping[str, Call]) -> list[State]:
    """``s`` and every state reached from it by applying pending call-time effects of other strands (and of
    the event's own strand, for a callback or deleter that may run inside that call), in any order —
    those that can matter to the event (``footprints.relevant``)."""
    strands = relevant(ctx, s, ev, strand, calls)
    if not strands:
        return [s]
    seen: dict[tuple[object, ...], State] = {s.key(): s}
    frontier = [s]
    while frontier:
        grown: list[State] = []
        for v in frontier:
            for other in threads.pending_strands(v):
                if other not in strands:
                    continue
                try:
                    res = _apply(ctx, threads.switch(v, other), calls[other])
                except Unjudgeable:
                    continue  # this placement makes the scenario undefined: it did not happen
                if isinstance(res, Reject):
                    continue
                for w in res:
                    w = threads.switch(w, strand)
                    k = w.key()
                    if k not in seen:
                        seen[k] = w
                        grown.append(w)
                    else:
                        seen[k] = merge_shown(seen[k], w)
        frontier = grown
        if len(seen) > AMBIGUITY_BOUND:
            break  # the caller reports the bound
    return list(seen.values())


def _transition(ctx: Ctx, cand: State, ev: Event, strand: str, calls: Mapping[str, Call]) -> Out:
    """One candidate through one event on ``strand``: ``step`` when nothing is pending (one thread), else
    one branch per placement of the pending effects (threads.py)."""
    if strand is STAY:
        strand = cand.strand
    s = cand if cand.strand == strand else threads.switch(cand, strand)
    call = calls.get(strand)
    if not s.parked and (s.inflight is None or not s.inflight.pending):
        return _strand_step(ctx, s, ev, call)
    if not threads.has_pending(s) or not _observes(s, ev):
        return _strand_step(ctx, s, ev, call)
    return _each(ctx, _placements(ctx, s, ev, strand, calls), ev, call, _strand_step, last_reject=True)


def in_flight(s: State, ctx: Ctx | None, calls: Mapping[str, Call]) -> list[Inflight]:
    """The calls in flight on every strand (a pending one as its call-time effects would make it)."""
    if not s.parked and (s.inflight is None or not s.inflight.pending):
        return [s.inflight] if s.inflight is not None else []
    out: list[Inflight] = []
    for strand, inflight in threads.inflights(s):
        if inflight.pending and ctx is not None and strand in calls:
            try:
                res = _apply(ctx, threads.switch(s, strand), calls[strand])
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
        k = st.key()
        kept = seen.get(k)
        seen[k] = st if kept is None else merge_shown(kept, st)
    return list(seen.values())



_MAIN: Final = threads.MAIN
# Built once: `isinstance(ev, Call | Ret)` would build the union on every event.
_CALL_OR_RET: Final = (Call, Ret)
_IN_A_CALL: Final = (Cb, Deleter)


def judged_strand(ev: Event) -> str:
    """The strand an event is judged on: a call's or ret's own; a callback or deleter running inside a call
    (thread "caller") that call's; one on another thread, or a callback's return, sees no call in
    flight: judged where the candidates are (``STAY``); settle and end on main."""
    if isinstance(ev, _CALL_OR_RET):
        return ev.strand
    if isinstance(ev, _IN_A_CALL):
        return ev.strand if ev.thread == "caller" else STAY
    return STAY if isinstance(ev, CbReturn) else threads.MAIN


def advance(ctx: Ctx, candidates: list[State], ev: Event, strand: str, calls: Mapping[str, Call]) -> Out:
    """Every candidate through one event on ``strand``: the deduplicated successors, or the first
    rejection when none survives. An Unjudgeable kills only its candidate's history, unless it is the
    last one. One candidate on one thread, the usual case, costs one plain transition."""
    if len(candidates) == 1:
        cand = candidates[0]
        if (strand == _MAIN or strand is STAY) and cand.strand == _MAIN and not cand.parked and (
                cand.inflight is None or not cand.inflight.pending):
            out = STEPPERS.get(type(ev), unexpected_event)(ctx, cand, ev, calls.get(_MAIN))
        else:
            out = _transition(ctx, cand, ev, strand, calls)
        return out if isinstance(out, Reject) or len(out) == 1 else _dedupe(out)
    successors: list[State] = []
    first_reject: Reject | None = None
    unjudgeable: Unjudgeable | None = None
    for cand in candidates:
        try:
            res = _transition(ctx, cand, ev, strand, calls)
        except Unjudgeable as exc:
            unjudgeable = unjudgeable or exc  # only this candidate's history is undefined
            continue
        if isinstance(res, Reject):
            first_reject = first_reject or res
        else:
            successors.extend(res)
    if successors:
        return _dedupe(successors)
    if first_reject is None and unjudgeable is not None:
        raise unjudgeable
    assert first_reject is not None
    return first_reject
