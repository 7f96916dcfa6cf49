"""Verdict assembly: from where the replay stopped (a rejection, the exit event) to the verdict and
its reason (docs/model.md §2, steps 4 and 5), and the reading and discrepancy tags a history carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ._context import Ctx, reject
from .crashes import death_shows
from .interleaving import in_flight
from .readings import READINGS
from .rules import Reject, clause
from .scenario import Scenario
from .state import State
from .trace import Call, Exit
from .verdicts import Verdict


@dataclass(frozen=True, slots=True)
class Result:
    """A replay's answer: the verdict and its reason; for a FAIL the rejection, its trace line and the
    step in flight; the tags (readings, discrepancies) of the history that passed."""

    verdict: Verdict
    reason: str
    reject: Reject | None = None
    line: int = 0
    step: int | None = None
    dids: frozenset[str] = frozenset()
    shown: frozenset[str] = frozenset()  # PASS or WARN: the clauses the trace demonstrated (State.shown)


def failed(reject: Reject, line: int, step_index: int | None) -> Result:
    """FAIL at the first event no candidate accepts (the divergence)."""
    return Result(Verdict.FAIL, f"{reject.clause}: observed {reject.observed}", reject, line, step_index)


def ending(scenario: Scenario, last: Exit, complete: bool, candidates: list[State], call: Call | None,
           ctx: Ctx | None = None, calls: Mapping[str, Call] | None = None) -> Result:
    """The verdict at the exit event: TIMEOUT, an expected death (PASS) or a CRASH, ERROR without an
    end event, else PASS or WARN."""
    if last.status == "timeout":
        stuck = stuck_in_onpreempt(calls or {})
        if stuck is not None:
            return failed(stuck[0], stuck[1].line, stuck[1].step)
        return Result(Verdict.TIMEOUT, f"scenario {scenario.id} exceeded its time budget")
    if last.status == "error":  # the host's marker status: a probe that writes it has not run the scenario
        return Result(Verdict.ERROR, f"trace line {last.line}: the scenario ended with status error")
    died = last.status == "signal" or (last.status == "code" and last.code not in (0, None))
    if died:
        how = last.signal if last.status == "signal" and last.signal else f"exit code {last.code}"
        for cand in candidates:
            for inflight in in_flight(cand, ctx, calls or {}):
                if inflight.crash is None:
                    continue
                dids = frozenset({inflight.crash_did}) if inflight.crash_did else frozenset()
                # The death the text documents is what the trace shows: its clause is demonstrated.
                return Result(Verdict.PASS, f"expected death in {inflight.op} at step {inflight.step} ({how}): "
                                             f"{inflight.crash}", dids=dids | cand.dids,
                              shown=cand.shown.union(death_shows(inflight.crash)))
        where = f"during step {call.step} ({call.op})" if call is not None else "outside any call"
        reason = f"the probe died {where}: {how}"
        cid = _died_in(call, candidates)
        if cid is None or call is None:
            return Result(Verdict.CRASH, reason)
        # The clause of the step that died: the sentence that says what the call does (a documented death
        # is an expected death above, so this call was to return).
        died_in = Reject(cid, f"death ({how}) in {call.op}", ("a return",),
                         f"step {call.step} ({call.op}) did not return")
        return Result(Verdict.CRASH, reason, died_in, last.line, call.step)
    if not complete:
        return Result(Verdict.ERROR, f"trace line {last.line}: the probe exited normally without an end event")
    return _passed(candidates)


# The clause that says what each API call does: a crash inside the call is named by it.
STEP_CLAUSE: Final[dict[str, str]] = {
    "req_create": "req-create-returns-request",
    "req_free": "req-free-destroys",
    "req_free_null": "req-free-null-noop",
    "req_set_device": "req-device-opaque",
    "req_set_type": "req-type-not-io",
    "req_set_size": "req-size-bytes",
    "req_set_priority": "priority-request-range",
    "req_set_prot": "req-prot-values",
    "req_set_cookie": "cookie-replace-deletes-previous",
    "req_set_onalloc": "req-callbacks-handle-cookie",
    "req_set_onpreempt": "req-callbacks-handle-cookie",
    "req_set_file": "req-file-segment",
    "is_supported": "support-tests-requests",
    "alloc": "alloc-async",
    "buf_free": "free-indicates-not-needed",
    "buf_map": "map-maps-buffer",
    "buf_unmap": "unmap-unmaps",
    "buf_set_priority": "priority-set",
    "buf_load": "load-async",
}


def _died_in(call: Call | None, candidates: list[State]) -> str | None:
    """The clause of the step a crash interrupted. An access through a mapping names the sentence that made
    the address valid: a partial unmap that left it mapped, a free that keeps mappings valid, or the map. A
    call the text allows at that moment names that allowance: changing or freeing a request whose allocation
    is pending, changing or freeing one allocAsync was given (it never took ownership) or one isSupported
    answered for, unmapping a freed buffer; setCookie with a raw integer
    names "not dereferenced"."""
    if call is None:
        return None
    allowed = _allowance(call, candidates[0]) if candidates else None
    if allowed is not None:
        return allowed
    if call.op in ("map_read", "map_write") and candidates:
        m = candidates[0].maps.get(str(call.args.get("map") or ""))
        if m is not None and m.ranges is not None:
            return "unmap-args-like-munmap"
        b = candidates[0].bufs.get(m.buf) if m is not None else None
        return "free-mapping-valid-after-free" if b is not None and b.freed else "map-maps-buffer"
    return STEP_CLAUSE.get(call.op)
def _allowance(call: Call, s: State) -> str | None:
    """The sentence allowing ``call`` at this point, when it is one of those the text singles out."""
    op = call.op
    slot = call.args.get("req")
    if op.startswith("req_set_") or op == "req_free":
        pending = any(sub.req == slot for sub in s.subs.values())
        if op == "req_set_cookie" and str(call.args.get("cookie") or "").startswith("raw:"):
            return "cookie-not-dereferenced"
        if pending:
            return "alloc-free-request-after-call" if op == "req_free" else "alloc-elements-modify-after-return"
        req = s.reqs.get(str(slot)) if isinstance(slot, str) else None
        if req is not None and req.submitted:
            return "alloc-no-request-ownership"
        if req is not None and req.asked:
            return "support-modify-after-return"
    if op == "buf_unmap":
        m = s.maps.get(str(call.args.get("map") or ""))
        b = s.bufs.get(m.buf) if m is not None else None
        if m is not None and (b is None or b.freed):
            return "free-unmap-allowed-after-free"
    return None


# The calls the text invites inside onPreempt: a new request given the cookie.
INVITED_IN_ONPREEMPT = ("req_create", "req_set_cookie", "req_free")


@clause("cookie-shared-refcounted")
def stuck_in_onpreempt(calls: Mapping[str, Call]) -> tuple[Reject, Call] | None:
    """Spec: "In particular, to use the same cookie in multiple ANpuManager_AllocRequest objects, or in
    OnPreempt() to reuse the cookie in a new ANpuManager_AllocRequest object, reference count the cookie,
    and:" (cookie-shared-refcounted)

    The text tells applications to create a request and set its cookie inside onPreempt. A scenario that
    ran out of time while such a call, made by onPreempt, never returned (a ``call`` without its ``ret``
    on the callback's thread) is a FAIL of that sentence naming the call, not a TIMEOUT: the
    implementation holds, around onPreempt, something the call waits for.
    """
    for call in sorted(calls.values(), key=lambda c: c.line):
        if call.in_cb == "preempt" and call.op in INVITED_IN_ONPREEMPT:
            return reject("cookie-shared-refcounted", f"{call.op} called inside onPreempt (thread {call.th}) "
                          "never returned", [f"{call.op} returns"],
                          "the text invites creating a request and setting its cookie in OnPreempt()"), call
    return None


def _passed(candidates: list[State]) -> Result:
    """PASS, or WARN when every surviving history departs from a reading of silent text (tags ``R<n>``,
    docs/model.md §4): the history with the fewest departures is the one reported, and among those the one
    the fewest AOSP discrepancies (``D<n>``, under aosp-2026) explain."""
    def rank(c: State) -> tuple[int, int]:
        return len(readings_of(c.dids)), len(discrepancies_of(c.dids))

    best = min(candidates, key=rank)
    # What the trace demonstrated: what every history reported alike demonstrated, so that no clause counts
    # on the strength of one explanation of the trace among several.
    shown = frozenset.intersection(*(c.shown for c in candidates if rank(c) == rank(best)))
    warns = readings_of(best.dids)
    if warns:
        return Result(Verdict.WARN, "allowed by the text, but departs from the kit's reading(s) "
                                     + ", ".join(f"{w} ({READINGS.get(w, '?')})" for w in warns), dids=best.dids,
                      shown=shown)
    return Result(Verdict.PASS, "every event is allowed by the model", dids=best.dids, shown=shown)


def readings_of(tags: frozenset[str]) -> list[str]:
    """The reading IDs (``R<n>``) among a history's tags, in order."""
    return sorted((t for t in tags if t.startswith("R")), key=lambda t: (len(t), t))


def discrepancies_of(tags: frozenset[str]) -> list[str]:
    """The AOSP discrepancy IDs (``D<n>``) among a history's tags, in order."""
    return sorted((t for t in tags if t.startswith("D")), key=_did_order)


def _did_order(did: str) -> tuple[int, str]:
    digits = did.lstrip("D")
    return (int(digits), did) if digits.isdigit() else (1 << 30, did)

