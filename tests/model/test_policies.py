"""The acl, caching and arena policies: their arithmetic, and the rules that hold a device to them."""

from __future__ import annotations

from dataclasses import replace

from reference_model.caps import DeviceCaps
from reference_model.policies import acl, arena, caching
from reference_model.policies.pool import MIB, Block, Candidate, Pool

from .builder import PAIR, TB, allocated, request, teardown
from .coverage import covers
from .test_rules_requests_cookies import fails, passes

CAP = 16384


def caps(policy: str | None, capacity: int | None = CAP) -> DeviceCaps:
    return DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=capacity, policy=policy, vnpu_control=True)


# -- arithmetic -----------------------------------------------------------------------------------

def test_acl_reservation_alignment_and_pools():
    pool = Pool(256 * MIB, {})
    assert acl.huge_capacity(256 * MIB) == 32 * MIB
    assert acl.reservation(1) == 64 and acl.reservation(32) == 64 and acl.reservation(33) == 96
    small = acl.place(pool, "a", 1000)
    assert small.block == Block(1, 1000, 1088, "normal")  # round_up(1000, 32) + 32 = 1056 -> 64-aligned 1088
    exact_mib = acl.place(pool, "a", MIB)
    assert exact_mib.block is not None and exact_mib.block.region == "normal"  # at most 1 MiB: normal pages
    big = acl.place(pool, "a", MIB + 1)
    assert big.block is not None and (big.block.region, big.block.charge) == ("huge", 2 * MIB)
    pool = big.pool
    too_big_for_huge = acl.place(pool, "b", 31 * MIB)  # 32 MiB of huge pages, 2 MiB already taken
    assert too_big_for_huge.block is not None and too_big_for_huge.block.region == "normal"
    assert "huge pool cannot hold" in too_big_for_huge.why
    half = acl.place(Pool(256 * MIB, {}), "h1", 128 * MIB)
    assert half.block is not None and half.block.charge == 128 * MIB + 64
    second = acl.place(half.pool, "h2", 128 * MIB)
    assert second.block is None and second.why.startswith("policy acl:")


def test_caching_steps_reuse_cleanup_and_preemption():
    pool = Pool(8192, {})
    a = caching.place(pool, "a", 1, 500, [])
    assert a.block is not None and a.block.charge == 1024
    pool = caching.release(a.pool, "a")
    assert pool.cache == (1024,) and caching.used(pool) == 1024
    reuse = caching.place(pool, "b", 1000, 500, [])
    assert reuse.block is not None and reuse.pool.cache == () and "reuse" in reuse.why
    # a miss that does not fit next to the cache cleans it first
    pool = caching.place(Pool(8192, {}), "x", 4096, 500, []).pool
    pool = caching.release(pool, "x")
    fresh = caching.place(pool, "y", 6144, 500, [])
    assert fresh.block is not None and fresh.pool.cache == () and "cleaning 4096" in fresh.why
    # still no room: less important buffers are preempted, in victim order, when they free enough
    held = caching.place(Pool(8192, {}), "p", 4096, 900, [])
    pool = caching.place(held.pool, "q", 2048, 500, []).pool
    cands = [Candidate("p", 900, 1, pool.blocks["p"]), Candidate("q", 500, 2, pool.blocks["q"])]
    urgent = caching.place(pool, "u", 4096, 100, cands)
    assert urgent.block is not None and urgent.victims == ("p",)
    assert caching.place(pool, "u", 4096, 900, cands).block is None  # nobody is less important
    assert caching.place(pool, "u", 4096, 900, cands).victims == ()


def test_arena_head_tail_alignment_and_holes():
    pool = Pool(1000, {})  # end rounded down to 992
    assert arena.end(pool) == 992
    w = arena.place(pool, "w", 100, 2)  # weights: tail
    assert w.block == Block(1, 100, 112, "tail", 880)
    c = arena.place(w.pool, "c", 17, 3)  # cache: head, rounded up to 16
    assert c.block == Block(2, 17, 32, "head", 0)
    pool = arena.place(c.pool, "w2", 100, 1).pool  # executable: tail again, below w
    assert arena.tail(pool) == 768 and arena.used(pool) == 32 + 992 - 768
    holed = arena.release(pool, "w")  # not the top of the tail: a hole
    assert arena.tail(holed) == 768 and len(holed.holes) == 1
    reclaimed = arena.release(holed, "w2")  # the top goes, and the hole under it with it
    assert arena.tail(reclaimed) == 992 and reclaimed.holes == ()
    assert arena.place(reclaimed, "big", 992 - 32, 2).block is not None
    assert arena.place(reclaimed, "big", 992 - 31, 2).block is None


# -- rules ----------------------------------------------------------------------------------------

def two_allocations(second_ok: bool, size: int = 8192) -> TB:
    b = TB()
    allocated(b, cookie="c1", size=size)
    request(b, "r2", cookie="c2", size=size)
    answer = b.cb("alloc", "c2", 0, "B2") if second_ok else b.cb("alloc", "c2", "ENOMEM", None)
    b.call("alloc", reqs=["r2"], during=[answer])
    if second_ok:
        b.bind("b2", "B2")
    return teardown(b, bufs=["b", "b2"] if second_ok else ["b"], reqs=["r", "r2"], deleted=["c1", "c2"])


@covers("allocation.policy_outcome")
def test_declared_policy_is_held_to_its_answer():
    # 2 x 8192 bytes fill 16384 exactly: budget and caching admit both; acl's 32-byte overhead does not.
    passes(two_allocations(True), caps=caps("budget"))
    passes(two_allocations(True), caps=caps("caching"))
    passes(two_allocations(False), caps=caps("acl"))
    j = fails(two_allocations(True), "alloc-supported-may-fail", caps=caps("acl"))
    assert j.divergence is not None and "policy acl" in j.divergence.message
    j = fails(two_allocations(False), "alloc-supported-may-fail", caps=caps("caching"))
    assert j.divergence is not None and "policy caching" in j.divergence.message
    # nothing declared: the text allows both answers
    passes(two_allocations(True), caps=caps(None, None))
    passes(two_allocations(False), caps=caps(None, None))
    passes(two_allocations(False), caps=caps("acl", None))


def pressure_trace(ret: int, preempt_cb: bool = True, reserve: int = 12288) -> TB:
    b = TB()
    allocated(b, cookie="c", size=8192, onpreempt=True)
    during = [b.cb("preempt", "c")] if preempt_cb else []
    b.call("vnpu", command=f"pressure={reserve}", ret=ret, errno="ENOMEM" if ret else None, during=during)
    b.call("vnpu", command="pressure=0")
    return teardown(b, bufs=["b"], reqs=["r"], deleted=["c"])


@covers("preemption.pressure_answer")
def test_pressure_is_predicted_under_a_declared_policy():
    # 8192 live + 12288 reserved > 16384: the one buffer is the victim, and then the reservation fits.
    passes(pressure_trace(0), caps=caps("caching"))
    passes(pressure_trace(0), caps=caps("arena"))
    j = fails(pressure_trace(-1), "alloc-supported-may-fail", caps=caps("caching"))
    assert j.divergence is not None and "policy caching" in j.divergence.message
    passes(pressure_trace(0, preempt_cb=False), caps=caps("arena"))  # a victim's onPreempt may come later
    # 8192 live + 4096 reserved fit: no victim, so an onPreempt is not the policy's
    passes(pressure_trace(0, preempt_cb=False, reserve=4096), caps=caps("arena"))
    fails(pressure_trace(0, reserve=4096), "preempt-callback-on-forced-dealloc", caps=caps("arena"))
    passes(pressure_trace(-1), caps=caps("budget"))  # budget: pressure is not predicted


def test_pool_keys_are_hashable_and_stable():
    pool = replace(Pool(CAP, {"B1": Block(1, 1, 16, "head")}), decided={3: (True, "x")})
    assert hash(pool.key()) == hash(replace(pool).key())


def unsettled_trace(third_ok: bool) -> TB:
    """Under caching the third request needs a victim while the second's onAlloc is still outstanding."""
    b = TB()
    allocated(b, cookie="c1", size=8192, onpreempt=True)
    request(b, "r2", cookie="c2", size=4096)
    b.call("alloc", reqs=["r2"])
    request(b, "r3", cookie="c3", size=8192)
    b.call("req_set_priority", req="r3", priority=100)
    if third_ok:
        answer = [b.cb("preempt", "c1"), b.cb("alloc", "c3", 0, "B3")]
    else:
        answer = [b.cb("alloc", "c3", "ENOMEM", None)]
    b.call("alloc", reqs=["r3"], during=answer)
    b.emit(b.cb("alloc", "c2", 0, "B2"))
    b.bind("b2", "B2")
    bufs = ["b", "b2"]
    if third_ok:
        b.bind("b3", "B3", nth=2)
        bufs.append("b3")
    return teardown(b, bufs=bufs, reqs=["r", "r2", "r3"], deleted=["c1", "c2", "c3"])


def test_victims_are_not_predicted_while_an_onalloc_is_outstanding():
    # with the second onAlloc outstanding the vnpu may or may not count that buffer: both answers pass
    passes(unsettled_trace(True), caps=caps("caching"))
    passes(unsettled_trace(False), caps=caps("caching"))


def pressure_while_onalloc_starts(ret: int, then_alloc: bool) -> TB:
    """Budget device (capacity declared, pressure not predicted). r's onAlloc starts on the device thread
    while `pressure=` runs: the device already counts the buffer, takes it as a victim (or, if it could
    not, answers ENOMEM and keeps the reservation), and the trace shows the onAlloc only after the command.
    ``then_alloc``: a second allocation follows, answered ENOMEM because the reservation stays."""
    b = TB()
    request(b, cookie="c", size=8192, onpreempt=True)
    b.call("alloc", reqs=["r"])
    b.call("vnpu", command="pressure=16384", ret=ret, errno="ENOMEM" if ret else None)
    b.emit(b.cb("alloc", "c", 0, "B1"))
    b.bind("b", "B1")
    if ret == 0:
        b.emit(b.cb("preempt", "c"))
    if then_alloc:
        request(b, "r2", cookie="d", size=4096)
        b.call("alloc", reqs=["r2"], during=[b.cb("alloc", "d", "ENOMEM")])
    more = ["2"] if then_alloc else []
    return teardown(b, bufs=["b"], reqs=["r", *(f"r{n}" for n in more)], deleted=["c", *("d" for _ in more)])


def test_pressure_may_take_a_buffer_whose_onalloc_is_starting():
    passes(pressure_while_onalloc_starts(0, then_alloc=False), caps=caps("budget"))
    # nothing commanded: the same onPreempt is not allowed on a device that declares its capacity
    b = TB()
    request(b, cookie="c", size=8192, onpreempt=True)
    b.call("alloc", reqs=["r"])
    b.call("vnpu", command="delay_ms=0")
    b.emit(b.cb("alloc", "c", 0, "B1"))
    b.bind("b", "B1")
    b.emit(b.cb("preempt", "c"))
    fails(teardown(b, bufs=["b"], reqs=["r"], deleted=["c"]), "preempt-callback-on-forced-dealloc",
          caps=caps("budget"))


def test_a_pressure_that_answered_enomem_keeps_its_reservation():
    passes(pressure_while_onalloc_starts(-1, then_alloc=True), caps=caps("budget"))


@covers("allocation.on_alloc")
def test_alike_submissions_may_be_answered_in_any_order_under_a_policy():
    """Three submissions of one request, the declared policy admitting two when allocAsync is called: the
    refusal may come first. Which of the alike submissions an answer stands for is not known, so each
    one's own decision is tried."""
    b = TB()
    request(b, "r", cookie="c", size=8192)
    b.call("alloc", reqs=["r", "r", "r"])
    b.emit(b.cb("alloc", "c", "ENOMEM", None), b.cb("alloc", "c", 0, "B1"), b.cb("alloc", "c", 0, "B2"))
    b.bind("b1", "B1").bind("b2", "B2")
    teardown(b, bufs=["b1", "b2"], reqs=["r"], deleted=["c"])
    passes(b, caps=caps("caching"))
    passes(b, caps=caps("arena", 16384 + 64))
    three = TB()
    request(three, "r", cookie="c", size=8192)
    three.call("alloc", reqs=["r", "r", "r"])
    three.emit(*(three.cb("alloc", "c", 0, f"B{i}") for i in (1, 2, 3)))
    for i in (1, 2, 3):
        three.bind(f"b{i}", f"B{i}")
    teardown(three, bufs=["b1", "b2", "b3"], reqs=["r"], deleted=["c"])
    fails(three, "alloc-supported-may-fail", caps=caps("caching"))
