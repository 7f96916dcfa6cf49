"""Compiling scenarios into probe programs (docs/formats.md §3)."""

import pytest

from host.probe import CompileError, Pairs, compile_program, compile_scenario
from host.suite import keyword_matches
from reference_model.errors import ScenarioInvalid
from reference_model.scenario import parse_scenario
from reference_model.vocabulary import VOCABULARY_HASH


def scenario(steps, requires=()):
    return parse_scenario(
        {"id": "t.x", "title": "t", "clauses": ["c"], "requires": list(requires), "steps": steps}, "t.yaml", "t"
    )


def test_handles_get_slots_by_kind_in_order_of_appearance():
    s = scenario(
        [
            {"req_create": {"req": "second"}},
            {"req_create": {"req": "first"}},
            {"cookie_new": {"cookie": "ck"}},
            {"req_set_cookie": {"req": "first", "cookie": "ck", "deleter": True}},
            {"req_set_cookie": {"req": "second", "cookie": None, "deleter": False}},
            {"req_set_cookie": {"req": "second", "cookie": 77, "deleter": False}},
            {"req_set_prot": {"req": "first", "prot": ["READ", "WRITE"]}},
            {"req_set_prot": {"req": "second", "prot": "NONE"}},
            {"alloc": {"reqs": ["first", "second"]}},
            {"bind": {"buf": "b", "select": {"cookie": "ck"}}},
            {"bind": {"buf": "b2", "select": {"nth": 1}}},
            {"buf_map": {"map": "m", "buf": "b", "length": "PAGE", "prot": ["READ"], "flags": ["SHARED"], "offset": 0}},
            {"vnpu": {"command": "preempt=b"}},
            {"buf_free": {"bufs": []}},
            {"req_set_file": {"req": "first", "fd": {"fd": -1}, "file_offset": 0, "length": 0, "buffer_offset": 0}},
        ]
    )
    compiled = compile_scenario(s, Pairs(None, None))
    assert compiled.lines == (
        "scenario t.x 5000",
        "req_create r0",
        "req_create r1",
        "cookie_new c0",
        "req_set_cookie r1 c0 1",
        "req_set_cookie r0 null 0",
        "req_set_cookie r0 raw:77 0",
        "req_set_prot r1 READ|WRITE",
        "req_set_prot r0 NONE",
        "alloc r1,r0",
        "bind b0 cookie:c0",
        "bind b1 nth:1",
        "buf_map m0 b0 4096 READ SHARED 0",
        "vnpu preempt=b0",
        "buf_free -",
        "req_set_file r1 fd:-1 0 0 0",
        "end",
    )
    assert compiled.slots == {"second": "r0", "first": "r1", "ck": "c0", "b": "b0", "b2": "b1", "m": "m0"}
    assert compile_program([compiled]).startswith(f"npuconf-program 2 {VOCABULARY_HASH}\nscenario t.x")


def test_pair_references_resolve_from_discovery():
    s = scenario(
        [{"req_create": {"req": "r"}}, {"req_set_device": {"req": "r", "device": "$pair.device"}},
         {"req_set_type": {"req": "r", "type": "$pair.type"}}],
        requires=["supported-pair"],
    )
    assert compile_scenario(s, Pairs((1, 2), None)).lines[2:4] == ("req_set_device r0 1", "req_set_type r0 2")
    with pytest.raises(CompileError, match=r"\$pair.device"):
        compile_scenario(s, Pairs(None, None))


def test_one_name_cannot_be_two_kinds():
    s = scenario([{"req_create": {"req": "x"}}, {"cookie_new": {"cookie": "x"}}])
    with pytest.raises(CompileError, match="used both"):
        compile_scenario(s, Pairs(None, None))


@pytest.mark.parametrize(
    ("expression", "name", "expected"),
    [
        ("cookie", "cookies.replace", True),
        ("not cookie", "cookies.replace", False),
        ("alloc or map", "mapping.after_free", True),
        ("alloc and map", "mapping.after_free", False),
        ("(alloc or map) and not free", "mapping.after_free", False),
        ("(alloc or map) and not free", "mapping.prot", True),
    ],
)
def test_keyword_expressions(expression, name, expected):
    assert keyword_matches(expression, name) is expected


@pytest.mark.parametrize("expression", ["and", "(a", "a b", "not"])
def test_bad_keyword_expressions_raise_value_error(expression):
    with pytest.raises(ValueError, match="-k"):
        keyword_matches(expression, "x")


def test_parallel_blocks_compile_to_prefixed_lines_in_step_order():
    s = scenario(
        [
            {"req_create": {"req": "r"}},
            {"parallel": [[{"alloc": {"reqs": ["r"]}}, {"sleep_ms": {"ms": 1}}], [{"req_create": {"req": "q"}}]]},
            {"cb_action": {"kind": "preempt", "action": "alloc_q", "count": 2}},
            {"cb_action": {"kind": "alloc", "action": "set_priority_-3", "count": 1}},
            {"cb_action": {"kind": "load", "action": "sleep_250", "count": 1}},
        ]
    )
    assert [(st.op.value, st.thread) for st in s.steps] == [
        ("req_create", None), ("par_begin", None), ("alloc", 0), ("sleep_ms", 0), ("req_create", 1),
        ("par_end", None), ("cb_action", None), ("cb_action", None), ("cb_action", None),
    ]
    assert compile_scenario(s, Pairs(None, None)).lines == (
        "scenario t.x 5000",
        "req_create r0",
        "par_begin 2",
        "@0 alloc r0",
        "@0 sleep_ms 1",
        "@1 req_create r1",
        "par_end",
        "cb_action preempt alloc_r1 2",
        "cb_action alloc set_priority_-3 1",
        "cb_action load sleep_250 1",
        "end",
    )


@pytest.mark.parametrize(
    ("steps", "field", "expected"),
    [
        ([{"parallel": [[{"sleep_ms": {"ms": 1}}]]}], "steps[0].parallel", "2 to 16 lists"),
        ([{"parallel": [[{"sleep_ms": {"ms": 1}}], []]}], "steps[0].parallel[1]", "non-empty list of steps"),
        ([{"parallel": [[{"sleep_ms": {"ms": 1}}], [{"parallel": []}]]}], "steps[0].parallel[1][0]", "do not nest"),
        ([{"parallel": [[{"sleep_ms": {"ms": 1}}], [{"sleep_ms": {"ms": "x"}}]]}],
         "steps[0].parallel[1][0].sleep_ms.ms", "an int"),
        ([{"par_begin": {"threads": 2}}], "steps[0]", "other than par_begin/par_end"),
        ([{"cb_action": {"kind": "free", "action": "none", "count": 0}}], "steps[0].cb_action.kind", "one of alloc"),
        ([{"cb_action": {"kind": "alloc", "action": "unmap", "count": 1}}], "steps[0].cb_action.action", "free_buf"),
        ([{"cb_action": {"kind": "alloc", "action": "alloc_r", "count": 1}}], "steps[0].cb_action.action",
         "a request an earlier step used"),
        ([{"cb_action": {"kind": "alloc", "action": "set_priority_9999999999", "count": 1}}],
         "steps[0].cb_action.action", "int32"),
        ([{"cb_action": {"kind": "alloc", "action": "sleep_0", "count": 1}}], "steps[0].cb_action.action",
         "sleep_<ms 1..9999>"),
        ([{"cb_action": {"kind": "alloc", "action": "sleep_10000", "count": 1}}], "steps[0].cb_action.action",
         "sleep_<ms 1..9999>"),
        ([{"cb_action": {"kind": "alloc", "action": "none", "count": 1}}], "steps[0].cb_action.count",
         "0 for action none"),
        ([{"parallel": [[{"sleep_ms": {"ms": 1}}], [{"cb_action": {"kind": "load", "action": "free_buf",
                                                                    "count": 0}}]]}],
         "steps[0].parallel[1][0].cb_action.count", "at least 1"),
    ],
)
def test_parallel_and_cb_action_errors_name_the_field(steps, field, expected):
    with pytest.raises(ScenarioInvalid) as info:
        scenario(steps)
    message = str(info.value)
    assert message.startswith(f"t.yaml: scenario t.x: {field}: expected "), message
    assert expected in message and "\n" not in message
