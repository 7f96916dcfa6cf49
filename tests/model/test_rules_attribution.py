"""Clause attribution: a failure names the most specific sentence its observation contradicts (issue 27)."""

from __future__ import annotations

from reference_model.verdicts import Verdict

from .builder import TB, allocated, request, teardown
from .test_rules_alloc_map import mapped
from .test_rules_requests_cookies import fails, passes, warns


def test_free_returning_a_count_names_the_return_clause():
    b = TB()
    allocated(b)
    b.call("buf_free", bufs=["b"], ret=1)  # the number of buffers freed
    j = fails(teardown(b, reqs=["r"]), "free-returns")
    assert j.divergence.observed == "ret=1"


def test_set_priority_returning_the_old_priority_names_the_return_clause():
    b = TB()
    allocated(b)
    b.call("buf_set_priority", buf="b", priority=300, ret=500)
    fails(teardown(b, bufs=["b"], reqs=["r"]), "priority-set-returns")


def test_unmap_refused_after_free_names_the_return_clause():
    b = mapped()
    b.call("buf_free", bufs=["b"])
    b.call("buf_unmap", map="m", offset=0, length=8192, ret=-1, errno="EINVAL")
    j = fails(teardown(b, reqs=["r"]), "unmap-returns")
    assert "after the buffer was freed" in j.divergence.message


def changed(ev: dict) -> dict:
    return {**ev, "cookie": "?0x5601"}  # the probe's name for a pointer the application never made


def test_changed_cookie_names_the_snapshot_clause():
    # a request with a cookie and one with none are pending: an unknown value answers neither
    b = TB()
    request(b, "r1", cookie="c")
    request(b, "r2", cookie=None, deleter=False)
    b.call("alloc", reqs=["r1", "r2"], during=[changed(b.cb("alloc", None, 0, "B1"))])
    b.bind("b", "B1")
    fails(teardown(b, bufs=["b"], reqs=["r1", "r2"], deleted=["c"]), "cookie-snapshot-at-alloc")
    # an onPreempt carrying a value the application never made
    b = TB()
    allocated(b, cookie="c", onpreempt=True)
    b.emit(changed(b.cb("preempt", None)))
    fails(teardown(b, bufs=["b"], reqs=["r"], deleted=["c"]), "cookie-snapshot-at-alloc")


def test_crash_names_the_clause_of_the_step_that_died():
    b = TB()
    allocated(b)
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    b.call("buf_unmap", map="m", offset=0, length=4096)
    b.steps.append({"map_read": {"map": "m", "offset": 4096, "length": 8}})
    b.lines.append(b._line({"ev": "call", "step": len(b.steps) - 1, "op": "map_read",
                            "args": b._echo("map_read", {"map": "m", "offset": 4096, "length": 8})}))
    j = b.exit("signal", None, "SIGSEGV").judge()
    assert j.verdict is Verdict.CRASH, j.reason
    assert j.divergence is not None and j.divergence.clause == "unmap-args-like-munmap", j.reason
    assert "the probe died during step" in j.reason
    b = TB()
    allocated(b)
    b.steps.append({"buf_set_priority": {"buf": "b", "priority": 5}})
    b.lines.append(b._line({"ev": "call", "step": len(b.steps) - 1, "op": "buf_set_priority",
                            "args": b._echo("buf_set_priority", {"buf": "b", "priority": 5})}))
    j = b.exit("signal", None, "SIGSEGV").judge()
    assert j.verdict is Verdict.CRASH and j.divergence is not None and j.divergence.clause == "priority-set"
    passes(teardown(mapped(), bufs=["b"], reqs=["r"], maps=["m"]))


def test_prot_none_mapping_refused_warns():
    b = mapped(map_prot=(), ret=-1, errno="EINVAL")
    warns(teardown(b, bufs=["b"], reqs=["r"]), "R18")
    passes(teardown(mapped(map_prot=()), bufs=["b"], reqs=["r"], maps=["m"]))
    fails(teardown(mapped(map_prot=("READ",), ret=-1, errno="EINVAL"), bufs=["b"], reqs=["r"]), "map-maps-buffer")


def test_free_refused_during_a_load_warns_and_keeps_the_buffer():
    def build(free_ret, errno=None, loading=True):
        b = TB()
        allocated(b)
        b.call("file_new", file="f", size=4096, seed=7)
        if loading:
            b.call("buf_load", buf="b", fd="f", file_offset=0, length=100, buffer_offset=0, onload=True)
        b.call("buf_free", bufs=["b"], ret=free_ret, errno=errno)
        if loading:
            b.emit(b.cb("load", None, 0, "B1"))
        return teardown(b, bufs=["b"] if free_ret != 0 else [], reqs=["r"])

    passes(build(0))
    warns(build(-1, "EBUSY"), "R20")  # the buffer stays live: teardown frees it
    fails(build(-1, "EBUSY", loading=False), "free-each-allocated-buffer")
