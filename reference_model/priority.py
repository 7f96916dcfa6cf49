"""Chapter "priority": ANpuBuffer_setPriority (request priorities are judged in allocation.py)."""

from __future__ import annotations

from ._context import (
    PRIORITY_BOUNDS,
    PRIORITY_RANGE,
    PRIORITY_SPAN,
    Ctx,
    Out,
    arg_handle,
    arg_int,
    errno_set,
    live_buffer,
    reject,
)
from .rules import Reject, clause, shows
from .state import Buffer, State, done, evolve, show
from .trace import Call, Ret


@clause("priority-set", "priority-set-range", "priority-set-returns", "priority-range-inclusive")
def set_priority_result(ctx: Ctx, b: Buffer, value: int, ret: Ret) -> Reject | str | None:
    """Spec: "Sets the priority of the buffer." (priority-set)
    Spec: "newBufferPriority The new priority of the buffer. The value must be within the range
    [ANPUBUFFER_PRIORITY_MIN, ANPUBUFFER_PRIORITY_MAX], inclusive." (priority-set-range)
    Spec: "... Returns 0 on success, or -1 on error with errno set." (priority-set-returns)

    In range on a live buffer: 0 (a preempted buffer may also refuse; a mapped one refusing is WARN
    R10; refusing with an errno other than EINVAL, e.g. a priority it will not raise, is WARN R19 — EINVAL
    contradicts "inclusive"). Out of range: -1 with errno; accepting it is WARN R4 (aosp-2026 returns 0:
    D3). Returns None, a reading or discrepancy tag, or the rejection.
    """
    if ret.ret == -1 and not errno_set(ret.errno):
        return reject("priority-set-returns", "-1 without errno", ["errno set"], "a failure sets errno")
    if ret.ret not in (0, -1):
        return reject("priority-set-returns", f"ret={ret.ret}", ["0", "-1 with errno"],
                      "ANpuBuffer_setPriority returns 0 or -1 with errno set")
    if value in PRIORITY_RANGE:
        if ret.ret == 0 or (ret.ret == -1 and b.preempted):
            return None
        if ret.ret == -1 and b.maps > 0:
            return "R10"  # the text is silent on a mapped buffer: refusing it departs from reading R10
        if ret.ret == -1 and ret.errno != "EINVAL":
            return "R19"  # "-1 on error" lists no errors; EINVAL would call a priority of the range invalid
        # MIN or MAX refused as invalid contradicts "inclusive" first
        cid = "priority-set-range" if value in PRIORITY_BOUNDS else "priority-set"
        return reject(cid, f"ret={ret.ret} errno={ret.errno}", ["0"],
                      f"priority {value} is within {PRIORITY_SPAN} and {b.handle} is live")
    if ret.ret == -1:
        return None
    # "must be within the range" is the caller's duty with no stated consequence: accepting is WARN R4
    return "D3" if ctx.profile.priority_unchecked else "R4"


def ret_set_priority(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    handle = arg_handle(call, "buf")
    if ret.skipped is not None or handle is None:
        return [done(s)]
    b = live_buffer(s, call, handle, "sets the priority of")
    value = arg_int(call, "priority")
    res = set_priority_result(ctx, b, value, ret)
    if isinstance(res, Reject):
        return res
    bufs = s.bufs
    if ret.ret == 0:
        bufs = dict(s.bufs)
        bufs[handle] = evolve(b, priority=value, priority_set=True)
    out = evolve(s, bufs=bufs, inflight=None, dids=s.dids | {res} if res else s.dids)
    return [show(out, *set_priority_shown(value, ret)) if not res else out]


@shows("priority-set", "priority-set-range", "priority-set-returns", "priority-range-inclusive")
def set_priority_shown(value: int, ret: Ret) -> tuple[str, ...]:
    """What a setPriority answer no reading was needed for demonstrates: a priority of the range set (0; at
    MIN or MAX, that the range is inclusive), and the return sentence each time (a refusal of a priority
    outside the range is the kit's reading of a caller's duty: it shows nothing the text promises)."""
    if value in PRIORITY_RANGE and ret.ret == 0:
        bounds = ("priority-range-inclusive", "priority-set-range") if value in PRIORITY_BOUNDS else ()
        return ("priority-set", "priority-set-returns", *bounds)
    return ("priority-set-returns",)
