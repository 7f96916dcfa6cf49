"""Reading results.jsonl: records, problems with line numbers, NOT_EXECUTED, aggregation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_results import DIVERGENCE, ResultsBuilder, load, scenario, trace_lines

from reference_model.errors import KitError
from reference_model.verdicts import RunExit, Verdict, worst
from reports.answers.claim import claim_of, problems_of
from reports.recorded.results import (
    NOT_EXECUTED_REASON,
    ResultsUnreadable,
    alloc_callback_latencies_ns,
    count_verdicts,
    counts_by_chapter,
    counts_by_device,
    safe_text,
)


def test_mixed_run_is_read_in_plan_order(mixed_run: ResultsBuilder):
    run = load(mixed_run.write())
    assert run.problems == ()
    assert run.plan is not None and run.plan.run_id == "run-20260101-000000"
    assert run.device_serials == ("emulator-5554", "vnpu-1")
    assert run.devices["vnpu-1"]["personality"] == "aosp-2026"
    assert len(run.results) == 14
    assert [r.scenario for r in run.for_device("vnpu-1")][:3] == ["alloc.basic", "alloc.enomem", "cookie.replace"]
    fail = next(r for r in run.results if r.verdict is Verdict.FAIL)
    assert fail.divergence is not None
    assert fail.divergence.clause == "alloc-supported-succeeds"
    assert fail.divergence.step == 4 and fail.divergence.event == 9
    assert fail.discrepancy == "D4"
    assert fail.duration_ms == 12.5
    waived = next(r for r in run.results if r.verdict is Verdict.WAIVED)
    assert waived.waiver is not None and waived.waiver.startswith("known AOSP bug b/123")
    assert claim_of(run).level.value == "non-conformant"
    assert claim_of(run).exit_code is RunExit.NON_CONFORMANT


def test_not_executed_for_planned_pairs_without_results(mixed_run: ResultsBuilder):
    run = load(mixed_run.write())
    missing = [r for r in run.results if r.verdict is Verdict.NOT_EXECUTED]
    assert [(r.device, r.scenario) for r in missing] == [("vnpu-1", "free.twice")]
    (record,) = missing
    assert not record.recorded
    assert record.reason == NOT_EXECUTED_REASON
    assert record.clauses == ("free-twice-crashes",)
    assert record.chapter == "free"


def test_a_device_without_any_result_is_all_not_executed(builder: ResultsBuilder):
    builder.plan(["a", "lost"], [scenario("alloc.x"), scenario("free.y")])
    builder.result("a", "alloc.x", "PASS").result("a", "free.y", "PASS").end()
    run = load(builder.write())
    assert [r.verdict for r in run.for_device("lost")] == [Verdict.NOT_EXECUTED] * 2
    assert claim_of(run).level.value == "incomplete"
    assert claim_of(run).exit_code is RunExit.INCOMPLETE


def test_corrupted_lines_are_reported_with_their_number_and_skipped(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x"), scenario("alloc.y"), scenario("alloc.z")])  # line 1
    builder.device("a")  # line 2
    builder.result("a", "alloc.x", "PASS")  # line 3
    builder.raw('{"kind": "result", "device": "a", "scenario": "alloc.y", "verd')  # line 4: truncated
    builder.raw("[1, 2]")  # line 5
    builder.record({"kind": "result", "device": "a", "scenario": "alloc.z"})  # line 6: no verdict
    builder.record({"kind": "result", "device": "a", "scenario": "alloc.z", "verdict": "MAYBE"})  # line 7
    builder.record({"kind": "gossip"})  # line 8
    builder.record({"device": "a"})  # line 9
    builder.result("a", "alloc.z", "PASS", duration_ms="fast")  # line 10: kept, field ignored
    run = load(builder.write())
    text = "\n".join(run.problems)
    assert "results.jsonl line 4: not JSON" in text
    assert "results.jsonl line 5: expected a JSON object" in text
    assert "results.jsonl line 6: lacks 'verdict'" in text
    assert "results.jsonl line 7: verdict 'MAYBE' is not one of" in text
    assert "results.jsonl line 8: unknown kind 'gossip'" in text
    assert "results.jsonl line 9: lacks 'kind'" in text
    assert "results.jsonl line 10: field 'duration_ms' should be a finite number" in text
    assert not any(p.startswith("results.jsonl line 3") for p in run.problems)
    by_id = {r.scenario: r for r in run.results}
    assert by_id["alloc.x"].verdict is Verdict.PASS
    assert by_id["alloc.y"].verdict is Verdict.NOT_EXECUTED  # its only line was corrupt
    assert by_id["alloc.z"].verdict is Verdict.PASS
    assert by_id["alloc.z"].duration_ms is None
    assert by_id["alloc.z"].line == 10


def test_invalid_utf8_is_replaced_and_reported(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")])
    path = builder.write()
    with path.open("ab") as f:
        f.write(b'{"kind":"result","device":"a","scenario":"alloc.x","verdict":"PASS","reason":"\xff\xfe bytes"}\n')
    run = load(path)
    assert any("line 2: not valid UTF-8" in p for p in run.problems)
    assert run.results[0].verdict is Verdict.PASS
    assert "\ufffd" in run.results[0].reason


def test_latest_finished_wins_for_duplicates(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")])
    builder.result("a", "alloc.x", "PASS", finished="2026-01-01T00:00:05Z")
    builder.result("a", "alloc.x", "FAIL", finished="2026-01-01T00:00:02Z")
    builder.result("a", "alloc.x", "TIMEOUT", finished="2026-01-01T00:00:09Z")
    builder.result("a", "alloc.x", "ERROR", finished="2026-01-01T00:00:01Z")
    run = load(builder.write())
    assert [r.verdict for r in run.results] == [Verdict.TIMEOUT]


def test_results_for_unplanned_pairs_are_kept(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")])
    builder.result("a", "alloc.x", "PASS").result("b", "extra.one", "FAIL")
    run = load(builder.write())
    assert [(r.device, r.scenario, r.verdict) for r in run.results] == [
        ("a", "alloc.x", Verdict.PASS),
        ("b", "extra.one", Verdict.FAIL),
    ]
    assert run.device_serials == ("a", "b")


def test_missing_plan_makes_the_run_incomplete(builder: ResultsBuilder):
    builder.result("a", "alloc.x", "PASS")
    run = load(builder.write())
    assert run.plan is None
    assert any("no plan record" in p for p in run.problems)
    assert claim_of(run).level.value == "incomplete"
    assert claim_of(run).exit_code is RunExit.INCOMPLETE


def test_empty_file_and_empty_plan_are_incomplete(tmp_path: Path, builder: ResultsBuilder):
    empty = tmp_path / "results.jsonl"
    empty.write_text("")
    assert claim_of(load(empty)).level.value == "incomplete"
    builder.plan([], [])
    assert claim_of(load(builder.write())).level.value == "incomplete"


def test_plan_must_come_first_and_only_once(builder: ResultsBuilder):
    builder.device("a")
    builder.plan(["a"], [scenario("alloc.x")])
    builder.plan(["a"], [scenario("alloc.y")])
    builder.result("a", "alloc.x", "PASS")
    run = load(builder.write())
    assert run.plan is not None and [s.id for s in run.plan.scenarios] == ["alloc.x"]
    assert any("line 2: the plan record should be the first line" in p for p in run.problems)
    assert any("line 3: a second plan record" in p for p in run.problems)


def test_end_record_disagreeing_with_results_is_a_problem(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")]).result("a", "alloc.x", "FAIL", divergence=DIVERGENCE).end(exit_code=0)
    run = load(builder.write())
    assert run.end is not None and run.end.exit_code == 0
    assert claim_of(run).exit_code is RunExit.NON_CONFORMANT
    assert run.problems == ()  # the records are sound; their end record disagrees with the claim
    assert any("line 3: the end record says exit code 0, the results give 1" in p for p in problems_of(run))


def test_run_directory_is_accepted(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")]).result("a", "alloc.x", "PASS").end()
    path = builder.write()
    assert claim_of(load(path.parent)).level.value == "conformant"


def test_unreadable_results_raise_a_kit_error(tmp_path: Path):
    with pytest.raises(ResultsUnreadable) as info:
        load(tmp_path / "nope" / "results.jsonl")
    assert isinstance(info.value, KitError)
    assert "nope/results.jsonl" in str(info.value)


def test_counts_helpers(mixed_run: ResultsBuilder):
    run = load(mixed_run.write())
    counts = count_verdicts(run.results)
    assert counts[Verdict.PASS] == 7 and sum(counts.values()) == 14
    assert counts[Verdict.WARN] == 0  # the mixed run predates WARN: one of every other verdict
    assert all(counts[v] == 1 for v in Verdict if v not in (Verdict.PASS, Verdict.WARN))
    by_device = counts_by_device(run)
    assert by_device["vnpu-1"][Verdict.NOT_EXECUTED] == 1
    assert by_device["emulator-5554"][Verdict.FAIL] == 1
    assert list(counts_by_chapter(run)) == ["alloc", "cookie", "free", "load", "map", "preempt"]
    assert worst([]) is None
    assert worst([Verdict.PASS, Verdict.NOT_APPLICABLE]) is Verdict.NOT_APPLICABLE


def test_alloc_callback_latencies(builder: ResultsBuilder):
    trace = trace_lines("alloc.x", alloc_latencies_ns=(3_000, 70_000))
    trace.insert(2, "not json at all")
    builder.plan(["a"], [scenario("alloc.x")]).result("a", "alloc.x", "PASS", trace=trace)
    (record,) = load(builder.write()).results
    assert alloc_callback_latencies_ns(record) == [3_000, 70_000]


def test_alloc_callback_latencies_skip_an_integer_beyond_the_int_string_limit(builder: ResultsBuilder):
    trace = trace_lines("alloc.x", alloc_latencies_ns=(3_000,))
    trace.insert(2, '{"ev":"settle","what":"alloc","reached":true,"t":' + "9" * 5000 + "}")
    builder.plan(["a"], [scenario("alloc.x")]).result("a", "alloc.x", "PASS", trace=trace)
    (record,) = load(builder.write()).results
    assert alloc_callback_latencies_ns(record) == [3_000]


def test_safe_text_escapes_what_xml_forbids():
    assert safe_text("a\x01b\x1b[0m\tc\n\ud800\uffff") == "a\\x01b\\x1b[0m\tc\n\\ud800\\uffff"
    assert safe_text("<script>é</script>") == "<script>é</script>"


def test_trace_entries_that_are_not_strings_are_kept_as_json(builder: ResultsBuilder):
    builder.plan(["a"], [scenario("alloc.x")]).result("a", "alloc.x", "PASS", trace=[{"ev": "begin"}, "raw"])
    (record,) = load(builder.write()).results
    assert record.trace == (json.dumps({"ev": "begin"}, separators=(",", ":")), "raw")
