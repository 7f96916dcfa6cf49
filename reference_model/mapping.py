"""Chapter "mapping": ANpuBuffer_map / ANpuBuffer_unmap and the data seen through mappings."""

from __future__ import annotations

from ._context import ANY_ERRNO, Ctx, Out, arg_handle, arg_int, arg_slot, errno_set, live_buffer, reject
from .content import Content, DigestMemo, expected_digest, forget, named_clause, shown_clauses, write
from .cookies import hold_tokens
from .errors import Unjudgeable
from .free import retire
from .rules import Reject, clause, shows
from .state import (
    MAP_FIXED,
    MAP_PRIVATE,
    MAP_SHARED,
    PAGE,
    PROT_EXEC,
    PROT_READ,
    PROT_WRITE,
    Buffer,
    Inflight,
    Load,
    Mapping_,
    State,
    done,
    evolve,
    show,
)
from .trace import Call, Ret


@clause("map-returns", "unmap-returns")
def failure_sets_errno(ret: Ret, cid: str) -> Reject | None:
    """Spec: "The mapped address on success, or MAP_FAILED on error and errno is set." (map-returns)"""
    if ret.ret == -1 and not errno_set(ret.errno):
        return reject(cid, "failure without errno", ["errno set"], "a failure sets errno")
    if ret.ret not in (0, -1):
        return reject(cid, f"ret={ret.ret}", ["0", "-1"], "the probe reports success as 0 and failure as -1")
    return None


@clause("map-after-preempt-enoent", "map-preempt-window-enoent", "preempt-map-enoent",
        "preempt-map-fails-after-callback", "preempt-window-before-callback")
def map_preempted(ctx: Ctx, b: Buffer, ret: Ret, after_callback: bool) -> Reject | str | None:
    """Spec: "When the buffer is preempted, any subsequent attempt to map the buffer will fail with errno set
    to ENOENT." (preempt-map-enoent)
    Spec: "If the app calls ANpuBuffer_map() during this time window, it will still get -1 with errno set to
    ENOENT, even though when ANpuManager_OnPreempt has not been called yet." (map-preempt-window-enoent)

    Returns None when accepted under the published text, a discrepancy tag when accepted as AOSP
    behaviour (D1: ENOMEM; D24: success while the AOSP client has not had the notice of a commanded
    preemption or of one by commanded pressure, i.e. before its onPreempt and before a map showed ENOMEM),
    or the rejection.
    ``after_callback``: the onPreempt ran before the map was called (one that came while the map was in
    flight leaves the map inside the window).
    """
    if ret.ret == -1 and ret.errno == "ENOENT":
        return None
    if ret.ret == -1 and ret.errno == "ENOMEM" and ctx.profile.preempt_map_enomem:
        return "D1"
    if (ret.ret == 0 and ctx.profile.preempt_notice_window and (b.vnpu_preempted or b.preemptable)
            and not after_callback and not b.notified):
        return "D24"
    cid = "preempt-map-fails-after-callback" if after_callback else "map-preempt-window-enoent"
    if ret.ret == -1:
        cid = "preempt-map-enoent" if after_callback else "map-after-preempt-enoent"
    return reject(cid, "mapped" if ret.ret == 0 else f"MAP_FAILED, errno {ret.errno}", ["MAP_FAILED, errno ENOENT"],
                  f"{b.handle} was preempted" + (" and its onPreempt ran" if after_callback else ""))


@clause("map-prot-subset", "map-prot-param-subset", "map-maps-buffer", "map-args-like-mmap", "req-prot-default-read")
def map_outcome(
    ctx: Ctx, b: Buffer, length: int, prot: int, flags: int, offset: int, load_met: bool = False
) -> tuple[dict[str, str], str, str]:
    """Spec: "After the buffer is allocated, ANpuBuffer_map() may only be called with |prot| to be a subset
    of the value set by this function. If not, ANpuBuffer_map() fails and returns MAP_FAILED."
    (map-prot-subset, map-prot-param-subset)
    Spec: "If never called, the default value is PROT_READ." (req-prot-default-read)
    Spec: "Maps a buffer into the application's address space." (map-maps-buffer)
    Spec: "The arguments are similar to mmap()." (map-args-like-mmap)

    Returns (allowed answers -> tag, clause, why). A valid mapping of a live buffer (prot a subset, one
    of SHARED/PRIVATE, page-aligned offset, inside the buffer) succeeds — or, where preemption can
    happen without a vnpu command, fails with ENOENT because the buffer was just preempted. Invalid
    mmap-style arguments leave both answers open. Reading R23: a valid PROT_EXEC mapping succeeds; refusing
    it (mmap() may refuse PROT_EXEC for a memory object mounted noexec) is WARN R23. Reading R6: a valid
    mapping of a buffer that is already mapped succeeds too; refusing it (a limit on the number of
    mappings) is WARN R6. Reading R18: a valid
    PROT_NONE mapping succeeds; refusing it is WARN R18 ("MAP_FAILED on error" lists no errors). Reading R15: while a
    loadAsync of the buffer is in flight (its onLoad not observed) a valid mapping may succeed or fail
    with any errno (load_exclusive); so may a map whose call began before such a load's onLoad
    (``load_met``): the map may have met the load before the callback came.
    """
    if prot & ~b.prot:
        alts = {ANY_ERRNO: ""}
        if ctx.profile.map_prot_unchecked:
            alts["success"] = "D13"
        if "prot" in b.unset:  # the buffer's protection is the default: a wider map contradicts that first
            return alts, "req-prot-default-read", f"prot {prot:#x} is wider than PROT_READ, the default protection"
        return alts, "map-prot-subset", f"prot {prot:#x} is not a subset of the buffer's {b.prot:#x}"
    kind = flags & (MAP_SHARED | MAP_PRIVATE)
    rounded = -(-b.size // PAGE) * PAGE
    valid = (kind in (MAP_SHARED, MAP_PRIVATE) and not flags & ~(MAP_SHARED | MAP_PRIVATE | MAP_FIXED)
             and not flags & MAP_FIXED and length > 0 and offset >= 0 and offset % PAGE == 0
             and offset + length <= rounded)
    if not valid:
        return {"success": "", ANY_ERRNO: ""}, "map-args-like-mmap", "mmap-style arguments outside a plain mapping"
    if b.loads or load_met:
        return load_exclusive(b)
    alts = {"success": ""}
    if prot & PROT_EXEC:
        alts[ANY_ERRNO] = "R23"  # mmap() itself may refuse PROT_EXEC (a noexec memory object): a reading
    elif b.maps > 0:
        alts[ANY_ERRNO] = "R6"  # the text sets no limit on mappings, and names none either: a reading
    elif prot == 0:
        alts[ANY_ERRNO] = "R18"  # PROT_NONE: "see mmap()" and "MAP_FAILED on error" name no case for it
    if ctx.spontaneous or b.preemptable:
        alts["ENOENT"] = ""
        if ctx.profile.preempt_map_enomem:
            alts["ENOMEM"] = "D1"
    if b.wedged and ctx.profile.load_bad_fd_wedges:
        alts["ENOMEM"] = "D25"  # the AOSP client still thinks a load is running (D25)
    return alts, "map-maps-buffer", f"a valid mapping of live buffer {b.handle}"


@clause("load-no-existing-mapping", "map-returns")
def load_exclusive(b: Buffer) -> tuple[dict[str, str], str, str]:
    """Spec: "There should not be any existing mapping (via ANpuBuffer_map()) to the buffer. Otherwise, the
    callback is replied with an error." (load-no-existing-mapping)
    Spec: "The mapped address on success, or MAP_FAILED on error and errno is set." (map-returns)

    Reading R15 (no WARN): the text makes a mapping and a load of one buffer exclusive, and says which
    gives way only when the mapping came first. A map while a load is in flight may therefore be refused
    (with any errno: the text names only ENOENT, for preemption) or succeed; when it succeeds, the load
    had a mapping while it ran, and its onLoad may carry an error or success (relax_loads).
    """
    return {"success": "", ANY_ERRNO: ""}, "map-maps-buffer", f"a valid mapping of {b.handle}, a load in flight"


@clause("load-no-existing-mapping")
def relax_loads(s: State, handle: str) -> dict[int, Load]:
    """Spec: "There should not be any existing mapping (via ANpuBuffer_map()) to the buffer. Otherwise, the
    callback is replied with an error." (load-no-existing-mapping)

    The loads of ``handle`` in flight once a mapping of it succeeded: an existing mapping now meets each,
    so one that had to succeed may carry an error as well (reading R15).
    """
    loads = dict(s.loads)
    for lid, ld in s.loads.items():
        if ld.buf == handle and ld.expect == "success":
            loads[lid] = evolve(ld, expect="any", why="load-no-existing-mapping")
    return loads


def in_flight_spans(s: State, handle: str) -> list[tuple[int, int]]:
    """The ranges of the loads of ``handle`` in flight, and of the loads answered while the current call
    was in flight: their bytes are indeterminate to it (reading R16)."""
    spans = [span for ld in s.loads.values() if ld.buf == handle and (span := ld.span()) is not None]
    if s.inflight is not None:
        spans += [(lo, hi) for buf, lo, hi in s.inflight.overtaken if buf == handle]
    return spans


@shows("map-returns")
def ret_map(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    handle = arg_handle(call, "buf")
    if ret.skipped is not None or handle is None:
        return [done(s)]
    b = live_buffer(s, call, handle, "maps")
    bad = failure_sets_errno(ret, "map-returns")
    if bad is not None:
        return bad
    dids = s.dids
    length, prot, flags, offset = (arg_int(call, "length"), arg_int(call, "prot"), arg_int(call, "flags"),
                                   arg_int(call, "offset"))
    if b.preempted:
        after_callback = b.preempt_cb and not (s.inflight is not None and handle in s.inflight.preempt_met)
        res = map_preempted(ctx, b, ret, after_callback)
        if isinstance(res, Reject):
            return res
        if res:
            dids = dids | {res}
        if res != "D24":
            bufs = s.bufs
            if res == "D1" and not b.notified:
                bufs = {**s.bufs, handle: evolve(b, notified=True)}
            out = evolve(s, bufs=bufs, inflight=None, dids=dids)
            return [show(out, *preempted_map_shown(after_callback)) if res is None else out]
        return [_mapped(s, call, handle, b, dids, Mapping_(handle, offset, length, prot, bool(flags & MAP_SHARED)))]
    load_met = s.inflight is not None and any(buf == handle for buf, _, _ in s.inflight.overtaken)
    alts, cid, why = map_outcome(ctx, b, length, prot, flags, offset, load_met)
    key = "success" if ret.ret == 0 else (ret.errno or "")
    tag = alts.get(key, alts.get(ANY_ERRNO) if ret.ret == -1 else None)
    if tag is None:
        shown = sorted("mapped" if k == "success" else f"MAP_FAILED, {k}" for k in alts)
        if ret.ret == -1 and cid == "map-maps-buffer" and b.preemptable and "ENOENT" in alts:
            return unseen_preemption_errno(b, ret, shown)
        return reject(cid, "mapped" if ret.ret == 0 else f"MAP_FAILED, errno {ret.errno}", shown, why)
    if tag:
        dids = dids | {tag}
    if ret.ret == -1:
        bufs = dict(s.bufs)
        if key in ("ENOENT", "ENOMEM") and key in alts and cid == "map-maps-buffer" and tag not in ("R6", "D25"):
            bufs[handle] = evolve(b, preempted=True, announced=b.onpreempt)
        return [show(evolve(s, bufs=bufs, inflight=None, dids=dids), *refused_map_shown(b, cid, tag))]
    out = _mapped(s, call, handle, b, dids, Mapping_(handle, offset, length, prot, bool(flags & MAP_SHARED)))
    return [show(out, "map-returns")]


@clause("map-preempt-window-enoent")
def unseen_preemption_errno(b: Buffer, ret: Ret, shown: list[str]) -> Reject:
    """Spec: "If the app calls ANpuBuffer_map() during this time window, it will still get -1 with errno set to
    ENOENT, even though when ANpuManager_OnPreempt has not been called yet." (map-preempt-window-enoent)

    A valid map of a buffer that a vnpu command may have preempted, its onPreempt not observed, fails only
    because it was; the errno of that failure is ENOENT. (Where preemption may come at any time, as on a
    real device, a failing map is no sign of one: map_outcome names map-maps-buffer.)"""
    return reject("map-preempt-window-enoent", f"MAP_FAILED, errno {ret.errno}", shown,
                  f"{b.handle} may have been preempted by the vnpu command, its onPreempt not yet observed: a "
                  "valid map of it fails only then, with ENOENT")


@shows("map-after-preempt-enoent", "preempt-map-enoent", "map-preempt-window-enoent", "preempt-window-before-callback",
        "preempt-map-fails-after-callback")
def preempted_map_shown(after_callback: bool) -> tuple[str, ...]:
    """What a map of a preempted buffer answered ENOENT demonstrates: the errno after preemption, and
    whether it came within the window before onPreempt or after the callback."""
    when = (("preempt-map-fails-after-callback",) if after_callback
            else ("map-preempt-window-enoent", "preempt-window-before-callback"))
    return ("map-after-preempt-enoent", "preempt-map-enoent", "map-returns", *when)


@shows("map-returns", "map-prot-subset", "map-prot-param-subset", "map-args-like-mmap", "req-prot-default-read")
def refused_map_shown(b: Buffer, cid: str, tag: str) -> tuple[str, ...]:
    """What a refused map demonstrates: MAP_FAILED with errno (map-returns); for a prot that is not a subset
    of the buffer's, the subset rule (and, for a buffer whose request never set its protection, that the
    default was PROT_READ); mmap()-style arguments refused as mmap() refuses them. A refusal a reading
    allows (R6, R18, R23) or an unseen preemption demonstrates nothing more."""
    if cid in ("map-prot-subset", "req-prot-default-read"):
        default = ("req-prot-default-read", "req-create-default-state") if "prot" in b.unset else ()
        return ("map-returns", "map-prot-subset", "map-prot-param-subset", *default)
    if cid == "map-args-like-mmap":
        return ("map-returns", "map-args-like-mmap")
    return ("map-returns",) if not tag else ()


def _mapped(s: State, call: Call, handle: str, b: Buffer, dids: frozenset[str], m: Mapping_) -> State:
    """The state once ``buf_map`` of ``handle`` succeeded: one more live mapping of the buffer, ``m``."""
    maps = dict(s.maps)
    maps[arg_slot(call, "map")] = m
    bufs = dict(s.bufs)
    bufs[handle] = evolve(b, maps=b.maps + 1)
    loads = relax_loads(s, handle) if b.loads else s.loads
    return evolve(s, bufs=bufs, maps=maps, loads=loads, inflight=None, dids=dids)


def unmapped_span(m: Mapping_, offset: int, length: int) -> tuple[int, int] | None:
    """The part of the mapping `buf_unmap m offset length` unmaps when it succeeds (docs/probe.md):
    length 0 means from `offset` (raised to the first still-mapped byte) to the end of the last mapped
    part; like munmap() the end is rounded up to a page. None: nothing, or an unaligned start (munmap
    refuses it, so either answer is allowed and nothing changes)."""
    ranges = m.live_ranges()
    if length == 0:
        offset = max(offset, min(r[0] for r in ranges))
        length = max(r[1] for r in ranges) - offset
        if length <= 0:
            return None
    if offset % PAGE:
        return None
    return (offset, offset + -(-length // PAGE) * PAGE)


def ranges_left(m: Mapping_, span: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    lo, hi = span
    left: list[tuple[int, int]] = []
    for r_lo, r_hi in m.live_ranges():
        if r_lo < lo:
            left.append((r_lo, min(r_hi, lo)))
        if r_hi > hi:
            left.append((max(r_lo, hi), r_hi))
    return tuple(left)


def call_unmap(ctx: Ctx, s: State, call: Call) -> Out:
    slot = arg_slot(call, "map")
    m = s.maps.get(slot)
    span = unmapped_span(m, arg_int(call, "offset"), arg_int(call, "length")) if m is not None else None
    if m is None or span is None or ranges_left(m, span):
        # Nothing mapped there, or a part of the mapping: judged (and applied) at the return.
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    maps = dict(s.maps)
    del maps[slot]
    bufs = dict(s.bufs)
    ghosts = s.ghosts
    tokens = s.tokens
    released = 0
    b = bufs.get(m.buf)
    if b is not None:
        b = evolve(b, maps=b.maps - 1)
        if b.freed and b.maps == 0 and b.mapped_hold:
            # The freed buffer's last mapping goes: whatever of it held the cookie lets go now.
            tokens = hold_tokens(tokens, b.cookie, -1)
            b = evolve(b, mapped_hold=False)
        bufs[m.buf] = b
        if b.freed and b.maps == 0:
            ghosts = retire(tokens, s.ghosts, bufs, m.buf)
            released += 0 if b.preempted else b.size
    return [evolve(s, maps=maps, bufs=bufs, ghosts=ghosts, tokens=tokens,
                         released_at_unmap=s.released_at_unmap + released,
                         inflight=Inflight(call.step, call.op, applied=True, buffers=(m.buf,)))]


@clause("unmap-unmaps", "unmap-args-like-munmap", "unmap-returns", "map-must-unmap", "free-unmap-allowed-after-free")
def unmap_result(s: State, ret: Ret) -> Reject | None:
    """Spec: "Unmaps a previously mapped buffer." (unmap-unmaps)
    Spec: "The returned address must be unmapped by calling ANpuBuffer_unmap()." (map-must-unmap)
    Spec: "... except: ANpuBuffer_unmap() to unmap any existing mappings to the buffer."
    (free-unmap-allowed-after-free)

    Unmapping a whole live mapping succeeds (also after the buffer was freed); other ranges may
    return either answer. A refusal contradicts the return sentence first: it is named unmap-returns.
    """
    bad = failure_sets_errno(ret, "unmap-returns")
    if bad is not None:
        return bad
    whole = s.inflight is not None and s.inflight.applied
    if whole and ret.ret != 0:
        after_free = s.inflight is not None and any(
            (b := s.bufs.get(h)) is None or b.freed for h in s.inflight.buffers)
        return reject("unmap-returns", f"-1, errno {ret.errno}", ["0"], "unmapping a whole live mapping succeeds"
                      + (" (also after the buffer was freed)" if after_free else ""))
    return None


@shows("unmap-returns", "map-must-unmap", "free-unmap-allowed-after-free")
def ret_unmap(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    bad = unmap_result(s, ret)
    if bad is not None:
        return bad
    if s.inflight is not None and s.inflight.applied and ret.ret == 0:
        # A whole mapping unmapped: the call answered as it must, also for a buffer freed before (that the
        # pages are gone is shown only by looking at them: map_gone, pages_left_mapped).
        after_free = any((b := s.bufs.get(h)) is None or b.freed for h in s.inflight.buffers)
        return [show(done(s), "unmap-returns", "map-must-unmap",
                     *(("free-unmap-allowed-after-free",) if after_free else ()))]
    partial = ret.ret == 0 and ret.skipped is None and not (s.inflight is not None and s.inflight.applied)
    m = s.maps.get(arg_slot(call, "map")) if partial else None
    span = unmapped_span(m, arg_int(call, "offset"), arg_int(call, "length")) if m is not None else None
    if m is None or span is None:
        return [done(s)]
    maps = dict(s.maps)
    maps[arg_slot(call, "map")] = evolve(m, ranges=ranges_left(m, span))
    return [evolve(s, maps=maps, inflight=None)]


def call_access(ctx: Ctx, s: State, call: Call) -> Out:
    """map_read / map_write / buf_map: the access is in flight until its ret; an onLoad observed meanwhile
    is recorded on it (loading.overtake), since the access may have met that load's copy (reading R16) or
    the map may have met the load (reading R15). An onPreempt observed during a buf_map is recorded on it
    too (preemption.met_by_maps): the map may have been decided before the callback. With no load in
    flight in a scenario whose calls are all made by main, no load can start before the ret: unless the
    mapped buffer may still get its onPreempt, nothing will be recorded, so no call state is kept."""
    if ctx.one_thread and not s.loads and not (call.op == "buf_map" and onpreempt_may_come(s, call)):
        return [s]
    return [evolve(s, inflight=Inflight(call.step, call.op))]


def onpreempt_may_come(s: State, call: Call) -> bool:
    """Whether the buffer a buf_map names may still get an onPreempt."""
    handle = arg_handle(call, "buf")
    b = s.bufs.get(handle) if handle is not None else None
    return b is not None and b.onpreempt and not b.preempt_cb


def _live_map(s: State, call: Call, access: str) -> tuple[str, Mapping_]:
    """The slot and mapping a map_read or map_write goes through; Unjudgeable when it names none live."""
    slot = arg_slot(call, "map")
    m = s.maps.get(slot)
    if m is None:
        raise Unjudgeable(call.line, f"step {call.step} {access} through {slot}, which is not a live mapping")
    return slot, m


@shows("req-size-bytes")
def ret_map_write(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    if ret.skipped is not None:
        return [done(s)]
    slot, m = _live_map(s, call, "writes")
    off, length, seed = arg_int(call, "offset"), arg_int(call, "length"), arg_int(call, "seed")
    if not m.shared:
        maps = dict(s.maps)
        maps[slot] = evolve(m, overlay=write(m.overlay, off, off + length, seed, off, "map-maps-buffer"))
        return [evolve(s, maps=maps, inflight=None)]
    b = s.bufs.get(m.buf)
    if b is None:
        return [done(s)]
    start = m.offset + off
    content = write(b.content, start, start + length, seed, start, "map-maps-buffer")
    # Reading R16: bytes of a load's range written while the load is in flight (or while its onLoad was
    # observed) stay indeterminate: the copy may come before or after the write.
    for lo, hi in in_flight_spans(s, m.buf):
        content = forget(content, lo, hi)
    loads = dict(s.loads)
    for lid, ld in s.loads.items():
        span = ld.span()
        if ld.buf == m.buf and span is not None and start < span[1] and start + length > span[0]:
            loads[lid] = evolve(ld, dirty=(*ld.dirty, (max(start, span[0]), min(start + length, span[1]))))
    bufs = dict(s.bufs)
    bufs[m.buf] = evolve(b, content=content)
    out = evolve(s, bufs=bufs, loads=loads, inflight=None)
    return [show(out, "req-size-bytes") if reaches_last_page(b, start + length) else out]


@shows("req-size-bytes")
def reaches_last_page(b: Buffer, end: int) -> bool:
    """Spec: "Sets the size of the buffer in bytes for an allocation request." (req-size-bytes)

    An access through a mapping that ends in the buffer's last page, and returns, shows the buffer holds
    the bytes its size asked for (a smaller buffer would not have that page)."""
    return b.size > 0 and end > (b.size - 1) // PAGE * PAGE


@clause("map-maps-buffer", "free-mapping-valid-after-free", "load-async", "req-file-segment")
def read_digest(s: State, m: Mapping_, off: int, length: int, digest: object, memo: DigestMemo,
                hidden: list[tuple[int, int]] | None = None) -> Reject | tuple[str, ...]:
    """Spec: "If there are any existing mappings to the buffer via ANpuBuffer_map(), the mapping will
    continue to be valid until unmapped even after the buffer is freed." (free-mapping-valid-after-free)
    Spec: "Maps a buffer into the application's address space." (map-maps-buffer)

    Bytes read through a mapping are the bytes last written to the buffer (through a shared mapping or by
    a completed load); bytes never written are unconstrained, and so are the ``hidden`` buffer ranges
    (loads in flight during the read, reading R16). Returns the rejection, or what the read demonstrated
    (``read_shown``; nothing when the bytes were not all known).
    """
    b = s.bufs.get(m.buf)
    if m.shared:
        if b is None:
            return ()
        content: Content = b.content
        for lo, hi in hidden or ():
            content = forget(content, lo, hi)
        exp = expected_digest(content, m.offset + off, m.offset + off + length, memo)
    else:
        exp = expected_digest(m.overlay, off, off + length, memo)
    if exp is None:
        return ()
    if digest == exp[0]:
        return read_shown(m, b, off, length, shown_clauses(exp[1]))
    cid = "free-mapping-valid-after-free" if b is not None and b.freed else (named_clause(exp[1]) or "map-maps-buffer")
    return reject(cid, f"digest {digest}", [exp[0]],
                  f"bytes {off}..{off + length} of the mapping of {m.buf} differ from what was written or loaded")


@shows("map-maps-buffer", "map-args-like-mmap", "free-mapping-valid-after-free", "unmap-args-like-munmap",
       "req-size-bytes", "load-async", "load-file-offset", "load-buffer-offset-nonnegative", "load-length-nonnegative",
       "load-on-alloc-reported-by-onalloc", "req-file-segment", "req-file-offset-ignored")
def read_shown(m: Mapping_, b: Buffer | None, off: int, length: int, clauses: tuple[str, ...]) -> tuple[str, ...]:
    """What bytes read through a mapping and found as written or loaded demonstrate: the clauses that made
    them observable (content.py: a load's, a segment's), that the mapping is the buffer's memory
    (map-maps-buffer; a private mapping or one at an offset, as mmap() maps: map-args-like-mmap), also
    after the buffer's free and after part of the mapping was unmapped; a read reaching the last page, the
    buffer's size."""
    out = list(clauses)
    out.append("map-maps-buffer" if m.shared else "map-args-like-mmap")
    if m.offset:
        out.append("map-args-like-mmap")
    if b is not None and b.freed:
        out.append("free-mapping-valid-after-free")
    if m.ranges is not None:
        out.append("unmap-args-like-munmap")
    if b is not None and reaches_last_page(b, m.offset + off + length):
        out.append("req-size-bytes")
    return tuple(out)


def ret_map_read(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    if ret.skipped is not None:
        return [done(s)]
    _, m = _live_map(s, call, "reads")
    res = read_digest(s, m, arg_int(call, "offset"), arg_int(call, "length"), ret.extra.get("digest"),
                      ctx.digests, in_flight_spans(s, m.buf))
    return res if isinstance(res, Reject) else [show(done(s), *res)]


@clause("map-args-like-mmap", "map-prot-param-subset")
def effective_prot(m: Mapping_, b: Buffer | None, off: int, length: int, ret: Ret) -> Reject | None:
    """Spec: "The arguments are similar to mmap()." (map-args-like-mmap)
    Spec: "The value must be a subset of the value set by ANpuManager_AllocRequest_setProtectionFlags().
    Otherwise, ANpuBuffer_map() fails and returns MAP_FAILED." (map-prot-param-subset)

    What the process's memory map says of the pages of [off, off+length) of a live mapping (probe op
    ``map_prot``). As with mmap(), the mapping covers every page its length touches (4097 bytes: two pages),
    and its pages may be written only when the map asked for PROT_WRITE, and read when it asked for
    PROT_READ. A page writable although the buffer itself was allocated without PROT_WRITE breaks the subset
    rule; one writable only beyond the map's own ``prot`` breaks the mmap() meaning of ``prot``. Readable
    pages beyond the asked protection are allowed (mmap() may imply PROT_READ on some architectures);
    PROT_EXEC is not judged.
    """
    span = f"bytes {off}..{off + length} of the mapping of {m.buf}"
    if ret.extra.get("mapped") is not True:
        return reject("map-args-like-mmap", f"{span} not all mapped", ["every page the length touches mapped"],
                      f"a mapping of {m.length} bytes covers its pages as mmap() does")
    every, some = ret.extra.get("prot_all"), ret.extra.get("prot_any")
    if not isinstance(every, int) or not isinstance(some, int):
        return None
    if some & PROT_WRITE and not m.prot & PROT_WRITE:
        beyond_buffer = b is not None and not b.prot & PROT_WRITE
        cid = "map-prot-param-subset" if beyond_buffer else "map-args-like-mmap"
        whose = "the buffer's protection" if beyond_buffer else "the map's prot"
        return reject(cid, f"{span} writable", [f"not writable (prot {m.prot:#x})"],
                      f"PROT_WRITE is outside {whose}")
    missing = m.prot & (PROT_READ | PROT_WRITE) & ~every
    if missing:
        return reject("map-args-like-mmap", f"{span} with protection {every:#x}", [f"at least {m.prot & 3:#x}"],
                      f"the map asked for prot {m.prot:#x}")
    return None


@shows("map-args-like-mmap", "map-prot-param-subset")
def prot_shown(m: Mapping_, b: Buffer | None) -> tuple[str, ...]:
    """What a mapping's effective protection, found as asked, demonstrates: the pages mmap() would map with
    the prot mmap() would give (map-args-like-mmap); not writable where the buffer's own protection has no
    PROT_WRITE (map-prot-param-subset)."""
    beyond = b is not None and not b.prot & PROT_WRITE and not m.prot & PROT_WRITE
    return ("map-args-like-mmap", *(("map-prot-param-subset",) if beyond else ()))


def ret_map_prot(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    if ret.skipped is not None or ret.ret != 0:
        return [done(s)]
    slot = arg_slot(call, "map")
    m = s.maps.get(slot)
    if m is None:
        raise Unjudgeable(call.line, f"step {call.step} looks at {slot}, which is not a live mapping")
    b = s.bufs.get(m.buf)
    bad = effective_prot(m, b, arg_int(call, "offset"), arg_int(call, "length"), ret)
    if bad is not None:
        return bad
    judged = isinstance(ret.extra.get("prot_all"), int) and isinstance(ret.extra.get("prot_any"), int)
    return [show(done(s), *prot_shown(m, b)) if judged else done(s)]


@clause("unmap-unmaps")
def pages_left_mapped(slot: str, off: int, length: int, ret: Ret) -> Reject | None:
    """Spec: "Unmaps a previously mapped buffer." (unmap-unmaps)

    What the process's memory map says of bytes [off, off+length) of a mapping the scenario unmapped there
    (probe op ``map_gone``, skipped while the scenario still maps any of them): no page of them still holds
    the mapped object at the offset it had. An unmap that returned 0 and left them mapped did not unmap."""
    if ret.extra.get("mapped") is not True:
        return None
    return reject("unmap-unmaps", f"bytes {off}..{off + length} of {slot} still mapped", ["not mapped"],
                  "ANpuBuffer_unmap returned 0 for them, and they still map the buffer")


@shows("unmap-unmaps")
def ret_map_gone(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    """``map_gone`` answered: unmapped bytes no longer map the buffer (unmap-unmaps)."""
    if ret.skipped is not None or ret.ret != 0 or not isinstance(ret.extra.get("mapped"), bool):
        return [done(s)]
    bad = pages_left_mapped(arg_slot(call, "map"), arg_int(call, "offset"), arg_int(call, "length"), ret)
    return bad if bad is not None else [show(done(s), "unmap-unmaps")]
