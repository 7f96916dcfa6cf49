"""reports.answers.findings: failure order, the line a verdict rests on, replay commands, clauses not demonstrated."""

from __future__ import annotations

from synthetic_results import DIVERGENCE, ResultsBuilder, load, scenario, trace_lines

from reports.answers.findings import coverage_gaps, findings, focus_line, replay_command, trace_excerpt
from tests.conftest import PRINTED_NPUCONF


def test_replay_repeats_the_options_that_change_what_runs(builder: ResultsBuilder):
    options = {"impl": "/tmp/my lib.so", "personality": "aosp-2026", "policy": "budget", "profile": "aosp-2026"}
    builder.plan(["local"], [scenario("alloc.x")], target="local", profile="aosp-2026", options=options)
    run = load(builder.result("local", "alloc.x", "FAIL", divergence=DIVERGENCE).write())
    assert replay_command(run, run.results[0]) == (
        f"{PRINTED_NPUCONF} run --target local --impl '/tmp/my lib.so' --personality aosp-2026 --profile aosp-2026"
        " --scenario alloc.x"
    )


def test_focus_is_the_divergence_the_error_line_or_the_end(builder: ResultsBuilder):
    long = [f'{{"ev":"call","step":{n}}}' for n in range(1, 31)]
    builder.plan(["d"], [scenario(s) for s in ("a.fail", "a.error", "a.crash", "a.bad_event", "a.never")])
    builder.result("d", "a.fail", "FAIL", divergence={**DIVERGENCE, "event": 12}, trace=long)
    builder.result("d", "a.error", "ERROR", reason="trace line 25: ret without its call", trace=long)
    builder.result("d", "a.crash", "CRASH", reason="SIGSEGV", trace=trace_lines("a.crash", status="signal"))
    builder.result("d", "a.bad_event", "FAIL", divergence={**DIVERGENCE, "event": 99}, trace=long)
    run = load(builder.write())
    by_id = {r.scenario: r for r in run.results}
    assert focus_line(by_id["a.fail"]) == 12
    assert focus_line(by_id["a.error"]) == 25
    assert focus_line(by_id["a.crash"]) == len(by_id["a.crash"].trace)
    assert focus_line(by_id["a.bad_event"]) is None  # an event past the trace's end names no line
    assert focus_line(by_id["a.never"]) is None
    excerpt = trace_excerpt(by_id["a.error"])
    assert [line.number for line in excerpt.lines] == list(range(10, 31))  # 21 lines ending at the last
    assert [line.number for line in excerpt.lines if line.marked] == [25]
    assert trace_excerpt(by_id["a.never"]).note == "no trace: the scenario never ran"


def test_failures_are_sorted_by_severity_then_plan_order(mixed_run: ResultsBuilder):
    run = load(mixed_run.write())
    assert [(f.verdict, f.device, f.scenario) for f in findings(run)] == [
        ("CRASH", "emulator-5554", "cookie.replace"),
        ("FAIL", "emulator-5554", "alloc.enomem"),
        ("TIMEOUT", "emulator-5554", "map.prot"),
        ("ERROR", "vnpu-1", "map.prot"),
    ]


def test_a_clause_exercised_by_one_scenario_is_no_gap(builder: ResultsBuilder):
    builder.plan(["d"], [scenario("a.one", ["c-1"]), scenario("a.two", ["c-1", "c-2"])])
    builder.result("d", "a.one", "NOT_APPLICABLE", reason="requires vnpu-control")
    builder.result("d", "a.two", "PASS")
    assert coverage_gaps(load(builder.write())) == ()
