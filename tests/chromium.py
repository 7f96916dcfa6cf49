"""Headless Chromium for the kit's own tests: open a page from file://, collect console errors."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_S = 90
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless Chromium not installed at /usr/bin/chromium"
)

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
