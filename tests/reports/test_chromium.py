"""report.html opened in headless Chromium from file://: JS runs without errors, the page renders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from synthetic_results import ResultsBuilder, load

from reports.renderers.run_reports import write_run_reports
from tests.chromium import chromium, console_lines, needs_chromium
from tests.conftest import PRINTED_NPUCONF

pytestmark = [pytest.mark.chromium, needs_chromium]


@pytest.fixture
def report(mixed_run: ResultsBuilder, tmp_path: Path) -> Path:
    mixed_run.device("vnpu-1", model="<script>alert(1)</script>\x01\x1b[31m")
    return write_run_reports(load(mixed_run.write()), tmp_path / "out")["html"]


def test_console_detection_works(tmp_path: Path):
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>null.x;</script></body></html>", encoding="utf-8")
    _, err = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert any("Uncaught TypeError" in line for line in console_lines(err))


def test_report_script_runs_without_console_errors(report: Path, tmp_path: Path):
    dom, err = chromium(tmp_path, "--dump-dom", report.as_uri())
    assert console_lines(err) == []
    assert re.search(r'<body[^>]*data-ready="1"', dom), "the inline script did not reach its end"
    assert '<section id="matrix"' in dom and '<details class="chapter"' in dom
    assert '<span id="shown-count">14</span>' in dom
    assert "alert(1)" in dom and "<script>alert(1)" not in dom


def test_filters_from_the_link_hide_rows(report: Path, tmp_path: Path):
    dom, err = chromium(tmp_path, "--dump-dom", report.as_uri() + "#verdicts=FAIL,CRASH&text=enomem")
    assert console_lines(err) == []
    assert '<span id="shown-count">1</span>' in dom
    visible = re.findall(r'<tr data-verdict="(\w+)">', dom)
    hidden = re.findall(r'<tr data-verdict="(\w+)" hidden="">', dom)
    assert visible == ["FAIL"]
    assert len(hidden) == 13


def test_screenshot(report: Path, tmp_path: Path):
    shot = tmp_path / "report.png"
    _, err = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri())
    assert console_lines(err) == []
    assert shot.is_file()
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000  # a rendered page, not a blank one


@pytest.fixture(scope="module")
def aosp_run(aosp_twin_run) -> Path:
    """The whole corpus on the local target with the virtual NPU behaving like AOSP today (it has FAILs);
    the session's shared run (tests/conftest.py), only read here."""
    return aosp_twin_run.path


def test_aosp_run_report_leads_with_its_first_failure_and_marks_the_divergent_line(aosp_run: Path, tmp_path: Path):
    records = [json.loads(line) for line in (aosp_run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    # Lanes append results as they finish; the report shows failures in the plan's order.
    order = {s["id"]: i for i, s in enumerate(next(r for r in records if r.get("kind") == "plan")["scenarios"])}
    fails = sorted((r for r in records if r.get("kind") == "result" and r["verdict"] == "FAIL"),
                   key=lambda r: order[r["scenario"]])  # fmt: skip
    assert fails
    dom, err = chromium(tmp_path, "--dump-dom", (aosp_run / "report.html").as_uri())
    assert console_lines(err) == []
    assert re.search(r'<body[^>]*data-ready="1"', dom)
    first = dom.index('<article class="detail')
    assert first < dom.index('<section id="matrix"')
    # The first FAIL shown is the first FAIL of the plan; its excerpt marks the line the judge named.
    article = re.search(r'<article class="detail d-FAIL" id="(f\d+)" data-verdict="FAIL">(.*?)</article>', dom, re.S)
    assert article is not None
    body = article.group(2)
    assert fails[0]["scenario"] in body
    assert fails[0]["divergence"]["clause"] in body and "AOSP discrepancy" in body
    replay = f'{PRINTED_NPUCONF} run --target local --personality aosp-2026 --scenario {fails[0]["scenario"]}'
    assert f"<code>{replay}</code>" in body
    marked = re.findall(r'<mark class="tl hit" data-line="(\d+)"', body)
    assert marked == [str(fails[0]["divergence"]["event"])]
    # The batch of 64 has its divergence deep in a long trace: the excerpt is centred on it, not the end.
    deep = next(r for r in fails if r["scenario"] == "allocation.batch_of_64_distinct")
    line = deep["divergence"]["event"]
    assert len(deep["trace"]) - line > 100
    assert f'<mark class="tl hit" data-line="{line}"' in dom


def test_aosp_run_report_filters_work(aosp_run: Path, tmp_path: Path):
    page = (aosp_run / "report.html").as_uri()
    dom, err = chromium(tmp_path, "--dump-dom", page + "#failing=1&verdicts=FAIL&text=req-type-unknown-einval")
    assert console_lines(err) == []
    matrix = dom[dom.index('<section id="matrix"') : dom.index('<section id="coverage"')]
    shown_rows = re.findall(r'<tr data-failing="(\d)">', matrix)
    hidden_rows = re.findall(r'<tr data-failing="(\d)" hidden="">', matrix)
    assert shown_rows and set(shown_rows) == {"1"}
    assert hidden_rows and set(hidden_rows) == {"0"}
    assert re.search(r'<details class="chapter" data-failing="0"[^>]*hidden=""', matrix)
    shown = int(re.search(r'<span id="matrix-shown">(\d+)</span>', matrix).group(1))  # type: ignore[union-attr]
    assert shown == len(shown_rows)
    table = dom[dom.index('<table id="results"') :]
    visible = re.findall(r'<tr data-verdict="(\w+)">', table)
    assert visible and set(visible) == {"FAIL"}
    count = int(re.search(r'<span id="shown-count">(\d+)</span>', dom).group(1))  # type: ignore[union-attr]
    assert count == len(visible)


def test_aosp_run_report_screenshot(aosp_run: Path, tmp_path: Path):
    shot = tmp_path / "report.png"
    _, err = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", (aosp_run / "report.html").as_uri())
    assert console_lines(err) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 100_000
