"""summary.json and write_reports."""

from __future__ import annotations

import json
from pathlib import Path

from synthetic_results import ResultsBuilder, scenario

from reports import write_reports
from reports.results import load_results
from reports.summary import SUMMARY_SCHEMA, write_summary


def test_summary_fields(mixed_run: ResultsBuilder, tmp_path: Path):
    path = tmp_path / "summary.json"
    write_summary(load_results(mixed_run.write()), path)
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
    assert summary["failures"] == [
        {
            "device": "emulator-5554",
            "scenario": "alloc.enomem",
            "verdict": "FAIL",
            "clause": "alloc-supported-succeeds",
            "clauses": ["alloc-supported-succeeds"],
            "discrepancy": "D4",
        },
        {
            "device": "emulator-5554",
            "scenario": "cookie.replace",
            "verdict": "CRASH",
            "clause": None,
            "clauses": ["cookie-replace-deletes-previous"],
            "discrepancy": None,
        },
    ]
    assert summary["problems"] == []


def test_summary_of_a_conformant_run(builder: ResultsBuilder, tmp_path: Path):
    builder.plan(["a"], [scenario("alloc.x"), scenario("map.y")])
    builder.result("a", "alloc.x", "PASS").result("a", "map.y", "NOT_APPLICABLE").end(exit_code=0)
    path = tmp_path / "summary.json"
    write_summary(load_results(builder.write()), path)
    summary = json.loads(path.read_text(encoding="utf-8"))
    assert (summary["answer"], summary["exit_code"], summary["failures"]) == ("conformant", 0, [])
    assert summary["finished"] == "2026-01-01T00:10:00Z"


def test_write_reports_writes_all_three(mixed_run: ResultsBuilder, tmp_path: Path):
    out = tmp_path / "reports"
    paths = write_reports(mixed_run.write(), out)
    assert set(paths) == {"junit", "html", "summary"}
    assert paths == {"junit": out / "junit.xml", "html": out / "report.html", "summary": out / "summary.json"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths.values())
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html", "summary.json"]  # no temp files
