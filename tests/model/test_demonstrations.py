"""What a trace demonstrates (State.shown, the judge's `demonstrated`): only what it showed, never what a
legal refusal, a departure from a reading or a failure kept from happening."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import yaml

from reference_model import rules
from reference_model.caps import DeviceCaps
from reference_model.verdicts import Verdict

from .builder import PAIR, ROOT, TB, allocated, request, teardown
from .test_rules_alloc_map import digest

VNPU = DeviceCaps(supported_pairs=frozenset({PAIR}), capacity_bytes=1 << 20, policy="budget", vnpu_control=True)
FILE_SEED = 7


def test_every_testable_clause_can_be_demonstrated_by_a_registered_function():
    clauses = yaml.safe_load((ROOT / "conformance" / "clauses.yaml").read_text())["clauses"]
    testable = {c["id"] for c in clauses if c["testability"] != "not-testable"}
    shown = {cid for ids in rules.demonstration_clauses().values() for cid in ids}
    assert not testable - set(shown)
    assert not set(shown) - testable  # nothing demonstrates a sentence the kit cannot test


def test_each_literal_a_function_shows_is_registered_for_it():
    """A `show(state, "clause", ...)` with literal clause IDs names only clauses its function's @shows lists."""
    registered = {name.split(".")[1]: set(ids) for name, ids in rules._SHOWS.items()}
    package = Path(inspect.getfile(rules)).parent
    unregistered: list[str] = []
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "show":
                    literals = {a.value for a in node.args[1:] if isinstance(a, ast.Constant)}
                    literals |= {v.value for a in node.args[1:] if isinstance(a, ast.IfExp)
                                 for v in (a.body, a.orelse) if isinstance(v, ast.Constant)}
                    missing = literals - registered.get(fn.name, set())
                    unregistered += [f"{path.stem}.{fn.name}: {c}" for c in sorted(missing)]
    assert not unregistered


def _loaded(*, file_offset: int, answer: object = 0, read: str | None = None) -> TB:
    """A 3-page buffer written whole, a load of 4096 bytes at ``file_offset`` to buffer offset 4096, and the
    whole buffer read back (``read``: the digest of its middle page; the rest as written)."""
    b = TB()
    allocated(b, size=12288)
    b.call("buf_map", map="w", buf="b", length=12288, prot=["READ", "WRITE"], flags=["SHARED"], offset=0)
    b.call("map_write", map="w", offset=0, length=12288, seed=9)
    b.call("buf_unmap", map="w", offset=0, length=12288)
    b.call("file_new", file="f", size=12288, seed=FILE_SEED)
    b.call("buf_load", buf="b", fd="f", file_offset=file_offset, length=4096, buffer_offset=4096, onload=True)
    b.emit(b.cb("load", None, answer, "B1"))
    b.call("buf_map", map="m", buf="b", length=12288, prot=["READ"], flags=["SHARED"], offset=0)
    b.extra(digest=digest(9, 4096)).call("map_read", map="m", offset=0, length=4096)
    if read is not None:
        b.extra(digest=read).call("map_read", map="m", offset=4096, length=4096)
    b.extra(digest=digest(9, 4096, 8192)).call("map_read", map="m", offset=8192, length=4096)
    return teardown(b, bufs=["b"], reqs=["r"], maps=["m"])


def test_a_load_read_back_demonstrates_its_offsets_and_an_error_demonstrates_none():
    done = _loaded(file_offset=4096, read=digest(FILE_SEED, 4096, 4096)).judge()
    assert done.verdict is Verdict.PASS, done.reason
    assert {"load-async", "load-file-offset", "load-buffer-offset-nonnegative", "load-length-nonnegative"} <= set(
        done.demonstrated)
    at_zero = _loaded(file_offset=0, read=digest(FILE_SEED, 4096)).judge()
    assert "load-async" in at_zero.demonstrated and "load-file-offset" not in at_zero.demonstrated
    # A valid load answered EIO is allowed (R8): the bytes it was to load are unknown, so nothing shows them.
    failed = _loaded(file_offset=4096, answer="EIO").judge()
    assert failed.verdict is Verdict.WARN and "R8" in failed.reason
    assert not {"load-async", "load-file-offset"} & set(failed.demonstrated)
    assert "load-callback-same-buf" in failed.demonstrated  # the onLoad with its error did show that
    # Bytes taken from elsewhere in the file (the descriptor's position) name the file offset.
    wrong = _loaded(file_offset=4096, read=digest(FILE_SEED, 4096, 0)).judge()
    assert wrong.verdict is Verdict.FAIL and wrong.divergence is not None
    assert wrong.divergence.clause == "load-file-offset"
    assert wrong.demonstrated == ()
    # With the file read from its start, wrong bytes at buffer offset 4096 name that offset (a device loading
    # to the buffer's start leaves others there), not the summary sentence.
    elsewhere = _loaded(file_offset=0, read=digest(9, 4096, 4096 * 2)).judge()
    assert elsewhere.divergence is not None and elsewhere.divergence.clause == "load-buffer-offset-nonnegative"


def test_a_refused_allocation_demonstrates_nothing_of_what_would_follow():
    b = TB()
    request(b, cookie="c")
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", "c", "ENOMEM", None)])
    b.call("bind", buf="b", select={"nth": 0})
    refused = teardown(b, reqs=["r"], deleted=["c"]).judge()
    assert refused.verdict is Verdict.PASS, refused.reason
    shown = set(refused.demonstrated)
    assert "alloc-supported-may-fail" in shown and "alloc-errornum-iff-buf" in shown
    assert not {"map-maps-buffer", "free-each-allocated-buffer", "req-size-bytes"} & shown


def test_a_default_is_demonstrated_only_by_a_request_that_kept_it():
    def prot_refused(set_prot: bool) -> TB:
        b = TB()
        b.call("req_create", req="r")
        b.call("req_set_device", req="r", device=PAIR[0])
        b.call("req_set_type", req="r", type=PAIR[1])
        b.call("req_set_size", req="r", size=8192)
        if set_prot:
            b.call("req_set_prot", req="r", prot=["READ"])
        b.call("req_set_onalloc", req="r", set=True)
        b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, 0, "B1")])
        b.bind("b", "B1")
        b.call("buf_map", map="w", buf="b", length=8192, prot=["READ", "WRITE"], flags=["SHARED"], offset=0, ret=-1,
               errno="EACCES")
        return teardown(b, bufs=["b"], reqs=["r"])

    kept = prot_refused(False).judge()
    assert {"req-prot-default-read", "map-prot-subset", "cookie-default-null"} <= set(kept.demonstrated)
    overwritten = prot_refused(True).judge()
    assert "map-prot-subset" in overwritten.demonstrated
    assert "req-prot-default-read" not in overwritten.demonstrated


def test_a_read_write_map_of_a_buffer_whose_protection_was_never_set_fails_the_default():
    b = request(TB(), prot=None)
    b.call("alloc", reqs=["r"], during=[b.cb("alloc", None, 0, "B1")])
    b.bind("b", "B1")
    b.call("buf_map", map="w", buf="b", length=8192, prot=["READ", "WRITE"], flags=["SHARED"], offset=0)
    judged = teardown(b, bufs=["b"], reqs=["r"], maps=["w"]).judge()
    assert judged.verdict is Verdict.FAIL and judged.divergence is not None
    assert judged.divergence.clause == "req-prot-default-read"


def test_histories_that_differ_keep_only_what_all_demonstrated():
    """preempt=lowest without a declared victim order: the victim is the one the trace shows."""
    b = TB()
    allocated(b, "r", "b", "B1", cookie="c1", onpreempt=True)
    allocated(b, "q", "d", "B2", cookie="c2", onpreempt=True)
    caps = DeviceCaps(supported_pairs=frozenset({PAIR}), vnpu_control=True)
    b.call("vnpu", command="preempt=lowest", during=[b.cb("preempt", "c2")])
    b.call("buf_map", map="m", buf="d", length=8192, prot=["READ"], flags=["SHARED"], offset=0, ret=-1,
           errno="ENOENT")
    b.call("buf_map", map="n", buf="b", length=8192, prot=["READ"], flags=["SHARED"], offset=0)
    judged = teardown(b, bufs=["b", "d"], reqs=["r", "q"], deleted=["c1", "c2"], maps=["n"]).judge(caps=caps)
    assert judged.verdict is Verdict.PASS, judged.reason
    assert {"preempt-onpreempt-purpose", "preempt-map-fails-after-callback"} <= set(judged.demonstrated)


def test_alike_submissions_of_requests_changed_differently_keep_only_what_either_answer_shows():
    """Two requests submitted alike (NULL cookie), the first changed to an invalid size after allocAsync: the
    success and the refusal that follow may answer either one, so the success shows the snapshot only in one
    history, and the trace does not demonstrate it."""
    b = TB()
    request(b, "r1", size=4096)
    request(b, "r2", size=4096)
    b.call("alloc", reqs=["r1"])
    b.call("alloc", reqs=["r2"])
    b.call("req_set_size", req="r1", size=-1)
    b.emit(b.cb("alloc", None, 0, "B1"), b.cb("alloc", None, "EIO", None))
    judged = teardown(b, bufs=["B1"], reqs=["r1", "r2"]).judge()
    assert judged.verdict is Verdict.PASS, judged.reason
    assert "alloc-snapshot" not in judged.demonstrated
    assert "alloc-elements-modify-after-return" in judged.demonstrated  # either answer shows that

    # The same when the requests are alike at the first answer and one changes only before the second: which
    # one is still pending depends on whom the first answer was for.
    b = TB()
    request(b, "r1", size=4096)
    request(b, "r2", size=4096)
    b.call("alloc", reqs=["r1"])
    b.call("alloc", reqs=["r2"])
    b.emit(b.cb("alloc", None, 0, "B1"))
    b.call("req_set_size", req="r2", size=-1)
    b.emit(b.cb("alloc", None, 0, "B2"))
    judged = teardown(b, bufs=["B1", "B2"], reqs=["r1", "r2"]).judge()
    assert judged.verdict is Verdict.PASS, judged.reason
    assert "alloc-snapshot" not in judged.demonstrated
