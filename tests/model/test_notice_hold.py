"""A freed buffer a vnpu command may have preempted keeps its cookie for the notice of that preemption.

After `vnpu pressure=` the device may have preempted a buffer with its onPreempt still on the way; once
the scenario frees the buffer the callback may come late ("the preemption callback may be invoked after
the caller has already freed the buffer"), or be dropped, and until then the device holds the cookie. A
clear or replacement of the request's cookie then need not delete it inside setCookie. The same holds
when the device gave an onPreempt inside the free (R13): that callback need not be the notice of the
command's preemption.
"""

from __future__ import annotations

from reference_model.caps import DeviceCaps
from reference_model.verdicts import Verdict

from .builder import PAIR, TB, request, teardown
from .coverage import covers

CONTROL = DeviceCaps(supported_pairs=frozenset({PAIR}), vnpu_control=True)


def cleared_after_free(*, command: str | None, inside_free: bool = False, late: bool = False,
                       deleted_in_clear: bool = False) -> TB:
    """r's buffer B1 (cookie c, onPreempt set) is freed after ``command``, then r's cookie is cleared. The
    onAlloc of B1 certainly returned (w1 went on with B2's), so only the buffer's hold can defer the deletion.
    ``inside_free``: an onPreempt inside the free; ``late``: one after the clear; the deleter comes inside the
    clear (``deleted_in_clear``) or after everything on w1."""
    b = TB(trace=2)
    request(b, cookie="c", onpreempt=True)
    request(b, "r2")
    b.call("alloc", reqs=["r", "r2"])
    b.emit(b.cb("alloc", "c", 0, "B1", th="w1"), b.cb_return("alloc", "c", th="w1"))
    b.emit(b.cb("alloc", None, 0, "B2", th="w1"), b.cb_return("alloc", None, th="w1"))
    b.bind("b", "B1")
    b.bind("b2", "B2")
    if command is not None:
        b.call("vnpu", command=command)
    in_free = [b.cb("preempt", "c", thread="caller", th="main"), b.cb_return("preempt", "c", th="main")]
    b.call("buf_free", bufs=["b"], during=in_free if inside_free else [])
    b.call("req_set_cookie", req="r", cookie=None, deleter=False,
           during=[b.deleter("c", thread="caller", th="main")] if deleted_in_clear else [])
    if late:
        b.emit(b.cb("preempt", "c", th="w1"), b.cb_return("preempt", "c", th="w1"))
    if not deleted_in_clear:
        b.emit(b.deleter("c", th="w1"))
    return teardown(b, bufs=["b2"], reqs=["r", "r2"])


def _judged(b: TB) -> tuple[Verdict, str | None, str]:
    j = b.judge(caps=CONTROL)
    return j.verdict, j.divergence.clause if j.divergence is not None else None, j.reason


def test_a_clear_after_pressure_may_leave_the_cookie_to_the_late_onpreempt():
    pressure = "pressure=1048576"
    assert _judged(cleared_after_free(command=pressure, late=True))[:2] == (Verdict.PASS, None)
    # the notice dropped at the free: the device let go of the cookie once it had
    assert _judged(cleared_after_free(command=pressure))[:2] == (Verdict.PASS, None)
    assert _judged(cleared_after_free(command=pressure, deleted_in_clear=True))[:2] == (Verdict.PASS, None)
    # the cookie deleted and then carried by the late onPreempt: still borrowing's failure
    assert _judged(cleared_after_free(command=pressure, late=True, deleted_in_clear=True))[1] == \
        "cookie-borrowed-in-callbacks"


@covers("preemption.on_preempt")
def test_an_onpreempt_inside_the_free_after_pressure_leaves_the_cookie_held_for_the_notice():
    verdict, clause, reason = _judged(cleared_after_free(command="pressure=1048576", inside_free=True))
    assert (verdict, clause) == (Verdict.WARN, None) and "R13 (" in reason, reason
    verdict, clause, reason = _judged(cleared_after_free(command="pressure=1048576", inside_free=True,
                                                         deleted_in_clear=True))
    assert (verdict, clause) == (Verdict.WARN, None) and "R13 (" in reason, reason
    # no second onPreempt for it: the one inside the free was its one
    b = cleared_after_free(command="pressure=1048576", inside_free=True, late=True)
    assert _judged(b)[:2] == (Verdict.FAIL, "preempt-callback-on-forced-dealloc")


def test_an_onpreempt_inside_the_free_of_a_commanded_victim_leaves_the_cookie_held_for_the_notice():
    # preempt=b: the buffer is preempted, the onPreempt inside its free is the race the text allows (no
    # reading), and the command's own notice may still be on its way with the cookie
    assert _judged(cleared_after_free(command="preempt=b", inside_free=True))[:2] == (Verdict.PASS, None)
    assert _judged(cleared_after_free(command="preempt=b", late=True))[:2] == (Verdict.PASS, None)
    b = cleared_after_free(command="preempt=b", inside_free=True, late=True)
    assert _judged(b)[:2] == (Verdict.FAIL, "preempt-callback-on-forced-dealloc")


def test_without_a_command_the_clear_still_owes_the_deletion():
    # no command took the buffer (nor may have): the request was the cookie's last holder
    for inside_free in (False, True):
        assert _judged(cleared_after_free(command=None, inside_free=inside_free))[1] == "cookie-clear"
    assert _judged(cleared_after_free(command=None, deleted_in_clear=True))[:2] == (Verdict.PASS, None)
