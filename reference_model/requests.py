"""Chapter "requests": ANpuManager_AllocRequest_* — defaults, setters, free.

Setters validate nothing observable: the values are recorded raw and judged when allocAsync answers
(allocation.py). ``req_free`` releases the request's hold on its cookie and on its file.
"""

from __future__ import annotations

from ._context import Ctx, Out, arg, arg_bool, arg_int, arg_slot, reject
from .cookies import hold
from .rules import Reject, clause, shows
from .state import (
    DEFAULT_ATTRS,
    NO_COOKIE,
    FileSeg,
    FileState,
    Inflight,
    Request,
    State,
    done,
    evolve,
    show,
)
from .trace import Call, Ret

# The field each setter sets (Attrs.unset names the ones a request kept at their defaults).
SETTER_FIELD = {"req_set_device": "device", "req_set_type": "type", "req_set_size": "size",
                "req_set_priority": "priority", "req_set_prot": "prot", "req_set_onpreempt": "onpreempt",
                "req_set_file": "file"}


@clause("req-create-default-state", "req-create-returns-request", "req-device-default-negative",
        "req-type-default-unknown", "req-size-default-zero", "req-priority-default", "req-prot-default-read",
        "req-file-fd-default", "cookie-default-null", "req-onpreempt-default-null")
def new_request() -> Request:
    """Spec: "Fields are initialized to a default state." (req-create-default-state)

    The defaults: a negative device (req-device-default-negative), type UNKNOWN
    (req-type-default-unknown), size 0 (req-size-default-zero), priority DEFAULT
    (req-priority-default), prot PROT_READ (req-prot-default-read), no file (req-file-fd-default),
    a NULL cookie without deleter (cookie-default-null), no onAlloc and a NULL onPreempt
    (req-onpreempt-default-null).
    """
    return Request(DEFAULT_ATTRS, NO_COOKIE)


@clause("req-create-returns-request")
def created(ret: Ret) -> Reject | None:
    """Spec: "Creates a new allocation request." (req-create-returns-request)

    ANpuManager_AllocRequest_create() returns ``_Nonnull``: a NULL request is a FAIL, not a probe problem.
    """
    if ret.extra.get("null") is True:
        return reject("req-create-returns-request", "NULL", ["a new request"],
                      "ANpuManager_AllocRequest_create() returns a non-NULL request")
    return None


@shows("req-create-returns-request")
def ret_create(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    bad = created(ret)
    if bad is not None:
        return bad
    reqs = dict(s.reqs)
    reqs[arg_slot(call, "req")] = new_request()
    return [show(evolve(s, reqs=reqs, inflight=None), "req-create-returns-request")]


def file_hold(files: dict[str, FileState], seg: FileSeg | None, delta: int, handed: str | None = None) -> None:
    """Adjust in place (on a private copy) the holders of the file a segment names."""
    if seg is None or seg.file is None:
        return
    f = files.get(seg.file)
    if f is None:
        return
    position = f.position
    if handed == "req-file-fd-ownership":
        position = None  # loading at allocation does not promise to keep the position
    files[seg.file] = FileState(f.size, f.seed, f.holders + delta, handed or f.handed, position, f.bufs)


@clause("req-free-destroys", "alloc-free-request-after-call", "alloc-no-request-ownership")
@shows("alloc-no-request-ownership", "support-modify-after-return")
def release_request(s: State, slot: str) -> State:
    """Spec: "Destroys an allocation request." (req-free-destroys)

    The request lets go of its cookie and its file; submissions made from it keep their own snapshot
    (alloc-free-request-after-call: freeing right after allocAsync() is fine), and the request stays the
    caller's until freed (alloc-no-request-ownership). Demonstrated: the deleter its free lets run
    (req-free-destroys, through Token.released_by); a request freed after allocAsync used it
    (alloc-no-request-ownership) or after isSupported answered for it (support-modify-after-return).
    """
    req = s.reqs[slot]
    reqs = dict(s.reqs)
    del reqs[slot]
    files = dict(s.files)
    file_hold(files, req.attrs.file, -1)
    out = evolve(s, reqs=reqs, tokens=hold(s, req.cookie, -1, by="req-free-destroys"), files=files)
    if req.submitted:
        out = show(out, "alloc-no-request-ownership")
    return show(out, "support-modify-after-return") if req.asked else out


def call_free(ctx: Ctx, s: State, call: Call) -> Out:
    slot = arg_slot(call, "req")
    if slot not in s.reqs:
        return [evolve(s, inflight=Inflight(call.step, call.op))]
    return [evolve(release_request(s, slot), inflight=Inflight(call.step, call.op, applied=True))]


@clause("req-free-null-noop")
def free_null(ctx: Ctx, s: State, call: Call) -> Out:
    """Spec: "request The allocation request to destroy. If NULL, nothing happens." (req-free-null-noop)

    Under aosp-2026 the call may also crash (D4: the implementation dereferences NULL).
    """
    normal = evolve(s, inflight=Inflight(call.step, call.op))
    if ctx.profile.free_null_crashes:
        crashing = Inflight(call.step, call.op, crash="req-free-null-noop", crash_did="D4")
        return [normal, evolve(s, inflight=crashing)]
    return [normal]


@shows("req-free-null-noop")
def ret_free_null(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    """``AllocRequest_free(NULL)`` returned: nothing happened (req-free-null-noop)."""
    return [show(done(s), "req-free-null-noop")]


@shows("req-file-offset-ignored", "req-file-length-nonnegative", "req-file-buffer-offset-nonnegative")
def ignored_arguments(call: Call, seg: FileSeg | None) -> frozenset[str]:
    """Spec: "fileOffset The offset of the file segment to load, starting from the beginning of the file.
    Ignored if fdToOwn is -1." (req-file-offset-ignored; likewise segmentLength and bufferOffset)

    The arguments of setFileSegmentToLoad(-1, ...) that would matter were they not ignored: a negative
    value, which a segment that is loaded could not have. The allocation of such a request demonstrates
    that they were ignored (allocation.shown_by_answer)."""
    if seg is not None:
        return frozenset()
    named = {"offset": "file_offset", "length": "length", "buffer_offset": "buffer_offset"}
    return frozenset(name for name, arg_name in named.items() if arg_int(call, arg_name) < 0)


@shows("support-modify-after-return")
def ret_setter(ctx: Ctx, s: State, call: Call, ret: Ret) -> Out:
    """Record a request field (setDeviceNumber, setBufferType, setSize, setBufferPriority,
    setProtectionFlags, setOnPreempt, setOnAlloc, setFileSegmentToLoad)."""
    slot = arg_slot(call, "req")
    req = s.reqs.get(slot)
    if req is None or ret.skipped is not None:
        return [done(s)]
    a = req.attrs
    field = SETTER_FIELD.get(call.op)
    if field is not None and field in a.unset:
        a = evolve(a, unset=a.unset - {field})
    files = s.files
    op = call.op
    if op == "req_set_device":
        a = evolve(a, device=arg_int(call, "device"))
    elif op == "req_set_type":
        a = evolve(a, type=arg_int(call, "type"))
    elif op == "req_set_size":
        a = evolve(a, size=arg_int(call, "size"))
    elif op == "req_set_priority":
        a = evolve(a, priority=arg_int(call, "priority"))
    elif op == "req_set_prot":
        a = evolve(a, prot=arg_int(call, "prot"))
    elif op == "req_set_onpreempt":
        a = evolve(a, onpreempt=arg_bool(call, "set"))
    elif op == "req_set_onalloc":
        a = evolve(a, onalloc=True)
    elif op == "req_set_file":
        seg = file_segment(call)
        new_files = dict(s.files)
        file_hold(new_files, a.file, -1)
        file_hold(new_files, seg, +1, "req-file-fd-ownership")
        files = new_files
        a = evolve(a, file=seg, ignored=ignored_arguments(call, seg))
    reqs = dict(s.reqs)
    reqs[slot] = evolve(req, attrs=a)
    out = evolve(s, reqs=reqs, files=files, inflight=None)
    return [show(out, "support-modify-after-return") if req.asked else out]


def file_segment(call: Call) -> FileSeg | None:
    """The segment of setFileSegmentToLoad / loadAsync: a file slot, or a literal descriptor."""
    fd = arg(call, "fd")
    off, length, boff = arg_int(call, "file_offset"), arg_int(call, "length"), arg_int(call, "buffer_offset")
    if isinstance(fd, str):
        if fd.startswith("fd:"):
            try:
                number = int(fd[3:])
            except ValueError:
                number = -2
            return None if number == -1 and call.op == "req_set_file" else FileSeg(None, number, off, length, boff)
        return FileSeg(fd, -1, off, length, boff)
    if isinstance(fd, int) and not isinstance(fd, bool):
        if fd == -1 and call.op == "req_set_file":
            return None
        return FileSeg(None, fd, off, length, boff)
    if isinstance(fd, dict) and isinstance(fd.get("fd"), int):
        number = fd["fd"]
        return None if number == -1 and call.op == "req_set_file" else FileSeg(None, number, off, length, boff)
    return FileSeg(None, -2, off, length, boff)
