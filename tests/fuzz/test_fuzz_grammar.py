"""The fuzz grammar (host/fuzz/grammar.py): every API operation of the vocabulary has its cells, a
program's steps are named by op x context x class (host/fuzz/cells.py), the generator alone reaches every
cell the grammar allows within a bounded number of programs of seed 0, steered as a campaign steers
(host/fuzz/steer.py), and reaches no cell the grammar does not describe; a campaign's coverage and its
clauses x outcomes (host/fuzz/coverage.py)."""

from __future__ import annotations

from host.fuzz.cells import program_cells
from host.fuzz.coverage import Coverage, judgeable_clauses, judged_of, render
from host.fuzz.grammar import ALLOWED, BY_OP, CONTEXTS, allowed, api_ops
from host.fuzz.steer import Scorer, choose, kit_prior
from reference_model.verdicts import Verdict
from reference_model.vocabulary import OPS

# Seed 0 reached every cell in 550 programs when this was written (seeds 1-5: 400 to 800).
SEED_0_PROGRAMS = 1000
BATCH = 50  # as a campaign's batches: one coverage snapshot steers a batch


def test_every_api_operation_of_the_vocabulary_has_cells_in_every_context_it_takes():
    assert api_ops() <= set(BY_OP), api_ops() - set(BY_OP)
    assert len(api_ops()) == len({OPS[op].api for op in api_ops()}) + 2  # free(NULL), setOnAlloc(NULL request)
    ops_of = {op for op, _, _ in ALLOWED}
    assert {str(op) for op in api_ops()} <= ops_of
    assert {context for _, context, _ in ALLOWED} == set(CONTEXTS)
    # Fewer capabilities, fewer cells: no preemption window without vnpu control, no load without loads.
    small = allowed(control=False, loads=False, pointer64=False, unsupported=False)
    assert small < ALLOWED
    assert not {cell for cell in small if cell[1] in ("preempt_window", "in_onpreempt", "during_load")}
    assert ("req_set_cookie", "main", "integer_64") not in small and ("buf_load", "main", "whole") not in small


def _program(steps):
    return {"id": "fuzz.cells", "title": "t", "clauses": ["alloc-async"], "requires": ["supported-pair"],
            "timeout_ms": 20000, "steps": steps}


REQUEST = [
    {"req_create": {"req": "r"}}, {"req_set_device": {"req": "r", "device": "$pair.device"}},
    {"req_set_type": {"req": "r", "type": "$pair.type"}}, {"req_set_size": {"req": "r", "size": 8192}},
    {"req_set_onalloc": {"req": "r", "set": True}}, {"req_set_onpreempt": {"req": "r", "set": True}},
    {"cookie_new": {"cookie": "c"}}, {"req_set_cookie": {"req": "r", "cookie": "c", "deleter": True}},
]
BOUND = [*REQUEST, {"alloc": {"reqs": ["r"]}}, {"bind": {"buf": "b", "select": {"cookie": "c"}}}]


def test_steps_are_named_by_op_context_and_classes():
    cells = program_cells(_program([
        *REQUEST[:4], {"req_set_size": {"req": "r", "size": -1}}, *REQUEST[4:],
        {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 2000}},
        {"req_set_size": {"req": "r", "size": 8192}},
        {"alloc": {"reqs": ["r"]}}, {"bind": {"buf": "b", "select": {"cookie": "c"}}},
        # the default protection is READ: a read-write map is wider, refused
        {"buf_map": {"map": "w", "buf": "b", "length": 4096, "prot": ["READ", "WRITE"], "flags": ["SHARED"],
                     "offset": 0}},
        {"buf_map": {"map": "m", "buf": "b", "length": 4097, "prot": ["READ"], "flags": ["PRIVATE"], "offset": 0}},
        {"map_prot": {"map": "m", "offset": 0, "length": 4097}},
        {"buf_free": {"bufs": ["b"]}},
        {"map_read": {"map": "m", "offset": 4090, "length": 7}},
        {"buf_unmap": {"map": "m", "offset": 0, "length": 4097}},
        {"cb_action": {"kind": "alloc", "action": "set_priority_1000", "count": 1}},
    ]))
    expected = {
        ("req_set_size", "main", "negative"), ("req_set_size", "main", "again"),
        ("req_set_size", "main", "after_submit"), ("alloc", "main", "one"), ("alloc", "main", "after_failure"),
        ("buf_map", "main", "prot=wider"), ("buf_map", "main", "length=unaligned"),
        ("buf_map", "main", "flags=private"), ("buf_map", "main", "after_failure"), ("map_prot", "main", "whole"),
        ("buf_free", "main", "mapped"), ("map_read", "after_free", "odd_range"),
        ("buf_unmap", "after_free", "unaligned_length"), ("buf_set_priority", "in_onalloc", "max"),
    }
    assert expected <= cells, expected - cells
    assert ("alloc", "main", "after_failure") not in program_cells(_program([*BOUND]))


def test_threads_and_windows_are_contexts():
    cells = program_cells(_program([
        *BOUND,
        {"vnpu": {"command": "preempt_late=b"}},
        {"buf_map": {"map": "m", "buf": "b", "length": 4096, "prot": ["READ"], "flags": ["SHARED"], "offset": 0}},
        {"await_preempt": {"count": 1, "timeout_ms": 2000}},
        {"buf_set_priority": {"buf": "b", "priority": 1001}},
        {"parallel": [[{"req_create": {"req": "p"}}], [{"req_create": {"req": "q"}}, {"req_free": {"req": "q"}}]]},
    ]))
    assert {("buf_map", "preempt_window", "buffer=preempted"), ("buf_set_priority", "main", "above"),
            ("buf_set_priority", "main", "preempted"), ("req_create", "concurrent", "fresh"),
            ("req_free", "thread", "live")} <= cells


def test_seed_0_reaches_every_allowed_cell_within_a_bounded_number_of_programs():
    """The generator alone (no device), steered as a campaign steers with nothing judged yet."""
    coverage = Coverage(ALLOWED)
    prior = kit_prior()
    for start in range(0, SEED_0_PROGRAMS, BATCH):
        scorer = Scorer(coverage.snapshot(), prior)
        for index in range(start, start + BATCH):
            drawn = choose(scorer, 0, index, vnpu_control=True, pointer64=True, unsupported=True)
            coverage.record(drawn.cells, set())
        if not coverage.missed():
            break
    assert coverage.missed() == [], coverage.missed()
    assert set(coverage.reached) <= ALLOWED, set(coverage.reached) - ALLOWED  # the grammar describes them all


def test_a_judged_program_gives_clauses_x_outcomes():
    assert judged_of(Verdict.PASS, None, "ok", ("map-maps-buffer",)) == {("map-maps-buffer", "shown")}
    warned = judged_of(Verdict.WARN, None, "departs from the kit's reading(s) R6 (mappings)", ("alloc-async",))
    assert warned == {("alloc-async", "shown"), ("R6", "warned")}
    assert judged_of(Verdict.FAIL, "free-returns", "x", ()) == {("free-returns", "failed")}
    assert judged_of(Verdict.CRASH, None, "died", ()) == {("CRASH", "crashed")}
    assert judged_of(Verdict.TIMEOUT, None, "slow", ()) == set()


def test_coverage_names_the_cells_missed_and_the_clauses_not_judged():
    cell, other = ("buf_map", "main", "length=zero"), ("buf_free", "main", "empty")
    coverage = Coverage(frozenset({cell, other}), judgeable_clauses(
        {"free-returns": "device", "preempt-map-enoent": "virtual-only", "req-type-not-io": "not-testable"},
        control=False))
    coverage.record({cell}, {("free-returns", "shown")})
    assert coverage.missed() == [other] and coverage.unjudged() == []
    lines = render(coverage)
    assert "1 of 2 grammar cells" in lines[0] and "buf_map  main: length=zero" in "\n".join(lines)
    assert "buf_free  main: !empty" in "\n".join(lines) and "missed: 1 cells: buf_free/main/empty" in lines
    assert any("judged: 1 of 1 testable clauses" in line for line in lines)
    summary = coverage.summary()
    assert summary["cells_missed"] == [list(other)] and summary["judged"]["shown"] == 1


def test_a_preempt_window_under_a_taken_capacity_asks_onpreempt_only_of_a_buffer_it_can_have():
    """Seed 0, program 6534, candidate 1, on a device declaring 256 MiB: a 256 MiB request took the capacity
    and the only quiet buffer has no onPreempt; the window's move once allocated a new buffer anyway and
    bound it, which the caller's model refuses (the allocation cannot be granted). It now takes the buffer
    there is."""
    from host.fuzz.generate import draw
    from host.fuzz.legal import check

    drawn = draw(0, 6534, vnpu_control=True, pointer64=True, pair=True, unsupported=True, capacity=256 << 20,
                 variant=1)
    assert check(drawn.program, capacity=256 << 20) is None
