"""Property tests: a conforming fake implementation driven at random always PASSes; garbage never raises."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reference_model.judge import Judgement
from reference_model.verdicts import Verdict

from .builder import PAIR, TB, allocated, teardown
from .test_rules_alloc_map import digest


class FakeNpu:
    """A tiny conforming implementation: it answers inside allocAsync on another thread, holds cookies
    with reference counts, and runs a deleter when the last holder lets go."""

    def __init__(self) -> None:
        self.holders: dict[int, int] = {}
        self.value: dict[int, str | None] = {}
        self.deleted: set[int] = set()
        self.next = 1

    def hand(self, value: str | None) -> int:
        h = self.next
        self.next += 1
        self.holders[h] = 1
        self.value[h] = value
        return h

    def hold(self, h: int | None) -> None:
        if h is not None:
            assert h not in self.deleted, "a holder of a deleted cookie"
            self.holders[h] += 1

    def release(self, h: int | None, b: TB) -> list[dict]:
        if h is None:
            return []
        self.holders[h] -= 1
        if self.holders[h] == 0:
            assert h not in self.deleted, "cookie deleted twice"
            self.deleted.add(h)
            return [b.deleter(self.value[h], "caller")]
        return []


class Machine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b = TB("fuzz.machine")
        self.npu = FakeNpu()
        self.reqs: dict[str, int | None] = {}  # request -> hand-over
        self.valid: dict[str, bool] = {}
        self.bufs: dict[str, tuple[str, int | None]] = {}  # slot -> (handle, hand-over)
        self.freed: set[str] = set()
        self.maps: dict[str, str] = {}  # map slot -> buffer slot
        self.written: dict[str, int] = {}
        self.n = 0
        self.handles = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    @rule(valid=st.booleans(), cookie=st.sampled_from(["none", "deleter", "raw", "null_deleter"]))
    def new_request(self, valid: bool, cookie: str) -> None:
        r = self.fresh("r")
        b = self.b
        b.call("req_create", req=r)
        b.call("req_set_device", req=r, device=PAIR[0])
        b.call("req_set_type", req=r, type=PAIR[1] if valid else 0)
        b.call("req_set_size", req=r, size=8192)
        b.call("req_set_prot", req=r, prot=["READ", "WRITE"])
        b.call("req_set_onalloc", req=r, set=True)
        h = None
        if cookie == "deleter":
            k = self.fresh("k")
            b.call("cookie_new", cookie=k)
            b.call("req_set_cookie", req=r, cookie=k, deleter=True)
            h = self.npu.hand(k)
        elif cookie == "raw":
            b.call("req_set_cookie", req=r, cookie=self.n, deleter=False)
        elif cookie == "null_deleter":
            b.call("req_set_cookie", req=r, cookie=None, deleter=True)
            h = self.npu.hand(None)
        self.reqs[r] = h
        self.valid[r] = valid

    @precondition(lambda self: self.reqs)
    @rule(data=st.data())
    def replace_cookie(self, data: st.DataObject) -> None:
        r = data.draw(st.sampled_from(sorted(self.reqs)))
        k = self.fresh("k")
        self.b.call("cookie_new", cookie=k)
        new = self.npu.hand(k)
        during = self.npu.release(self.reqs[r], self.b)
        self.b.call("req_set_cookie", req=r, cookie=k, deleter=True, during=during)
        self.reqs[r] = new

    @precondition(lambda self: self.reqs)
    @rule(data=st.data())
    def alloc(self, data: st.DataObject) -> None:
        r = data.draw(st.sampled_from(sorted(self.reqs)))
        h = self.reqs[r]
        cookie_echo = self.cookie_value(r)
        b = self.b
        self.npu.hold(h)
        if self.valid[r]:
            self.handles += 1
            handle = f"B{self.handles}"
            cb = {"ev": "cb", "kind": "alloc", "cookie": cookie_echo, "error": 0, "buf": handle, "thread": "other"}
            b.call("alloc", reqs=[r], during=[cb])
            slot = self.fresh("b")
            b.bind(slot, handle, nth=self.handles - 1)
            self.bufs[slot] = (handle, h)
        else:
            cb = {"ev": "cb", "kind": "alloc", "cookie": cookie_echo, "error": "EINVAL", "buf": None,
                  "thread": "caller"}
            b.call("alloc", reqs=[r], during=[cb, *self.npu.release(h, b)])

    def cookie_value(self, r: str) -> str | None:
        # the last req_set_cookie of r in the trace decides the value
        value: str | None = None
        for line in self.b.lines:
            ev = json.loads(line)
            if ev.get("ev") == "call" and ev["op"] == "req_set_cookie" and ev["args"]["req"] == self.b.slots[r]:
                value = ev["args"]["cookie"]
        return value

    def live_bufs(self) -> list[str]:
        return sorted(s for s in self.bufs if s not in self.freed)

    @precondition(lambda self: self.live_bufs())
    @rule(data=st.data())
    def map_write_read(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from(self.live_bufs()))
        m = self.fresh("m")
        seed = data.draw(st.integers(0, 255))
        b = self.b
        b.call("buf_map", map=m, buf=slot, length=8192, prot=["READ", "WRITE"], flags=["SHARED"], offset=0)
        b.call("map_write", map=m, offset=0, length=256, seed=seed)
        b.extra(digest=digest(seed, 256)).call("map_read", map=m, offset=0, length=256)
        self.maps[m] = slot

    @precondition(lambda self: self.maps)
    @rule(data=st.data())
    def unmap(self, data: st.DataObject) -> None:
        m = data.draw(st.sampled_from(sorted(self.maps)))
        self.b.call("buf_unmap", map=m, offset=0, length=8192)
        del self.maps[m]

    @precondition(lambda self: self.live_bufs())
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from(self.live_bufs()))
        _, h = self.bufs[slot]
        self.b.call("buf_free", bufs=[slot], during=self.npu.release(h, self.b))
        self.freed.add(slot)

    @precondition(lambda self: self.reqs)
    @rule(data=st.data())
    def free_request(self, data: st.DataObject) -> None:
        r = data.draw(st.sampled_from(sorted(self.reqs)))
        self.b.call("req_free", req=r, during=self.npu.release(self.reqs.pop(r), self.b))

    @invariant()
    def holders_never_negative(self) -> None:
        assert all(v >= 0 for v in self.npu.holders.values())

    def teardown(self) -> None:
        b = self.b
        b.settle("alloc").settle("load")
        for m in sorted(self.maps):
            b.call("buf_unmap", map=m, offset=0, length=8192, teardown=True)
        for slot in self.live_bufs():
            b.call("buf_free", bufs=[slot], teardown=True, during=self.npu.release(self.bufs[slot][1], b))
        for r in sorted(self.reqs):
            b.call("req_free", req=r, teardown=True, during=self.npu.release(self.reqs[r], b))
        b.settle("deleters")
        b.end()
        assert self.npu.deleted == set(self.npu.holders), "every hand-over deleted exactly once"
        j: Judgement = b.judge()
        assert j.verdict is Verdict.PASS, (j.reason, "\n".join(b.lines))


Machine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
TestConformingFake = Machine.TestCase


def conforming_lines() -> list[str]:
    b = TB()
    allocated(b, cookie="c")
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    return teardown(b, bufs=["b"], reqs=["r"], deleted=["c"], maps=["m"]).lines


BASE = conforming_lines()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=20))
def test_random_text_is_an_error_never_an_exception(lines: list[str]) -> None:
    j = _judge(lines)
    assert j.verdict is Verdict.ERROR


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(BASE)), st.binary(max_size=40))
def test_truncated_or_corrupted_traces_never_raise(cut: int, junk: bytes) -> None:
    lines = [*BASE[:cut], junk.decode("latin-1")]
    j = _judge(lines)
    assert j.verdict in set(Verdict)
    if not junk.strip():
        return
    assert j.verdict is not Verdict.PASS or cut == len(BASE)


@settings(max_examples=300, deadline=None)
@given(st.permutations(BASE))
def test_shuffled_traces_never_raise(lines: list[str]) -> None:
    j = _judge(lines)
    assert j.verdict in set(Verdict)
    assert "reference model bug" not in j.reason
    if lines != BASE:
        assert j.verdict is not Verdict.PASS or _same_events(lines)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, len(BASE) - 2), st.sampled_from(["ev", "step", "op", "args", "ret", "cookie", "buf", "error"]),
       st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=5), st.booleans()))
def test_field_mutations_never_raise(index: int, key: str, value: object) -> None:
    lines = list(BASE)
    obj = json.loads(lines[index])
    obj[key] = value
    lines[index] = json.dumps(obj)
    j = _judge(lines)
    assert "reference model bug" not in j.reason, j.reason


def _same_events(lines: list[str]) -> bool:
    return [json.loads(x).get("ev") for x in lines] == [json.loads(x).get("ev") for x in BASE]


def _judge(lines: list[str]) -> Judgement:
    from reference_model.judge import judge

    from .builder import CAPS, CATALOGUE

    b = TB()
    allocated(b, cookie="c")
    b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    return judge(b.scenario(), lines, CAPS, CATALOGUE)
