"""Chapter "allocation": ANpuManager_allocAsync and its onAlloc callbacks.

A submission is the snapshot of one request at allocAsync(); exactly one onAlloc answers it. The
callback names only a cookie, so it is attributed to a pending submission with that cookie value —
a shared or NULL cookie leaves a choice, and the judge keeps one candidate state per choice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from . import policies
from ._context import (
    ANY_ERRNO,
    PRIORITY_BOUNDS,
    PRIORITY_RANGE,
    PRIORITY_SPAN,
    TYPE_VALID,
    Ctx,
    Out,
    arg_list,
    negative_errno,
    reject,
    show_errno,
    slot_label,
)
from .caps import DEVICE_POLICIES
from .content import EMPTY, write
from .cookies import borrow, callback_cookie_alive, cookie_value_shown, hold, unmatched_alloc_cookie
from .crashes import alloc_without_onalloc_crashes
from .requests import file_hold
from .rules import Reject, clause, shows
from .state import (
    PROT_VALID,
    Attrs,
    Buffer,
    Inflight,
    State,
    Submission,
    done,
    evolve,
    live_bytes,
    show,
)
from .trace import Call, Cb, Ret

SUCCESS: Final = "success"


@dataclass(frozen=True, slots=True)
class Expect:
    """Allowed answers: ``alts`` maps "success", an errno name or ANY_ERRNO to the discrepancy tag
    that allows it ("" under the published text)."""

    alts: dict[str, str]
    clause: str
    why: str

    def match(self, error: str | None) -> str | None:
        key = SUCCESS if error is None else error
        if key in self.alts:
            return self.alts[key]
        if error is not None and ANY_ERRNO in self.alts:
            return self.alts[ANY_ERRNO]
        return None

    def shown(self) -> tuple[str, ...]:
        return tuple(sorted(k if k != SUCCESS else "0 (success)" for k in self.alts))


def _merge(base: Expect, extra: Expect, tag: str) -> Expect:
    alts = dict(base.alts)
    for k, v in extra.alts.items():
        alts.setdefault(k, ",".join(x for x in (tag, v) if x))
    return Expect(alts, base.clause, base.why)


@clause("req-device-negative-einval", "req-type-unknown-einval", "req-size-bytes", "req-size-default-zero",
        "priority-request-range", "priority-range-inclusive", "req-prot-values")
def invalid_request(ctx: Ctx, a: Attrs) -> Expect | None:
    """Spec: "Hence, this must be with a valid non-negative device number before being sent to
    NpuManagerService. Otherwise, the request is responded with errorNum set to EINVAL."
    (req-device-negative-einval; likewise req-type-unknown-einval for the type)
    Spec: "This is the relative priority of the buffer within the app. The value must be within the range
    [ANPUBUFFER_PRIORITY_MIN, ANPUBUFFER_PRIORITY_MAX], inclusive." (priority-request-range)
    Spec: "prot The protection flags. Either PROT_NONE, or the bitwise OR of one or more of PROT_READ,
    PROT_WRITE, PROT_EXEC." (req-prot-values)
    Spec: "Sets the size of the buffer in bytes for an allocation request." (req-size-bytes)

    Readings (R4): an out-of-range priority and invalid protection bits make the request invalid, so it
    is refused — with any errno, since the text names EINVAL only for the device and the type; an errno
    other than EINVAL departs from the kit's reading (WARN R4). The range of the priority is a duty of
    the caller ("must be within the range") with no stated consequence: accepting it is WARN R4 too. A
    negative size describes no buffer and
    fails with any errno. The text never calls size 0 invalid: either answer, success departs from R4.
    """
    p = ctx.profile
    if a.device < 0 or a.type not in TYPE_VALID:
        cid = invalid_field_clause(a)
        alts = {"EINVAL": ""}
        if p.invalid_pair_enosys and (a.device < 0 or a.type == 0):
            alts["ENOSYS"] = "D2"
        what = f"device {a.device}" if a.device < 0 else f"type {a.type}"
        return Expect(alts, cid, f"the request has an invalid {what}")
    if a.priority not in PRIORITY_RANGE:
        e = Expect({"EINVAL": "", ANY_ERRNO: "R4"}, "priority-request-range",
                   f"priority {a.priority} is outside {PRIORITY_SPAN}")
        # "must be within the range" is the caller's duty; the text gives no consequence for its breach
        return _merge(e, valid_outcome(ctx, a, None, 0, 0), "D3" if p.priority_unchecked else "R4")
    if a.prot & ~PROT_VALID:
        e = Expect({"EINVAL": "", ANY_ERRNO: "R4"}, "req-prot-values",
                   f"prot {a.prot:#x} has bits outside READ|WRITE|EXEC")
        return _merge(e, valid_outcome(ctx, a, None, 0, 0), "D12") if p.prot_unchecked else e
    if a.size < 0:
        return Expect({ANY_ERRNO: ""}, "req-size-bytes", f"size {a.size} describes no buffer")
    if a.size == 0:
        return Expect({ANY_ERRNO: "", SUCCESS: "R4"}, "req-size-bytes", "size 0: the text allows either answer")
    return None


@clause("req-device-negative-einval", "req-device-default-negative", "req-type-unknown-einval",
        "req-type-default-unknown")
def invalid_field_clause(a: Attrs) -> str:
    """Spec: "The default value is a negative value, which is invalid." (req-device-default-negative)
    Spec: "The default value is ANPUBUFFER_TYPE_UNKNOWN, which is invalid." (req-type-default-unknown)

    The sentence an answer to a request with an invalid device or type is held to: the default's, when the
    request never set that field, else the setter's "Otherwise, the request is responded with errorNum set to
    EINVAL" (the device first)."""
    if a.device < 0:
        return "req-device-default-negative" if "device" in a.unset else "req-device-negative-einval"
    return "req-type-default-unknown" if "type" in a.unset else "req-type-unknown-einval"


@clause("req-file-segment", "req-file-fd-default", "req-file-offset-ignored", "req-file-length-nonnegative",
        "req-file-buffer-offset-nonnegative", "load-on-alloc-reported-by-onalloc")
def file_outcome(ctx: Ctx, s: State, a: Attrs) -> Expect | None:
    """Spec: "Sets the file segment to load for an allocation request." (req-file-segment)
    Spec: "segmentLength The length of the file segment to load. Must be non-negative. Ignored if fdToOwn
    is -1." (req-file-length-nonnegative; likewise bufferOffset)
    Spec: "Must be a valid file descriptor, or -1 to ask NpuManager to not load any file." (req-file-fd-default)

    A segment that cannot be loaded makes the allocation fail (any errno: the spec names none); a segment
    outside the file or the buffer leaves both answers open. A negative fd other than -1 is expected to fail
    the allocation; allocating it as if no file were given is WARN R22 (the caller's duty, no consequence).
    """
    seg = a.file
    if seg is None:
        return None
    if seg.file is None:
        if seg.fd >= 0:
            return Expect({SUCCESS: "", ANY_ERRNO: ""}, "req-file-fd-default", "a descriptor the probe does not know")
        # "Must be a valid file descriptor, or -1 ...": the caller's duty, no consequence stated. Failing is the
        # reading; treating it as "no file" (aosp-2026: D11) or otherwise allocating is WARN R22.
        e = Expect({ANY_ERRNO: ""}, "req-file-fd-default", f"fd {seg.fd} is neither valid nor -1")
        tag = "D11" if ctx.profile.any_negative_fd_no_file else "R22"
        return _merge(e, valid_outcome(ctx, evolve(a, file=None), None, 0, 0), tag)
    if seg.length < 0:
        # "Must be non-negative": the caller's duty, no consequence stated: accepting it is WARN R17
        return Expect({ANY_ERRNO: "", SUCCESS: "R17"}, "req-file-length-nonnegative",
                      f"segment length {seg.length} is negative")
    if seg.buffer_offset < 0:
        return Expect({ANY_ERRNO: ""}, "req-file-buffer-offset-nonnegative",
                      f"buffer offset {seg.buffer_offset} is negative")
    if seg.offset < 0:
        return Expect({ANY_ERRNO: ""}, "req-file-offset-ignored", f"file offset {seg.offset} is negative")
    f = s.files.get(seg.file)
    if f is None or seg.offset + seg.length > f.size or seg.buffer_offset + seg.length > a.size:
        return Expect({SUCCESS: "", ANY_ERRNO: ""}, "req-file-segment", "the segment exceeds the file or the buffer")
    return None


@clause("alloc-supported-may-fail", "alloc-unsupported-fails", "free-memory-after-last-unmap")
def valid_outcome(ctx: Ctx, a: Attrs, sub: Submission | None, live_now: int, relaxed: int,
                  pending: int = 0) -> Expect:
    """Spec: "If a request is supported, ANpuManager_allocAsync() may still respond onAlloc with a failure
    due to other reasons, e.g., no memory." (alloc-supported-may-fail)
    Spec: "If a request is not supported, ANpuManager_allocAsync() guarantees to respond onAlloc with a
    failure." (alloc-unsupported-fails)

    For a valid request: a request isSupported denied fails (any errno); a supported pair succeeds or
    fails with any errno ("other reasons, e.g., no memory") — exactly predicted when the device declares
    its capacity (budget policy: live buffers,
    i.e. neither preempted nor freed-and-unmapped, never exceed it; free-memory-after-last-unmap).
    Another request still pending (``pending`` bytes) may already hold memory: a device may admit it and
    answer this one first, from another callback thread. So ENOMEM is allowed where the request does not
    fit next to the live buffers and those requests, or did not fit when it was submitted.
    An unknown pair (no discovery) may do either.
    """
    if sub is not None and sub.forced is not None:
        return Expect({sub.forced: ""}, "alloc-supported-may-fail", f"the vnpu was told fail_next={sub.forced}")
    pairs = ctx.caps.supported_pairs
    if sub is not None and sub.unsupported:
        return Expect({ANY_ERRNO: ""}, "alloc-unsupported-fails",
                      f"isSupported answered false for this request of pair ({a.device}, {a.type})")
    if pairs is not None and (a.device, a.type) not in pairs:
        # Discovery tested one request of the pair; support is per request, so another request of it may
        # be supported: success departs from the kit's reading R5 only.
        return Expect({ANY_ERRNO: "", SUCCESS: "R5"}, "alloc-unsupported-fails",
                      f"pair ({a.device}, {a.type}) was not supported when the device was discovered")
    if pairs is None:
        return Expect({SUCCESS: "", ANY_ERRNO: ""}, "alloc-supported-may-fail", "the device's pairs are unknown")
    if ctx.capacity is not None and not relaxed and sub is not None:
        fits_now = live_now + a.size <= ctx.capacity
        fits_then = sub.live_at_submit + a.size <= ctx.capacity
        fits_beside_pending = live_now + pending + a.size <= ctx.capacity
        alts: dict[str, str] = {}
        if fits_now:
            alts[SUCCESS] = ""
        if not fits_beside_pending or not fits_then:
            alts["ENOMEM"] = ""
        beside = f" and {pending} bytes of requests still pending" if pending else ""
        why = (f"{a.size} bytes {'fit' if fits_beside_pending else 'do not fit'} next to {live_now} live bytes"
               f"{beside} within the capacity of {ctx.capacity}")
        return Expect(alts, "alloc-supported-may-fail", why)
    return Expect({SUCCESS: "", ANY_ERRNO: ""}, "alloc-supported-may-fail", "a valid request of a supported pair")


def expected(ctx: Ctx, s: State, sub: Submission) -> Expect:
    a = sub.attrs
    declared = ctx.capacity is not None
    return (invalid_request(ctx, a) or file_outcome(ctx, s, a)
            or valid_outcome(ctx, a, sub, live_bytes(s) if declared else 0, s.relaxed_capacity,
                             pending_elsewhere(ctx, s, sub) if declared else 0))


def pending_elsewhere(ctx: Ctx, s: State, sub: Submission) -> int:
    """Bytes the other pending submissions may hold already: the valid, supported ones not told to fail."""
    return sum(o.attrs.size for o in s.subs.values()
               if o is not sub and o.forced is None and not o.unsupported and o.attrs.size > 0
               and invalid_request(ctx, o.attrs) is None)


@clause("alloc-async", "alloc-snapshot", "alloc-list-modify-after-return", "alloc-elements-modify-after-return")
def call_alloc(ctx: Ctx, s: State, call: Call) -> Out:
    """Spec: "A "snapshot" of the requests are taken; in other words, all parameters are recorded at the
    moment ANpuManager_allocAsync() is called. Any subsequent modification to the request objects will
    not be reflected in the allocation or in the callbacks." (alloc-snapshot)

    Each request of the list becomes a submission holding its cookie and file; later setters, frees
    and list changes touch only the request (alloc-elements-modify-after-return).
    """
    slots = arg_list(call, "reqs")
    for slot in slots:
        if slot is None or slot not in s.reqs:
            return [evolve(s, inflight=Inflight(call.step, call.op))]
    crash = alloc_without_onalloc_crashes(s, call, slots)
    if crash is not None:
        return [evolve(s, inflight=Inflight(call.step, call.op, crash=crash))]
    subs = dict(s.subs)
    overlapping = overlapped_allocs(s, call)
    if s.overlaps:
        for other, sub in s.subs.items():
            if sub.step in s.overlaps and not sub.overlapped:
                subs[other] = replace(sub, overlapped=True)
    files = dict(s.files)
    forced = list(s.forced)
    live = live_bytes(s)
    tokens = dict(s.tokens)
    sid = s.next_id
    made: list[int] = []
    reqs = s.reqs
    for position, slot in enumerate(slots, 1):
        assert slot is not None
        req = s.reqs[slot]
        # Only a batch member's why needs its name (Submission.named).
        label = slot_label(ctx, slot) if len(slots) > 1 else slot
        unsupported = bool(s.unsupported) and req.attrs.support_key() in s.unsupported
        subs[sid] = Submission(req.attrs, req.cookie, call.step, forced.pop(0) if forced else None, live,
                               unsupported, slot=label, position=position, batch=len(slots), overlapped=overlapping,
                               req=slot)
        if not req.submitted or req.cookie_after_submit:
            reqs = {**reqs, slot: evolve(req, submitted=True, cookie_after_submit=False)}
        if req.cookie.token is not None and req.cookie.token in tokens:
            t = tokens[req.cookie.token]
            tokens[req.cookie.token] = evolve(t, holders=t.holders + 1)
        file_hold(files, req.attrs.file, +1)
        made.append(sid)
        sid += 1
    out = evolve(s, reqs=reqs, subs=subs, files=files, tokens=tokens, forced=tuple(forced), next_id=sid,
                       inflight=Inflight(call.step, call.op, applied=True, subs=tuple(made)))
    if ctx.policy is not None and ctx.caps.capacity_bytes is not None:
        out = policies.submitted(ctx.policy, ctx.caps.capacity_bytes, out, tuple(made),
                                 lambda sub: _policy_decides(ctx, out, sub))
    return [out]


def _policy_decides(ctx: Ctx, s: State, sub: Submission) -> bool | None:
    """Whether the declared policy decides this submission: a valid request of a supported pair (the vnpu
    checks the fields, the file segment and the pair first). None when the model cannot tell."""
    if sub.forced is not None or sub.unsupported:
        return False
    a = sub.attrs
    pairs = ctx.caps.supported_pairs
    if pairs is None:
        return None
    for e in (invalid_request(ctx, a), file_outcome(ctx, s, a)):
        if e is not None:
            return None if SUCCESS in e.alts else False
    return (a.device, a.type) in pairs


@clause("alloc-supported-may-fail")
def policy_outcome(ctx: Ctx, s: State, sid: int) -> Expect | None:
    """Spec: "If a request is supported, ANpuManager_allocAsync() may still respond onAlloc with a failure
    due to other reasons, e.g., no memory." (alloc-supported-may-fail)

    The text allows success or ENOMEM; a device that declares an allocation policy (acl, caching, arena)
    is held to the policy's exact answer, decided when allocAsync() was called. The divergence names the
    policy and its arithmetic.
    """
    if ctx.policy is None:
        return None
    found = policies.decision(s, sid)
    if found is None:
        return None
    admitted, why = found
    return Expect({SUCCESS: ""} if admitted else {"ENOMEM": ""}, "alloc-supported-may-fail", why)


@clause("alloc-async", "load-async")
def returned_first(ret: Ret) -> str:
    """Spec: "Asynchronously allocates multiple buffers." (alloc-async)
    Spec: "Loads a file into the buffer asynchronously." (load-async)

    Reading R14: an asynchronous call returns before its outcome is delivered. The probe's wait_return
    callbacks wait (bounded) for the call to return; a call that returned only after such a callback
    gave up (``blocked``) had waited for its callback to finish. The words do not say when the call
    returns, so this is WARN R14, never a FAIL. Returns the tag ("" when none).
    """
    return "R14" if ret.extra.get("blocked") is True else ""


@clause("alloc-async", "alloc-supported-may-fail")
def overlapped_allocs(s: State, call: Call) -> bool:
    """Spec: "Asynchronously allocates multiple buffers." (alloc-async)
    Spec: "If a request is supported, ANpuManager_allocAsync() may still respond onAlloc with a failure due
    to other reasons, e.g., no memory." (alloc-supported-may-fail)

    Whether this allocAsync was in flight together with another thread's (threads.overlapping_calls). The
    text forbids changing a call's list or requests while it runs, not calling allocAsync from two threads
    at once, and names no consequence for it; the kit reads overlapping calls as independent. A request
    refused where it would otherwise be granted, while its allocAsync overlapped another, is accepted under
    "may still respond onAlloc with a failure due to other reasons": WARN R21.
    """
    return call.step in s.overlaps


def ret_alloc(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    tag = returned_first(ret)
    return [evolve(s, inflight=None, dids=s.dids | {tag})] if tag else [done(s)]


@clause("alloc-callback-thread", "alloc-callback-any-thread")
def callback_thread(s: State, sid: int, ev: Cb) -> str:
    """Spec: "The callback may be invoked on any thread, including the current thread immediately inside
    ANpuManager_allocAsync() if an error is immediately detected." (alloc-callback-thread)

    "Any thread" includes the calling thread, so no delivery thread is a FAIL. Reading R1: delivery on
    the calling thread inside an API call is expected only for an immediately detected error, inside
    the allocAsync() that submitted the request; anything else there is WARN R1. Returns the tag.
    """
    if ev.thread != "caller":
        return ""
    inside = s.inflight is not None and s.inflight.op == "alloc" and sid in s.inflight.subs
    if ev.error is not None and inside:
        return ""
    return "R1"


@clause("alloc-errornum-iff-buf")
def errornum_iff_buf(ev: Cb) -> Reject | None:
    """Spec: "errorNum 0 if successful, or an errno on error. buf The buffer on success, or NULL on error."
    (alloc-errornum-iff-buf)

    An errno is a positive number: a negative errorNum (e.g. -ENODEV) is neither 0 nor an errno.
    """
    if negative_errno(ev.error):
        return reject("alloc-errornum-iff-buf", f"errorNum={ev.error}", ["errorNum=0", "errorNum=a positive errno"],
                      "errorNum is 0 on success or an errno, and errno values are positive")
    if (ev.error is None) == (ev.buf is not None):
        return None
    observed = f"errorNum={show_errno(ev.error)}, buf={ev.buf or 'NULL'}"
    return reject("alloc-errornum-iff-buf", observed, ["errorNum=0 with a buffer", "errorNum=errno with NULL"],
                  "errorNum is 0 exactly when a buffer is delivered")


@clause("alloc-one-callback-per-request", "alloc-callback-on-completion", "cookie-identify-request")
def on_alloc(ctx: Ctx, s: State, ev: Cb) -> Out:
    """Spec: "The callback is invoked in response to ANpuManager_allocAsync()." (alloc-one-callback-per-request)
    Spec: "Callback function to be invoked when allocation and load is finished or has encountered an
    error." (alloc-callback-on-completion)

    Exactly one onAlloc per submission: the callback consumes one pending submission with its cookie.
    """
    if not s.subs:
        return reject("alloc-one-callback-per-request", f"onAlloc(cookie={ev.cookie or 'NULL'})",
                      ["no callback: every submitted request has had its onAlloc"],
                      "an extra onAlloc, with no request waiting for one")
    out: list[State] = []
    first: Reject | None = None
    seen: set[tuple[object, ...]] = set()
    alike = 0
    single = len(s.subs) == 1  # one submission waiting: no two answers to tell apart
    for sid, sub in s.subs.items():
        if sub.cookie.value != ev.cookie:
            continue
        alike += 1
        if not single:
            # alike submissions need one try; a declared policy may still admit one and refuse another. What an
            # answer shows depends on its request as it is then (shown_by_answer), and a live request may still
            # change: submissions of two live requests are never alike.
            decided = policies.decision(s, sid) if ctx.policy is not None else None
            sig = (sub.attrs, sub.cookie, sub.forced, sub.unsupported, sub.live_at_submit, sub.overlapped,
                   sub.preemptable, s.inflight is not None and sid in s.inflight.subs, decided[0] if decided else None,
                   sub.req if sub.req in s.reqs else None)
            if sig in seen:
                continue
            seen.add(sig)
        res = _answer(ctx, s, sid, sub, ev)
        if isinstance(res, Reject):
            first = first or res
        else:
            out.append(res)
    if out:
        return out
    if first is None:
        return unmatched_alloc_cookie(s, ev)
    swapped = mistaken_identity(ctx, s, ev)
    if swapped is not None:
        return swapped
    if alike > 1:
        # The cookie cannot tell which request this answers; the why names the first, so say it stands for all.
        return replace(first, why=f"{first.why}; none of the {alike} requests waiting with this cookie allows it")
    return first


@clause("cookie-identify-request")
def mistaken_identity(ctx: Ctx, s: State, ev: Cb) -> Reject | None:
    """Spec: "The user may use this cookie to identify the request." (cookie-identify-request)

    A buffer delivered with a cookie whose pending requests must all fail, while another pending request (with
    another cookie) could have succeeded: the answers reached the requests under each other's cookies. (A
    wrong errno is only that: named by the request's own rule.)"""
    if ev.error is not None:
        return None
    for sid, sub in s.subs.items():
        if sub.cookie.value == ev.cookie:
            continue
        if not isinstance(_answer(ctx, s, sid, sub, ev), Reject):
            mine = "NULL" if ev.cookie is None else ev.cookie
            theirs = "NULL" if sub.cookie.value is None else sub.cookie.value
            return reject("cookie-identify-request", f"onAlloc(cookie={mine}, errorNum={show_errno(ev.error)})",
                          [f"this answer with cookie {theirs}"],
                          f"no request waiting with cookie {mine} allows it, the {sub.named()} (cookie {theirs}) "
                          "does: the cookie does not identify the request it answers")
    return None


def _answer(ctx: Ctx, s: State, sid: int, sub: Submission, ev: Cb) -> State | Reject:
    bad = callback_cookie_alive(s, sub.cookie, ev) or errornum_iff_buf(ev)
    if bad is not None:
        return bad
    exp = policy_outcome(ctx, s, sid) or expected(ctx, s, sub)
    tag = exp.match(ev.error)
    thread_tag = callback_thread(s, sid, ev)
    if tag is not None and thread_tag:
        tag = ",".join(x for x in (tag, thread_tag) if x)
    if tag is None and ev.error == "ECANCELED" and ctx.profile.preempt_extra_callbacks and SUCCESS in exp.alts:
        tag = "D14"
    if tag is None and ev.error is not None and sub.overlapped and SUCCESS in exp.alts:
        tag = "R21"  # refused while another thread's allocAsync was in flight (overlapped_allocs)
    if tag is None:
        cid = refused_clause(s, sub, ev, exp)
        if cid == "alloc-supported-may-fail" and ev.error is not None:
            cid = kept_memory_clause(ctx, s, sub.attrs) or cid
        return reject(cid, f"onAlloc(errorNum={show_errno(ev.error)})", exp.shown(), f"{exp.why} ({sub.named()})")
    s = show(s, *shown_by_answer(ctx, s, sid, sub, ev, exp, thread_tag))
    subs = dict(s.subs)
    del subs[sid]
    files = dict(s.files)
    file_hold(files, sub.attrs.file, -1)
    if s.pool is not None:
        s = evolve(s, pool=policies.delivered(s, sid, ev.buf))
    dids = s.dids | set(tag.split(",")) if tag else s.dids
    if ev.error is not None:
        ghosts = s.ghosts
        # D14: an allocation preempted while pending is answered ECANCELED, then onPreempt — also where
        # ECANCELED is an allowed answer anyway (no declared capacity): the ghost takes that onPreempt.
        if ev.error == "ECANCELED" and ctx.profile.preempt_extra_callbacks and sub.attrs.onpreempt:
            ghost = Buffer("", max(sub.attrs.size, 0), sub.attrs.prot, sub.cookie, True, sub.attrs.priority,
                           freed=True, preempted=True)
            ghosts = (*s.ghosts, ghost)
        return borrow(ctx, evolve(s, subs=subs, files=files, tokens=hold(s, sub.cookie, -1), dids=dids,
                                        ghosts=ghosts), sub.cookie, ev)
    assert ev.buf is not None
    if ev.buf in s.bufs:
        return reject("alloc-async", f"onAlloc(buf={ev.buf})", ["a buffer distinct from every live buffer"],
                      "the implementation delivered a buffer that is already live")
    a = sub.attrs
    content = EMPTY
    seg = a.file
    if seg is not None and seg.file is not None and seg.file in s.files and seg.length > 0:
        f = s.files[seg.file]
        if seg.offset + seg.length <= f.size and seg.buffer_offset + seg.length <= a.size:
            # Bytes read back from here demonstrate the load onAlloc reported and the segment's placement.
            shows = ("load-on-alloc-reported-by-onalloc", "req-file-segment",
                     *(("req-file-offset-ignored",) if seg.offset > 0 else ()),
                     *(("req-file-buffer-offset-nonnegative",) if seg.buffer_offset > 0 else ()))
            content = write(EMPTY, seg.buffer_offset, seg.buffer_offset + seg.length, f.seed,
                            seg.buffer_offset - seg.offset, ",".join(shows))
    if seg is not None and seg.file is not None and seg.file in files:
        files[seg.file] = evolve(files[seg.file], bufs=files[seg.file].bufs | {ev.buf})
    bufs = dict(s.bufs)
    bufs[ev.buf] = Buffer(ev.buf, a.size, a.prot, sub.cookie, a.onpreempt, a.priority, content=content,
                          preemptable=sub.preemptable, unset=a.unset)
    return borrow(ctx, evolve(s, subs=subs, files=files, bufs=bufs, dids=dids), sub.cookie, ev)


@shows("alloc-one-callback-per-request")
def settle_alloc(ctx: Ctx, s: State) -> Out:
    bad = all_answered(s)
    if bad is not None:
        return bad
    # Every submission had its one onAlloc by the settle (none more: an extra one is refused when it comes).
    return [show(s, "alloc-one-callback-per-request") if "alloc-callback-on-completion" in s.shown else s]


# What an onAlloc error demonstrates, by the rule that allowed it: only the refusals the text itself promises
# (an unsupported request fails; a supported one may). A refusal the kit expects by a reading of a caller's
# duty (an out-of-range priority, invalid prot bits, a negative size or segment value, an fd that is neither
# valid nor -1) shows nothing the text promises: those sentences are demonstrated by what they allow.
_REFUSAL_SHOWS: Final[dict[str, tuple[str, ...]]] = {
    "alloc-unsupported-fails": ("alloc-unsupported-fails",),
    "alloc-supported-may-fail": ("alloc-supported-may-fail",),
}
_IGNORED_SHOWS: Final = {"offset": "req-file-offset-ignored", "length": "req-file-length-nonnegative",
                         "buffer_offset": "req-file-buffer-offset-nonnegative"}


@shows("alloc-callback-on-completion", "alloc-callback-any-thread", "alloc-callback-thread", "alloc-errornum-iff-buf",
        "alloc-async", "cookie-identify-request", "cookie-snapshot-at-alloc", "cookie-later-changes-no-effect",
        "alloc-snapshot-cookie-example", "cookie-callback-null-if-unset", "cookie-default-null",
        "alloc-free-request-after-call", "alloc-elements-modify-after-return", "alloc-list-modify-after-return",
        "alloc-snapshot", "req-device-negative-einval", "req-device-default-negative", "req-type-unknown-einval",
        "req-type-default-unknown", "req-size-default-zero", "req-create-default-state",
        "load-callback-not-alloc", "free-memory-after-last-unmap", "priority-request-range", "priority-range-inclusive",
        "req-prot-values", "req-file-fd-default", "req-file-length-nonnegative", "req-file-buffer-offset-nonnegative",
        "req-file-offset-ignored", "alloc-unsupported-fails", "alloc-supported-may-fail")
def shown_by_answer(ctx: Ctx, s: State, sid: int, sub: Submission, ev: Cb, exp: Expect, thread_tag: str) -> list[str]:
    """What an accepted onAlloc demonstrates (docs/corpus.md, "What each chapter observes"): the clauses
    whose behaviour this answer shows, beyond its being allowed.

    Every answer: a callback came for the request, with 0 and a buffer or an errno and NULL, on some
    thread (R1 aside); after allocAsync returned (alloc-async); with the cookie of the snapshot, told
    apart from other pending ones (cookie-identify-request), also when the request changed or was freed
    since (the snapshot and modify-after-return sentences), NULL where none was set. A refusal shows the
    rule that refused it where the text promises the refusal (an invalid device or type refused EINVAL, with
    the default where the field was never set; an unsupported request; _REFUSAL_SHOWS). A success shows what
    a refusal would have contradicted: a request changed to invalid fields since allocAsync still allocated
    (alloc-snapshot); an explicit priority or protection of the range; ignored segment arguments. (The default
    priority is seen only through the victim order a device declares: preemption.victim_order_shown.)
    """
    a = sub.attrs
    out = ["alloc-callback-on-completion", "alloc-callback-any-thread", "alloc-errornum-iff-buf"]
    if not thread_tag:
        out.append("alloc-callback-thread")
    if not (s.inflight is not None and s.inflight.op == "alloc" and sid in s.inflight.subs):
        out.append("alloc-async")
    if ev.cookie is None:
        out += ["cookie-callback-null-if-unset", *(("cookie-default-null", "req-create-default-state")
                                                   if "cookie" in a.unset else ())]
    else:
        out += ["cookie-snapshot-at-alloc", *cookie_value_shown(ev.cookie)]
        if len({x.cookie.value for x in s.subs.values()}) > 1:
            out.append("cookie-identify-request")
    now = s.reqs.get(sub.req)
    if now is None:
        out += ["alloc-free-request-after-call", "alloc-elements-modify-after-return"]
    elif (now.attrs, now.cookie) != (a, sub.cookie):  # the pair compares its members by identity first
        out.append("alloc-elements-modify-after-return")
        if ev.cookie is not None and now.cookie.value != ev.cookie:
            out += ["cookie-later-changes-no-effect", "alloc-snapshot-cookie-example"]
        if ev.error is None and invalid_request(ctx, now.attrs) is not None:
            out.append("alloc-snapshot")  # the request as it is now would have been refused
    if sub.batch > 1:
        out.append("alloc-list-modify-after-return")  # the probe reverses the list once allocAsync returns
    if a.file is not None and a.file.file is not None:
        out.append("load-callback-not-alloc")  # the load of the segment is answered by this onAlloc
    if ev.error is not None:
        out += _refusal_shown(a, ev.error, exp)
        if (exp.clause == "alloc-supported-may-fail" and len(exp.alts) == 1 and ctx.capacity is not None
                and any(b.freed and b.maps for b in s.bufs.values())):
            out.append("free-memory-after-last-unmap")  # a freed, mapped buffer's memory still counted
        return out
    if exp.clause == "alloc-supported-may-fail":
        out.append("alloc-supported-may-fail")
        if released_memory_needed(ctx, s, a):
            out.append("free-memory-after-last-unmap")  # it fits only because the last unmap released memory
    if "priority" not in a.unset and a.priority in PRIORITY_RANGE:
        out += ["priority-request-range", *(("priority-range-inclusive",) if a.priority in PRIORITY_BOUNDS else ())]
    if "prot" not in a.unset and not a.prot & ~PROT_VALID:
        out.append("req-prot-values")
    if a.file is None:
        out += ["req-file-fd-default", *(_IGNORED_SHOWS[name] for name in sorted(a.ignored))]
    return out


def _refusal_shown(a: Attrs, error: str, exp: Expect) -> list[str]:
    """What an onAlloc error demonstrates of the rule ``exp`` that allowed it (shown_by_answer)."""
    if a.device < 0 and error == "EINVAL" and a.type in TYPE_VALID:
        return ["req-device-negative-einval",
                *(("req-device-default-negative", "req-create-default-state") if "device" in a.unset else ())]
    if a.device >= 0 and a.type not in TYPE_VALID and error == "EINVAL":
        return ["req-type-unknown-einval",
                *(("req-type-default-unknown", "req-create-default-state") if "type" in a.unset else ())]
    if exp.clause == "req-size-bytes" and a.size == 0 and "size" in a.unset:
        return ["req-size-default-zero", "req-create-default-state"]
    return list(_REFUSAL_SHOWS.get(exp.clause, ()))


# The errnos that say "invalid argument": a refusal with one of them blames a field of the request.
INVALID_ARGUMENT_ERRNOS: Final = frozenset({"EINVAL", "ERANGE", "EBADF"})
IGNORED_ARGUMENT_CLAUSE: Final = {"offset": "req-file-offset-ignored", "length": "req-file-length-nonnegative",
                                  "buffer_offset": "req-file-buffer-offset-nonnegative"}


@clause("priority-range-inclusive", "req-file-fd-default", "req-file-offset-ignored", "req-file-length-nonnegative",
        "req-file-buffer-offset-nonnegative", "alloc-snapshot", "req-prot-values")
def refused_clause(s: State, sub: Submission, ev: Cb, exp: Expect) -> str:
    """Spec: "The buffer_priority field must be within the range [ANPUBUFFER_PRIORITY_MIN,
    ANPUBUFFER_PRIORITY_MAX], inclusive." (priority-range-inclusive)
    Spec: "Must be a valid file descriptor, or -1 to ask NpuManager to not load any file. Default value is -1."
    (req-file-fd-default)
    Spec: "Ignored if fdToOwn is -1." (req-file-offset-ignored, and likewise segmentLength and bufferOffset)
    Spec: "all parameters are recorded at the moment ANpuManager_allocAsync() is called." (alloc-snapshot)
    Spec: "prot The protection flags. Either PROT_NONE, or the bitwise OR of one or more of PROT_READ,
    PROT_WRITE, PROT_EXEC." (req-prot-values)

    The sentence a refused valid request contradicts, where the device owed it a buffer (its capacity declared)
    and the errno says "invalid argument": the field that made the device think so. An argument the text says
    is ignored, an explicit fd -1, a priority at a bound, PROT_NONE, or the request as changed after
    allocAsync (invalid now, valid in the snapshot); otherwise the rule that allowed only success."""
    if ev.error not in INVALID_ARGUMENT_ERRNOS or SUCCESS not in exp.alts or exp.clause != "alloc-supported-may-fail":
        return exp.clause
    a = sub.attrs
    for name in ("offset", "length", "buffer_offset"):
        if name in a.ignored:
            return IGNORED_ARGUMENT_CLAUSE[name]
    if a.file is None and "file" not in a.unset:
        return "req-file-fd-default"
    if a.priority in (PRIORITY_RANGE[0], PRIORITY_RANGE[-1]):
        return "priority-range-inclusive"
    if a.prot == 0:
        return "req-prot-values"
    live = s.reqs.get(sub.req)
    if live is not None and live.attrs != a and invalid_field_now(live.attrs):
        return "alloc-snapshot"
    return exp.clause


@clause("free-memory-after-last-unmap", "free-indicates-not-needed")
def kept_memory_clause(ctx: Ctx, s: State, a: Attrs) -> str | None:
    """Spec: "In this case, the associated memory will be freed after all mappings are unmapped."
    (free-memory-after-last-unmap)
    Spec: "Indicates that the buffers are not needed by the user and can be freed." (free-indicates-not-needed)

    The sentence a refusal of a request that fits the declared capacity contradicts when only memory kept
    past its release explains it: had the buffers freed after their last unmap (or freed unmapped) kept
    their memory, the request would not have fit."""
    if ctx.capacity is None:
        return None
    need = live_bytes(s) + a.size
    if s.released_at_unmap and need + s.released_at_unmap > ctx.capacity:
        return "free-memory-after-last-unmap"
    if s.released_at_free and need + s.released_at_free > ctx.capacity:
        return "free-indicates-not-needed"
    return None


@shows("free-memory-after-last-unmap")
def released_memory_needed(ctx: Ctx, s: State, a: Attrs) -> bool:
    """Spec: "In this case, the associated memory will be freed after all mappings are unmapped."
    (free-memory-after-last-unmap)

    Whether a granted request shows the memory of freed buffers given back at their last unmap: the sizes
    of the live buffers, of those released buffers and of this request add up to more than all the memory
    the device declares (any policy charges a block at least its size), so it fits only because they went."""
    capacity = ctx.caps.capacity_bytes
    if not s.released_at_unmap or capacity is None or ctx.caps.policy not in (None, *DEVICE_POLICIES):
        return False
    return live_bytes(s) + a.size + s.released_at_unmap > policies.total_bytes(ctx.caps.policy, capacity)


def invalid_field_now(a: Attrs) -> bool:
    """Whether a request with these fields is one the device must refuse with EINVAL."""
    return (a.device < 0 or a.type not in TYPE_VALID or a.size < 0 or a.priority not in PRIORITY_RANGE
            or bool(a.prot & ~PROT_VALID))


@clause("alloc-callback-on-completion", "alloc-free-request-after-call")
def all_answered(s: State) -> Reject | None:
    """Spec: "Callback function to be invoked when allocation and load is finished or has encountered an
    error." (alloc-callback-on-completion)
    Spec: "The caller may call ANpuManager_AllocRequest_free() right after ANpuManager_allocAsync() is called.
    The caller does not need to wait for the response on the onAlloc callback to free the request."
    (alloc-free-request-after-call)

    When teardown has waited for the callbacks, every submission must have had its onAlloc; one whose request
    the application freed before the answer names the sentence that allows that free.
    """
    if not s.subs:
        return None
    sub = min(s.subs.values(), key=lambda x: (x.step, x.position))
    others = len(s.subs) - 1
    more = f" ({others} more unanswered)" if others else ""
    freed = sub.req not in s.reqs
    cid = "alloc-free-request-after-call" if freed else "alloc-callback-on-completion"
    return reject(cid, f"no onAlloc for the {sub.named()}{more}", ["exactly one onAlloc per submitted request"],
                  "the settle wait ended with a request unanswered" + (", its request freed since" if freed else ""))
