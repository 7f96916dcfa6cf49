"""reports.recorded.records: every record kind typed once; what the run writes reads back and writes again byte
for byte, and a tool that rewrites a record keeps the fields it does not know."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from synthetic_results import ResultsBuilder, scenario

from reports.recorded.records import (
    KINDS,
    DeviceRecord,
    EndRecord,
    LostRecord,
    Plan,
    ResultRecord,
    ResumeRecord,
    encoded,
    parse_line,
    read_records,
)


def test_a_whole_run_reads_back_and_writes_again_byte_for_byte(twin: Path):
    data = (twin / "results.jsonl").read_bytes()
    records = read_records(twin)
    assert records.problems == ()
    lines = data.split(b"\n")
    assert lines.pop() == b""
    assert len(records.lines) == len(lines)
    assert b"".join(encoded(record) for _, record in records.lines) == data
    kinds = {type(record) for _, record in records.lines}
    assert {Plan, DeviceRecord, ResultRecord, EndRecord} <= kinds
    fail = next(r for r in records.results if r.divergence is not None)
    assert fail.divergence is not None and fail.divergence.clause and fail.divergence.event


def test_every_kind_round_trips_with_the_fields_it_does_not_model():
    lines = [
        {"kind": "plan", "schema": 1, "run_id": "r", "started": "s", "kit_version": "k", "vocabulary": "v",
         "profile": "p", "target": "t", "devices": ["d"], "scenarios": [{"id": "a.x", "title": "", "chapter": "a",
         "clauses": ["c"]}], "corpus_hash": "h", "model_hash": "m", "options": {"jobs": 2}, "host": "x",
         "shard": True, "claim_basis": {"b": 1}, "rejudged_from": {"run_id": "q"}, "merged_from": [{"run_id": "z"}],
         "from_a_newer_kit": [1, 2]},
        {"kind": "device", "device": "d", "group": "g", "info": {"serial": "d"}},
        {"kind": "result", "device": "d", "scenario": "a.x", "chapter": "a", "title": "", "clauses": ["c"],
         "verdict": "FAIL", "reason": "r", "divergence": {"step": 1, "event": 2, "observed": {"ret": 3},
         "allowed": [0, None], "clause": "c", "quote": "q", "message": "m"}, "discrepancy": "D2", "waiver": None,
         "slots": {"r": "r0"}, "trace": ["{}"], "exit": {"status": "ok"}, "duration_ms": 1.5, "finished": "f",
         "attempts": 3, "allocations_refused": True, "logcat": ["l"], "origin": "host", "from_a_newer_kit": True},
        {"kind": "lost", "device": "d", "group": "g", "reason": "gone"},
        {"kind": "resume", "run_id": "r", "host": "x", "started": "s"},
        {"kind": "end", "finished": "f", "counts": {"FAIL": 1}, "exit_code": 1},
    ]  # fmt: skip
    assert [line["kind"] for line in lines] == list(KINDS)
    for number, line in enumerate(lines, 1):
        raw = json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode()
        record, problems = parse_line(raw, number)
        assert problems == [] and record is not None
        assert encoded(record) == raw + b"\n"
        if isinstance(record, ResultRecord):  # what rejudge does: replace the judged fields, keep the rest
            rejudged = dataclasses.replace(record, verdict=record.verdict.PASS, divergence=None)
            assert json.loads(encoded(rejudged))["from_a_newer_kit"] is True
    assert isinstance(parse_line(b'{"kind":"resume","run_id":"r"}', 1)[0], ResumeRecord)
    assert isinstance(parse_line(b'{"kind":"lost","device":"d"}', 1)[0], LostRecord)


def test_a_line_that_holds_no_record_is_named_and_skipped(builder: ResultsBuilder):
    builder.plan(["d"], [scenario("a.x")])
    builder.raw('{"kind":"result","device":"d","scenario":"a.x","verdict":"MAYBE"}')
    builder.raw('{"kind":"plan","schema":1,"run_id":"again","scenarios":[]}')
    builder.raw("[1]")
    records = read_records(builder.write())
    assert [n for n, _ in records.lines] == [1]
    assert records.problems == (
        "results.jsonl line 2: verdict 'MAYBE' is not one of PASS, WARN, FAIL, NOT_APPLICABLE, WAIVED, CRASH, "
        "TIMEOUT, ERROR, NOT_EXECUTED; line skipped",
        "results.jsonl line 3: a second plan record; line skipped",
        "results.jsonl line 4: expected a JSON object, found list; line skipped",
    )
