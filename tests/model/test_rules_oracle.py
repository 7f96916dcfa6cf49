"""Rules of issue 11: announced preemption, attribution of a cookie dropped early, readings that WARN."""

from __future__ import annotations

from reference_model.caps import DeviceCaps

from .builder import PAIR, TB, allocated, request, teardown
from .coverage import covers
from .test_rules_requests_cookies import dies_in, fails, passes, warns

VNPU = DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=1 << 20, policy="budget", vnpu_control=True)


def map_enoent(b: TB, name: str = "m") -> TB:
    return b.call("buf_map", map=name, buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=-1,
                  errno="ENOENT")


def shown_preempted(*, onpreempt: bool = True, cb: str | None = "before free", deleter: bool = True,
                    freed: bool = True) -> TB:
    """A buffer a map shows preempted (ENOENT) with no vnpu command, then freed by the scenario (or, with
    ``freed`` False, only by teardown after the settles); onPreempt before the free, after it, or never."""
    b = TB()
    allocated(b, cookie="c", onpreempt=onpreempt, deleter=deleter)
    map_enoent(b)
    if cb == "before free":
        b.emit(b.cb("preempt", "c"))
    if freed:
        b.call("buf_free", bufs=["b"])
    if cb == "after free":
        b.emit(b.cb("preempt", "c"))
    return teardown(b, bufs=[] if freed else ["b"], reqs=["r"], deleted=["c"] if deleter else [])


@covers("preemption.announced_owed")
def test_unseen_preemption_must_be_announced():
    passes(shown_preempted())
    passes(shown_preempted(cb="after free"))  # the race of the text: late, but it comes
    passes(shown_preempted(onpreempt=False, cb=None))  # NULL onPreempt: silent preemption is allowed
    # never, after the scenario freed the buffer: the late callback has no deadline ("may be invoked after the
    # caller has already freed the buffer"), so no point of the trace shows it missing, and the device may
    # delete the cookie instead
    passes(shown_preempted(cb=None, deleter=False))
    passes(shown_preempted(cb=None))
    # never, for a buffer the scenario kept: the probe waits for no uncommanded onPreempt, so only the
    # deletion of the cookie it would carry bounds the window; without a deleter the trace shows nothing
    # missing, and with one the cookie deleted while it is owed names it
    passes(shown_preempted(cb=None, deleter=False, freed=False))
    j = fails(shown_preempted(cb=None, freed=False), "preempt-onpreempt-purpose")
    assert "before the onPreempt owed" in j.divergence.observed


def test_cookie_kept_for_an_owed_onpreempt():
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    map_enoent(b)
    b.call("req_free", req="r")
    # Freed by the scenario, the late onPreempt is no longer owed: the device may drop it and delete the cookie,
    # but then no onPreempt may carry the deleted cookie.
    b.call("buf_free", bufs=["b"], during=[b.deleter("c")])
    b.emit(b.cb("preempt", "c"))
    fails(teardown(b), "cookie-borrowed-in-callbacks")


def test_late_onpreempt_after_the_cookie_was_dropped_names_borrowing():
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("req_free", req="r")
    b.call("buf_free", bufs=["b"], during=[b.deleter("c")])  # nothing owed yet: deleting is allowed
    b.emit(b.cb("preempt", "c"))  # ... but then no late onPreempt may carry the cookie
    fails(teardown(b), "cookie-borrowed-in-callbacks")


def test_onpreempt_inside_every_free_warns():
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("buf_free", bufs=["b"], during=[b.cb("preempt", "c", thread="caller")])
    warns(teardown(b, reqs=["r"], deleted=["c"]), "R13")
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    map_enoent(b)
    b.call("buf_free", bufs=["b"], during=[b.cb("preempt", "c", thread="caller")])
    passes(teardown(b, reqs=["r"], deleted=["c"]))  # shown preempted before: the race of the text


def test_onpreempt_for_a_buffer_never_allocated_fails():
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.call("cookie_new", cookie="x")
    b.emit(b.cb("preempt", "x"))
    fails(teardown(b, bufs=["b"], reqs=["r"], deleted=["c"]), "preempt-callback-on-forced-dealloc")


def unseen_load(onpreempt: bool, cb: bool, cookie: object = 7) -> TB:
    """A load shows the buffer preempted (ENOENT); with a cookie object, it is handed over with a deleter."""
    b = TB()
    deleter = isinstance(cookie, str)
    allocated(b, cookie=cookie, onpreempt=onpreempt, deleter=deleter)
    b.call("file_new", file="f", size=4096, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
    b.emit(b.cb("load", cookie, "ENOENT", "B1"))
    if cb:
        b.emit(b.cb("preempt", cookie))
    map_enoent(b)
    return teardown(b, bufs=["b"], reqs=["r"], deleted=[cookie] if deleter else [])


def test_unseen_preemption_shown_by_load():
    passes(unseen_load(onpreempt=False, cb=False))
    passes(unseen_load(onpreempt=True, cb=True))
    # never: missing once the cookie it would carry was deleted; with a raw cookie nothing bounds the window
    fails(unseen_load(onpreempt=True, cb=False, cookie="c"), "preempt-onpreempt-purpose")
    passes(unseen_load(onpreempt=True, cb=False))


def freed_while_loading(answer: str | int) -> TB:
    """A buffer without onPreempt whose load is in flight when the application frees it; onLoad answers
    after the free."""
    b = TB()
    allocated(b, cookie=7, deleter=False)
    b.call("file_new", file="f", size=8192, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=8192, buffer_offset=0, onload=True)
    b.call("buf_free", bufs=["b"])
    b.emit(b.cb("load", 7, answer, "B1"))
    return teardown(b, reqs=["r"])


@covers("loading.may_be_preempted_unseen")
def test_unseen_preemption_shown_by_a_load_answered_after_the_free():
    passes(freed_while_loading(0))
    # preempted silently before the free (no onPreempt was set): ENOENT, as for any other load
    passes(freed_while_loading("ENOENT"))
    # a load whose buffer the application freed meanwhile may end either way: R8 speaks of a live buffer
    passes(freed_while_loading("ENOENT"), caps=VNPU)
    passes(freed_while_loading("EIO"))


def freed_while_loading_with_onpreempt(deleted: bool) -> TB:
    """A buffer with onPreempt and a cookie with a deleter, freed while its load is in flight; the onLoad,
    after the free, says ENOENT."""
    b = TB()
    allocated(b, cookie="c", onpreempt=True, deleter=True)
    b.call("file_new", file="f", size=8192, seed=7)
    b.call("buf_load", buf="b", fd="f", file_offset=0, length=8192, buffer_offset=0, onload=True)
    b.call("buf_free", bufs=["b"])
    b.emit(b.cb("load", "c", "ENOENT", "B1"))
    return teardown(b, reqs=["r"], deleted=["c"] if deleted else [])


@covers("loading.preempted_after_free")
def test_a_preemption_shown_after_the_free_lets_the_device_keep_the_cookie():
    # the preemption the onLoad shows may still bring its onPreempt: the cookie may be kept for it, or deleted
    passes(freed_while_loading_with_onpreempt(deleted=False))
    passes(freed_while_loading_with_onpreempt(deleted=True))
    # where nothing preempts without a vnpu command the ENOENT shows none: the cookie is owed its deleter
    fails(freed_while_loading_with_onpreempt(deleted=False), "cookie-deleter-called", caps=VNPU)


def test_second_mapping_refused_warns():
    b = TB()
    allocated(b)
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    b.call("buf_map", map="m2", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=-1,
           errno="EMFILE")
    warns(teardown(b, bufs=["b"], reqs=["r"], maps=["m"]), "R6")


def test_set_priority_refused_while_mapped_warns():
    b = TB()
    allocated(b)
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    b.call("buf_set_priority", buf="b", priority=10, ret=-1, errno="EBUSY")
    warns(teardown(b, bufs=["b"], reqs=["r"], maps=["m"]), "R10")
    b = TB()
    allocated(b)
    b.call("buf_set_priority", buf="b", priority=10, ret=-1, errno="EBUSY")
    warns(teardown(b, bufs=["b"], reqs=["r"]), "R19")


def deleted_by(fn: int | None, cookie: str = "c") -> TB:
    b = TB()
    b.call("cookie_new", cookie="other")  # slot c0: the cookie under test is c1, deleter #1
    request_with_cookie = allocated(b, cookie=cookie)
    request_with_cookie.call("buf_free", bufs=["b"])
    event = b.deleter(cookie)
    if fn is not None:
        event["fn"] = fn
    b.call("req_free", req="r", during=[event])
    return teardown(b)


@covers("cookies.own_deleter")
def test_each_cookie_deleted_by_its_own_deleter():
    passes(deleted_by(1))
    passes(deleted_by(None))  # a trace without the field (an older probe) is not judged on it
    fails(deleted_by(0), "cookie-ownership-donated")


@covers("requests.created")
def test_create_returning_null_fails():
    b = TB()
    b.extra(null=True).call("req_create", req="r")
    fails(teardown(b), "req-create-returns-request")
    b = TB()
    b.call("req_create", req="r")
    passes(teardown(b, reqs=["r"]))


@covers("crashes.null_request_crashes")
def test_setonalloc_with_null_request_crashes():
    passes(dies_in("req_set_onalloc_null_req", {}, lambda b: None))
    b = TB()
    b.call("req_set_onalloc_null_req")
    fails(teardown(b), "req-request-not-null")


def alloc_returning(blocked: bool) -> TB:
    b = TB()
    request(b)
    if blocked:
        b.extra(blocked=True)
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, 0, "B1")])
    b.bind("b", "B1")
    return teardown(b, bufs=["b"], reqs=["r"])


@covers("allocation.returned_first")
def test_call_blocked_until_its_callback_ran_warns():
    passes(alloc_returning(False))
    warns(alloc_returning(True), "R14")


def test_truncated_raw_cookie_names_cookie_raw_integer():
    def build(delivered: int) -> TB:
        b = TB()
        request(b, cookie=(1 << 63) + 5, deleter=False)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", delivered, 0, "B1")])
        b.bind("b", "B1")
        return teardown(b, bufs=["b"], reqs=["r"])

    passes(build((1 << 63) + 5))
    fails(build(5), "cookie-raw-integer")  # only the low 48 bits kept


def test_control_command_naming_a_buffer_whose_allocation_failed_is_no_error():
    b = TB()
    request(b, cookie="c", onpreempt=True)
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", "c", "ENOMEM", None)])
    b.bind("b", None)
    b.call("vnpu", command="preempt=b", skipped="b0 unbound")
    b.call("buf_map", map="m", buf="b", length=4096, prot=["READ"], flags=["SHARED"], offset=0,
           skipped="b0 unbound")
    passes(teardown(b, reqs=["r"], deleted=["c"]))


def test_every_reading_that_warns_is_documented():
    from pathlib import Path

    from reference_model.readings import READINGS

    model_md = (Path(__file__).resolve().parents[2] / "docs" / "model.md").read_text()
    for rid in READINGS:
        assert f"| {rid} |" in model_md, f"{rid} has no row in docs/model.md §4"


def test_onpreempt_owed_by_a_seen_preemption_may_come_during_teardown():
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    map_enoent(b)
    b.settle("alloc").settle("load")  # "a small time window" before onPreempt: not over yet
    b.emit(b.cb("preempt", "c"))
    b.call("buf_free", bufs=["b"], teardown=True)
    b.call("req_free", req="r", teardown=True, during=[b.deleter("c")])
    b.settle("deleters")
    passes(b.end())
