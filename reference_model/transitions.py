"""One transition of the model per trace event: the tables from an event to the rule module that judges it.

``step`` is the model on one strand (docs/model.md §2, step 3): the successor states, or a rejection.
Several threads are handled around it (interleaving.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from . import allocation, cookies, crashes, free, loading, mapping, preemption, priority, requests, support
from ._context import Ctx, Out
from .errors import ModelCrash, Unjudgeable
from .state import State, done, evolve
from .trace import Call, Cb, CbReturn, Deleter, End, Event, Ret, Settle

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
    name = None
    for key, value in ctx.steps[call.step].args:  # its "buf" argument, without building a dict of them
        if key == "buf":
            name = value
    slot = ctx.names.get(name, "") if isinstance(name, str) else ""
    slots = dict(s.slots)
    if isinstance(handle, str):
        slots[slot] = handle
    else:
        slots.pop(slot, None)
    return [evolve(s, slots=slots, inflight=None)]


RET_HANDLERS: Final[dict[str, RetHandler]] = {
    "req_create": requests.ret_create,
    "req_free_null": requests.ret_free_null,
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
    "map_prot": mapping.ret_map_prot,
    "map_gone": mapping.ret_map_gone,
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


def unexpected_event(ctx: Ctx, s: State, ev: Event, call: Call | None) -> Out:
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
    return STEPPERS.get(type(ev), unexpected_event)(ctx, s, ev, call)
