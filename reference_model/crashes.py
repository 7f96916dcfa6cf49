"""Chapter "crashes": the calls the spec documents as crashing the process.

A documented crash is an *expected death*: when the process dies inside that call the verdict is
PASS; when the call returns normally the verdict is FAIL citing the crash clause.
"""

from __future__ import annotations

from ._context import Ctx, Out, arg_bool, arg_list
from .rules import Reject, clause, shows
from .state import Inflight, State, evolve
from .trace import Call


@clause("crash-setonalloc-null")
def setonalloc_null_crashes(ctx: Ctx, s: State, call: Call) -> Out:
    """Spec: "setOnAlloc() must be called with a non-NULL value. Otherwise, the process will crash."
    (crash-setonalloc-null)"""
    crash = None if arg_bool(call, "set") else "crash-setonalloc-null"
    return [evolve(s, inflight=Inflight(call.step, call.op, crash=crash))]


@clause("req-request-not-null")
def null_request_crashes(ctx: Ctx, s: State, call: Call) -> Out:
    """Spec: "request The allocation request. Must not be NULL; otherwise the process will crash."
    (req-request-not-null: setOnAlloc's request)"""
    return [evolve(s, inflight=Inflight(call.step, call.op, crash="req-request-not-null"))]


@clause("crash-alloc-without-onalloc", "crash-alloc-onalloc-null")
def alloc_without_onalloc_crashes(s: State, call: Call, slots: list[str | None] | None = None) -> str | None:
    """Spec: "setOnAlloc() must be called before calling ANpuManager_allocAsync(). Otherwise, the process
    will crash." (crash-alloc-without-onalloc)
    Spec: "The onAlloc callback must not be NULL. Otherwise, the process will crash." (crash-alloc-onalloc-null)

    Returns the clause of the expected death when a live request of the list has no onAlloc (``slots``: the
    list as the caller has read it already).
    """
    for slot in arg_list(call, "reqs") if slots is None else slots:
        req = s.reqs.get(slot) if slot is not None else None
        if req is not None and not req.attrs.onalloc:
            return "crash-alloc-without-onalloc"
    return None


@clause("crash-load-onload-null")
def load_without_onload_crashes(call: Call) -> str | None:
    """Spec: "This must be non-NULL. Otherwise, the process will crash." (crash-load-onload-null: onLoad)"""
    return None if arg_bool(call, "onload") else "crash-load-onload-null"


@shows("crash-alloc-without-onalloc", "crash-alloc-onalloc-null", "crash-setonalloc-null", "crash-load-onload-null",
       "req-request-not-null")
def death_shows(crash: str) -> tuple[str, ...]:
    """The clauses an expected death demonstrates: its own, and for allocAsync with a request lacking onAlloc
    both sentences that document that death (a request's onAlloc is NULL at allocAsync exactly when
    setOnAlloc was never called: setOnAlloc(NULL) itself crashes)."""
    if crash == "crash-alloc-without-onalloc":
        return ("crash-alloc-without-onalloc", "crash-alloc-onalloc-null")
    return (crash,)


def returned_from_crash(inflight: Inflight) -> Reject:
    """The call returned although the spec says it crashes the process."""
    assert inflight.crash is not None
    return Reject(inflight.crash, f"{inflight.op} returned", ("the process crashes inside the call",),
                  "the spec documents this call as crashing the process")
