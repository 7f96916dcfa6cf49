"""report.html opened in headless Chromium from file://: JS runs without errors, the page renders."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from synthetic_results import ResultsBuilder

from reports import write_reports

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_S = 90

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium not installed at /usr/bin/chromium"),
]

# Console messages (console.*, uncaught exceptions, CSP refusals) are logged as "...:CONSOLE(...)]" lines.
CONSOLE = re.compile(r":CONSOLE[:(\]]|Uncaught")


def chromium(tmp_path: Path, *args: str) -> tuple[str, str]:
    """Run headless Chromium once under a timeout; returns stdout and stderr."""
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session this test started, nothing else
        proc.communicate()
        pytest.fail(f"chromium did not finish within {TIMEOUT_S} s: {' '.join(command)}")
    assert proc.returncode == 0, err[-2000:]
    return out, err


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


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
    assert '<table id="matrix"' in dom
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
