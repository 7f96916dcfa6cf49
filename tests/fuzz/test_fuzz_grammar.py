"""The fuzz grammar (host/fuzz/grammar.py): every API operation of the vocabulary has its cells, and a
program's steps are named by op x context x class (host/fuzz/cells.py)."""

from __future__ import annotations

from host.fuzz.cells import program_cells
from host.fuzz.grammar import ALLOWED, BY_OP, CONTEXTS, allowed, api_ops
from reference_model.vocabulary import OPS


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
