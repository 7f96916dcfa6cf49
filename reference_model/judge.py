"""The judge: replay a trace through the model and say PASS / FAIL / CRASH / TIMEOUT / ERROR.

Algorithm (docs/model.md §Judge): carry a set of candidate model states through the events as they are
parsed; any malformed line, wherever it is, makes the trace an ERROR with its line number (after the
replay stops, the rest of the trace is still parsed). A transition returns the
successor states (several where the spec leaves a choice: which submission a callback answers, which
buffer was preempted, ...) or a rejection. Candidates are deduplicated; more than ``AMBIGUITY_BOUND``
is an ERROR, never a silent PASS. The first event no candidate accepts is the divergence. With one
candidate — the usual case — a step costs one transition and no deduplication.

This module is the driver: the transitions are in transitions.py, the search over the interleavings
of several threads in interleaving.py (and footprints.py), the verdict at the end in verdict_assembly.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from . import cookies, threads
from ._context import Ctx, arg_slot
from .caps import DeviceCaps
from .content import DigestMemo
from .divergence import Divergence
from .errors import ModelCrash, Unjudgeable
from .interleaving import AMBIGUITY_BOUND, advance, judged_strand
from .policies import declared as declared_policy
from .profiles import AOSP_2026, get_profile
from .profiles import PUBLISHED as PUBLISHED_PROFILE
from .rules import Reject
from .scenario import Scenario
from .slots import SlotError, assign_slots, check_recorded
from .state import INITIAL, State
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
    TraceError,
    first_error,
    read_events,
)
from .transitions import CALL_HANDLERS, step
from .verdict_assembly import Result, discrepancies_of, ending, failed
from .verdicts import Verdict
from .vocabulary import Op

PUBLISHED: Final = PUBLISHED_PROFILE.name
AOSP: Final = AOSP_2026.name
_MAIN: Final = threads.MAIN


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str
    divergence: Divergence | None
    discrepancy: str | None
    # PASS or WARN: the clauses the trace demonstrated, sorted (docs/model.md "Demonstrated"); else empty.
    demonstrated: tuple[str, ...] = ()


def make_ctx(scenario: Scenario, caps: DeviceCaps, profile: str, *, returns: bool = False,
             digests: DigestMemo | None = None) -> Ctx:
    """The judging context; SlotError when the scenario's handles cannot be given slots."""
    capacity = caps.capacity_bytes if caps.policy in (None, "budget") else None
    main_ops = tuple([st.op if st.thread is None else None for st in scenario.steps])  # an Op equals its value
    return Ctx(
        profile=get_profile(profile),
        caps=caps,
        names=assign_slots(scenario.steps).names,
        steps=scenario.steps,
        spontaneous=caps.capacity_bytes is None,
        capacity=capacity,
        policy=declared_policy(caps.policy, caps.capacity_bytes),
        returns=returns,
        main_ops=main_ops,
        one_thread=None not in main_ops and Op.CB_ACTION not in main_ops,
        ranks_victims=caps.capacity_bytes is not None and caps.policy is not None,
        digests={} if digests is None else digests,
    )


def _replay(scenario: Scenario, stream: Iterator[Event | TraceError], caps: DeviceCaps, profile: str,
            digests: DigestMemo) -> Result:
    """Replay the events as the stream yields them. A malformed line found later still makes the trace
    ERROR: the caller reads the rest of the stream (``_safe_replay``)."""
    first = next(stream)
    if not isinstance(first, Begin):
        return _no_begin(first, stream)
    if first.scenario != scenario.id:
        return Result(Verdict.ERROR, f"trace line {first.line}: the trace is of scenario {first.scenario!r}, "
                                     f"not {scenario.id!r}")
    try:
        ctx = make_ctx(scenario, caps, profile, returns=first.version > TRACE_V1, digests=digests)
    except SlotError as exc:
        return Result(Verdict.ERROR, f"scenario {scenario.id} has no probe program: {exc}")
    candidates: list[State] = [INITIAL]
    # A call that is a step of main as the scenario has it, made outside a callback, belongs to the scenario
    # as it is (the usual call; the others are checked by _in_envelope).
    main_ops = ctx.main_ops
    calls: dict[str, Call] = {}  # the call in flight, by strand
    last_call: Call | None = None
    step_index: int | None = None
    complete = False
    # Per thread, the callbacks that wrote their cb_return (by the line of their cb): the thread's next
    # event shows that they have returned (cookies.returned).
    returning: dict[str, frozenset[int]] = {}
    for ev in stream:
        if isinstance(ev, TraceError):
            return Result(Verdict.ERROR, str(ev))
        kind = type(ev)
        if returning and kind in _THREADED and cast(_Threaded, ev).th in returning:
            lines = returning.pop(cast(_Threaded, ev).th)
            candidates = [cookies.returned(c, lines, ev.line) for c in candidates]
        if isinstance(ev, Call):
            call = ev
            step = call.step
            if not (0 <= step < len(main_ops) and main_ops[step] == call.op and call.th == _MAIN
                    and call.in_cb is None):
                checked = _in_envelope(scenario, call)
                if isinstance(checked, str):
                    return Result(Verdict.ERROR, f"trace line {call.line}: {checked}")
                ev = call = checked
            calls[call.strand] = last_call = call
            step_index = step
            if call.op not in CALL_HANDLERS:
                continue  # no call-time effect: every candidate stays as it is
            strand = call.strand
        elif isinstance(ev, Ret):
            strand = ev.strand
        elif isinstance(ev, Exit):
            open_call = last_call if last_call is not None and last_call.strand in calls else next(
                iter(calls.values()), None)
            return ending(scenario, ev, complete, candidates, open_call, ctx, calls)
        elif isinstance(ev, CbReturn):
            returning[ev.th] = returning.get(ev.th, frozenset()) | {ev.opened}
        elif kind is End:
            complete = True
        if kind is not Call and kind is not Ret:
            strand = judged_strand(ev)
        try:
            out = advance(ctx, candidates, ev, strand, calls)
        except Unjudgeable as exc:
            return Result(Verdict.ERROR, f"trace line {exc.line}: {exc.message}")
        except ModelCrash as exc:
            return Result(Verdict.ERROR, f"reference model bug at trace line {ev.line}: {exc} (please file a bug)")
        if isinstance(out, Reject):
            return failed(out, ev.line, step_index)
        candidates = out
        if len(candidates) > AMBIGUITY_BOUND:
            return Result(Verdict.ERROR, f"trace line {ev.line}: ambiguity bound exceeded ({len(candidates)} "
                                         f"candidate states > {AMBIGUITY_BOUND})")
        if kind is Ret:
            calls.pop(strand, None)
    raise AssertionError("the event stream ended without exit or error")


_Threaded = Call | Ret | Cb | CbReturn | Deleter
_THREADED: Final = frozenset({Call, Ret, Cb, CbReturn, Deleter})


def _no_begin(first: Event | TraceError, stream: Iterator[Event | TraceError]) -> Result:
    """ERROR for a trace that does not open with begin: a parse error, missing functions, or an exit."""
    if isinstance(first, TraceError):
        return Result(Verdict.ERROR, str(first))
    if isinstance(first, ApiMissing):
        return Result(Verdict.ERROR, "the implementation lacks public functions: " + ", ".join(first.symbols))
    error = first_error(stream)  # an exit before begin: the stream ends with its TraceError
    assert error is not None
    return Result(Verdict.ERROR, str(error))


def _in_envelope(scenario: Scenario, ev: Call) -> Call | str:
    """A call other than the usual one (a step of the main thread as the scenario has it, which the replay
    takes as it is): the call as the replay judges it, or why it cannot belong to the scenario (ERROR)."""
    bad = _envelope(scenario, len(scenario.steps), ev)
    if bad is not None:
        return bad
    if ev.in_cb is not None and ev.op in ("buf_map", "buf_unmap") and ev.args.get("map") is None:
        return ev._replace(args={**ev.args, "map": f"~{ev.strand}"})  # a callback's mapping: no slot
    if ev.in_cb is not None and ev.op in ("req_create", "req_set_cookie", "req_free") and ev.args.get("req") is None:
        return ev._replace(args={**ev.args, "req": f"~{ev.strand}"})  # a callback's request (new_request): no slot
    return ev

def _envelope(scenario: Scenario, nsteps: int, ev: Call) -> str | None:
    """Why a call cannot belong to the scenario (ERROR), or None. Teardown calls continue the numbering
    and are made by the scenario's thread, main (formats §5); a callback's calls carry the step of the
    cb_action that armed them."""
    if ev.teardown:
        if ev.in_cb is not None:
            return f"teardown step {ev.step} ({ev.op}) is made by a callback, but teardown runs on main"
        if ev.th != threads.MAIN:
            return f"teardown step {ev.step} ({ev.op}) runs on thread {ev.th}, but teardown runs on main"
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


def judge(
    scenario: Scenario,
    trace: Sequence[str],
    caps: DeviceCaps,
    catalogue: Mapping[str, str],
    profile: str = PUBLISHED,
    *,
    slots: Mapping[str, str] | None = None,
    digests: DigestMemo | None = None,
) -> Judgement:
    """Judge one scenario's raw trace (docs/formats.md §7). Never raises on any trace content. ``slots``
    is the slot map the program was compiled with, when at hand: one that differs from the judge's own
    is a kit bug (ModelCrash), never a verdict (docs/formats.md §3, "Slots"). ``digests``: a memo of data
    digests the caller keeps across judgements (content.DigestMemo), filled as the judge computes more."""
    memo: DigestMemo = {} if digests is None else digests
    if slots is not None:
        try:
            own = assign_slots(scenario.steps)
        except SlotError as exc:
            raise ModelCrash(f"scenario {scenario.id}: a program was compiled, but {exc}") from None
        check_recorded(scenario.id, slots, own)
    result = _safe_replay(scenario, trace, caps, profile, memo)
    discrepancy = None
    if profile == PUBLISHED and result.verdict.blocking:
        other = _safe_replay(scenario, trace, caps, AOSP, memo)
        if other.verdict.exercises and discrepancies_of(other.dids):
            discrepancy = ",".join(discrepancies_of(other.dids))
    elif profile != PUBLISHED and result.verdict.exercises and discrepancies_of(result.dids):
        discrepancy = ",".join(discrepancies_of(result.dids))
    divergence = None
    reason = result.reason
    if result.reject is not None:
        r = result.reject
        allowed = ", ".join(r.allowed) if r.allowed else "nothing"
        message = f"observed {r.observed}, allowed {allowed}: {r.why}"
        divergence = Divergence(result.step, result.line, r.observed, r.allowed, r.clause,
                                catalogue.get(r.clause, ""), message)
        if result.verdict is Verdict.FAIL:
            reason = f"trace line {result.line}: {r.clause}: {message}"
        else:
            reason = f"{reason} ({r.clause})"
    shown = tuple(sorted(result.shown)) if result.verdict.exercises else ()
    return Judgement(result.verdict, reason, divergence, discrepancy, shown)


def _safe_replay(scenario: Scenario, trace: Sequence[str], caps: DeviceCaps, profile: str,
                 digests: DigestMemo) -> Result:
    stream = read_events(trace)
    try:
        result = _replay(scenario, stream, caps, profile, digests)
    except RecursionError:
        result = Result(Verdict.ERROR, "trace nested too deeply")
    except (ModelCrash, KeyError, ValueError, TypeError, AttributeError, AssertionError, IndexError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith("unknown profile"):
            if (error := first_error(stream)) is not None:
                return Result(Verdict.ERROR, str(error))
            raise
        result = Result(Verdict.ERROR, f"reference model bug: {type(exc).__name__}: {exc} (please file a bug)")
    # A malformed line anywhere makes the trace ERROR, whatever the replay met before it.
    error = first_error(stream)
    return result if error is None else Result(Verdict.ERROR, str(error))


__all__ = ["AMBIGUITY_BOUND", "Divergence", "Judgement", "arg_slot", "judge", "make_ctx", "step"]
