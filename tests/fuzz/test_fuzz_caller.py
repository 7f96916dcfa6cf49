"""The fuzz caller's one model (host/fuzz/caller.py): the generator draws through its rules, the legality
check replays through the same rules, and the shrinker refuses a candidate whose step a precondition
refuses."""

from __future__ import annotations

import time
from collections import Counter
from itertools import product

import pytest

from host.fuzz import caller, generate
from host.fuzz.caller import RULE_LIST, RULES, Caller, Illegal, item_steps
from host.fuzz.execute import Result
from host.fuzz.legal import check
from host.fuzz.shrink import _Clock, _first_match, shrink
from host.fuzz.steer import CANDIDATES
from host.suite import load_catalogue
from reference_model.scenario import parse_scenario
from reference_model.verdicts import Verdict
from reference_model.vocabulary import OPS, Op


def _programs(seeds=(1, 2, 3), count=100):
    """300 programs (seeds x indexes, every candidate the steering chooses among) for each capability set:
    vnpu control and loads on and off, 64-bit ABI and an unsupported pair, and a device whose pair
    discovery failed."""
    for control, loads in product((True, False), repeat=2):
        for seed, index in product(seeds, range(count)):
            yield generate(seed, index, vnpu_control=control, loads=loads, pointer64=control, unsupported=control,
                           variant=index % CANDIDATES)
    for seed, index in product(seeds, range(count)):
        yield generate(seed, index, vnpu_control=True, pair=False, variant=index % CANDIDATES)


def _emitted_ops() -> set[str]:
    # await_closed is rare (a buffer freed unmapped after an awaited load): seed 11 has one in 300.
    programs = [*_programs(), *(generate(11, index, vnpu_control=True, pointer64=True) for index in range(300))]
    return {op for program in programs for item in program["steps"] for op, _ in item_steps(item)}


def test_every_generated_program_is_legal_by_the_model():
    known = load_catalogue().ids()
    for program in _programs():
        assert check(program) is None, (program["id"], check(program))
        parse_scenario(program, "fuzz", "fuzz", known)  # also valid as a scenario (no $pair without the pair)


def test_every_op_the_generator_emits_has_exactly_one_rule():
    emitted = _emitted_ops()
    assert Counter(rule.op for rule in RULE_LIST).most_common(1)[0][1] == 1  # no op has two rules
    assert emitted <= set(RULES), emitted - set(RULES)
    assert set(RULES) <= emitted, set(RULES) - emitted  # no rule for an op the generator never makes
    # Every rule is for an op of the vocabulary's table (a parallel item is its par_begin .. par_end).
    vocabulary = {str(op) for op in OPS}
    assert {("par_begin" if op == caller.PARALLEL else op) for op in RULES} <= vocabulary
    # Every op of the vocabulary has one (the whole API, its crashes as a program's last step); a name
    # without one is refused.
    assert {Op(op) for op in RULES if op != caller.PARALLEL} == set(OPS) - {Op.PAR_BEGIN, Op.PAR_END}
    with pytest.raises(Illegal, match="not an op of fuzz programs"):
        Caller().take("wait_return", {})


def test_generator_and_check_share_the_rules(monkeypatch):
    """A precondition changed in the model changes both: the generator refuses to make the step, and the
    check refuses a program that has it."""
    program = next(p for p in _programs() if any("buf_set_priority" in item for item in p["steps"]))
    assert check(program) is None

    def refused(c, a):
        raise Illegal("refused for the test")

    monkeypatch.setitem(RULES, "buf_set_priority", caller.Rule("buf_set_priority", refused))
    assert "refused for the test" in (check(program) or "")
    with pytest.raises(Illegal, match="refused for the test"):
        for _ in _programs():
            pass


BOUND = [
    {"req_create": {"req": "r"}}, {"req_set_device": {"req": "r", "device": "$pair.device"}},
    {"req_set_type": {"req": "r", "type": "$pair.type"}}, {"req_set_size": {"req": "r", "size": 8192}},
    {"req_set_prot": {"req": "r", "prot": ["READ", "WRITE"]}}, {"req_set_onalloc": {"req": "r", "set": True}},
    {"cookie_new": {"cookie": "c"}}, {"req_set_cookie": {"req": "r", "cookie": "c", "deleter": True}},
    {"alloc": {"reqs": ["r"]}}, {"await_alloc": {"count": 1, "timeout_ms": 2000}},
    {"bind": {"buf": "b", "select": {"cookie": "c"}}},
]
MAP_READ = [{"buf_map": {"map": "m", "buf": "b", "length": 4096, "prot": ["READ"], "flags": ["SHARED"],
                         "offset": 0}},
            {"map_read": {"map": "m", "offset": 0, "length": 4096}}]


def _program(steps):
    return {"id": "fuzz.caller", "title": "t", "clauses": ["alloc-async"], "requires": ["supported-pair"],
            "timeout_ms": 20000, "steps": steps}


def _failing_on_map_read(ran):
    """A target on which any program with a map_read FAILs (clause x): a candidate without the bind still
    would, so only the preconditions keep it from running."""
    def run(programs):
        ran.extend(programs)
        return [Result(p["id"], Verdict.FAIL if any("map_read" in s for s in p["steps"]) else Verdict.PASS, "",
                       "x", None, {}) for p in programs]

    return run


def test_a_shrink_candidate_that_breaks_a_precondition_is_refused():
    current = _program([*BOUND, *MAP_READ])
    unbound = _program([*BOUND[:-1], *MAP_READ])  # the bind dropped: the map is of a handle never bound
    assert check(current) is None and "buffer b is not bound" in (check(unbound) or "")
    ran: list[dict] = []
    clock = _Clock(_failing_on_map_read(ran), time.monotonic() + 30)
    better, tried = _first_match([unbound], lambda result: result.verdict is Verdict.FAIL, clock, current)
    assert (better, tried, ran) == (None, 0, [])


def test_the_shrinker_runs_only_candidates_the_model_accepts():
    ran: list[dict] = []
    found = Result("fuzz.caller", Verdict.FAIL, "", "x", None, {})
    shrunk, tried = shrink(_program([*BOUND, *MAP_READ]), found, _failing_on_map_read(ran), time.monotonic() + 30)
    assert tried == len(ran) > 0
    assert all(check(program) is None for program in ran)
    # Everything the map_read needs stays: the request's setup, its allocation, the bind and the map.
    assert check(shrunk) is None and any("bind" in step for step in shrunk["steps"])
