"""Traces of several threads (formats §5 `th`, `in_cb`): pairing per thread, effects placed anywhere
between call and ret, callbacks that call back into the API, free racing preemption."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_model.caps import DeviceCaps
from reference_model.judge import AMBIGUITY_BOUND, judge
from reference_model.scenario import parse_scenario
from reference_model.trace import Call, Cb, Ret, TraceError
from reference_model.verdicts import Verdict

from .builder import CATALOGUE
from .coverage import covers
from .parsed_trace import parse_trace

VNPU = DeviceCaps(supported_pairs=frozenset({(0, 1)}), capacity_bytes=1 << 28, policy="budget", vnpu_control=True)
SMALL = DeviceCaps(supported_pairs=frozenset({(0, 1)}), capacity_bytes=8192, policy="budget", vnpu_control=True)


def request(r: str = "r", c: str = "c", onpreempt: bool = True) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [
        {"req_create": {"req": r}},
        {"req_set_device": {"req": r, "device": 0}},
        {"req_set_type": {"req": r, "type": 1}},
        {"req_set_size": {"req": r, "size": 4096}},
        {"req_set_onalloc": {"req": r, "set": True}},
        {"cookie_new": {"cookie": c}},
        {"req_set_cookie": {"req": r, "cookie": c, "deleter": True}},
    ]
    if onpreempt:
        steps.insert(5, {"req_set_onpreempt": {"req": r, "set": True}})
    return steps


class T:
    """Raw trace lines; every call/ret/cb/deleter names its thread."""

    def __init__(self, steps: list[dict[str, Any]], sid: str = "model.threads") -> None:
        self.sid = sid
        self.scenario = parse_scenario({"id": sid, "title": "t", "clauses": ["alloc-async"], "steps": steps},
                                       "<test>", "model")
        self.t = 0
        self.lines: list[str] = []
        self.add(ev="begin", scenario=sid, pid=1)

    def add(self, **ev: Any) -> T:
        self.t += 1
        self.lines.append(json.dumps({**ev, "t": self.t}, separators=(",", ":")))
        return self

    def call(self, step: int, op: str, args: dict[str, Any], th: str = "main", **kw: Any) -> T:
        return self.add(ev="call", step=step, op=op, th=th, args=args, **kw)

    def ret(self, step: int, op: str, th: str = "main", ret: Any = None, errno: str | None = None, **kw: Any) -> T:
        return self.add(ev="ret", step=step, op=op, th=th, ret=ret, errno=errno, dur_ns=1, **kw)

    def op(self, step: int, op: str, args: dict[str, Any], th: str = "main", ret: Any = None, **kw: Any) -> T:
        return self.call(step, op, args, th).ret(step, op, th, ret, **kw)

    def cb(self, kind: str, cookie: str | None, buf: str | None = None, error: Any = 0, thread: str = "other",
           th: str = "w1") -> T:
        ev: dict[str, Any] = {"ev": "cb", "kind": kind, "cookie": cookie, "thread": thread, "th": th}
        if kind != "preempt":
            ev.update(error=error, buf=buf)
        return self.add(**ev)

    def deleter(self, cookie: str, thread: str = "other", th: str = "w1") -> T:
        return self.add(ev="deleter", cookie=cookie, thread=thread, th=th)

    def finish(self, settle: bool = True) -> T:
        if settle:
            for what in ("alloc", "load", "deleters"):
                self.add(ev="settle", what=what, expected=0, got=0, reached=True)
        self.add(ev="end", scenario=self.sid)
        return self.add(ev="exit", scenario=self.sid, status="ok", code=0, signal=None)

    def judge(self, caps: DeviceCaps = VNPU) -> Any:
        return judge(self.scenario, self.lines, caps, CATALOGUE)


def requested(t: T, r: str = "r0", c: str = "c0", first: int = 0, onpreempt: bool = True) -> int:
    """The steps of ``request`` as the probe writes them; returns the next step."""
    n = first
    t.op(n, "req_create", {"req": r})
    t.op(n + 1, "req_set_device", {"req": r, "device": 0})
    t.op(n + 2, "req_set_type", {"req": r, "type": 1})
    t.op(n + 3, "req_set_size", {"req": r, "size": 4096})
    t.op(n + 4, "req_set_onalloc", {"req": r, "set": True})
    n += 5
    if onpreempt:
        t.op(n, "req_set_onpreempt", {"req": r, "set": True})
        n += 1
    t.op(n, "cookie_new", {"cookie": c}, ret=0)
    t.op(n + 1, "req_set_cookie", {"req": r, "cookie": c, "deleter": True})
    return n + 2


def setup(t: T, r: str = "r0", c: str = "c0", handle: str = "B1", first: int = 0, onpreempt: bool = True) -> int:
    """The steps of ``request`` then alloc, await, bind, as the probe writes them; returns the next step."""
    n = requested(t, r, c, first, onpreempt) - 2
    t.call(n + 2, "alloc", {"reqs": [r]}).cb("alloc", c, handle).ret(n + 2, "alloc")
    t.op(n + 3, "await_alloc", {"count": 1, "timeout_ms": 100}, ret=0, reached=True, got=1)
    t.op(n + 4, "bind", {"buf": None, "select": {"cookie": c}}, ret=0, handle=handle)
    return n + 5


SETUP = [*request("r", "c"), {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 100}},
         {"bind": {"buf": "b", "select": {"cookie": "c"}}}]  # steps 0..10


def passes(t: T, caps: DeviceCaps = VNPU) -> None:
    j = t.judge(caps)
    assert j.verdict is Verdict.PASS, (j.reason, "\n".join(t.lines))


def fails(t: T, clause: str, caps: DeviceCaps = VNPU) -> None:
    j = t.judge(caps)
    assert j.verdict is Verdict.FAIL, (j.reason, "\n".join(t.lines))
    assert j.divergence is not None and j.divergence.clause == clause, j.reason


def errors(t: T, text: str) -> None:
    j = t.judge()
    assert j.verdict is Verdict.ERROR, j.reason
    assert text in j.reason, j.reason


# -- parsing ------------------------------------------------------------------------------------------------


def test_calls_pair_per_thread_and_nested_calls_get_their_own_strand():
    lines = [
        '{"ev":"begin","scenario":"s","pid":1}',
        '{"ev":"call","step":1,"op":"sleep_ms","th":"t0","args":{"ms":1}}',
        '{"ev":"call","step":2,"op":"alloc","th":"t1","args":{"reqs":["r0"]}}',
        '{"ev":"cb","kind":"alloc","cookie":null,"error":"EIO","buf":null,"thread":"caller","th":"t1"}',
        '{"ev":"call","step":0,"op":"alloc","th":"t1","in_cb":"alloc","args":{"reqs":["r0"]}}',
        '{"ev":"ret","step":0,"op":"alloc","th":"t1","in_cb":"alloc","ret":null,"errno":null,"dur_ns":1}',
        '{"ev":"ret","step":2,"op":"alloc","th":"t1","ret":null,"errno":null,"dur_ns":1}',
        '{"ev":"ret","step":1,"op":"sleep_ms","th":"t0","ret":0,"errno":null,"dur_ns":1}',
        '{"ev":"end","scenario":"s"}',
        '{"ev":"exit","scenario":"s","status":"ok","code":0,"signal":null}',
    ]
    trace = parse_trace(lines)
    assert not isinstance(trace, TraceError), trace
    calls = [e for e in trace.events if isinstance(e, Call)]
    assert [(c.th, c.strand, c.in_cb) for c in calls] == [("t0", "t0", None), ("t1", "t1", None),
                                                        ("t1", "t1/1", "alloc")]
    cb = next(e for e in trace.events if isinstance(e, Cb))
    assert cb.strand == "t1"
    rets = [e for e in trace.events if isinstance(e, Ret)]
    assert [r.strand for r in rets] == ["t1/1", "t1", "t0"]
    assert rets[0].extra == {}


@pytest.mark.parametrize(("lines", "message"), [
    (['{"ev":"call","step":1,"op":"sleep_ms","th":"t0","args":{}}',
      '{"ev":"call","step":2,"op":"sleep_ms","th":"t0","args":{}}'], "call of step 2 while step 1 has not returned"),
    (['{"ev":"call","step":1,"op":"sleep_ms","th":"t0","args":{}}',
      '{"ev":"ret","step":1,"op":"sleep_ms","th":"t1","ret":0,"errno":null,"dur_ns":1}'], "without its call"),
    (['{"ev":"call","step":1,"op":"sleep_ms","th":"t0","args":{}}', '{"ev":"end","scenario":"s"}'],
     "end while step 1 has not returned"),
    (['{"ev":"call","step":1,"op":"sleep_ms","th":"a/b","args":{}}'], "field 'th'"),
    (['{"ev":"call","step":1,"op":"sleep_ms","in_cb":"map","args":{}}'], "field 'in_cb'"),
])
def test_pairing_errors_name_the_line(lines, message):
    trace = parse_trace(['{"ev":"begin","scenario":"s","pid":1}', *lines,
                         '{"ev":"exit","scenario":"s","status":"ok","code":0,"signal":null}'])
    assert isinstance(trace, TraceError)
    assert message in trace.message


def test_a_step_on_the_wrong_thread_is_an_error():
    t = T([{"parallel": [[{"sleep_ms": {"ms": 1}}], [{"sleep_ms": {"ms": 2}}]]}])
    t.op(0, "par_begin", {"threads": 2}, ret=0).call(3, "par_end", {})
    t.op(1, "sleep_ms", {"ms": 1}, th="t1", ret=0).op(2, "sleep_ms", {"ms": 2}, th="t1", ret=0)
    t.ret(3, "par_end", ret=0).finish()
    errors(t, "runs on thread t1 in the trace but on t0")


def test_a_callback_call_must_carry_a_cb_action_step():
    t = T([*SETUP, {"cb_action": {"kind": "alloc", "action": "free_buf", "count": 1}}])
    setup(t)
    t.op(11, "cb_action", {"kind": "alloc", "action": "free_buf", "count": 1}, ret=0)
    t.call(3, "buf_free", {"bufs": ["B1"]}, th="w1", in_cb="alloc").ret(3, "buf_free", th="w1", ret=0)
    t.finish()
    errors(t, "is not a cb_action")


@pytest.mark.parametrize(("th", "in_cb", "message"), [
    ("t1", None, "teardown step 11 (buf_free) runs on thread t1, but teardown runs on main"),
    ("main", "alloc", "teardown step 11 (buf_free) is made by a callback, but teardown runs on main"),
])
def test_teardown_calls_run_on_main_outside_callbacks(th, in_cb, message):
    t = T(SETUP)
    n = setup(t)
    extra = {} if in_cb is None else {"in_cb": in_cb}
    t.call(n, "buf_free", {"bufs": ["B1"]}, th=th, teardown=True, **extra).ret(n, "buf_free", th=th, ret=0)
    t.finish()
    errors(t, message)


MAP_WHILE_LOADING = [*SETUP, {"file_new": {"file": "f", "size": 4096, "seed": 7}}, {"parallel": [
    [{"buf_map": {"map": "m", "buf": "b", "length": 4096, "prot": ["READ"], "flags": ["SHARED"], "offset": 0}}],
    [{"buf_load": {"buf": "b", "fd": "f", "file_offset": 0, "length": 4096, "buffer_offset": 0, "onload": True}}],
]}]  # 11 file_new, 12 par_begin, 13 buf_map (t0), 14 buf_load (t1), 15 par_end


@pytest.mark.parametrize("load_starts", ["during the map", "before the map"])
def test_a_load_another_thread_starts_while_a_map_is_in_flight_may_have_met_it(load_starts):
    """No load is in flight at the map's call; another thread's load starts and is answered before the map
    returns refused: the map may have met it (R15), as when the load was in flight at the call."""
    t = T(MAP_WHILE_LOADING)
    setup(t)
    t.op(11, "file_new", {"file": "f0", "size": 4096, "seed": 7}).op(12, "par_begin", {"threads": 2}, ret=0)
    load = {"buf": "B1", "fd": "f0", "file_offset": 0, "length": 4096, "buffer_offset": 0, "onload": True}
    if load_starts == "before the map":
        t.op(14, "buf_load", load, th="t1")
    t.call(13, "buf_map", {"map": "m0", "buf": "B1", "length": 4096, "prot": 1, "flags": 1, "offset": 0}, th="t0")
    if load_starts == "during the map":
        t.op(14, "buf_load", load, th="t1")
    t.cb("load", "c0", "B1").ret(13, "buf_map", th="t0", ret=-1, errno="EBUSY").op(15, "par_end", {}, ret=0)
    passes(t.finish())


# -- free racing preemption -------------------------------------------------------------------------------

RACE = [*SETUP, {"parallel": [[{"vnpu": {"command": "preempt=b"}}], [{"buf_free": {"bufs": ["b"]}}]]},
        {"sleep_ms": {"ms": 1}}]  # 11 par_begin, 12 vnpu (t0), 13 buf_free (t1), 14 par_end, 15 sleep


def race(order: list[str], vnpu_ret: int = 0, preempt_cb: bool = True, free_ret: int = 0) -> T:
    t = T(RACE)
    setup(t)
    t.op(11, "par_begin", {"threads": 2}, ret=0).call(14, "par_end", {})
    events = {
        "callP": lambda: t.call(12, "vnpu", {"command": "preempt=b0"}, th="t0"),
        "retP": lambda: t.ret(12, "vnpu", th="t0", ret=vnpu_ret, errno=None if vnpu_ret == 0 else "ENOENT"),
        "callF": lambda: t.call(13, "buf_free", {"bufs": ["B1"]}, th="t1"),
        "retF": lambda: t.ret(13, "buf_free", th="t1", ret=free_ret, errno=None if free_ret == 0 else "EINVAL"),
        "cbP": lambda: t.cb("preempt", "c0"),
    }
    for name in order:
        events[name]()
    t.ret(14, "par_end", ret=0)
    if preempt_cb and "cbP" not in order:
        t.cb("preempt", "c0")
    t.op(15, "sleep_ms", {"ms": 1}, ret=0)
    t.add(ev="settle", what="alloc", expected=1, got=1, reached=True)
    t.add(ev="settle", what="load", expected=0, got=0, reached=True)
    t.call(16, "req_free", {"req": "r0"}, teardown=True).deleter("c0", "caller", "main").ret(16, "req_free")
    t.add(ev="settle", what="deleters", expected=1, got=1, reached=True)
    t.add(ev="end", scenario=t.sid)
    return t.add(ev="exit", scenario=t.sid, status="ok", code=0, signal=None)


@pytest.mark.parametrize("order", [
    ["callP", "retP", "callF", "retF"],
    ["callP", "callF", "retF", "retP"],  # the preemption took effect before the free, returned after
    ["callF", "callP", "retP", "retF"],  # the free took effect after the preemption
    ["callF", "callP", "retF", "retP"],
    ["callP", "callF", "retP", "cbP", "retF"],
])
def test_free_racing_preemption_any_interleaving(order):
    passes(race(order))


def test_free_first_then_preemption_refused():
    passes(race(["callF", "retF", "callP", "retP"], vnpu_ret=-1, preempt_cb=False))
    passes(race(["callP", "callF", "retF", "retP"], vnpu_ret=-1, preempt_cb=False))


def test_free_racing_preemption_violations():
    fails(race(["callP", "callF", "retF", "retP"], free_ret=-1), "free-each-allocated-buffer")
    fails(race(["callP", "retP", "callF", "retF"], free_ret=-1), "free-even-if-preempted")
    # the vnpu refused (the free came first), yet an onPreempt arrives: nothing preempted the buffer
    fails(race(["callF", "retF", "callP", "retP"], vnpu_ret=-1, preempt_cb=True), "preempt-callback-on-forced-dealloc")
    # the preemption succeeded before the free returned; the buffer was not freed when the steps ended:
    # a second onPreempt is one too many
    t = race(["callP", "retP", "cbP", "callF", "retF"])
    t.lines.insert(-6, json.dumps({"ev": "cb", "kind": "preempt", "cookie": "c0", "thread": "other", "th": "w1"}))
    fails(t, "preempt-callback-on-forced-dealloc")


def test_preemption_of_a_buffer_another_thread_has_mapped_fails():
    steps = [*SETUP, {"parallel": [
        [{"buf_map": {"map": "m", "buf": "b", "length": 4096, "prot": ["READ"], "flags": ["SHARED"], "offset": 0}}],
        [{"sleep_ms": {"ms": 1}}, {"vnpu": {"command": "preempt=b"}}]]}]
    t = T(steps)
    setup(t)
    t.op(11, "par_begin", {"threads": 2}, ret=0).call(15, "par_end", {})
    map_args = {"map": "m0", "buf": "B1", "length": 4096, "prot": 1, "flags": 1, "offset": 0}
    t.op(12, "buf_map", map_args, th="t0", ret=0)
    t.op(13, "sleep_ms", {"ms": 1}, th="t1", ret=0)
    t.op(14, "vnpu", {"command": "preempt=b0"}, th="t1", ret=0)
    t.ret(15, "par_end", ret=0).finish()
    fails(t, "preempt-never-while-mapped")
    # the same, but the vnpu call overlaps the map: it may have come first (then the map must fail)
    t = T(steps)
    setup(t)
    t.op(11, "par_begin", {"threads": 2}, ret=0).call(15, "par_end", {})
    t.op(13, "sleep_ms", {"ms": 1}, th="t1", ret=0)
    t.call(14, "vnpu", {"command": "preempt=b0"}, th="t1").call(12, "buf_map", map_args, th="t0")
    t.ret(14, "vnpu", th="t1", ret=0).ret(12, "buf_map", th="t0", ret=-1, errno="ENOENT")
    t.ret(15, "par_end", ret=0).cb("preempt", "c0").finish()
    passes(t)


# -- threads allocating at once -----------------------------------------------------------------------------


def four_allocs(extra_cb: bool = False, caps_small: bool = False, refused: str | None = None) -> T:
    steps: list[dict[str, Any]] = []
    for k in range(4):
        steps += request(f"r{k}", f"c{k}", onpreempt=False)
    steps.append({"parallel": [[{"alloc": {"reqs": [f"r{k}"]}}] for k in range(4)]})
    t = T(steps)
    n = 0
    for k in range(4):
        t.op(n, "req_create", {"req": f"r{k}"})
        t.op(n + 1, "req_set_device", {"req": f"r{k}", "device": 0})
        t.op(n + 2, "req_set_type", {"req": f"r{k}", "type": 1})
        t.op(n + 3, "req_set_size", {"req": f"r{k}", "size": 4096})
        t.op(n + 4, "req_set_onalloc", {"req": f"r{k}", "set": True})
        t.op(n + 5, "cookie_new", {"cookie": f"c{k}"}, ret=0)
        t.op(n + 6, "req_set_cookie", {"req": f"r{k}", "cookie": f"c{k}", "deleter": True})
        n += 7
    t.op(n, "par_begin", {"threads": 4}, ret=0).call(n + 5, "par_end", {})
    for k in range(4):
        t.call(n + 1 + k, "alloc", {"reqs": [f"r{k}"]}, th=f"t{k}")
    t.cb("alloc", "c2", "B1").cb("alloc", "c0", "B2")
    for k in (3, 0, 2, 1):
        t.ret(n + 1 + k, "alloc", th=f"t{k}")
    if caps_small or refused:
        t.cb("alloc", "c1", None, refused or "ENOMEM").cb("alloc", "c3", None, refused or "ENOMEM")
    else:
        t.cb("alloc", "c1", "B3").cb("alloc", "c3", "B4")
    if extra_cb:
        t.cb("alloc", "c3", "B5")
    return t.ret(n + 5, "par_end", ret=0).finish(settle=False)


def test_threads_allocating_at_once():
    passes(four_allocs())
    fails(four_allocs(extra_cb=True), "alloc-one-callback-per-request")


def test_capacity_with_concurrent_submissions():
    # two 4096-byte buffers fit 8192 bytes: after two successes the other two must fail with ENOMEM
    passes(four_allocs(caps_small=True), SMALL)
    fails(four_allocs(), "alloc-supported-may-fail", SMALL)


@covers("allocation.overlapped_allocs")
def test_refusing_requests_of_overlapping_allocs_warns_r21():
    """The text names no consequence for allocAsync calls of two threads at once: refusing (EBUSY) requests
    the declared capacity would grant, while their allocAsync overlapped another, is WARN R21."""
    j = four_allocs(refused="EBUSY").judge()
    assert j.verdict is Verdict.WARN and "R21 (" in j.reason, j.reason
    # the same refusal of a request whose allocAsync overlapped nothing stays a FAIL
    t = T([*request("r", "c", onpreempt=False), {"alloc": {"reqs": ["r"]}}])
    n = requested(t, onpreempt=False)
    t.op(n, "alloc", {"reqs": ["r0"]}).cb("alloc", "c0", None, "EBUSY")
    fails(t.finish(settle=False), "alloc-supported-may-fail")


def test_synchronous_answer_inside_another_threads_alloc_warns():
    steps: list[dict[str, Any]] = []
    for k in range(2):
        steps += request(f"r{k}", f"c{k}", onpreempt=False)
    steps.append({"parallel": [[{"alloc": {"reqs": ["r0"]}}], [{"alloc": {"reqs": ["r1"]}}]]})
    t = T(steps)
    for k in range(2):
        n = 7 * k
        t.op(n, "req_create", {"req": f"r{k}"})
        t.op(n + 1, "req_set_device", {"req": f"r{k}", "device": 0})
        t.op(n + 2, "req_set_type", {"req": f"r{k}", "type": 1})
        t.op(n + 3, "req_set_size", {"req": f"r{k}", "size": 4096})
        t.op(n + 4, "req_set_onalloc", {"req": f"r{k}", "set": True})
        t.op(n + 5, "cookie_new", {"cookie": f"c{k}"}, ret=0)
        t.op(n + 6, "req_set_cookie", {"req": f"r{k}", "cookie": f"c{k}", "deleter": True})
    t.op(14, "par_begin", {"threads": 2}, ret=0).call(17, "par_end", {})
    t.call(15, "alloc", {"reqs": ["r0"]}, th="t0").call(16, "alloc", {"reqs": ["r1"]}, th="t1")
    # r0's answer delivered synchronously on t1, inside t1's allocAsync of r1: "any thread" allows it,
    # the kit's reading R1 does not expect it (WARN)
    t.cb("alloc", "c0", None, "ENOMEM", thread="caller", th="t1")
    t.ret(16, "alloc", th="t1").ret(15, "alloc", th="t0").cb("alloc", "c1", "B1")
    t.ret(17, "par_end", ret=0).finish(settle=False)
    j = t.judge(DeviceCaps(supported_pairs=frozenset({(0, 1)}), vnpu_control=True))
    assert j.verdict is Verdict.WARN and "R1 (" in j.reason, j.reason


def test_cookies_replaced_on_different_threads():
    steps = [{"req_create": {"req": "r0"}}, {"req_create": {"req": "r1"}}, {"cookie_new": {"cookie": "a"}},
             {"cookie_new": {"cookie": "b"}},
             {"parallel": [[{"req_set_cookie": {"req": "r0", "cookie": "a", "deleter": True}},
                            {"req_set_cookie": {"req": "r0", "cookie": None, "deleter": False}}],
                           [{"req_set_cookie": {"req": "r1", "cookie": "b", "deleter": True}},
                            {"req_set_cookie": {"req": "r1", "cookie": None, "deleter": False}}]]}]

    def build(deleter_on: str) -> T:
        t = T(steps)
        t.op(0, "req_create", {"req": "r0"}).op(1, "req_create", {"req": "r1"})
        t.op(2, "cookie_new", {"cookie": "c0"}, ret=0).op(3, "cookie_new", {"cookie": "c1"}, ret=0)
        t.op(4, "par_begin", {"threads": 2}, ret=0).call(9, "par_end", {})
        t.call(5, "req_set_cookie", {"req": "r0", "cookie": "c0", "deleter": True}, th="t0")
        t.call(7, "req_set_cookie", {"req": "r1", "cookie": "c1", "deleter": True}, th="t1")
        t.ret(5, "req_set_cookie", th="t0").ret(7, "req_set_cookie", th="t1")
        t.call(6, "req_set_cookie", {"req": "r0", "cookie": None, "deleter": False}, th="t0")
        t.call(8, "req_set_cookie", {"req": "r1", "cookie": None, "deleter": False}, th="t1")
        t.deleter("c1", "caller", deleter_on)
        t.ret(8, "req_set_cookie", th="t1")
        t.deleter("c0", "caller", "t0").ret(6, "req_set_cookie", th="t0")
        return t.ret(9, "par_end", ret=0).finish()

    passes(build("t1"))
    # c1's deleter inside t0's call while t1's clear has not been placed: only possible if t1's effect
    # took place first -- which it may (its call came before); still a conforming trace
    passes(build("t0"))


# -- callbacks that call back into the API ------------------------------------------------------------------

CB_STEPS = [*request("r", "c"), {"cb_action": {"kind": "alloc", "action": "free_buf", "count": 1}},
            {"alloc": {"reqs": ["r"]}}, {"req_free": {"req": "r"}}, {"await_alloc": {"count": 1, "timeout_ms": 9}}]


def free_in_onalloc(free_ret: int = 0, deleter_early: bool = False) -> T:
    t = T(CB_STEPS)
    t.op(0, "req_create", {"req": "r0"})
    t.op(1, "req_set_device", {"req": "r0", "device": 0})
    t.op(2, "req_set_type", {"req": "r0", "type": 1})
    t.op(3, "req_set_size", {"req": "r0", "size": 4096})
    t.op(4, "req_set_onalloc", {"req": "r0", "set": True})
    t.op(5, "req_set_onpreempt", {"req": "r0", "set": True})
    t.op(6, "cookie_new", {"cookie": "c0"}, ret=0)
    t.op(7, "req_set_cookie", {"req": "r0", "cookie": "c0", "deleter": True})
    t.op(8, "cb_action", {"kind": "alloc", "action": "free_buf", "count": 1}, ret=0)
    t.op(9, "alloc", {"reqs": ["r0"]}).op(10, "req_free", {"req": "r0"})
    t.call(11, "await_alloc", {"count": 1, "timeout_ms": 9})
    t.cb("alloc", "c0", "B1")
    if deleter_early:
        t.deleter("c0", "other", "w1")
    t.call(8, "buf_free", {"bufs": ["B1"]}, th="w1", in_cb="alloc")
    if not deleter_early and free_ret == 0:
        t.deleter("c0", "caller", "w1")
    t.ret(8, "buf_free", th="w1", ret=free_ret, errno=None if free_ret == 0 else "EINVAL", in_cb="alloc")
    t.ret(11, "await_alloc", ret=0, reached=True, got=1)
    return t.finish()


def test_free_inside_onalloc():
    passes(free_in_onalloc())
    fails(free_in_onalloc(free_ret=-1), "free-each-allocated-buffer")
    fails(free_in_onalloc(deleter_early=True), "cookie-borrowed-in-callbacks")


def map_in_onpreempt(map_ret: int) -> T:
    steps = [*SETUP, {"cb_action": {"kind": "preempt", "action": "map_unmap", "count": 1}},
             {"vnpu": {"command": "preempt=b"}}, {"await_preempt": {"count": 1, "timeout_ms": 9}},
             {"buf_free": {"bufs": ["b"]}}]
    t = T(steps)
    setup(t)
    t.op(11, "cb_action", {"kind": "preempt", "action": "map_unmap", "count": 1}, ret=0)
    t.op(12, "vnpu", {"command": "preempt=b0"}, ret=0)
    t.call(13, "await_preempt", {"count": 1, "timeout_ms": 9}).cb("preempt", "c0")
    args = {"map": None, "buf": "B1", "length": 4096, "prot": 1, "flags": 1, "offset": 0}
    t.call(11, "buf_map", args, th="w1", in_cb="preempt")
    t.ret(11, "buf_map", th="w1", ret=map_ret, errno="ENOENT" if map_ret else None, in_cb="preempt")
    if map_ret == 0:
        t.call(11, "buf_unmap", {"map": None, "offset": 0, "length": 4096}, th="w1", in_cb="preempt")
        t.ret(11, "buf_unmap", th="w1", ret=0, in_cb="preempt")
    t.ret(13, "await_preempt", ret=0, reached=True, got=1)
    t.op(14, "buf_free", {"bufs": ["B1"]}, ret=0)
    t.add(ev="settle", what="alloc", expected=1, got=1, reached=True)
    t.add(ev="settle", what="load", expected=0, got=0, reached=True)
    t.call(15, "req_free", {"req": "r0"}, teardown=True).deleter("c0", "caller", "main").ret(15, "req_free")
    t.add(ev="settle", what="deleters", expected=1, got=1, reached=True)
    t.add(ev="end", scenario=t.sid)
    return t.add(ev="exit", scenario=t.sid, status="ok", code=0, signal=None)


def test_map_inside_onpreempt():
    passes(map_in_onpreempt(-1))
    fails(map_in_onpreempt(0), "preempt-map-fails-after-callback")


def test_alloc_inside_onalloc_needs_its_own_onalloc():
    steps = [*request("r", "c", onpreempt=False),
             {"cb_action": {"kind": "alloc", "action": "alloc_r", "count": 1}},
             {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 2, "timeout_ms": 9}}]

    def build(second: bool) -> T:
        t = T(steps)
        requested(t, onpreempt=False)
        t.op(7, "cb_action", {"kind": "alloc", "action": "alloc_r0", "count": 1}, ret=0)
        t.op(8, "alloc", {"reqs": ["r0"]})
        t.call(9, "await_alloc", {"count": 2, "timeout_ms": 9}).cb("alloc", "c0", "B1")
        t.call(7, "alloc", {"reqs": ["r0"]}, th="w1", in_cb="alloc").ret(7, "alloc", th="w1", in_cb="alloc")
        if second:
            t.cb("alloc", "c0", "B2")
        t.ret(9, "await_alloc", ret=0, reached=second, got=1 + second)
        return t.finish()

    passes(build(True))
    fails(build(False), "alloc-callback-on-completion")  # the second allocation was never answered


def test_many_overlapping_threads_stay_within_the_bound():
    """Sixteen threads submitting at once keep the candidate set small: effects on different requests
    commute, so only the placements that can matter are kept."""
    steps = [{"parallel": [[*request(f"r{k}", f"c{k}", onpreempt=False), {"alloc": {"reqs": [f"r{k}"]}}]
                           for k in range(16)]}]
    t = T(steps)
    t.op(0, "par_begin", {"threads": 16}, ret=0).call(16 * 8 + 1, "par_end", {})
    for i in range(7):
        for k in range(16):
            n = 1 + 8 * k + i
            (op, args), = steps[0]["parallel"][k][i].items()
            echo = {key: (f"{v}"[0] + f"{k}" if isinstance(v, str) and key in ("req", "cookie") else v)
                    for key, v in args.items()}
            t.call(n, op, echo, th=f"t{k}")
        for k in range(16):
            n = 1 + 8 * k + i
            op = next(iter(steps[0]["parallel"][k][i]))
            t.ret(n, op, th=f"t{k}", ret=0 if op == "cookie_new" else None)
    for k in range(16):
        t.call(8 + 8 * k, "alloc", {"reqs": [f"r{k}"]}, th=f"t{k}")
    for k in range(16):
        t.cb("alloc", f"c{k}", f"B{k + 1}")
    for k in range(16):
        t.ret(8 + 8 * k, "alloc", th=f"t{k}")
    t.ret(16 * 8 + 1, "par_end", ret=0).finish(settle=False)
    passes(t)
    assert AMBIGUITY_BOUND == 256


def test_a_refusal_may_answer_the_overlapped_one_of_two_submissions_of_a_request():
    """r0 submitted on main, then again on t0 while t1's allocAsync was in flight: the two submissions
    are alike but for that overlap, and a refusal of r0 is allowed (WARN R21) for the overlapped one only.
    The device may answer that one first: the alike submissions are each tried."""
    steps = [*request("r0", "c0", onpreempt=False), *request("r1", "c1", onpreempt=False),
             {"alloc": {"reqs": ["r0"]}},
             {"parallel": [[{"alloc": {"reqs": ["r0"]}}], [{"alloc": {"reqs": ["r1"]}}]]}]
    t = T(steps)
    n = requested(t, "r1", "c1", requested(t, "r0", "c0", 0, onpreempt=False), onpreempt=False)
    t.op(n, "alloc", {"reqs": ["r0"]})
    t.op(n + 1, "par_begin", {"threads": 2}, ret=0).call(n + 4, "par_end", {})
    t.call(n + 2, "alloc", {"reqs": ["r0"]}, th="t0").call(n + 3, "alloc", {"reqs": ["r1"]}, th="t1")
    t.ret(n + 2, "alloc", th="t0").ret(n + 3, "alloc", th="t1")
    t.cb("alloc", "c0", None, "EBUSY").cb("alloc", "c0", "B1").cb("alloc", "c1", "B2")
    j = t.ret(n + 4, "par_end", ret=0).finish(settle=False).judge()
    assert j.verdict is Verdict.WARN and "R21 (" in j.reason, j.reason
