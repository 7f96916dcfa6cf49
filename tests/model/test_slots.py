"""Slots are assigned once (reference_model/slots.py): the program compiler, the judge and the model
tests' trace builder agree on every scenario of the corpus (docs/formats.md §3, "Slots")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from host.probe import CompileError, Pairs, compile_scenario
from host.suite.checkout import SCENARIO_ROOT
from host.suite.corpus import load_corpus
from host.suite.safe_yaml import load_yaml_file
from reference_model.caps import DeviceCaps
from reference_model.errors import ModelCrash
from reference_model.judge import judge, make_ctx
from reference_model.scenario import Parallel, Scenario, parse_scenario
from reference_model.slots import MAX_SLOTS, SlotError, assign_slots
from reference_model.verdicts import Verdict
from reference_model.vocabulary import OPS, ArgKind, Op
from tests.model.builder import TB

CORPUS = load_corpus()
PAIRS = Pairs((0, 1), (5, 6))
CAPS = DeviceCaps(supported_pairs=frozenset({(0, 1)}))


def _raw_steps() -> dict[str, list[Any]]:
    """The corpus's steps as written in YAML (the form the trace builder takes), by scenario id."""
    out: dict[str, list[Any]] = {}
    for path in sorted(SCENARIO_ROOT.glob("*/*.yaml")):
        data = load_yaml_file(path)
        for item in data["scenarios"] if isinstance(data, dict) and "scenarios" in data else [data]:
            out[item["id"]] = item["steps"]
    return out


RAW = _raw_steps()


def _builder_args(args: dict[str, Any] | None) -> dict[str, Any]:
    """A step's args as the builder takes them: its scenarios require nothing (`$pair.*` become ints)
    and it writes no prot as []."""
    def plain(v: Any) -> Any:
        return 0 if isinstance(v, str) and v.startswith("$") else [] if v == "NONE" else v
    return {k: plain(v) for k, v in (args or {}).items()}


def _slot_tokens(op: Op, tokens: list[str]) -> dict[str, str]:
    """The program line's tokens of the arguments that name slots, by argument name."""
    out: dict[str, str] = {}
    for spec, token in zip(OPS[op].args, tokens, strict=True):
        if spec.kind in (ArgKind.REQ, ArgKind.MAP, ArgKind.FILE, ArgKind.REQS, ArgKind.COOKIE,
                         ArgKind.FDSEL, ArgKind.BINDSEL, ArgKind.TEXT):
            out[spec.name] = token
    return out


def _echo_tokens(op: Op, echo: dict[str, Any]) -> dict[str, str]:
    """The builder's echo of the same arguments, written the way the program writes them."""
    out: dict[str, str] = {}
    for spec in OPS[op].args:
        v = echo[spec.name]
        kind = spec.kind
        if kind in (ArgKind.REQ, ArgKind.MAP, ArgKind.FILE, ArgKind.TEXT):
            out[spec.name] = str(v)
        elif kind is ArgKind.REQS:
            out[spec.name] = ",".join(v) or "-"
        elif kind is ArgKind.COOKIE:
            out[spec.name] = "null" if v is None else str(v)
        elif kind is ArgKind.FDSEL:
            out[spec.name] = v if isinstance(v, str) else f"fd:{v}"
        elif kind is ArgKind.BINDSEL:
            out[spec.name] = f"cookie:{v['cookie']}" if "cookie" in v else f"nth:{v['nth']}"
    return out


def _compiled(scenario: Scenario):
    try:
        return compile_scenario(scenario, PAIRS)
    except CompileError as exc:
        pytest.fail(f"{scenario.id}: {exc}")


@pytest.mark.parametrize("scenario", CORPUS, ids=lambda s: s.id)
def test_compiler_and_judge_use_one_slot_map(scenario: Scenario) -> None:
    compiled = _compiled(scenario)
    assert dict(compiled.slots) == dict(assign_slots(scenario.steps).names)
    assert dict(make_ctx(scenario, CAPS, "published-37").names) == dict(compiled.slots)
    # The judge handed the program's map accepts it (a trace that is not even begun: ERROR, not a raise).
    assert judge(scenario, [], CAPS, {}, slots=compiled.slots).verdict is Verdict.ERROR


def test_the_trace_builder_echoes_the_slots_the_compiler_writes() -> None:
    """Every step of every single-threaded corpus scenario, fed to the builder: the slots in its call
    events are the tokens of the compiled program line (cb_action's action is the compiler's own)."""
    checked = 0
    for scenario in CORPUS:
        if any(isinstance(item, Parallel) for item in scenario.body):
            continue  # the builder writes no parallel blocks
        lines = _compiled(scenario).lines[1:-1]
        b = TB(scenario.id)
        for index, (raw, line) in enumerate(zip(RAW[scenario.id], lines, strict=True)):
            ((op_name, args),) = raw.items()
            op = Op(op_name)
            if op is Op.CB_ACTION:
                b.steps.append({op_name: args})
                continue
            b.call(op_name, **_builder_args(args))
            echo = next(ev for ev in map(json.loads, reversed(b.lines)) if ev["ev"] == "call")["args"]
            assert _echo_tokens(op, echo) == _slot_tokens(op, line.split()[1:]), (scenario.id, index, line)
            checked += 1
        assert b.slots == dict(assign_slots(parse_scenario(
            {"id": scenario.id, "title": "t", "clauses": ["c"], "steps": b.steps}, "<t>", "t").steps).names)
    assert checked > 1000  # most of the corpus is single-threaded


def test_a_recorded_map_that_differs_is_a_kit_bug_not_a_verdict() -> None:
    scenario = next(s for s in CORPUS if len(assign_slots(s.steps).names) >= 2)
    recorded = dict(_compiled(scenario).slots)
    first, second = list(recorded)[:2]
    recorded[first], recorded[second] = recorded[second], recorded[first]
    with pytest.raises(ModelCrash, match=f"scenario {scenario.id}: the program gave handle"):
        judge(scenario, [], CAPS, {}, slots=recorded)


def _scenario(steps: list[dict[str, Any]]) -> Scenario:
    return parse_scenario({"id": "t.slots", "title": "t", "clauses": ["c"], "steps": steps}, "t.yaml", "t")


def test_one_name_of_two_kinds_has_no_slot_anywhere() -> None:
    s = _scenario([{"req_create": {"req": "x"}}, {"bind": {"buf": "x", "select": {"nth": 0}}}])
    with pytest.raises(SlotError, match="handle 'x' is used both as r and b"):
        assign_slots(s.steps)
    with pytest.raises(CompileError, match=r"scenario t\.slots: handle 'x' is used both as r and b"):
        compile_scenario(s, PAIRS)
    trace = ['{"ev":"begin","scenario":"t.slots","pid":1,"t":1}',
             '{"ev":"exit","scenario":"t.slots","status":"ok","code":0,"signal":null,"t":2}']
    j = judge(s, trace, CAPS, {})
    assert j.verdict is Verdict.ERROR
    assert j.reason == "scenario t.slots has no probe program: handle 'x' is used both as r and b"


def test_slots_are_numbered_per_kind_up_to_the_probe_limit() -> None:
    steps = [{"req_create": {"req": f"r{i}"}} for i in range(MAX_SLOTS)] + [{"cookie_new": {"cookie": "k"}}]
    slots = assign_slots(_scenario(steps).steps)
    assert slots.names["r255"] == "r255" and slots.names["k"] == "c0" and slots.first_step["k"] == MAX_SLOTS
    with pytest.raises(SlotError, match=f"more than {MAX_SLOTS} handles of one kind"):
        assign_slots(_scenario([*steps, {"req_create": {"req": "extra"}}]).steps)
