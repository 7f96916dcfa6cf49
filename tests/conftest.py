"""Shared fixtures for the kit's own tests."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def wait_until(predicate, timeout, what):
    """The first true value of ``predicate()``, polled every 50 ms for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def jsonl_records(path: Path, kind: str) -> list[dict]:
    """The records of one kind in a JSON-lines file another process may be appending to (a partial last
    line is skipped)."""
    if not path.is_file():
        return []
    found = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written
        if record.get("kind") == kind:
            found.append(record)
    return found


def npuconf_interruptible(*args: object) -> subprocess.Popen[str]:
    """The real CLI in a subprocess that a test will send SIGINT (Ctrl-C) to."""
    return subprocess.Popen(
        [sys.executable, "-m", "host", *map(str, args)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=_default_sigint,
    )  # fmt: skip


def _default_sigint() -> None:
    # A test session started in the background (nohup, `&` without job control) ignores SIGINT, and a
    # Python started with SIGINT ignored never raises KeyboardInterrupt: give the child the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def npuconf(*args, cwd=None, timeout=300):
    """Run the real CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "host", *map(str, args)],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )


@pytest.fixture(scope="session")
def probe_build():
    """The host build of the probe and libvnpu (built once; .ci/setup normally did it already)."""
    from host.probe import DEFAULT_BUILD_DIR, ProbeBuild, build_probe

    build = ProbeBuild(DEFAULT_BUILD_DIR)
    if not build.exists():
        build = build_probe(DEFAULT_BUILD_DIR)
    return build
