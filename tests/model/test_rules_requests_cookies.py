"""Requests, cookies and crashes: a conforming and a non-conforming trace per rule."""

from __future__ import annotations

from reference_model.verdicts import Verdict

from .builder import TB, allocated, request, teardown
from .coverage import covers


def passes(b: TB, **kw):
    j = b.judge(**kw)
    assert j.verdict is Verdict.PASS, (j.reason, b.lines)
    return j


def warns(b: TB, reading: str, **kw):
    j = b.judge(**kw)
    assert j.verdict is Verdict.WARN, (j.reason, b.lines)
    assert f"{reading} (" in j.reason, j.reason
    return j


def fails(b: TB, clause: str, **kw):
    j = b.judge(**kw)
    assert j.verdict is Verdict.FAIL, (j.reason, b.lines)
    assert j.divergence is not None and j.divergence.clause == clause, j.reason
    assert j.divergence.quote, "the catalogue quote is carried"
    assert j.divergence.message.startswith("observed ")
    return j


def default_request(answer: dict) -> TB:
    b = TB()
    b.call("req_create", req="r")
    b.call("req_set_onalloc", req="r", set=True)
    b.call("alloc", reqs=["r"], during=[answer])
    return teardown(b, reqs=["r"])


@covers("requests.new_request")
def test_defaults_answer_einval():
    b = TB()
    passes(default_request(b.cb("alloc", None, "EINVAL", None)))
    # the device was never set: the default's sentence is the one contradicted
    j = fails(default_request(b.cb("alloc", None, 0, "B1")), "req-device-default-negative")
    assert j.divergence is not None and j.divergence.event == 7 and j.divergence.step == 2


def test_defaults_enosys_is_aosp_d2():
    b = TB()
    j = fails(default_request(b.cb("alloc", None, "ENOSYS", None)), "req-device-default-negative")
    assert j.discrepancy == "D2"


@covers("requests.release_request")
def test_free_request_right_after_alloc():
    def build(deleter_early: bool) -> TB:
        b = TB()
        request(b, cookie="c")
        b.call("alloc", reqs=["r"])
        b.call("req_free", req="r", during=[b.deleter("c")] if deleter_early else [])
        b.emit(b.cb("alloc", "c", "ENOMEM", None))
        if not deleter_early:
            b.emit(b.deleter("c"))
        return teardown(b)

    passes(build(False))
    fails(build(True), "cookie-borrowed-in-callbacks")


@covers("requests.free_null")
def test_free_null():
    b = TB()
    b.call("req_free_null")
    passes(teardown(b))
    b = TB()
    b.lines.append(b._line({"ev": "call", "step": 0, "op": "req_free_null", "args": {}}))
    b.steps.append({"req_free_null": None})
    b.exit("signal", None, "SIGSEGV")
    j = b.judge()
    assert j.verdict is Verdict.CRASH and j.discrepancy == "D4"
    assert b.judge(profile="aosp-2026").verdict is Verdict.PASS


def dies_in(op: str, args: dict, setup) -> TB:
    b = TB()
    setup(b)
    b.steps.append({op: dict(args)})
    b.lines.append(b._line({"ev": "call", "step": len(b.steps) - 1, "op": op, "args": b._echo(op, args)}))
    return b.exit("signal", None, "SIGABRT")


@covers("crashes.setonalloc_null_crashes")
def test_setonalloc_null_crashes():
    passes(dies_in("req_set_onalloc", {"req": "r", "set": False}, lambda b: b.call("req_create", req="r")))
    b = TB()
    b.call("req_create", req="r")
    b.call("req_set_onalloc", req="r", set=False)
    fails(teardown(b, reqs=["r"]), "crash-setonalloc-null")


@covers("crashes.alloc_without_onalloc_crashes")
def test_alloc_without_onalloc_crashes():
    passes(dies_in("alloc", {"reqs": ["r"]}, lambda b: request(b, onalloc=False)))
    b = request(TB(), onalloc=False)
    b.call("alloc", reqs=["r"])
    fails(teardown(b, reqs=["r"]), "crash-alloc-without-onalloc")


def test_unexpected_death_is_crash():
    b = request(TB())
    b.steps.append({"alloc": {"reqs": ["r"]}})
    b.lines.append(b._line({"ev": "call", "step": len(b.steps) - 1, "op": "alloc", "args": {"reqs": ["r0"]}}))
    b.exit("signal", None, "SIGSEGV")
    j = b.judge()
    assert j.verdict is Verdict.CRASH and "SIGSEGV" in j.reason


@covers("crashes.load_without_onload_crashes")
def test_load_without_onload_crashes():
    def setup(b: TB) -> None:
        allocated(b)
        b.call("file_new", file="f", size=4096, seed=1)

    args = {"buf": "b", "fd": "f", "file_offset": 0, "length": 16, "buffer_offset": 0, "onload": False}
    passes(dies_in("buf_load", args, setup))
    b = TB()
    setup(b)
    b.call("buf_load", **args)
    fails(teardown(b, bufs=["b"], reqs=["r"]), "crash-load-onload-null")


@covers("cookies.hand_over", "cookies.all_deleted")
def test_shared_cookie_deleted_once_per_hand_over():
    def build(deleters: int) -> TB:
        b = TB()
        request(b, "r1", cookie="c")
        request(b, "r2")
        b.call("req_set_cookie", req="r2", cookie="c", deleter=True)
        return teardown(b, reqs=["r1", "r2"], deleted=["c"] * deleters)

    passes(build(2))
    fails(build(1), "cookie-deleter-called")


def test_null_cookie_with_deleter_is_deleted_with_null():
    b = request(TB(), cookie=None, deleter=True)
    passes(teardown(b, reqs=["r"], deleted=[None]))
    b = request(TB(), cookie=None, deleter=True)
    fails(teardown(b, reqs=["r"]), "cookie-deleter-null-cookie")


@covers("cookies.replaced_cookie_deleted")
def test_replacement_deletes_previous_during_set_cookie():
    def build(in_call: bool) -> TB:
        b = TB()
        b.call("req_create", req="r")
        b.call("cookie_new", cookie="a")
        b.call("cookie_new", cookie="z")
        b.call("req_set_cookie", req="r", cookie="a", deleter=True)
        b.call("req_set_cookie", req="r", cookie="z", deleter=True,
               during=[b.deleter("a", "caller")] if in_call else [])
        return teardown(b, reqs=["r"], deleted=(["z"] if in_call else ["a", "z"]))

    passes(build(True))
    fails(build(False), "cookie-replace-deletes-previous")


def test_replacement_deferred_while_a_submission_holds_it():
    b = TB()
    request(b, cookie="a")
    b.call("alloc", reqs=["r"])
    b.call("cookie_new", cookie="z")
    b.call("req_set_cookie", req="r", cookie="z", deleter=True)
    b.emit(b.cb("alloc", "a", "ENOMEM", None), b.deleter("a"))
    passes(teardown(b, reqs=["r"], deleted=["z"]))


@covers("cookies.on_deleter")
def test_deleter_attribution():
    b = request(TB(), cookie="c", deleter=False)
    fails(teardown(b, reqs=["r"], deleted=["c"]), "cookie-null-deleter-nothing")
    b = request(TB(), cookie="c")
    fails(teardown(b, reqs=["r"], deleted=["c", "c"]), "cookie-deleter-called")
    b = request(TB(), cookie="c")
    b.emit(b.deleter("c"))
    fails(teardown(b, reqs=["r"]), "cookie-ownership-donated")
    b = request(TB(), cookie=5, deleter=False)
    passes(teardown(b, reqs=["r"]))


@covers("cookies.callback_cookie_alive")
def test_no_callback_after_deletion():
    b = TB()
    request(b, cookie="c")
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", "c", "ENOMEM", None)])
    passes(teardown(b, reqs=["r"], deleted=["c"]))
    b = TB()
    request(b, cookie="c")
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", "c", "ENOMEM", None, cookie_deleted=True)])
    fails(teardown(b, reqs=["r"], deleted=["c"]), "cookie-borrowed-in-callbacks")


@covers("cookies.unmatched_alloc_cookie", "allocation.call_alloc")
def test_snapshot_of_cookie_at_alloc():
    def build(cookie_seen: str) -> TB:
        b = TB()
        request(b, cookie="old")
        b.call("alloc", reqs=["r"])
        b.call("cookie_new", cookie="new")
        b.call("req_set_cookie", req="r", cookie="new", deleter=True)
        b.emit(b.cb("alloc", cookie_seen, "ENOMEM", None), b.deleter("old"))
        return teardown(b, reqs=["r"], deleted=["new"])

    passes(build("old"))
    fails(build("new"), "alloc-snapshot-cookie-example")


def replaced_after_failed_onalloc(deleted_in_call: bool, deleted_later: bool) -> TB:
    """The submission's onAlloc failed (its start is all the trace shows), then the request's cookie is
    replaced: the implementation may still be inside that callback, holding the cookie."""
    b = TB()
    request(b, cookie="a")
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", "a", "EIO", None)])
    b.call("cookie_new", cookie="z")
    b.call("req_set_cookie", req="r", cookie="z", deleter=True,
           during=[b.deleter("a", "caller")] if deleted_in_call else [])
    if deleted_later:
        b.emit(b.deleter("a"))
    return teardown(b, reqs=["r"], deleted=["z"])


def test_replacement_after_a_failed_onalloc_may_wait_for_the_callback():
    passes(replaced_after_failed_onalloc(True, False))
    passes(replaced_after_failed_onalloc(False, True))  # deleted once the callback returned
    # never deleted at all: a leak, found at the deleters' settle
    fails(replaced_after_failed_onalloc(False, False), "cookie-deleter-called")


@covers("cookies.never_handed_over")
def test_a_deleter_for_a_value_never_handed_over():
    # A raw integer handed over with a deleter comes back changed (its high bits lost): the integer did not
    # survive, whichever deleter function the changed value happens to select.
    high = 0x1234_0000_0000_0005
    b = request(TB(), cookie=high)
    b.call("req_free", req="r", during=[b.deleter(high & 0xFFFF_FFFF_FFFF)])
    fails(teardown(b), "cookie-raw-integer")
    b = request(TB(), cookie=high)
    b.call("req_free", req="r", during=[b.deleter(high)])
    passes(teardown(b))
    # A pointer cookie set with a NULL deleter: nothing may be called for it.
    b = request(TB(), cookie="c", deleter=False)
    b.call("req_free", req="r", during=[b.deleter("c")])
    fails(teardown(b), "cookie-null-deleter-nothing")
