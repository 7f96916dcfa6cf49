"""Loading and preemption: a conforming and a non-conforming trace per rule."""

from __future__ import annotations

from reference_model.caps import DeviceCaps

from .builder import PAIR, TB, allocated, request, teardown
from .coverage import covers
from .test_rules_alloc_map import digest
from .test_rules_requests_cookies import fails, passes, warns

VNPU = DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=1 << 20, policy="budget", vnpu_control=True)
CAPS_SPONTANEOUS = DeviceCaps(supported_pairs=frozenset({PAIR}), vnpu_control=True)  # no capacity declared


def loaded(answer=0, *, mapped=False, length=1000, closed=True, position=0, read=True, cookie="absent") -> TB:
    b = TB()
    allocated(b, cookie=cookie) if cookie != "absent" else allocated(b)
    b.call("file_new", file="f", size=4096, seed=7)
    if mapped:
        b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    cv = None if cookie == "absent" else cookie
    b.call("buf_load", buf="b", fd="f", file_offset=100, length=length, buffer_offset=50, onload=True)
    b.emit(b.cb("load", cv, answer, "B1"))
    b.extra(closed=closed, position=position).call("fd_check", file="f")
    if read and not mapped:
        b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
        mapped = True
    if read and answer == 0:
        b.extra(digest=digest(7, 200, 100)).call("map_read", map="m", offset=50, length=200)
    return teardown(b, bufs=["b"], reqs=["r"], maps=["m"] if mapped else [], deleted=[cookie] if cv else [])


@covers("loading.load_expectation")
def test_load_expectations():
    passes(loaded())
    passes(loaded("EINVAL", length=-1, read=False))
    warns(loaded(0, length=-1, read=False), "R17")  # "Must be non-negative": the caller's duty
    passes(loaded("EBUSY", mapped=True, read=False))
    j = fails(loaded(0, mapped=True, read=False), "load-no-existing-mapping")
    assert j.discrepancy == "D7"
    warns(loaded("EIO"), "R8")  # "is done or has encountered an error": success is not promised


def _loaded_twice(second_answer, second_bytes=None) -> TB:
    """A descriptor handed to a load, answered, then handed to a second load: the first load's owner may
    have closed it (and the number may name another file by now)."""
    b = TB()
    allocated(b)
    b.call("file_new", file="f", size=4096, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
    b.emit(b.cb("load", None, 0, "B1"))
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
    b.emit(b.cb("load", None, second_answer, "B1"))
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    if second_bytes is not None:
        b.extra(digest=second_bytes).call("map_read", map="m", offset=0, length=100)
    return teardown(b, bufs=["b"], reqs=["r"], maps=["m"])


@covers("loading.load_expectation", "loading.loaded_content")
def test_a_descriptor_handed_over_again_may_be_closed_already():
    passes(_loaded_twice("EBADF"))  # its owner closed it after the first load: "Must be a valid file descriptor"
    passes(_loaded_twice(0, digest(7, 0, 100)))  # still open: the file's bytes
    passes(_loaded_twice(0, digest(9, 0, 100)))  # the number names another file by now: the text says nothing


@covers("loading.errornum_is_errno")
def test_onload_errornum_is_a_positive_errno():
    passes(loaded("EBUSY", mapped=True, read=False))
    j = fails(loaded("E#-16", mapped=True, read=False), "load-callback-errornum")  # -EBUSY where an error is due
    assert j.divergence.observed == "onLoad(errorNum=E#-16)"
    fails(loaded("E#-5", read=False), "load-callback-errornum")


@covers("loading.on_load")
def test_onload_same_buffer_and_cookie():
    passes(loaded(cookie="c"))
    b = TB()
    allocated(b)
    b.call("file_new", file="f", size=4096, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=10, buffer_offset=0, onload=True)
    b.emit(b.cb("load", None, 0, "B9"))
    fails(teardown(b, bufs=["b"], reqs=["r"]), "load-callback-same-buf")
    b = TB()
    allocated(b)
    b.call("file_new", file="f", size=4096, seed=7)
    b.call("cookie_new", cookie="x")
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=10, buffer_offset=0, onload=True)
    b.emit(b.cb("load", "x", 0, "B1"))
    fails(teardown(b, bufs=["b"], reqs=["r"]), "load-callback-cookie")


@covers("loading.all_loaded")
def test_every_load_answered():
    b = TB()
    allocated(b)
    b.call("file_new", file="f", size=4096, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=10, buffer_offset=0, onload=True)
    fails(teardown(b, bufs=["b"], reqs=["r"]), "load-onload-invoked")


@covers("loading.fd_check")
def test_fd_ownership_and_position():
    passes(loaded(closed=False))  # kept open until the buffer is freed: legal
    for closed, wait, verdict in ((True, True, "PASS"), (False, True, "FAIL"), (False, False, "PASS")):
        b = TB()
        allocated(b)
        b.call("file_new", file="f", size=4096, seed=7)
        b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
        b.emit(b.cb("load", None, 0, "B1"))
        b.call("buf_free", bufs=["b"])
        if wait:  # everything freed, then a quiet wait: the descriptor must be closed
            b.call("sleep_ms", ms=50)
        # without the wait the owner may still be closing it on another thread: open is legal
        b.extra(closed=closed, position=0).call("fd_check", file="f")
        j = teardown(b, reqs=["r"]).judge()
        assert j.verdict.value == verdict, j.reason
        assert verdict == "PASS" or (j.divergence is not None and j.divergence.clause == "load-fd-ownership")
    fails(loaded(position=12), "load-position-unchanged")
    b = TB()
    b.call("file_new", file="f", size=4096, seed=1)
    b.call("req_create", req="r")
    b.call("req_set_file", req="r", fd="f", file_offset=0, length=10, buffer_offset=0)
    b.extra(closed=False, position=0).call("fd_check", file="f")
    b.call("req_free", req="r")
    b.extra(closed=True, position=0).call("fd_check", file="f")
    passes(teardown(b))
    b = TB()
    b.call("file_new", file="f", size=4096, seed=1)
    b.call("req_create", req="r")
    b.call("req_set_file", req="r", fd="f", file_offset=0, length=10, buffer_offset=0)
    b.call("req_free", req="r")
    b.extra(closed=False, position=0).call("fd_check", file="f")  # just after the free: may still be open
    b.call("sleep_ms", ms=50)
    b.extra(closed=False, position=0).call("fd_check", file="f")
    fails(teardown(b), "req-file-fd-ownership")
    b = TB()  # a wait before the release does not count
    b.call("file_new", file="f", size=4096, seed=1)
    b.call("req_create", req="r")
    b.call("req_set_file", req="r", fd="f", file_offset=0, length=10, buffer_offset=0)
    b.call("sleep_ms", ms=50)
    b.call("req_free", req="r")
    b.extra(closed=False, position=0).call("fd_check", file="f")
    passes(teardown(b))


@covers("loading.call_await_closed")
def test_await_closed_is_a_quiet_wait_that_began_when_nothing_needed_the_descriptor():
    def segment_freed(closed: bool, *, free_first: bool = True) -> TB:
        b = TB()
        b.call("file_new", file="f", size=4096, seed=1)
        b.call("req_create", req="r")
        b.call("req_set_file", req="r", fd="f", file_offset=0, length=10, buffer_offset=0)
        if free_first:
            b.call("req_free", req="r")
        b.extra(closed=closed, position=0, waited_ms=1000 if not closed else 3).call(
            "await_closed", file="f", timeout_ms=1000)
        return b

    passes(teardown(segment_freed(True)))
    fails(teardown(segment_freed(False)), "req-file-fd-ownership")  # still open after the whole wait: a leak
    # Waiting while the request still owns it proves nothing, nor does the free after it.
    b = segment_freed(False, free_first=False)
    b.call("req_free", req="r")
    b.extra(closed=False, position=0).call("fd_check", file="f")
    passes(teardown(b))
    # A descriptor whose load is answered during the wait was still needed when the wait began.
    b = TB()
    allocated(b)
    b.call("file_new", file="f", size=4096, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
    b.call("buf_free", bufs=["b"])
    b.extra(closed=False, position=0).call("await_closed", file="f", timeout_ms=1000,
                                           during=[b.cb("load", None, 0, "B1")])
    passes(teardown(b, reqs=["r"]))


def preempted(*, onpreempt=True, cb=True, mapped=False, map_after=None, vnpu_ret=0, key="preempt") -> TB:
    b = TB()
    allocated(b, cookie="c", onpreempt=onpreempt)
    if mapped:
        b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    during = [b.cb("preempt", "c")] if cb else []
    b.call("vnpu", command=f"{key}=b", ret=vnpu_ret, errno="EBUSY" if vnpu_ret else None, during=during)
    if map_after is not None:
        ret, errno = map_after
        b.call("buf_map", map="m2", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=ret,
               errno=errno)
    return teardown(b, bufs=["b"], reqs=["r"], deleted=["c"], maps=["m"] if mapped else [])


@covers("preemption.preempt_allowed")
def test_preempt_callback():
    passes(preempted(), caps=VNPU)
    fails(preempted(onpreempt=False), "req-onpreempt-default-null", caps=VNPU)
    fails(preempted(mapped=True, vnpu_ret=-1), "preempt-never-while-mapped", caps=VNPU)


@covers("preemption.ret_vnpu")
def test_vnpu_never_preempts_mapped_buffer():
    passes(preempted(mapped=True, cb=False, vnpu_ret=-1), caps=VNPU)
    fails(preempted(mapped=True, cb=False), "preempt-never-while-mapped", caps=VNPU)


@covers("preemption.owed_preempts")
def test_preempt_callback_owed():
    fails(preempted(cb=False), "preempt-onpreempt-purpose", caps=VNPU)
    passes(preempted(cb=False, onpreempt=False), caps=VNPU)


@covers("mapping.map_preempted", "free.free_result")
def test_map_after_preempt():
    passes(preempted(map_after=(-1, "ENOENT")), caps=VNPU)
    j = fails(preempted(map_after=(-1, "ENOMEM")), "preempt-map-enoent", caps=VNPU)
    assert j.discrepancy == "D1"
    fails(preempted(map_after=(0, None)), "preempt-map-fails-after-callback", caps=VNPU)


def test_spontaneous_preemption_on_real_devices():
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=-1,
           errno="ENOENT")
    b.emit(b.cb("preempt", "c"))
    passes(teardown(b, bufs=["b"], reqs=["r"], deleted=["c"]))


def test_late_preempt_after_free():
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("buf_free", bufs=["b"])
    b.emit(b.cb("preempt", "c"))
    passes(teardown(b, reqs=["r"], deleted=["c"]))


@covers("loading.on_load")
def test_onload_may_answer_any_pending_load_of_the_buffer():
    def two_loads(first_answer, second_answer) -> TB:
        b = TB()
        allocated(b)
        b.call("file_new", file="f", size=4096, seed=7)
        b.call("file_new", file="g", size=4096, seed=8)
        b.call("buf_load", buf="b", fd="f", file_offset=0, length=10, buffer_offset=0, onload=True)
        # the second load, issued while the first is in flight, is refused at once on the caller's thread
        b.call("buf_load", buf="b", fd="g", file_offset=0, length=10, buffer_offset=0, onload=True,
               during=[b.cb("load", None, second_answer, "B1", thread="caller")])
        b.emit(b.cb("load", None, first_answer, "B1"))
        return teardown(b, bufs=["b"], reqs=["r"])

    passes(two_loads(0, "EBUSY"))
    warns(two_loads("EIO", "EBUSY"), "R8")


def test_free_during_load_drops_the_reply_only_under_aosp_d22():
    def build(dropped: bool) -> TB:
        b = TB()
        allocated(b, cookie="c")
        b.call("req_free", req="r")
        b.call("file_new", file="f", size=4096, seed=7)
        b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
        b.call("buf_free", bufs=["b"], during=[b.deleter("c")] if dropped else [])
        if not dropped:
            b.emit(b.cb("load", "c", 0, "B1"), b.deleter("c"))
        return teardown(b)

    passes(build(False))
    passes(build(False), profile="aosp-2026")
    j = build(True).judge()
    assert j.verdict.name == "FAIL" and j.discrepancy == "D22", j.reason
    j = passes(build(True), profile="aosp-2026")
    assert j.discrepancy is not None and "D22" in j.discrepancy, j


def test_load_fd_minus_one_may_abort_only_under_aosp_d23():
    from .test_rules_requests_cookies import dies_in

    b = dies_in("buf_load", {"buf": "b", "fd": {"fd": -1}, "file_offset": 0, "length": 0, "buffer_offset": 0,
                             "onload": True}, lambda t: allocated(t))
    j = b.judge()
    assert j.verdict.name == "CRASH" and j.discrepancy == "D23", j.reason
    j = passes(b, profile="aosp-2026")
    assert j.discrepancy is not None and "D23" in j.discrepancy, j


# -- an onPreempt after a commanded preemption comes on a device thread: teardown's preempt settle ------
def commanded_late(where: str, *, reached: bool = True, key: str = "preempt") -> TB:
    """vnpu preempt=b confirmed (ret 0), no await_preempt: the onPreempt comes ``where``: "steps" (during
    the steps), "settle" (while teardown's preempt settle waits), "after" (after that settle gave its
    answer, before the frees) or "never"."""
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("vnpu", command=f"{key}=b", during=[b.cb("preempt", "c")] if where == "steps" else [])
    b.settle("alloc").settle("load")
    if where == "settle":
        b.emit(b.cb("preempt", "c"))
    b.emit({"ev": "settle", "what": "preempt", "expected": 1, "got": int(where in ("steps", "settle")),
            "reached": reached})
    if where == "after":
        b.emit(b.cb("preempt", "c"))
    b.call("buf_free", bufs=["b"], teardown=True)
    b.call("req_free", req="r", teardown=True)
    b.emit(b.deleter("c"))
    b.settle("deleters")
    return b.end()


@covers("preemption.settle_preempt")
def test_commanded_onpreempt_owed_by_the_preempt_settle():
    # A program without await_preempt: the onPreempt arrives while teardown waits for it. Before the
    # preempt settle the model owed it at the alloc settle, a false FAIL on a late device thread.
    passes(commanded_late("steps"), caps=VNPU)
    passes(commanded_late("settle"), caps=VNPU)
    passes(commanded_late("settle"), caps=VNPU.__class__(supported_pairs=VNPU.supported_pairs, vnpu_control=True))
    # The settle waited its whole budget and gave up: the callback is missing well past the text's
    # "small time window" (M_MAP_ENOENT never delivers it).
    fails(commanded_late("never", reached=False), "preempt-onpreempt-purpose", caps=VNPU)
    # The settle was answered, the callback came only after it: still owed at the settle.
    fails(commanded_late("after", reached=False), "preempt-onpreempt-purpose", caps=VNPU)


def test_preempt_late_is_judged_as_preempt():
    """vnpu preempt_late= preempts as preempt= does, its onPreempt only later (docs/vnpu.md §7): the same
    verdicts, and no rule bounds how late the callback comes before the preempt settle."""
    for key in ("preempt", "preempt_late"):
        passes(preempted(key=key), caps=VNPU)
        fails(preempted(onpreempt=False, key=key), "req-onpreempt-default-null", caps=VNPU)
        passes(preempted(mapped=True, cb=False, vnpu_ret=-1, key=key), caps=VNPU)
        fails(preempted(mapped=True, cb=False, key=key), "preempt-never-while-mapped", caps=VNPU)
        fails(preempted(cb=False, key=key), "preempt-onpreempt-purpose", caps=VNPU)
        passes(preempted(map_after=(-1, "ENOENT"), key=key), caps=VNPU)
        fails(preempted(map_after=(0, None), key=key), "preempt-map-fails-after-callback", caps=VNPU)
        passes(commanded_late("settle", key=key), caps=VNPU)
        fails(commanded_late("never", reached=False, key=key), "preempt-onpreempt-purpose", caps=VNPU)


def test_late_onpreempt_after_free_needs_a_live_cookie():
    """The route of M_DELETE_AT_FREE in one step: preempt_late=, then the free; the onPreempt comes after
    it. A deleter run at the free (the request let go of the cookie first) is a FAIL once it comes."""
    for deleted_at_free in (False, True):
        b = TB()
        allocated(b, cookie="c", onpreempt=True)
        b.call("req_free", req="r")
        b.call("vnpu", command="preempt_late=b")
        b.call("buf_free", bufs=["b"], during=[b.deleter("c")] if deleted_at_free else [])
        b.settle("alloc").settle("load")
        b.emit(b.cb("preempt", "c"))
        b.emit({"ev": "settle", "what": "preempt", "expected": 1, "got": 1, "reached": True})
        if not deleted_at_free:
            b.emit(b.deleter("c"))
        b.settle("deleters")
        if deleted_at_free:
            fails(b.end(), "cookie-borrowed-in-callbacks", caps=VNPU)
        else:
            passes(b.end(), caps=VNPU)


def test_commanded_preemption_without_onpreempt_owes_nothing_at_the_settle():
    b = TB()
    allocated(b, cookie="c", onpreempt=False)
    b.call("vnpu", command="preempt=b")
    passes(teardown(b, bufs=["b"], reqs=["r"], deleted=["c"]), caps=VNPU)


# -- onPreempt names only its cookie: any assignment of the onPreempts to buffers of that cookie ------------
def shared_cookie(*, preempt: tuple[str, ...] = ("b2",), cbs: int = 1, mapped: tuple[str, ...] = (),
                  cb_at_end: bool = False, second_fails: bool = False) -> TB:
    """One request (cookie c, onPreempt set) submitted twice: B1 and B2 carry the same cookie."""
    b = TB()
    request(b, "r", cookie="c", onpreempt=True)
    second = b.cb("alloc", "c", "ENOMEM", None) if second_fails else b.cb("alloc", "c", 0, "B2")
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", "c", 0, "B1")])
    b.call("alloc", reqs=["r"], during=[second])
    b.bind("b1", "B1", 0)
    if not second_fails:
        b.bind("b2", "B2", 1)
    for buf in mapped:
        b.call("buf_map", map=f"m{buf}", buf=buf, length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    for buf in preempt:
        b.call("vnpu", command=f"preempt={buf}", ret=-1 if buf in mapped else 0,
               errno="EBUSY" if buf in mapped else None)
    if not cb_at_end:
        b.emit(*[b.cb("preempt", "c") for _ in range(cbs)])
    b.settle("alloc").settle("load")
    if cb_at_end:
        b.emit(*[b.cb("preempt", "c") for _ in range(cbs)])
    b.settle("preempt")
    for buf in mapped:
        b.call("buf_unmap", map=f"m{buf}", offset=0, length=8192, teardown=True)
    b.call("buf_free", bufs=["b1"] if second_fails else ["b1", "b2"], teardown=True)
    b.call("req_free", req="r", teardown=True)
    b.emit(b.deleter("c"))
    b.settle("deleters")
    return b.end()


def test_onpreempt_of_a_shared_cookie_goes_to_any_buffer_that_may_receive_it():
    # The preempted buffer is the second one with that cookie, the first one is live (and even mapped).
    passes(shared_cookie(), caps=VNPU)
    passes(shared_cookie(mapped=("b1",)), caps=VNPU)
    passes(shared_cookie(cb_at_end=True), caps=VNPU)
    passes(shared_cookie(preempt=("b1",)), caps=VNPU)
    passes(shared_cookie(preempt=("b2", "b1"), cbs=2, cb_at_end=True), caps=VNPU)
    passes(shared_cookie(preempt=("b2", "b1"), cbs=2, mapped=()), caps=CAPS_SPONTANEOUS)
    # No assignment fits: more onPreempts than buffers that could get one; one while every candidate
    # is mapped (no command preempted anything); one owed and missing.
    fails(shared_cookie(cbs=2), "preempt-callback-on-forced-dealloc", caps=VNPU)
    fails(shared_cookie(preempt=("b2", "b1"), cbs=3), "preempt-callback-on-forced-dealloc", caps=VNPU)
    fails(shared_cookie(preempt=(), mapped=("b1", "b2")), "preempt-never-while-mapped", caps=CAPS_SPONTANEOUS)
    fails(shared_cookie(preempt=("b2", "b1"), cbs=1, cb_at_end=True), "preempt-onpreempt-purpose", caps=VNPU)


def test_onpreempt_for_a_failed_allocation_of_a_shared_cookie():
    # The same request submitted twice, the second submission refused: its onPreempt cannot come; only
    # the buffer of the first one may get one (M_PREEMPT_ON_FAILED sends one per failed onAlloc).
    passes(shared_cookie(preempt=("b1",), second_fails=True), caps=CAPS_SPONTANEOUS)
    fails(shared_cookie(preempt=("b1",), cbs=2, second_fails=True), "preempt-callback-on-forced-dealloc",
          caps=CAPS_SPONTANEOUS)
    fails(shared_cookie(preempt=(), mapped=("b1",), second_fails=True), "preempt-never-while-mapped",
          caps=CAPS_SPONTANEOUS)


def test_one_cookie_on_two_requests_only_the_one_with_onpreempt():
    """The same cookie object on two requests (reference counted), onPreempt set on one only."""
    def trace(preempt: str, cbs: int, together: bool = False) -> TB:
        b = TB()
        request(b, "r1", cookie="c", onpreempt=True)
        request(b, "r2", cookie="c", onpreempt=False)
        if together:  # one allocAsync: either onAlloc may answer either request
            b.call("alloc", reqs=["r1", "r2"], during=[b.cb("alloc", "c", 0, "B1"), b.cb("alloc", "c", 0, "B2")])
        else:
            b.call("alloc", reqs=["r1"], during=[b.cb("alloc", "c", 0, "B1")])
            b.call("alloc", reqs=["r2"], during=[b.cb("alloc", "c", 0, "B2")])
        b.bind("b1", "B1", 0).bind("b2", "B2", 1)
        b.call("vnpu", command=f"preempt={preempt}")
        b.emit(*[b.cb("preempt", "c") for _ in range(cbs)])
        return teardown(b, bufs=["b1", "b2"], reqs=["r1", "r2"], deleted=["c", "c"])
    passes(trace("b1", 1), caps=VNPU)
    passes(trace("b2", 0), caps=VNPU)
    fails(trace("b2", 1), "preempt-callback-on-forced-dealloc", caps=VNPU)
    fails(trace("b1", 0), "preempt-onpreempt-purpose", caps=VNPU)
    # Submitted together, the two onAllocs (same cookie) may answer the requests either way round.
    passes(trace("b2", 1, together=True), caps=VNPU)
    passes(trace("b2", 0, together=True), caps=VNPU)
    fails(trace("b2", 2, together=True), "req-onpreempt-default-null", caps=VNPU)


def test_late_onpreempt_of_a_shared_cookie_goes_to_the_freed_preempted_buffer():
    """B2 (cookie shared with the live B1) is preempted and freed before its onPreempt arrives: the late
    callback is B2's (preempt-after-free-race); a second one has no buffer left that may receive it."""
    def trace(cbs: int) -> TB:
        b = TB()
        request(b, "r", cookie="c", onpreempt=True)
        b.call("alloc", reqs=["r", "r"], during=[b.cb("alloc", "c", 0, "B1"), b.cb("alloc", "c", 0, "B2")])
        b.bind("b1", "B1", 0).bind("b2", "B2", 1)
        b.call("vnpu", command="preempt=b2")
        b.call("buf_free", bufs=["b2"])
        b.emit(*[b.cb("preempt", "c") for _ in range(cbs)])
        return teardown(b, bufs=["b1"], reqs=["r"], deleted=["c"])
    passes(trace(1), caps=VNPU)
    passes(trace(0), caps=VNPU)  # freed first: the late callback is optional
    fails(trace(2), "preempt-callback-on-forced-dealloc", caps=VNPU)


@covers("free.call_free")
def test_a_freed_buffer_a_vnpu_command_preempted_holds_its_cookie_for_a_late_onpreempt():
    """preempt=b, free b, replace the request's cookie: the onPreempt may still come after the free
    (preempt-after-free-race) and borrows the cookie, so its deletion is not owed at setCookie; a device
    may also drop that late callback and delete the cookie; one that comes after the deletion fails."""

    def trace(order: str) -> TB:
        b = TB(trace=2)
        request(b, "r", cookie="c", onpreempt=True)
        # onAlloc inside allocAsync on the caller's thread: its return is known at the call's ret
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", "c", 0, "B1", thread="caller", th="main"),
                                            b.cb_return("alloc", "c", th="main")])
        b.bind("b", "B1")
        b.call("vnpu", command="preempt=b")
        b.call("buf_free", bufs=["b"])
        b.call("cookie_new", cookie="c2")
        b.call("req_set_cookie", req="r", cookie="c2", deleter=True)
        onpreempt = [b.cb("preempt", "c", th="w1"), b.cb_return("preempt", "c", th="w1")]
        late = {"cb_then_deleter": [*onpreempt, b.deleter("c")], "deleter_only": [b.deleter("c")],
                "deleter_then_cb": [b.deleter("c"), b.cb("preempt", "c", cookie_deleted=True, th="w1")]}[order]
        b.emit(*late)
        return teardown(b, reqs=["r"], deleted=["c2"])

    for order in ("cb_then_deleter", "deleter_only"):
        j = trace(order).judge(caps=VNPU)  # WARN R1 only: the synchronous onAlloc that makes its return known
        assert j.verdict.value == "WARN" and "R1 " in j.reason and "R2" not in j.reason, (order, j.reason)
    fails(trace("deleter_then_cb"), "cookie-borrowed-in-callbacks", caps=VNPU)


def test_zero_length_load_changes_no_byte():
    def build(read_seed: int):
        b = TB()
        b.call("file_new", file="f", size=8192, seed=5)
        allocated(b, prot=("READ", "WRITE"), size=8192)
        b.call("buf_map", map="w", buf="b", length=8192, prot=["READ", "WRITE"], flags=["SHARED"], offset=0, ret=0)
        b.call("map_write", map="w", offset=0, length=8192, seed=9)
        b.call("buf_unmap", map="w", offset=0, length=8192)
        b.call("buf_load", buf="b", fd="f", file_offset=0, length=0, buffer_offset=0, onload=True,
               during=[b.cb("load", None, 0, "B1")])
        b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=0)
        b.extra(digest=digest(read_seed, 8192))
        b.call("map_read", map="m", offset=0, length=8192)
        b.call("buf_unmap", map="m", offset=0, length=8192)
        return teardown(b, bufs=["b"], reqs=["r"])

    passes(build(9))
    fails(build(5), "load-length-nonnegative")


def window_map(*, notified: bool, cb_first: bool, cb_during: bool = False) -> TB:
    """A commanded preemption whose onPreempt comes late, a map of the buffer before (or after, or while the map
    is in flight) it, and, with ``notified``, a map that already failed ENOMEM (the AOSP client had the notice)
    before the map that succeeds."""
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("vnpu", command="preempt=b", during=[b.cb("preempt", "c")] if cb_first else [])
    if notified:
        b.call("buf_map", map="m0", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=-1,
               errno="ENOMEM")
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0,
           during=[b.cb("preempt", "c")] if cb_during else [])
    if not cb_first and not cb_during:
        b.emit(b.cb("preempt", "c"))
    b.call("buf_unmap", map="m", offset=0, length=8192)
    return teardown(b, bufs=["b"], reqs=["r"], deleted=["c"])


@covers("mapping.map_preempted")
def test_map_before_the_notice_succeeds_only_under_aosp_d24():
    j = fails(window_map(notified=False, cb_first=False), "map-preempt-window-enoent", caps=VNPU)
    assert j.discrepancy is not None and "D24" in j.discrepancy, j
    j = passes(window_map(notified=False, cb_first=False), caps=VNPU, profile="aosp-2026")
    assert j.discrepancy == "D14,D24", j  # its onPreempt then comes while mapped (D14)
    # once the client had the notice (its onPreempt ran, or a map failed ENOMEM) the window is closed
    fails(window_map(notified=False, cb_first=True), "preempt-map-fails-after-callback", caps=VNPU,
          profile="aosp-2026")
    fails(window_map(notified=True, cb_first=False), "map-preempt-window-enoent", caps=VNPU, profile="aosp-2026")
    # an onPreempt that came while the map was in flight: the map may have been decided before it
    j = passes(window_map(notified=False, cb_first=False, cb_during=True), caps=VNPU, profile="aosp-2026")
    assert j.discrepancy == "D24", j  # the onPreempt came before the map returned: not while mapped
    fails(window_map(notified=False, cb_first=False, cb_during=True), "map-preempt-window-enoent", caps=VNPU)


def pressed_map(errno: str | None) -> TB:
    """Memory pressure that may take the buffer, then a map of it answered before any onPreempt."""
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("vnpu", command="pressure=268435456")
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=-1, errno=errno)
    b.emit(b.cb("preempt", "c"))
    b.call("vnpu", command="pressure=0")
    return teardown(b, bufs=["b"], reqs=["r"], deleted=["c"])


@covers("mapping.unseen_preemption_errno")
def test_a_map_refused_after_pressure_names_the_window_errno():
    passes(pressed_map("ENOENT"), caps=VNPU)
    # the refusal says the buffer was preempted; its errno is then ENOENT, whether or not onPreempt came yet
    fails(pressed_map("ENOMEM"), "map-preempt-window-enoent", caps=VNPU)
    j = passes(pressed_map("ENOMEM"), caps=VNPU, profile="aosp-2026")
    assert j.discrepancy is not None and "D1" in j.discrepancy, j


def wedged(*, map_answer: tuple[int, str | None]) -> TB:
    b = TB()
    allocated(b)
    b.call("buf_load", buf="b", fd={"fd": -7}, file_offset=0, length=100, buffer_offset=0, onload=True,
           during=[b.cb("load", None, "ECONNRESET", "B1", thread="caller")])
    ret, errno = map_answer
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=ret, errno=errno)
    return teardown(b, bufs=["b"], reqs=["r"], maps=["m"] if ret == 0 else [])


@covers("loading.aosp_load_error")
def test_a_refused_descriptor_may_leave_the_buffer_loading_only_under_aosp_d25():
    passes(wedged(map_answer=(0, None)))
    j = fails(wedged(map_answer=(-1, "ENOMEM")), "map-maps-buffer", caps=VNPU)
    assert j.discrepancy == "D25", j
    passes(wedged(map_answer=(-1, "ENOMEM")), caps=VNPU, profile="aosp-2026")
    # only a negative fd other than -1 wedges the AOSP client: a plain load error does not
    b = TB()
    allocated(b)
    b.call("file_new", file="f", size=4096, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
    b.emit(b.cb("load", None, "EIO", "B1"))
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=-1,
           errno="ENOMEM")
    fails(teardown(b, bufs=["b"], reqs=["r"]), "map-maps-buffer", caps=VNPU, profile="aosp-2026")


def lowest(victim: str, *, set_priority: bool = False, out_of_range: bool = False, pressure: bool = False,
           late: bool = False) -> TB:
    """Two buffers, priorities 900 (x) and 500 (y) (x's set by setPriority with ``set_priority``), then
    `vnpu preempt=lowest` and the onPreempt of ``victim`` (after a `pressure=` that may have taken x with
    ``pressure``)."""
    b = TB()
    for req, buf, handle, cookie, prio in (("rx", "bx", "B1", "cx", 900), ("ry", "by", "B2", "cy", 500)):
        request(b, req, cookie=cookie, onpreempt=True)
        if not (set_priority and req == "rx"):
            b.call("req_set_priority", req=req, priority=2000 if out_of_range and req == "rx" else prio)
        b.call("alloc", reqs=[req], during=[b.cb("alloc", cookie, 0, handle)])
        b.bind(buf, handle)
    if set_priority:
        b.call("buf_set_priority", buf="bx", priority=900)
    if pressure:  # y is mapped while pressure preempts x, so only x was preemptable then
        b.call("buf_map", map="m", buf="by", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
        b.call("vnpu", command="pressure=1048576", during=[b.cb("preempt", "cx")])
        b.call("buf_unmap", map="m", offset=0, length=8192)
    b.call("vnpu", command="preempt=lowest", during=[] if late else [b.cb("preempt", victim)])
    if late:  # the onPreempt after the command returned
        b.emit(b.cb("preempt", victim))
    return teardown(b, bufs=["bx", "by"], reqs=["rx", "ry"], deleted=["cx", "cy"])


@covers("preemption.lowest_candidates")
def test_preempt_lowest_takes_the_greatest_priority_value():
    passes(lowest("cx"), caps=VNPU)
    fails(lowest("cy"), "priority-request-range", caps=VNPU)  # the device holds another priority than set
    passes(lowest("cx", late=True), caps=VNPU)
    fails(lowest("cy", late=True), "priority-request-range", caps=VNPU)
    fails(lowest("cy", set_priority=True), "priority-set", caps=VNPU)
    warns(lowest("cy", out_of_range=True), "R4", caps=VNPU)  # an accepted out-of-range priority ranks nothing
    passes(lowest("cy", pressure=True), caps=VNPU)  # pressure took x: it sets no bar for y


@covers("preemption.on_preempt")
def test_onpreempt_with_a_cookie_set_after_allocasync_names_later_changes():
    def replaced(seen: str) -> TB:
        b = TB()
        allocated(b, cookie="c", onpreempt=True)
        b.call("cookie_new", cookie="n")
        b.call("req_set_cookie", req="r", cookie="n", deleter=True)
        b.call("vnpu", command="preempt=b", during=[b.cb("preempt", seen)])
        return teardown(b, bufs=["b"], reqs=["r"], deleted=["c", "n"])

    passes(replaced("c"), caps=VNPU)
    fails(replaced("n"), "cookie-later-changes-no-effect", caps=VNPU)


@covers("preemption.on_preempt")
def test_onpreempt_with_the_cookie_of_a_refused_submission_names_no_buffer():
    """r1 had cookie c when allocAsync was called and got no buffer; r2's buffer (cookie d) has onPreempt.
    An onPreempt carrying c is one of no buffer at all, not a later change of r1's cookie (nothing changed)."""
    b = TB()
    request(b, "r1", cookie="c", onpreempt=True)
    b.call("alloc", reqs=["r1"], during=[b.cb("alloc", "c", "ENOMEM", None)])
    request(b, "r2", cookie="d", onpreempt=True)
    b.call("alloc", reqs=["r2"], during=[b.cb("alloc", "d", 0, "B1")])
    b.bind("b", "B1", 0)
    b.emit(b.cb("preempt", "c"))
    fails(teardown(b, bufs=["b"], reqs=["r1", "r2"], deleted=["c", "d"]), "preempt-callback-on-forced-dealloc",
          caps=CAPS_SPONTANEOUS)
