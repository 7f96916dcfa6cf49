"""Chapter "free": ANpuBuffer_free, mappings that outlive it, and retiring buffers."""

from __future__ import annotations

from collections.abc import Mapping

from ._context import Ctx, Out, arg_list, errno_set, reject
from .cookies import hold_tokens
from .errors import Unjudgeable
from .requests import file_hold
from .rules import Reject, clause, shows
from .state import GHOST_LIMIT, Buffer, Inflight, State, Token, done, evolve, show
from .trace import Call, Ret


@clause("free-memory-after-last-unmap", "free-mapping-valid-after-free", "preempt-after-free-race")
def retire(tokens: Mapping[int, Token], ghosts: tuple[Buffer, ...], bufs: dict[str, Buffer],
           handle: str) -> tuple[Buffer, ...]:
    """Spec: "In this case, the associated memory will be freed after all mappings are unmapped."
    (free-memory-after-last-unmap)

    A freed buffer stays (and counts against the capacity) while mapped; once freed and fully unmapped it
    leaves the state. If it may still receive a late onPreempt (preempt-after-free-race) it is kept
    among a bounded number of ghosts. Mutates ``bufs`` (a private copy); returns the new ghosts (``tokens``
    and ``ghosts``: the state's, as updated so far by the caller).
    """
    b = bufs.pop(handle)
    if b.onpreempt and not b.preempt_cb and (b.awaits_late_onpreempt() or b.cookie.token is None
                                             or b.cookie.token in tokens):
        return (*ghosts, b)[-GHOST_LIMIT:]
    return ghosts


def call_free(ctx: Ctx, s: State, call: Call) -> Out:
    handles = arg_list(call, "bufs")
    if None in handles:
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    bufs = dict(s.bufs)
    tokens = s.tokens
    ghosts = s.ghosts
    for h in handles:
        assert h is not None
        b = bufs.get(h)
        if b is None or b.freed:
            raise Unjudgeable(call.line, f"step {call.step} frees {h}, which is not a live buffer (double free is "
                              "undefined behaviour)")
        mapped_hold = False
        if b.awaits_late_onpreempt():
            pass  # a late onPreempt keeps holding the cookie
        elif b.maps > 0:
            mapped_hold = True  # the buffer lives on until its last unmap, and may keep the cookie so long
        else:
            tokens = hold_tokens(tokens, b.cookie, -1, by="free-indicates-not-needed")
        b = evolve(b, freed=True, mapped_hold=mapped_hold, freed_in_teardown=call.teardown)
        bufs[h] = b
    preempted = tuple([h for h in handles if h is not None and bufs[h].preempted])
    called_back = any(bufs[h].preempt_cb for h in preempted)
    released = sum(bufs[h].size for h in set(handles) if h is not None and not bufs[h].maps and not bufs[h].preempted)
    for h in handles:
        assert h is not None
        if bufs[h].maps == 0:
            ghosts = retire(tokens, ghosts, bufs, h)
    out = evolve(s, bufs=bufs, tokens=tokens, ghosts=ghosts, released_at_free=s.released_at_free + released,
                       inflight=Inflight(call.step, call.op, applied=True, buffers=preempted if handles else ("-",),
                                         called_back=called_back))
    loading = bool(out.loads) and any(ld.buf in handles for ld in out.loads.values())
    # Reading R20: a free refused while a load of one of its buffers is in flight (the buffers stay live).
    refused = [evolve(s, inflight=Inflight(call.step, call.op, applied=True, buffers=(REFUSED,)))
               ] if loading else []
    if ctx.profile.free_drops_load_reply and loading:
        return [out, drop_load_replies(out, frozenset(h for h in handles if h is not None)), *refused]
    return [out, *refused]


REFUSED = "!refused"  # Inflight.buffers of the branch in which a free during a load is refused (R20)


def drop_load_replies(s: State, handles: frozenset[str]) -> State:
    """aosp-2026 (D22): ANpuBuffer_free removes the buffers from the client's map, so the reply of a load
    still in flight finds no buffer and is dropped: no onLoad comes, and the load holds the cookie no
    longer (the deleter may run at the free). The other branch of the free keeps the published answer."""
    loads = dict(s.loads)
    files = dict(s.files)
    tokens = s.tokens
    bufs = dict(s.bufs)
    for lid, ld in s.loads.items():
        if ld.buf not in handles:
            continue
        del loads[lid]
        file_hold(files, ld.seg, -1)
        tokens = hold_tokens(tokens, ld.cookie, -1)
        b = bufs.get(ld.buf)
        if b is not None:
            bufs[ld.buf] = evolve(b, loads=b.loads - 1)
    return evolve(s, loads=loads, files=files, tokens=tokens, bufs=bufs, dids=s.dids | {"D22"})


@clause("free-returns", "free-indicates-not-needed", "free-each-allocated-buffer", "free-success-buffer-must-be-freed",
        "free-even-if-preempted", "preempt-must-still-free", "free-mapping-valid-after-free")
def free_result(s: State, ret: Ret, mapped: bool = False) -> Reject | str | None:
    """Spec: "Each ANpuBuffer*, after being received from the onAlloc callback, must be explicitly freed by
    calling ANpuBuffer_free()." (free-each-allocated-buffer)
    Spec: "Even if a buffer is preempted, it must still be explicitly freed by calling ANpuBuffer_free() to
    clean up remaining resources." (free-even-if-preempted)
    Spec: "buffersLen The length of the buffers list. Returns 0 on success, or -1 on error with errno
    set." (free-returns)
    Spec: "If there are any existing mappings to the buffer via ANpuBuffer_map(), the mapping will continue to
    be valid until unmapped even after the buffer is freed." (free-mapping-valid-after-free)

    Reading: the application must free every buffer it received, so freeing a list of live buffers
    succeeds (returns 0) — preempted buffers included, and mapped ones (``mapped``: one of the list still has
    a mapping), which the text says may be freed before they are unmapped. An empty list may return either.
    Reading R20: while a load of one of the buffers is in flight, "-1 on error" (no errors listed) may refuse the free,
    and the application can free the buffers after the onLoad: WARN R20, the buffers stay live.
    """
    inflight = s.inflight
    if inflight is not None and inflight.buffers == (REFUSED,):
        if ret.ret == -1 and errno_set(ret.errno):
            return "R20"
        return reject("free-each-allocated-buffer", f"ret={ret.ret}", ["-1 with errno"], "the branch of a refused free")
    empty = inflight is not None and inflight.buffers == ("-",)
    if ret.ret == 0:
        return None
    if ret.ret == -1 and empty and errno_set(ret.errno):
        return None
    if ret.ret != -1 or not errno_set(ret.errno):
        shown = f"ret={ret.ret}" if ret.ret != -1 else "-1 without errno"
        return reject("free-returns", shown, ["0", "-1 with errno"], "ANpuBuffer_free returns 0 or -1 with errno set")
    preempted = inflight is not None and bool(inflight.buffers) and not empty
    # A buffer whose onPreempt came is held to the callback's own sentence ("Even if preempted, the buffer must
    # still be explicitly freed"); one preempted without it, to free's.
    called_back = preempted and inflight is not None and inflight.called_back
    cid = ("preempt-must-still-free" if called_back else "free-even-if-preempted") if preempted \
        else "free-mapping-valid-after-free" if mapped else "free-each-allocated-buffer"
    return reject(cid, f"ret={ret.ret} errno={ret.errno}", ["0"],
                  "freeing live buffers the application received from onAlloc succeeds"
                  + (" (preempted ones included)" if preempted else " (mapped ones included)" if mapped else ""))


def ret_free(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    freed = [s.bufs.get(h) for h in arg_list(call, "bufs") if h is not None]
    bad = free_result(s, ret, mapped=any(b is not None and b.maps > 0 for b in freed))
    if isinstance(bad, str):
        return [evolve(s, inflight=None, dids=s.dids | {bad})]
    return bad if bad is not None else [show(done(s), *free_shown(s.inflight))]


@shows("free-returns", "free-each-allocated-buffer", "free-success-buffer-must-be-freed", "free-even-if-preempted",
        "preempt-must-still-free")
def free_shown(inflight: Inflight | None) -> tuple[str, ...]:
    """What an accepted ANpuBuffer_free return demonstrates: the return sentence; for a list of buffers,
    that the buffers the application received are freed by it (0), preempted ones included."""
    if inflight is None or inflight.buffers == ("-",):
        return ("free-returns",)
    preempted = ("free-even-if-preempted", "preempt-must-still-free") if inflight.buffers else ()
    return ("free-returns", "free-each-allocated-buffer", "free-success-buffer-must-be-freed", *preempted)
