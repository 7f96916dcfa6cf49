"""A callback borrows its cookie until it returns (docs/model.md R2; formats §5 `cb_return`).

The pattern fuzzing found: an onAlloc is still running on the implementation's thread when the
application frees its buffer and replaces the request's cookie. The implementation rightly keeps the
cookie until the callback returns, so the deleter comes after setCookie returned.
"""

from __future__ import annotations

from reference_model.verdicts import Verdict

from .builder import TB, request, teardown
from .coverage import covers


def _verdict(b: TB, want: Verdict, clause: str | None = None) -> None:
    j = b.judge()
    assert j.verdict is want, (j.reason, b.lines)
    if clause is not None:
        assert j.divergence is not None and j.divergence.clause == clause, j.reason


def replaced_while_onalloc_runs(trace: int, *, returned: str) -> TB:
    """onAlloc(a, B1) starts on w1; the application binds and frees B1, then replaces r's cookie a with z.
    ``returned``: how far the callback got before the replacement — "no" (still running: cb only),
    "returning" (its cb_return, nothing after it on w1), "yes" (w1 went on with another callback after
    its cb_return, so it certainly returned). The deleter of a comes after setCookie returned."""
    b = TB(trace=trace)
    request(b, cookie="a")
    request(b, "r2")
    b.call("alloc", reqs=["r", "r2"])
    b.emit(b.cb("alloc", "a", 0, "B1", th="w1"))
    if returned != "no":
        b.emit(b.cb_return("alloc", "a", th="w1"))
    if returned == "yes":
        b.emit(b.cb("alloc", None, 0, "B2", th="w1"), b.cb_return("alloc", None, th="w1"))
    b.bind("b", "B1")
    b.call("buf_free", bufs=["b"])
    b.call("cookie_new", cookie="z")
    b.call("req_set_cookie", req="r", cookie="z", deleter=True)
    if returned == "no":
        b.emit(b.cb_return("alloc", "a", th="w1"))
    b.emit(b.deleter("a", th="w1"))
    if returned != "yes":
        b.emit(b.cb("alloc", None, 0, "B2", th="w1"), b.cb_return("alloc", None, th="w1"))
    b.bind("b2", "B2")
    return teardown(b, bufs=["b2"], reqs=["r", "r2"], deleted=["z"])


def _strip_returns(b: TB) -> TB:
    """The same trace as a probe of trace version 1 writes it: no `trace` field, no cb_return events."""
    lines = [x for x in b.lines if '"ev":"cb_return"' not in x]
    lines[0] = lines[0].replace(',"trace":2', "")
    b.lines = lines
    return b


@covers("cookies.unborrowed", "cookies.borrow", "cookies.returned")
def test_replacement_while_the_onalloc_carrying_the_cookie_runs_is_deferred():
    _verdict(replaced_while_onalloc_runs(2, returned="no"), Verdict.PASS)
    # cb_return written, but nothing shows that the implementation has seen the callback return yet
    _verdict(replaced_while_onalloc_runs(2, returned="returning"), Verdict.PASS)


def test_replacement_after_the_callback_returned_must_delete_in_set_cookie():
    # KEEP_REPLACED_COOKIE-like: the callback certainly returned before setCookie; the buffer was freed,
    # so the request was the last holder: the deletion is late
    _verdict(replaced_while_onalloc_runs(2, returned="yes"), Verdict.FAIL, "cookie-replace-deletes-previous")


def test_a_trace_without_returns_is_read_conservatively():
    for returned in ("no", "returning", "yes"):
        _verdict(_strip_returns(replaced_while_onalloc_runs(2, returned=returned)), Verdict.PASS)


def freed_while_onalloc_runs(trace: int, *, deleted: str) -> TB:
    """onAlloc(a, B1) runs on w1 while the application frees B1 and r; ``deleted``: when the deleter of a
    runs — "inside" req_free (the callback has not returned: no cb_return yet), "returning" (inside
    req_free, after the callback's cb_return), "after" (on w1, once it returned)."""
    b = TB(trace=trace)
    request(b, cookie="a")
    b.call("alloc", reqs=["r"])
    b.emit(b.cb("alloc", "a", 0, "B1", th="w1"))
    if deleted == "returning":
        b.emit(b.cb_return("alloc", "a", th="w1"))
    b.bind("b", "B1")
    b.call("buf_free", bufs=["b"])
    b.call("req_free", req="r", during=[b.deleter("a", "caller")] if deleted != "after" else [])
    if deleted != "returning":
        b.emit(b.cb_return("alloc", "a", th="w1"))
    if deleted == "after":
        b.emit(b.deleter("a", th="w1"))
    return teardown(b)


@covers("cookies.on_deleter", "cookies.borrowed")
def test_deleting_a_cookie_while_its_callback_runs_fails():
    _verdict(freed_while_onalloc_runs(2, deleted="inside"), Verdict.FAIL, "cookie-borrowed-in-callbacks")
    _verdict(freed_while_onalloc_runs(2, deleted="returning"), Verdict.PASS)
    _verdict(freed_while_onalloc_runs(2, deleted="after"), Verdict.PASS)
    # version 1: nothing shows that the callback was still running when the deleter ran
    _verdict(_strip_returns(freed_while_onalloc_runs(2, deleted="inside")), Verdict.PASS)


def test_a_free_hand_over_of_the_same_value_is_deleted_first():
    """Two hand-overs of a: one borrowed by the running onAlloc, one the request r2 held alone. A deleter
    of a during r2's free deletes the free one."""
    b = TB(trace=2)
    request(b, cookie="a")
    request(b, "r2")
    b.call("req_set_cookie", req="r2", cookie="a", deleter=True)
    b.call("alloc", reqs=["r"])
    b.emit(b.cb("alloc", "a", 0, "B1", th="w1"))
    b.bind("b", "B1")
    b.call("buf_free", bufs=["b"])
    b.call("req_free", req="r")
    b.call("req_free", req="r2", during=[b.deleter("a", "caller")])
    b.emit(b.cb_return("alloc", "a", th="w1"), b.deleter("a", th="w1"))
    _verdict(teardown(b), Verdict.PASS)


def test_a_failed_onalloc_borrows_until_it_returns():
    """The replacement after a failed onAlloc that certainly returned must delete in setCookie."""
    def build(proof: bool) -> TB:
        b = TB(trace=2)
        request(b, cookie="a")
        request(b, "r2")
        b.call("alloc", reqs=["r", "r2"])
        b.emit(b.cb("alloc", "a", "EIO", None, th="w1"), b.cb_return("alloc", "a", th="w1"))
        if proof:
            b.emit(b.cb("alloc", None, "EIO", None, th="w1"), b.cb_return("alloc", None, th="w1"))
        b.call("cookie_new", cookie="z")
        b.call("req_set_cookie", req="r", cookie="z", deleter=True)
        b.emit(b.deleter("a", th="w1"))
        if not proof:
            b.emit(b.cb("alloc", None, "EIO", None, th="w1"), b.cb_return("alloc", None, th="w1"))
        return teardown(b, reqs=["r", "r2"], deleted=["z"])

    _verdict(build(False), Verdict.PASS)
    _verdict(build(True), Verdict.FAIL, "cookie-replace-deletes-previous")


def test_cb_return_is_checked_against_its_cb():
    b = TB(trace=2)
    request(b, cookie="a")
    b.call("alloc", reqs=["r"])
    b.emit(b.cb("alloc", "a", "EIO", None, th="w1"), b.cb_return("load", "a", th="w1"))
    j = teardown(b, reqs=["r"], deleted=["a"]).judge()
    assert j.verdict is Verdict.ERROR and "cb_return (load) without its cb" in j.reason, j.reason
    # a version 1 trace has no cb_return
    b = TB()
    request(b, cookie="a")
    b.call("alloc", reqs=["r"])
    b.emit(b.cb("alloc", "a", "EIO", None, th="w1"), b.cb_return("alloc", "a", th="w1"))
    j = teardown(b, reqs=["r"], deleted=["a"]).judge()
    assert j.verdict is Verdict.ERROR and "version 1" in j.reason, j.reason


def test_cb_return_may_follow_end():
    def build(kind: str) -> TB:
        b = TB(trace=2)
        request(b)
        b.call("alloc", reqs=["r"])
        b.emit(b.cb("alloc", None, 0, "B1", th="w1"))
        b.bind("b", "B1")
        b.settle("alloc").settle("load")
        b.call("buf_free", bufs=["b"], teardown=True)
        b.call("req_free", req="r", teardown=True)
        b.settle("deleters")
        b.emit({"ev": "end", "scenario": b.sid}, b.cb_return(kind, None, th="w1"))
        return b.exit()

    _verdict(build("alloc"), Verdict.PASS)
    j = build("preempt").judge()
    assert j.verdict is Verdict.ERROR and "without its cb" in j.reason, j.reason


def _replaced_on_another_thread(proof_before_call: bool) -> tuple[Verdict, str | None]:
    """setCookie(r, z) runs on probe thread t0 while onAlloc(c0) ends on w1: the call-time effect of the
    setCookie may be placed anywhere up to its ret, but whether the callback was known to have returned
    is decided at the call's line."""
    from .test_threads import T

    def req(r: str) -> list[dict]:
        return [{"req_create": {"req": r}}, {"req_set_device": {"req": r, "device": 0}},
                {"req_set_type": {"req": r, "type": 1}}, {"req_set_size": {"req": r, "size": 4096}},
                {"req_set_onalloc": {"req": r, "set": True}}]

    steps = [*req("r"), {"cookie_new": {"cookie": "c"}},
             {"req_set_cookie": {"req": "r", "cookie": "c", "deleter": True}}, *req("q"),
             {"alloc": {"reqs": ["r", "q"]}}, {"bind": {"buf": "b", "select": {"cookie": "c"}}},
             {"buf_free": {"bufs": ["b"]}}, {"cookie_new": {"cookie": "z"}},
             {"parallel": [[{"req_set_cookie": {"req": "r", "cookie": "z", "deleter": True}}],
                           [{"sleep_ms": {"ms": 1}}]]}]
    t = T(steps)
    t.lines[0] = t.lines[0].replace('"pid":1', '"pid":1,"trace":2')
    for n, r in ((0, "r0"), (7, "r1")):
        t.op(n, "req_create", {"req": r})
        t.op(n + 1, "req_set_device", {"req": r, "device": 0})
        t.op(n + 2, "req_set_type", {"req": r, "type": 1})
        t.op(n + 3, "req_set_size", {"req": r, "size": 4096})
        t.op(n + 4, "req_set_onalloc", {"req": r, "set": True})
        if n == 0:
            t.op(5, "cookie_new", {"cookie": "c0"}, ret=0)
            t.op(6, "req_set_cookie", {"req": "r0", "cookie": "c0", "deleter": True})
    t.op(12, "alloc", {"reqs": ["r0", "r1"]})
    t.cb("alloc", "c0", "B1")
    t.op(13, "bind", {"buf": None, "select": {"cookie": "c0"}}, ret=0, handle="B1")
    t.op(14, "buf_free", {"bufs": ["B1"]}, ret=0)
    t.op(15, "cookie_new", {"cookie": "c1"}, ret=0)

    def end_of_callback() -> None:
        t.add(ev="cb_return", kind="alloc", cookie="c0", th="w1")
        t.cb("alloc", None, "B2").add(ev="cb_return", kind="alloc", cookie=None, th="w1")

    if proof_before_call:
        end_of_callback()
    t.op(16, "par_begin", {"threads": 2}, ret=0)
    t.call(17, "req_set_cookie", {"req": "r0", "cookie": "c1", "deleter": True}, th="t0")
    if not proof_before_call:
        end_of_callback()
    t.op(18, "sleep_ms", {"ms": 1}, th="t1", ret=0)
    t.ret(17, "req_set_cookie", th="t0")
    t.op(19, "par_end", {}, ret=0)
    t.deleter("c0")
    t.add(ev="settle", what="alloc", expected=2, got=2, reached=True)
    t.add(ev="settle", what="load", expected=0, got=0, reached=True)
    t.call(20, "buf_free", {"bufs": ["B2"]}, teardown=True).ret(20, "buf_free", ret=0)
    t.call(21, "req_free", {"req": "r0"}, teardown=True).deleter("c1", "caller", "main").ret(21, "req_free")
    t.call(22, "req_free", {"req": "r1"}, teardown=True).ret(22, "req_free")
    t.add(ev="settle", what="deleters", expected=2, got=2, reached=True)
    t.add(ev="end", scenario=t.sid)
    t.add(ev="exit", scenario=t.sid, status="ok", code=0, signal=None)
    j = t.judge()
    return j.verdict, j.divergence.clause if j.divergence is not None else None


def test_a_deferred_set_cookie_judges_the_borrow_at_its_call():
    assert _replaced_on_another_thread(proof_before_call=False) == (Verdict.PASS, None)
    assert _replaced_on_another_thread(proof_before_call=True) == (Verdict.FAIL, "cookie-replace-deletes-previous")


def test_a_deleter_may_be_for_any_unheld_hand_over_of_its_value():
    """NULL handed over twice with a deleter: the first (request r) let go of by r's free while its failed
    onAlloc was still borrowing it, the second (r2) replaced by setCookie. The deleter inside that setCookie
    is the second's, which it owes; the first's comes later from the callback's thread. Attributing the
    first deleter to the older hand-over gave a false cookie-replace-deletes-previous."""
    b = TB(trace=2)
    request(b, cookie=None, type_=0)  # invalid type: its onAlloc fails
    b.call("alloc", reqs=["r"])
    b.emit(b.cb("alloc", None, "EINVAL", None, th="w1"))
    b.call("req_free", req="r")  # the running onAlloc still borrows the first hand-over
    b.emit(b.cb_return("alloc", None, th="w1"))
    request(b, "r2", cookie=None)
    b.call("cookie_new", cookie="c")
    b.call("req_set_cookie", req="r2", cookie="c", deleter=True, during=[b.deleter(None, "caller")])
    b.emit(b.deleter(None, th="w1"))
    _verdict(teardown(b, reqs=["r2"], deleted=["c"]), Verdict.PASS)


def test_a_buffer_freed_while_mapped_may_hold_its_cookie_until_its_last_unmap():
    """map b, free b (still mapped), replace the request's cookie: the buffer's memory lives until the
    unmap, and it may keep the cookie so long (deleter at the unmap) or let go at once (deleter inside
    setCookie); a cookie never deleted once the last mapping is gone is still a FAIL."""

    def trace(deleted: str) -> TB:
        b = TB(trace=2)
        request(b, cookie="a")
        # onAlloc inside allocAsync on the caller's thread: its return is known at the call's ret (WARN R1)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", "a", 0, "B1", thread="caller", th="main"),
                                            b.cb_return("alloc", "a", th="main")])
        b.bind("b", "B1")
        b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
        b.call("buf_free", bufs=["b"])
        b.call("cookie_new", cookie="z")
        at_set = [b.deleter("a", "caller")] if deleted == "at_set_cookie" else []
        b.call("req_set_cookie", req="r", cookie="z", deleter=True, during=at_set)
        at_unmap = [b.deleter("a", "caller")] if deleted == "at_unmap" else []
        b.call("buf_unmap", map="m", offset=0, length=8192, during=at_unmap)
        return teardown(b, reqs=["r"], deleted=["z"])

    for deleted in ("at_set_cookie", "at_unmap"):
        j = trace(deleted).judge()
        assert j.verdict is Verdict.WARN and "R1 " in j.reason, (deleted, j.reason)
    j = trace("never").judge()
    assert j.verdict is Verdict.FAIL, j.reason


def test_a_deleter_for_one_of_two_null_hand_overs_may_be_the_mapped_buffers():
    """Two requests hand over NULL with a deleter; r's buffer b is still live when r2's buffer b2, freed
    while mapped, lets go of its hand-over: the deleter(NULL) at that free is r2's, not the one b holds."""
    b = TB()
    request(b, cookie=None)
    request(b, "r2", cookie=None)
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, 0, "B1")])
    b.bind("b", "B1")
    b.call("alloc", reqs=["r2"], during=[b.cb("alloc", None, 0, "B2")])
    b.bind("b2", "B2")
    b.call("req_free", req="r")
    b.call("req_free", req="r2")
    b.call("buf_map", map="m", buf="b2", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    b.call("buf_free", bufs=["b2"], during=[b.deleter(None, "caller")])
    _verdict(teardown(b, bufs=["b"], deleted=[None], maps=["m"]), Verdict.PASS)
