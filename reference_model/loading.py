"""Chapter "loading": file segments (at allocation and with ANpuBuffer_loadAsync), fd ownership, onLoad."""

from __future__ import annotations

from collections.abc import Mapping

from ._context import Ctx, Out, arg_handle, arg_int, arg_slot, live_buffer, negative_errno, reject
from .allocation import returned_first
from .content import NAMED_ONLY, Content, forget, prefix, write
from .cookies import borrow, callback_cookie_alive, cookie_value_shown, hold
from .crashes import load_without_onload_crashes
from .requests import file_hold, file_segment
from .rules import Reject, clause, shows
from .state import Buffer, FileSeg, FileState, Inflight, Load, State, done, each_in_flight, evolve, show
from .trace import Call, Cb, Ret


@clause("load-async", "load-no-existing-mapping", "load-length-nonnegative", "load-buffer-offset-nonnegative",
        "load-fd-ownership", "load-file-offset")
def load_expectation(ctx: Ctx, s: State, b: Buffer, seg: FileSeg) -> tuple[str, str, str]:
    """Spec: "There should not be any existing mapping (via ANpuBuffer_map()) to the buffer. Otherwise, the
    callback is replied with an error." (load-no-existing-mapping)
    Spec: "segmentLength The length of the file segment to load. Must be non-negative." (load-length-nonnegative;
    likewise bufferOffset, load-buffer-offset-nonnegative)
    Spec: "fdToOwn The file descriptor of the file to load. Must be a valid file descriptor." (load-fd-ownership)
    Spec: "Loads a file into the buffer asynchronously." (load-async)

    Returns (expectation, clause, tag): "error" — the onLoad must carry an error (aosp-2026 accepts success
    while mapped, D7; a descriptor that is not valid, reading R22, and a negative length, R17, are the
    caller's duties: success departs from the reading); "success" — a valid in-bounds load of a live
    buffer; "any".
    Where preemption can happen without a vnpu command, a "success" load may also be answered ENOENT:
    the buffer was preempted unseen, as a map would show (its onPreempt, if set, is then owed).
    A descriptor the caller handed over before (to a request or another load) is its owner's, who may have
    closed it already: "Must be a valid file descriptor" is then the caller's duty unmet, and either answer
    is allowed ("any").
    """
    if seg.length < 0:
        return "error", "load-length-nonnegative", "R17"  # "Must be non-negative": no consequence stated
    if seg.buffer_offset < 0:
        return "error", "load-buffer-offset-nonnegative", ""
    if seg.file is None:
        # "Must be a valid file descriptor": the caller's duty, no consequence stated. An error is the reading;
        # success departs from it (WARN R22, as for a request's descriptor).
        return ("any", "load-fd-ownership", "") if seg.fd >= 0 else ("error", "load-fd-ownership", "R22")
    if seg.offset < 0:
        return "error", "load-file-offset", ""
    if b.maps > 0:
        return "error", "load-no-existing-mapping", "D7" if ctx.profile.load_while_mapped_ok else ""
    f = s.files.get(seg.file)
    if f is not None and f.handed is not None:
        return "any", "load-fd-ownership", ""
    outside = f is None or seg.offset + seg.length > f.size or seg.buffer_offset + seg.length > b.size
    if b.preempted or b.loads or outside:
        return "any", "load-async", ""
    return "success", "load-async", ""


def call_load(ctx: Ctx, s: State, call: Call) -> Out:
    crash = load_without_onload_crashes(call)
    if crash is not None:
        return [evolve(s, inflight=Inflight(call.step, call.op, crash=crash))]
    handle = arg_handle(call, "buf")
    seg = file_segment(call)
    if handle is None or seg is None or (seg.file is not None and seg.file not in s.files):
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    b = live_buffer(s, call, handle, "loads into")
    out = _start_load(ctx, s, call, handle, b, seg)
    if ctx.profile.load_fd_minus_one_aborts and seg.file is None and seg.fd == -1:
        dies = Inflight(call.step, call.op, crash="load-fd-ownership", crash_did="D23")
        return [*out, evolve(s, inflight=dies)]
    return out


def _start_load(ctx: Ctx, s: State, call: Call, handle: str, b: Buffer, seg: FileSeg) -> list[State]:
    """The load becomes pending (load_expectation says what its onLoad may carry). Reading R16: the bytes
    of its range are indeterminate from the call until its onLoad, whatever the onLoad will say.

    Under aosp-2026, call_load adds a second history for fd -1: the process dies inside the call (D23:
    the AOSP client wraps the fd in an owned-fd type whose constructor aborts on -1). The crash clause
    named if the call returns in that history is load-fd-ownership ("Must be a valid file descriptor").
    """
    expect, cid, did = load_expectation(ctx, s, b, seg)
    lid = s.next_id
    loads = dict(s.loads)
    loads[lid] = Load(handle, seg, b.cookie, call.step, expect, cid, did)
    span = loads[lid].span()
    content = forget(b.content, *span) if span is not None else b.content  # indeterminate until onLoad (R16)
    bufs = dict(s.bufs)
    bufs[handle] = evolve(b, loads=b.loads + 1, content=content)
    files = dict(s.files)
    file_hold(files, seg, +1, "load-fd-ownership")
    if seg.file is not None and seg.file in files:
        files[seg.file] = evolve(files[seg.file], bufs=files[seg.file].bufs | {handle})
    return [evolve(s, loads=loads, bufs=bufs, files=files, tokens=hold(s, b.cookie, +1), next_id=lid + 1,
                   inflight=Inflight(call.step, call.op, applied=True))]


def ret_load(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    tag = returned_first(ret)
    return [evolve(s, inflight=None, dids=s.dids | {tag})] if tag else [done(s)]


@clause("load-callback-on-done", "load-onload-invoked", "load-callback-same-buf", "load-callback-cookie",
        "load-callback-not-alloc", "load-callback-errornum")
def on_load(ctx: Ctx, s: State, ev: Cb) -> Out:
    """Spec: "NpuManager calls this function when the buffer load is done or has encountered an error."
    (load-callback-on-done)
    Spec: "This is the same buffer passed to ANpuBuffer_loadAsync(), even if loading fails."
    (load-callback-same-buf)
    Spec: "This callback is invoked in response to ANpuBuffer_loadAsync(), NOT to ANpuManager_allocAsync()."
    (load-callback-not-alloc)
    Spec: "cookie The user cookie previously set by ANpuManager_AllocRequest_setCookie(), or NULL if not
    set. errorNum 0 if successful, or an errno on error. buf The buffer." (load-callback-cookie,
    load-callback-errornum)

    One onLoad per loadAsync, carrying the same buffer and that buffer's cookie. One with no loadAsync of its
    buffer pending, while allocations are pending or for a buffer whose request had a file segment, answers
    an allocation: load-callback-not-alloc.
    """
    b = s.bufs.get(ev.buf or "")
    for_alloc = b is not None and "file" not in b.unset and not b.loads
    if not s.loads:
        cid = "load-callback-not-alloc" if s.subs or for_alloc else "load-callback-on-done"
        return reject(cid, f"onLoad(buf={ev.buf or 'NULL'})", ["no onLoad: no loadAsync is pending"],
                      "onLoad answers loadAsync only")
    candidates = [(lid, ld) for lid, ld in s.loads.items() if ld.buf == ev.buf]
    if not candidates and for_alloc:
        return reject("load-callback-not-alloc", f"onLoad(buf={ev.buf})", ["no onLoad: no loadAsync of it is pending"],
                      "onLoad answers loadAsync only, not the load of a file segment at allocation")
    if not candidates:
        pending = sorted({ld.buf for ld in s.loads.values()})
        return reject("load-callback-same-buf", f"onLoad(buf={ev.buf or 'NULL'})", pending,
                      "onLoad carries the buffer passed to loadAsync, even on failure")
    # The callback names only the buffer: with two loads of one buffer outstanding it may answer
    # either, so every pending load of that buffer is a candidate (the first rejection explains).
    outcomes = [_answer_load(ctx, s, ev, lid, ld) for lid, ld in candidates]
    successors = [state for out in outcomes if not isinstance(out, Reject) for state in out]
    return successors if successors else outcomes[0]


def _answer_load(ctx: Ctx, s: State, ev: Cb, lid: int, ld: Load) -> Out:
    """The onLoad event as the answer to the pending load `lid`."""
    if ev.cookie != ld.cookie.value:
        return reject("load-callback-cookie", f"onLoad(cookie={ev.cookie or 'NULL'})", [ld.cookie.value or "NULL"],
                      f"the cookie of {ld.buf} is the one of the request it was allocated from")
    bad = callback_cookie_alive(s, ld.cookie, ev) or errornum_is_errno(ev)
    if bad is not None:
        return bad
    dids = s.dids
    if ld.expect == "error" and ev.error is None:
        if not ld.dids:
            return reject(ld.why, "onLoad(errorNum=0)", ["onLoad(errorNum=errno)"],
                          f"the loadAsync of step {ld.step} must be answered with an error")
        dids = dids | {ld.dids}
    b = s.bufs.get(ld.buf)
    unseen = ld.expect == "success" and ev.error == "ENOENT" and may_be_preempted_unseen(ctx, s, ld.buf)
    live = b is not None and not b.freed
    if ld.expect == "success" and ev.error is not None and not unseen and live:
        # "is done or has encountered an error": nothing promises that a valid load of a live buffer succeeds
        # (reading R8). A load whose buffer the application freed meanwhile may end either way, no reading.
        dids = dids | {aosp_load_error(ctx, b, ev) or "R8"}
    loads = dict(s.loads)
    del loads[lid]
    files = dict(s.files)
    file_hold(files, ld.seg, -1)
    bufs = s.bufs
    if b is not None:
        if unseen:  # an unseen preemption, as for map (load-preempted-enoent): announced if onPreempt is set
            b = evolve(b, preempted=True, announced=b.onpreempt and not b.preempt_cb)
        if (ctx.profile.load_bad_fd_wedges and ev.error is not None and ld.seg.file is None and ld.seg.fd < -1):
            b = evolve(b, wedged=True)  # D25: the AOSP client stays Loading
        bufs = dict(s.bufs)
        bufs[ld.buf] = evolve(b, loads=b.loads - 1,
                                     content=loaded_content(s, b, ld, ev.error is None, loads))
    ghosts, kept = s.ghosts, False
    if b is None and unseen:
        ghosts, kept = preempted_after_free(s.ghosts, ld.buf)
    inflight, parked = overtake(s, ld)
    out = evolve(s, loads=loads, files=files, bufs=bufs, tokens=hold(s, ld.cookie, 0 if kept else -1), dids=dids,
                       inflight=inflight, parked=parked, ghosts=ghosts)
    return [borrow(ctx, show(out, *load_answer_shown(ld, ev)), ld.cookie, ev)]


@clause("preempt-after-free-race")
def preempted_after_free(ghosts: tuple[Buffer, ...], handle: str) -> tuple[tuple[Buffer, ...], bool]:
    """Spec: "Note: On race conditions, the preemption callback may be invoked after the caller has already freed
    the buffer." (preempt-after-free-race)

    A freed buffer with onPreempt set whose load, answered after the free, reported a preemption (ENOENT): its
    onPreempt may still come, so the device may keep its cookie for it. The ghost takes over the load's hold
    of the cookie (returned True); the onPreempt stays optional, the buffer being freed."""
    for i, g in enumerate(ghosts):
        if g.handle == handle and g.onpreempt and not g.preempt_cb and not g.awaits_late_onpreempt():
            return (*ghosts[:i], evolve(g, preempted=True, announced=True), *ghosts[i + 1:]), True
    return ghosts, False


@shows("load-callback-on-done", "load-callback-errornum", "load-callback-cookie", "load-callback-same-buf",
       "cookie-callback-null-if-unset", "load-no-existing-mapping")
def load_answer_shown(ld: Load, ev: Cb) -> tuple[str, ...]:
    """What an accepted onLoad demonstrates: the callback came, with 0 or an errno, with the buffer's cookie
    (a NULL one where none was set); with an error, the buffer that was passed ("even if loading fails"),
    and, for a load into a mapped buffer, the refusal the text promises. A success shows its bytes once they
    are read back (loaded_content)."""
    cookie = (("load-callback-cookie", *cookie_value_shown(ld.cookie.value)) if ld.cookie.value is not None
              else ("cookie-callback-null-if-unset",))
    out = ("load-callback-on-done", "load-callback-errornum", *cookie)
    if ev.error is None:
        return out
    # A load refused because the buffer is mapped is what the text promises ("the callback is replied with an
    # error"); refusals of a caller's breach (a negative value, an invalid descriptor) are readings and show
    # nothing the text promises.
    promised = ("load-no-existing-mapping",) if ld.expect == "error" and ld.why == "load-no-existing-mapping" else ()
    return (*out, "load-callback-same-buf", *promised)


def aosp_load_error(ctx: Ctx, b: Buffer | None, ev: Cb) -> str | None:
    """The AOSP discrepancy that explains an error answering a valid load, or None: ECANCELED when a
    preemption notice reached the load (D14); any error once a load with a negative fd other than -1
    left the client's buffer Loading (D25: EINVAL)."""
    if ev.error == "ECANCELED" and ctx.profile.preempt_extra_callbacks:
        return "D14"
    if b is not None and b.wedged and ctx.profile.load_bad_fd_wedges:
        return "D25"
    return None


@clause("load-callback-errornum")
def errornum_is_errno(ev: Cb) -> Reject | None:
    """Spec: "errorNum 0 if successful, or an errno on error. buf The buffer." (load-callback-errornum)

    An errno is a positive number: a negative errorNum (e.g. -ENODEV) is neither 0 nor an errno.
    """
    if not negative_errno(ev.error):
        return None
    return reject("load-callback-errornum", f"onLoad(errorNum={ev.error})", ["onLoad(errorNum=0)",
                  "onLoad(errorNum=a positive errno)"], "errorNum is 0 on success or an errno, and errno values "
                  "are positive")


@clause("load-async", "load-callback-errornum", "load-length-nonnegative")
def loaded_content(s: State, b: Buffer, ld: Load, success: bool, others: Mapping[int, Load]) -> Content:
    """Spec: "Loads a file into the buffer asynchronously." (load-async)
    Spec: "errorNum 0 if successful, or an errno on error." (load-callback-errornum)
    Spec: "segmentLength The length of the file segment to load. Must be non-negative."
    (load-length-nonnegative)

    The bytes of buffer ``b`` once the onLoad of ``ld`` is observed (reading R16). After success the load's
    range holds the file's bytes, except the bytes the program wrote through a shared mapping while the
    load was in flight (the write may have landed before or after the copy, or between its parts: they
    are indeterminate) and the ranges of other loads of the buffer still in flight (``others``). After an
    error the text says nothing of the bytes: the range stays indeterminate, as it has been since the call.
    A load of length 0 changes no byte; a digest of the bytes from its buffer offset on then names
    load-length-nonnegative. A descriptor handed over before (load_expectation) may name another file by
    now: what its load copied is unknown.
    """
    content = b.content
    seg, span = ld.seg, ld.span()
    f = s.files.get(seg.file) if seg.file is not None else None
    if success and seg.length < 0:  # a negative length accepted (R17): the text says nothing of what it wrote
        content = forget(content, max(0, seg.buffer_offset), b.size)
    if ld.why == "load-fd-ownership":
        f = None  # its bytes stay indeterminate, as since the call
    if success and f is not None and span is not None:
        # A nonzero offset demonstrates "fileOffset ... starting from the beginning of the file" (an offset of
        # 0 does not: a device ignoring fileOffset loads the same bytes). Bytes that disagree name the offset
        # first wherever it decides where they come from: a nonzero one, or any once the application moved
        # the descriptor's position; then a nonzero buffer offset, which decides where they go.
        shows = [*(("load-file-offset",) if seg.offset else ()),
                 *(("load-buffer-offset-nonnegative",) if seg.buffer_offset else ()), "load-async"]
        if not seg.offset and f.position not in (None, 0):
            shows = [NAMED_ONLY + "load-file-offset", *shows]
        content = write(content, *span, f.seed, seg.buffer_offset - seg.offset, ",".join(shows))
        for lo, hi in ld.dirty:
            content = forget(content, lo, hi)
        # The bytes around the segment were to stay as they were: before it, the buffer offset says where
        # loading starts; after it, the length says where it stops.
        content = prefix(content, 0, span[0], "load-buffer-offset-nonnegative")
        content = prefix(content, span[1], b.size, "load-length-nonnegative")
    if success and seg.length == 0 and seg.buffer_offset >= 0:
        # "segmentLength The length of the file segment to load": 0 loads nothing, and the bytes a load to
        # the end of the file would have replaced are the ones a digest then names the clause for.
        content = prefix(content, seg.buffer_offset, b.size, "load-length-nonnegative")
    for other in others.values():
        other_span = other.span() if other.buf == ld.buf else None
        if other_span is not None:
            content = forget(content, *other_span)
    return content


def overtake(s: State, ld: Load) -> tuple[Inflight | None, tuple[tuple[str, Inflight], ...]]:
    """The in-flight calls with the load ``ld`` recorded as answered during them: a map_read or map_write
    in flight may have met the copy (reading R16)."""
    span = ld.span()

    def mark(inf: Inflight) -> Inflight:
        if inf.op == "buf_map":  # a map may have met the load before its onLoad (R15), whatever its span
            return evolve(inf, overtaken=(*inf.overtaken, (ld.buf, *(span or (0, 0)))))
        if span is None or inf.op not in ("map_read", "map_write"):
            return inf
        return evolve(inf, overtaken=(*inf.overtaken, (ld.buf, *span)))

    return each_in_flight(s, mark)


@clause("load-callback-errornum", "preempt-after-free-race")
def may_be_preempted_unseen(ctx: Ctx, s: State, handle: str) -> bool:
    """Spec: "errorNum 0 if successful, or an errno on error. buf The buffer." (load-callback-errornum)
    Spec: "Note: On race conditions, the preemption callback may be invoked after the caller has already freed
    the buffer." (preempt-after-free-race)

    Whether an onLoad(ENOENT) may report a preemption the trace did not show: the buffer is unmapped and
    preemption can happen without a vnpu command (or vnpu pressure may have reached it). A buffer the
    application freed while its load was in flight (and that has left the state, being unmapped) may
    have been preempted before the free as every other buffer may: the allowance holds for it too.
    """
    b = s.bufs.get(handle)
    if b is not None:
        return (ctx.spontaneous or b.preemptable) and b.maps == 0
    return ctx.spontaneous or any(g.handle == handle and g.preemptable for g in s.ghosts)


@clause("load-callback-on-done", "load-onload-invoked")
def all_loaded(s: State) -> Reject | None:
    """Spec: "onLoad The callback to be invoked when loading is finished or has encountered an error."
    (load-onload-invoked)

    When teardown has waited for the callbacks, every loadAsync must have had its onLoad.
    """
    if not s.loads:
        return None
    ld = min(s.loads.values(), key=lambda x: x.step)
    return reject("load-onload-invoked", f"no onLoad for the loadAsync of step {ld.step}",
                  ["exactly one onLoad per loadAsync"], "the settle wait ended with a load unanswered")


@shows("load-onload-invoked")
def settle_load(ctx: Ctx, s: State) -> Out:
    bad = all_loaded(s)
    if bad is not None:
        return bad
    # Every loadAsync had its one onLoad by the settle.
    return [show(s, "load-onload-invoked") if "load-callback-on-done" in s.shown else s]


def ret_file_new(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    if ret.skipped is not None:
        return [done(s)]
    files = dict(s.files)
    files[arg_slot(call, "file")] = FileState(arg_int(call, "size"), arg_int(call, "seed"))
    return [evolve(s, files=files, inflight=None)]


def ret_file_seek(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    slot = arg_slot(call, "file")
    f = s.files.get(slot)
    if f is None or ret.skipped is not None or ret.ret not in (0, None):
        return [done(s)]
    files = dict(s.files)
    files[slot] = evolve(f, position=None if f.handed == "req-file-fd-ownership" else arg_int(call, "position"))
    return [evolve(s, files=files, inflight=None)]


def unneeded(s: State, f: FileState) -> bool:
    """The handed-over descriptor of ``f`` is needed by nothing any more: the request freed (or its segment
    replaced), every submission and load using it answered, every buffer it was loaded into freed."""
    return (f.handed is not None and f.holders <= 0
            and not any(h in s.bufs and not s.bufs[h].freed for h in f.bufs))


@clause("req-file-fd-ownership", "load-fd-ownership", "load-position-unchanged")
def fd_check(f: FileState, unneeded_since_wait: bool, closed: object, position: object) -> Reject | None:
    """Spec: "Ownership: The ANpuManager_AllocRequest object takes ownership of the provided file descriptor.
    The caller must not close it manually." (req-file-fd-ownership)
    Spec: "The ownership of the fd is transferred to ANpuManager." (load-fd-ownership)
    Spec: "The position of the associated file description is not changed by this function."
    (load-position-unchanged)

    The text transfers ownership and says nothing about when the descriptor is closed; keeping it for
    ever is a leak. So: once nothing needs it any more — the request freed (or its segment replaced),
    every submission and load using it answered, and every buffer it was loaded into freed — and a quiet
    wait (a ``sleep_ms`` step) has passed since, it must be closed (``unneeded_since_wait``). Before that,
    open or closed are both fine: closing at the buffer's free is as legal as closing at onLoad, and so is
    closing on a worker thread just after the free returned. loadAsync leaves the file position where the
    application put it.
    """
    if unneeded_since_wait and closed is not True:
        return reject(f.handed or "req-file-fd-ownership", "the handed-over descriptor is still open", ["closed"],
                      "the implementation owns the descriptor and has not needed it since before the last wait")
    if f.position is not None and isinstance(position, int) and position != f.position:
        return reject("load-position-unchanged", f"position {position}", [str(f.position)],
                      "loadAsync does not move the file position")
    return None


@shows("req-file-fd-ownership", "load-fd-ownership", "load-position-unchanged")
def ret_fd_check(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    f = s.files.get(arg_slot(call, "file"))
    if f is None or ret.skipped is not None:
        return [done(s)]
    closed, position = ret.extra.get("closed"), ret.extra.get("position")
    bad = fd_check(f, f.due and unneeded(s, f), closed, position)
    if bad is not None:
        return bad
    # The owner closed the descriptor it was handed; loadAsync left the position where it was.
    shown = [f.handed] if closed is True and f.handed else []
    if f.handed == "load-fd-ownership" and f.position is not None and position == f.position:
        shown.append("load-position-unchanged")
    return [show(done(s), *shown)]


def call_await_closed(ctx: Ctx, s: State, call: Call) -> Out:
    """Waiting for a descriptor to be closed is a quiet wait for it: if nothing needed it when the wait
    began, it must be closed when the wait ends (the probe gives it the whole budget, polling). Teardown
    awaits every handed-over descriptor this way once it has freed everything."""
    slot = arg_slot(call, "file")
    f = s.files.get(slot)
    inflight = Inflight(call.step, call.op)
    if f is None or f.due or not unneeded(s, f):
        return [evolve(s, inflight=inflight)]
    files = dict(s.files)
    files[slot] = evolve(f, due=True)
    return [evolve(s, files=files, inflight=inflight)]


def ret_sleep(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    """A quiet wait: every handed-over descriptor nothing needs now must be closed by the next fd_check."""
    due = {slot: f for slot, f in s.files.items() if not f.due and unneeded(s, f)}
    if not due:
        return [done(s)]
    files = dict(s.files)
    for slot, f in due.items():
        files[slot] = evolve(f, due=True)
    return [evolve(s, files=files, inflight=None)]
