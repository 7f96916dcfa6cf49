"""report.html opened in headless Chromium from file://: JS runs without errors, the page renders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from synthetic_results import ResultsBuilder

from reports import write_reports
from tests.chromium import chromium, console_lines, needs_chromium

pytestmark = [pytest.mark.chromium, needs_chromium]


@pytest.fixture
def report(mixed_run: ResultsBuilder, tmp_path: Path) -> Path:
    mixed_run.device("vnpu-1", model="<script>alert(1)</script>\x01\x1b[31m")
    return write_reports(mixed_run.write(), tmp_path / "out")["html"]


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
