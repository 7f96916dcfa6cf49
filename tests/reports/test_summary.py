"""summary.json and write_reports."""

from __future__ import annotations

import json
from pathlib import Path

from synthetic_results import ResultsBuilder, load, scenario

from reports.renderers.run_reports import write_run_reports
from reports.renderers.summary import SUMMARY_SCHEMA, write_summary
from tests.conftest import PRINTED_NPUCONF


def test_summary_fields(mixed_run: ResultsBuilder, tmp_path: Path):
    path = tmp_path / "summary.json"
    write_summary(load(mixed_run.write()), path)
    summary = json.loads(path.read_text(encoding="utf-8"))
    assert summary["schema"] == SUMMARY_SCHEMA
    assert summary["run_id"] == "run-20260101-000000"
    assert summary["answer"] == "non-conformant"
    assert summary["exit_code"] == 1
    assert summary["total"] == 14
    assert summary["counts"]["PASS"] == 7 and summary["counts"]["NOT_EXECUTED"] == 1
    assert summary["devices"]["vnpu-1"]["NOT_EXECUTED"] == 1
    assert summary["chapters"]["alloc"] == {
        "PASS": 2,
        "WARN": 0,
        "FAIL": 1,
        "NOT_APPLICABLE": 0,
        "WAIVED": 1,
        "CRASH": 0,
        "TIMEOUT": 0,
        "ERROR": 0,
        "NOT_EXECUTED": 0,
    }
    assert summary["clauses"]["alloc-supported-succeeds"] == "FAIL"
    assert summary["clauses"]["load-callback"] == "PASS"
    failures = summary["failures"]
    # The report's failures in its order, each with what a script needs to act on it.
    assert [(f["device"], f["scenario"], f["verdict"]) for f in failures] == [
        ("emulator-5554", "cookie.replace", "CRASH"),
        ("emulator-5554", "alloc.enomem", "FAIL"),
        ("emulator-5554", "map.prot", "TIMEOUT"),
        ("vnpu-1", "map.prot", "ERROR"),
    ]
    fail = failures[1]
    assert fail["clause"] == "alloc-supported-succeeds"
    assert fail["quote"] == "An allocation for a supported pair succeeds unless memory is exhausted."
    assert fail["observed"] == '{"cb":"alloc","error":"ENOMEM"}'
    assert fail["allowed"] == '{"cb":"alloc","error":0}'
    assert fail["why"] == "onAlloc reported ENOMEM for a supported pair with capacity left"
    assert (fail["discrepancy"], fail["discrepancies"]) == ("D4", ["D4"])
    assert fail["replay"] == f"{PRINTED_NPUCONF} run --target virtual --scenario alloc.enomem"
    assert fail["excerpt"]["total"] == 8 and len(fail["excerpt"]["lines"]) == 8
    error = failures[3]
    assert (error["excerpt"]["focus"], error["excerpt"]["first"], len(error["excerpt"]["lines"])) == (3, 1, 21)
    assert summary["not_demonstrated"] == {
        "emulator-5554": {
            "map-prot-subset": {
                "why": "TIMEOUT: no exit within 5000 ms (1 scenario)",
                "scenarios": [{"scenario": "map.prot", "verdict": "TIMEOUT", "reason": "no exit within 5000 ms"}],
            },
            "preempt-never-mapped": {
                "why": "NOT_APPLICABLE: requires vnpu-control (1 scenario)",
                "scenarios": [
                    {"scenario": "preempt.mapped", "verdict": "NOT_APPLICABLE", "reason": "requires vnpu-control"}
                ],
            },
        },
        "vnpu-1": {
            "free-twice-crashes": {
                "why": "NOT_EXECUTED: planned, but results.jsonl holds no result for it (1 scenario)",
                "scenarios": [
                    {
                        "scenario": "free.twice",
                        "verdict": "NOT_EXECUTED",
                        "reason": "planned, but results.jsonl holds no result for it",
                    }
                ],
            },
            "map-prot-subset": {
                "why": "ERROR: trace line 3: ret without its call (1 scenario)",
                "scenarios": [
                    {"scenario": "map.prot", "verdict": "ERROR", "reason": "trace line 3: ret without its call"}
                ],
            },
        },
    }
    assert summary["problems"] == []


def test_summary_of_a_conformant_run(builder: ResultsBuilder, tmp_path: Path):
    # map.y cites a clause that is not device-testable (virtual-only): its NOT_APPLICABLE leaves no gap.
    basis = {"kit_corpus_hash": "c0ffee00c0ffee00", "device_testable": ["alloc-clause"], "without_buffers": []}
    builder.plan(["a"], [scenario("alloc.x"), scenario("map.y")], claim_basis=basis)
    builder.result("a", "alloc.x", "PASS").result("a", "map.y", "NOT_APPLICABLE").end(exit_code=0)
    path = tmp_path / "summary.json"
    write_summary(load(builder.write()), path)
    summary = json.loads(path.read_text(encoding="utf-8"))
    assert (summary["answer"], summary["exit_code"], summary["failures"]) == ("conformant", 0, [])
    assert summary["claim"]["headline"] == "conformant"
    assert summary["finished"] == "2026-01-01T00:10:00Z"


def test_write_reports_writes_all_four(mixed_run: ResultsBuilder, tmp_path: Path):
    out = tmp_path / "reports"
    paths = write_run_reports(load(mixed_run.write()), out)
    assert paths == {"junit": out / "junit.xml", "html": out / "report.html", "summary": out / "summary.json",
                     "atlas": out / "atlas.json"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())
    assert sorted(p.name for p in out.iterdir()) == ["atlas.json", "junit.xml", "report.html", "summary.json"]
