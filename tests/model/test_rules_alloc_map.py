"""Allocation, support, mapping, free and priority: a conforming and a non-conforming trace per rule."""

from __future__ import annotations

from dataclasses import replace

from reference_model.caps import DeviceCaps
from reference_model.content import fnv1a64, pattern_bytes

from .builder import PAIR, TB, allocated, request, teardown
from .coverage import covers
from .test_rules_requests_cookies import fails, passes, warns

VNPU = DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=16384, policy="budget", vnpu_control=True)


def alloc_once(error, buf=None, thread="other", **req_kw) -> TB:
    b = TB()
    request(b, **req_kw)
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, error, buf, thread)])
    if buf is not None:
        b.bind("b", buf)
    return teardown(b, bufs=["b"] if buf else [], reqs=["r"])


@covers("allocation.invalid_request")
def test_invalid_fields():
    passes(alloc_once("EINVAL", type_=0))
    fails(alloc_once("ENOSYS", type_=0), "req-type-unknown-einval")
    passes(alloc_once("EINVAL", prot=8))
    warns(alloc_once("ENOTSUP", prot=8), "R4")  # refused, with an errno the text does not name
    fails(alloc_once(0, "B1", prot=8), "req-prot-values")
    passes(alloc_once("EINVAL", size=0))
    passes(alloc_once("EIO", size=0))
    warns(alloc_once(0, "B1", size=0), "R4")  # the text never calls size 0 invalid
    fails(alloc_once(0, "B1", size=-1), "req-size-bytes")


def test_priority_out_of_range_in_request():
    def build(answer, buf=None):
        b = TB()
        request(b)
        b.call("req_set_priority", req="r", priority=2000)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, answer, buf)])
        return teardown(b, bufs=[buf] if buf else [], reqs=["r"])

    passes(build("EINVAL"))
    warns(build("ERANGE"), "R4")
    warns(build(0, "B1"), "R4")  # "must be within the range": the caller's duty, no consequence stated
    assert build(0, "B1").judge(profile="aosp-2026").discrepancy == "D3"


@covers("allocation.file_outcome")
def test_file_segment_at_alloc():
    def build(length, answer, buf=None):
        b = TB()
        b.call("file_new", file="f", size=4096, seed=9)
        request(b)
        b.call("req_set_file", req="r", fd="f", file_offset=0, length=length, buffer_offset=0)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, answer, buf)])
        if buf:
            b.bind("b", buf)
            b.call("buf_map", map="m", buf="b", length=4096, prot=["READ"], flags=["SHARED"], offset=0)
            digest = fnv1a64(pattern_bytes(9, 0, 100))
            b.extra(digest=f"{digest:016x}").call("map_read", map="m", offset=0, length=100)
        return teardown(b, bufs=["b"] if buf else [], reqs=["r"], maps=["m"] if buf else [])

    passes(build(-1, "EINVAL"))
    passes(build(100, 0, "B1"))
    warns(build(-1, 0, "B1"), "R17")  # "Must be non-negative": the caller's duty

    def bad_fd(answer, buf=None):
        b = TB()
        request(b)
        b.call("req_set_file", req="r", fd={"fd": -7}, file_offset=0, length=100, buffer_offset=0)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, answer, buf)])
        if buf:
            b.bind("b", buf)
        return teardown(b, bufs=["b"] if buf else [], reqs=["r"])

    passes(bad_fd("EBADF"))
    # "Must be a valid file descriptor, or -1": the caller's duty; allocating without a file is WARN R22
    warns(bad_fd(0, "B1"), "R22")


@covers("allocation.valid_outcome")
def test_valid_request_outcomes():
    passes(alloc_once("ENOMEM"))
    passes(alloc_once("EIO"))  # "due to other reasons": any errno
    passes(alloc_once("EINVAL", device=7))
    warns(alloc_once(0, "B1", device=7), "R5")  # discovery tested one request of the pair, not this one
    unknown = DeviceCaps()
    assert alloc_once("EIO", device=7).judge(unknown).verdict.value == "PASS"


def capacity_trace(second_fits: bool, answer, buf=None) -> TB:
    b = TB()
    allocated(b, size=16384)
    b.call("buf_map", map="m", buf="b", length=4096, prot=["READ"], flags=["SHARED"], offset=0)
    b.call("buf_free", bufs=["b"])
    if second_fits:
        b.call("buf_unmap", map="m", offset=0, length=4096)
    request(b, "r2", size=16384)
    b.call("alloc", reqs=["r2"], during=[b.cb("alloc", None, answer, buf)])
    if buf:
        b.bind("b2", buf)
    return teardown(b, bufs=["b2"] if buf else [], reqs=["r", "r2"], maps=[] if second_fits else ["m"])


@covers("free.retire")
def test_capacity_budget_counts_mapped_freed_buffers():
    passes(capacity_trace(True, 0, "B2"), caps=VNPU)
    passes(capacity_trace(False, "ENOMEM"), caps=VNPU)
    fails(capacity_trace(False, 0, "B2"), "alloc-supported-may-fail", caps=VNPU)
    # only the memory kept past the last unmap explains the refusal: that sentence is named
    fails(capacity_trace(True, "ENOMEM"), "free-memory-after-last-unmap", caps=VNPU)


@covers("allocation.callback_thread")
def test_callback_thread():
    passes(alloc_once("EINVAL", thread="caller", type_=0))
    warns(alloc_once(0, "B1", thread="caller"), "R1")  # "any thread": a reading, never a FAIL
    fails(alloc_once(0, None, thread="caller"), "alloc-errornum-iff-buf")


@covers("allocation.errornum_iff_buf")
def test_errornum_iff_buf():
    passes(alloc_once(0, "B1"))
    fails(alloc_once(0, None), "alloc-errornum-iff-buf")


def test_alloc_errornum_is_a_positive_errno():
    passes(alloc_once("E#4242"))  # a positive number outside the probe's vocabulary is still an errno
    j = fails(alloc_once("E#-19"), "alloc-errornum-iff-buf")  # -ENODEV
    assert j.divergence.observed == "errorNum=E#-19"
    fails(alloc_once("E#-12", thread="caller", type_=0), "alloc-errornum-iff-buf")  # even where an error is due


@covers("allocation.invalid_field_clause")
def test_an_invalid_field_is_held_to_the_default_it_kept_or_to_its_setter():
    def answered(*, set_device: bool, set_type: bool, error: object) -> TB:
        b = TB()
        b.call("req_create", req="r")
        if set_device:
            b.call("req_set_device", req="r", device=-1)
        if set_type:
            b.call("req_set_type", req="r", type=0)
        b.call("req_set_size", req="r", size=8192)
        b.call("req_set_onalloc", req="r", set=True)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, error, None if error else "B1")])
        if not error:
            b.bind("b", "B1")
        return teardown(b, bufs=[] if error else ["b"], reqs=["r"])

    passes(answered(set_device=True, set_type=True, error="EINVAL"))
    fails(answered(set_device=False, set_type=True, error=0), "req-device-default-negative")
    fails(answered(set_device=True, set_type=True, error=0), "req-device-negative-einval")


@covers("allocation.mistaken_identity")
def test_answers_swapped_between_cookies_name_the_cookie():
    def batch(swapped: bool) -> TB:
        b = TB()
        request(b, "ok", cookie="c1")
        request(b, "bad", cookie="c2", type_=0)
        answers = [b.cb("alloc", "c2", "EINVAL", None), b.cb("alloc", "c1", 0, "B1")]
        if swapped:  # the buffer reaches the invalid request's cookie, the error the valid one's
            answers = [b.cb("alloc", "c2", 0, "B1"), b.cb("alloc", "c1", "EINVAL", None)]
        b.call("alloc", reqs=["ok", "bad"], during=answers)
        b.bind("b", "B1")
        return teardown(b, bufs=["b"], reqs=["ok", "bad"], deleted=["c1", "c2"])

    passes(batch(False))
    fails(batch(True), "cookie-identify-request")


@covers("allocation.on_alloc")
def test_one_callback_per_request():
    b = TB()
    request(b)
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, "ENOMEM", None), b.cb("alloc", None, "ENOMEM", None)])
    fails(teardown(b, reqs=["r"]), "alloc-one-callback-per-request")


def test_shared_null_cookie_attribution_branches():
    b = TB()
    request(b, "r1")
    request(b, "r2", type_=0)
    b.call("alloc", reqs=["r1", "r2"])
    b.emit(b.cb("alloc", None, "EINVAL", None), b.cb("alloc", None, 0, "B1"))
    b.bind("b", "B1")
    passes(teardown(b, bufs=["b"], reqs=["r1", "r2"]))


@covers("allocation.all_answered")
def test_settle_requires_every_onalloc():
    b = TB()
    request(b)
    b.call("alloc", reqs=["r"])
    fails(teardown(b, reqs=["r"]), "alloc-callback-on-completion")
    # the request freed right after allocAsync: the sentence that allows that free is the one contradicted
    b = TB()
    request(b)
    b.call("alloc", reqs=["r"])
    b.call("req_free", req="r")
    fails(teardown(b), "alloc-free-request-after-call")


@covers("support.check_support")
def test_is_supported_results():
    def build(results, ret=0, errno=None, type_=PAIR[1]):
        b = TB()
        request(b, type_=type_, onalloc=False)
        b.extra(**({"results": results} if ret == 0 else {})).call("is_supported", reqs=["r"], ret=ret, errno=errno)
        return teardown(b, reqs=["r"])

    passes(build([True]))
    passes(build([], ret=-1, errno="ENOSYS"))
    warns(build([True], type_=0), "R5")
    fails(build([True, False]), "support-returns")
    fails(build([], ret=-1), "support-error-returns")
    fails(build([True], ret=1), "support-returns")  # e.g. the number of supported requests
    fails(build([True], ret=2), "support-returns")


@covers("support.check_support")
def test_is_supported_answers_per_request_in_one_call():
    def build(results, second_cookie=None, canary=None):
        b = TB()
        request(b, "r1", onalloc=False)
        request(b, "r2", cookie=second_cookie, onpreempt=second_cookie is not None)
        extra = {"results": results} | ({"canary": canary} if canary is not None else {})
        b.extra(**extra).call("is_supported", reqs=["r1", "r2", "r1"])
        return teardown(b, reqs=["r1", "r2"], deleted=[second_cookie] if second_cookie else [])

    passes(build([True, True, True], "c"))
    passes(build([False, False, False], "c", canary=True))
    fails(build([True, False, True], "c"), "support-ignored-fields")
    fails(build([True, True, False], "c"), "support-tests-requests")  # one request listed twice
    fails(build([True, True, True], "c", canary=False), "support-out-array-size")


@covers("support.unsupported_learned")
def test_unsupported_means_alloc_fails():
    def build(answer, buf=None):
        b = TB()
        request(b)
        b.extra(results=[False]).call("is_supported", reqs=["r"])
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, answer, buf)])
        return teardown(b, bufs=[], reqs=["r"])

    assert build("ENODEV").judge(DeviceCaps()).verdict.value == "PASS"
    j = build(0, "B1").judge(DeviceCaps())
    assert j.verdict.value == "FAIL" and j.divergence and j.divergence.clause == "alloc-unsupported-fails"


def mapped(prot=("READ", "WRITE"), map_prot=("READ", "WRITE"), ret=0, errno=None, flags=("SHARED",)) -> TB:
    b = TB()
    allocated(b, prot=prot)
    b.call("buf_map", map="m", buf="b", length=8192, prot=list(map_prot), flags=list(flags), offset=0, ret=ret,
           errno=errno)
    return b


@covers("mapping.map_outcome")
def test_map_prot_subset():
    passes(teardown(mapped(("READ",), ("READ", "WRITE"), -1, "EACCES"), bufs=["b"], reqs=["r"]))
    j = fails(teardown(mapped(("READ",), ("READ", "WRITE")), bufs=["b"], reqs=["r"], maps=["m"]), "map-prot-subset")
    assert j.discrepancy == "D13"
    passes(teardown(mapped(), bufs=["b"], reqs=["r"], maps=["m"]))
    fails(teardown(mapped(ret=-1, errno="EINVAL"), bufs=["b"], reqs=["r"]), "map-maps-buffer")
    passes(teardown(mapped(flags=("SHARED", "PRIVATE"), ret=-1, errno="EINVAL"), bufs=["b"], reqs=["r"]))


def test_default_prot_is_read_only():
    b = request(TB(), prot=None)
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, 0, "B1")])
    b.bind("b", "B1")
    b.call("buf_map", map="m", buf="b", length=8192, prot=["WRITE"], flags=["SHARED"], offset=0, ret=0)
    # the buffer kept the default protection: the wider map contradicts the default first
    fails(teardown(b, bufs=["b"], reqs=["r"], maps=["m"]), "req-prot-default-read")


@covers("mapping.effective_prot")
def test_effective_protection_of_a_mapping():
    def looked(prot=("READ", "WRITE"), map_prot=("READ",), **seen):
        b = mapped(prot, map_prot)
        b.extra(**seen).call("map_prot", map="m", offset=0, length=8192, ret=0)
        return teardown(b, bufs=["b"], reqs=["r"], maps=["m"])

    passes(looked(mapped=True, prot_all=1, prot_any=1))
    passes(looked(map_prot=("WRITE",), mapped=True, prot_all=3, prot_any=3))  # PROT_READ implied: as mmap()
    fails(looked(mapped=True, prot_all=3, prot_any=3), "map-args-like-mmap")
    fails(looked(("READ",), mapped=True, prot_all=3, prot_any=3), "map-prot-param-subset")
    fails(looked(map_prot=("READ", "WRITE"), mapped=True, prot_all=1, prot_any=3), "map-args-like-mmap")
    fails(looked(mapped=False, prot_all=1, prot_any=1), "map-args-like-mmap")


@covers("mapping.failure_sets_errno")
def test_map_failure_sets_errno():
    fails(teardown(mapped(("READ",), ("WRITE",), -1, None), bufs=["b"], reqs=["r"]), "map-returns")


@covers("mapping.unmap_result")
def test_unmap_whole_mapping_succeeds():
    b = mapped()
    b.call("buf_unmap", map="m", offset=0, length=8192)
    passes(teardown(b, bufs=["b"], reqs=["r"]))
    b = mapped()
    b.call("buf_unmap", map="m", offset=0, length=8192, ret=-1, errno="EINVAL")
    fails(teardown(b, bufs=["b"], reqs=["r"]), "unmap-returns")


def digest(seed: int, n: int, first: int = 0) -> str:
    return f"{fnv1a64(pattern_bytes(seed, first, n)):016x}"


@covers("mapping.read_digest")
def test_data_written_is_read_back_also_after_free():
    def build(good: bool) -> TB:
        b = mapped()
        b.call("map_write", map="m", offset=100, length=300, seed=5)
        b.call("buf_free", bufs=["b"])
        b.extra(digest=digest(5, 300) if good else "0000000000000000").call("map_read", map="m", offset=100,
                                                                            length=300)
        b.extra(digest="whatever").call("map_read", map="m", offset=1000, length=10)
        b.call("buf_unmap", map="m", offset=0, length=8192)
        return teardown(b, reqs=["r"])

    passes(build(True))
    fails(build(False), "free-mapping-valid-after-free")


@covers("free.free_result")
def test_free_returns_zero():
    b = TB()
    allocated(b)
    b.call("buf_free", bufs=["b"])
    passes(teardown(b, reqs=["r"]))
    b = TB()
    allocated(b)
    b.call("buf_free", bufs=["b"], ret=-1, errno="EINVAL")
    fails(teardown(b, reqs=["r"]), "free-each-allocated-buffer")


@covers("priority.set_priority_result")
def test_set_priority():
    def build(value, ret, errno=None):
        b = TB()
        allocated(b)
        b.call("buf_set_priority", buf="b", priority=value, ret=ret, errno=errno)
        return teardown(b, bufs=["b"], reqs=["r"])

    passes(build(0, 0))
    passes(build(1000, 0))
    passes(build(1001, -1, "EINVAL"))
    fails(build(100, -1, "EINVAL"), "priority-set")  # EINVAL: calls a priority of the inclusive range invalid
    warns(build(100, -1, "EPERM"), "R19")  # "-1 on error" lists no errors
    warns(build(-1, 0), "R4")  # "must be within the range": the caller's duty, no consequence stated
    assert build(-1, 0).judge(profile="aosp-2026").discrepancy == "D3"


@covers("mapping.unmap_result")
def test_unmap_length_zero_and_partial_unmaps_track_what_is_still_mapped():
    # length 0 unmaps the rest of the mapping: a whole unmap, which must succeed
    b = mapped()
    b.call("buf_unmap", map="m", offset=0, length=0)
    passes(teardown(b, bufs=["b"], reqs=["r"]))
    b = mapped()
    b.call("buf_unmap", map="m", offset=0, length=0, ret=-1, errno="EINVAL")
    fails(teardown(b, bufs=["b"], reqs=["r"]), "unmap-returns")
    # a first page unmapped, then the rest: the second unmap ends the mapping and must succeed
    b = mapped()
    b.call("buf_unmap", map="m", offset=0, length=4096)
    b.call("buf_unmap", map="m", offset=4096, length=4096)
    passes(teardown(b, bufs=["b"], reqs=["r"]))
    b = mapped()
    b.call("buf_unmap", map="m", offset=0, length=4096)
    b.call("buf_unmap", map="m", offset=0, length=0, ret=-1, errno="EINVAL")
    fails(teardown(b, bufs=["b"], reqs=["r"]), "unmap-returns")


def batch_of_five(answers: dict[str, object]) -> tuple[TB, int]:
    """Five requests with their own raw cookies in one allocAsync; the third has an invalid type. Each
    request in ``answers`` gets its onAlloc (errno, or 0 with a buffer), the others none. Returns the
    trace and the allocAsync's step."""
    b = TB()
    names = ["a", "b", "bad", "d", "e"]
    for i, name in enumerate(names):
        request(b, name, cookie=i + 1, deleter=False, type_=0 if name == "bad" else PAIR[1])
    alloc_step = len(b.steps)
    b.call("alloc", reqs=names)
    handles = []
    for i, name in enumerate(names):
        if name in answers:
            answer = answers[name]
            handle = f"B{i + 1}" if answer == 0 else None
            b.emit(b.cb("alloc", i + 1, answer, handle))
            if handle is not None:
                b.bind(f"buf_{name}", handle, nth=0)
                handles.append(f"buf_{name}")
    return teardown(b, bufs=handles, reqs=names), alloc_step


@covers("allocation.on_alloc")
def test_failing_batch_member_is_named_by_its_position():
    ok = {"a": 0, "b": 0, "bad": "EINVAL", "d": 0, "e": 0}
    passes(batch_of_five(ok)[0])
    trace, step = batch_of_five({**ok, "bad": "ENOSYS"})
    j = fails(trace, "req-type-unknown-einval")
    named = f"request 3 of 5 (bad, r2 in the trace) of the batch submitted at step {step}"
    assert j.divergence.message.endswith(f"the request has an invalid type 0 ({named})"), j.divergence.message


@covers("allocation.all_answered")
def test_unanswered_batch_member_is_named_by_its_position():
    trace, step = batch_of_five({"a": 0, "b": 0, "e": 0})
    j = fails(trace, "alloc-callback-on-completion")
    named = f"request 3 of 5 (bad, r2 in the trace) of the batch submitted at step {step}"
    assert f"observed no onAlloc for the {named} (1 more unanswered), allowed" in j.reason, j.reason


def test_single_request_why_keeps_the_step_alone():
    j = fails(alloc_once("ENOSYS", type_=0), "req-type-unknown-einval")
    assert j.divergence.message.endswith("the request has an invalid type 0 (request submitted at step 6)"), j.reason


def test_shared_cookie_why_says_it_covers_every_candidate():
    b = TB()
    for name in ("x", "y"):
        request(b, name, type_=0)
    b.call("alloc", reqs=["x", "y"], during=[b.cb("alloc", None, "ENOSYS", None), b.cb("alloc", None, "EINVAL", None)])
    j = fails(teardown(b, reqs=["x", "y"]), "req-type-unknown-einval")
    assert "(request 1 of 2 (x, r0 in the trace) of the batch submitted at step" in j.divergence.message
    assert j.divergence.message.endswith("; none of the 2 requests waiting with this cookie allows it"), j.reason


def test_is_supported_mismatch_names_both_requests_by_position():
    b = TB()
    request(b, "first", onalloc=False)
    request(b, "second", onalloc=False)
    b.extra(results=[True, True, False]).call("is_supported", reqs=["first", "second", "first"])
    j = fails(teardown(b, reqs=["first", "second"]), "support-tests-requests")
    assert j.divergence.message.endswith(
        "the same request, tested in one call: requests 1 and 3 of 3 (first, r0 in the trace; first, r0 in the trace)"
    ), j.divergence.message


@covers("allocation.refused_clause")
def test_a_refused_valid_request_names_the_field_that_was_blamed():
    """With the capacity declared the device owes a buffer: an "invalid argument" refusal names the sentence
    that makes the blamed field valid; any other refusal the capacity rule."""

    def refused(error: object, **fields: object) -> TB:
        b = TB()
        request(b)
        if "priority" in fields:
            b.call("req_set_priority", req="r", priority=fields["priority"])
        if "fd" in fields:
            b.call("req_set_file", req="r", fd={"fd": fields["fd"]}, file_offset=fields.get("file_offset", 0),
                   length=fields.get("length", 0), buffer_offset=0)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, error, None if error else "B1")])
        if not error:
            b.bind("b", "B1")
        return teardown(b, bufs=[] if error else ["b"], reqs=["r"])

    passes(refused(0, priority=1000), caps=VNPU)
    fails(refused("EINVAL", priority=1000), "priority-range-inclusive", caps=VNPU)
    fails(refused("EINVAL", priority=500), "alloc-supported-may-fail", caps=VNPU)
    passes(refused(0, fd=-1, file_offset=-5), caps=VNPU)
    fails(refused("EINVAL", fd=-1, file_offset=-5), "req-file-offset-ignored", caps=VNPU)
    fails(refused("EBADF", fd=-1), "req-file-fd-default", caps=VNPU)
    fails(refused("ENOMEM", fd=-1), "alloc-supported-may-fail", caps=VNPU)


@covers("mapping.pages_left_mapped")
def test_unmapped_pages_no_longer_map_the_buffer():
    def looked(still_mapped: bool) -> TB:
        b = mapped()
        b.call("buf_unmap", map="m", offset=0, length=8192)
        b.extra(mapped=still_mapped).call("map_gone", map="m", offset=0, length=8192, ret=0)
        return teardown(b, bufs=["b"], reqs=["r"])

    assert "unmap-unmaps" in passes(looked(False)).demonstrated
    fails(looked(True), "unmap-unmaps")


@covers("allocation.kept_memory_clause")
def test_a_refusal_only_kept_memory_explains_names_the_release():
    """Capacity 16 KiB: a buffer of 8 KiB freed (mapped: released at its last unmap), then a 16 KiB request
    that fits only because that memory came back."""

    def after_release(mapped_first: bool, error: object) -> TB:
        b = allocated(TB())
        if mapped_first:
            b.call("buf_map", map="m", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
        b.call("buf_free", bufs=["b"])
        if mapped_first:
            b.call("buf_unmap", map="m", offset=0, length=8192)
        request(b, "r2", size=16384)
        b.call("alloc", reqs=["r2"], during=[b.cb("alloc", None, error, None if error else "B2")])
        if not error:
            b.bind("b2", "B2")
        return teardown(b, bufs=[] if error else ["b2"], reqs=["r", "r2"])

    passes(after_release(True, 0), caps=VNPU)
    fails(after_release(True, "ENOMEM"), "free-memory-after-last-unmap", caps=VNPU)
    passes(after_release(False, 0), caps=VNPU)
    fails(after_release(False, "ENOMEM"), "free-indicates-not-needed", caps=VNPU)


@covers("allocation.released_memory_needed")
def test_a_grant_that_needs_the_last_unmaps_memory_demonstrates_it():
    """A 16 KiB buffer mapped, freed, unmapped; then a 16 KiB request granted. With 16 KiB of memory (acl:
    30000 bytes, no huge pool at that size) it fits only because the unmap gave the memory back; with 1 MiB
    it would fit anyway and shows nothing of that sentence."""
    shown = "free-memory-after-last-unmap"
    assert shown in passes(capacity_trace(True, 0, "B2"), caps=VNPU).demonstrated
    acl = DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=30000, policy="acl", vnpu_control=True)
    big = DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=1 << 20, policy="budget", vnpu_control=True)
    assert shown not in passes(capacity_trace(True, 0, "B2"), caps=big).demonstrated
    undeclared = DeviceCaps(supported_pairs=frozenset({PAIR}))
    assert shown not in passes(capacity_trace(True, 0, "B2"), caps=undeclared).demonstrated
    assert shown in passes(capacity_trace(True, 0, "B2"), caps=acl).demonstrated


def three_halves(answers: tuple[str, str, str]) -> TB:
    """One request of half the declared capacity submitted three times; the answers (a buffer handle "B<n>"
    or an errno) in the order given."""
    b = TB()
    request(b, "r", cookie="c", size=16384)
    b.call("alloc", reqs=["r", "r", "r"])
    granted = [a for a in answers if a.startswith("B")]
    b.emit(*(b.cb("alloc", "c", 0, a) if a in granted else b.cb("alloc", "c", a, None) for a in answers))
    for i, handle in enumerate(granted):
        b.bind(f"b{i}", handle)
    return teardown(b, bufs=[f"b{i}" for i in range(len(granted))], reqs=["r"], deleted=["c"])


@covers("allocation.valid_outcome")
def test_capacity_budget_counts_pending_requests_that_may_hold_memory():
    caps = replace(VNPU, capacity_bytes=32768)
    passes(three_halves(("B1", "B2", "ENOMEM")), caps=caps)
    # answered from several callback threads: the refusal may come before the second grant
    passes(three_halves(("B1", "ENOMEM", "B2")), caps=caps)
    passes(three_halves(("ENOMEM", "B1", "B2")), caps=caps)
    # two refused while two fit: not explained by the requests pending beside them
    fails(three_halves(("B1", "ENOMEM", "ENOMEM")), "alloc-supported-may-fail", caps=caps)
