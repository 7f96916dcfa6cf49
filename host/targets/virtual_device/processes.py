"""The fleet's processes, found again by PID: checked against their command line (PIDs get reused) and
their start time before anything is sent to them."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def pid_runs(pid: int, *markers: str) -> bool:
    """True when `pid` is alive and its command line contains every marker (guards against PID reuse)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if not raw:
        return False  # a zombie
    command = raw.replace(b"\0", b" ").decode(errors="replace")
    return all(marker in command for marker in markers)


def kill_pid(pid: int, *markers: str, grace_s: float = 1.0) -> None:
    """SIGTERM, then SIGKILL after grace_s, the process `pid` if it still runs what markers say."""
    if not pid_runs(pid, *markers):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not pid_runs(pid, *markers):
            break
        time.sleep(0.02)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def process_start(pid: int) -> str | None:
    """The start time of `pid` (field 22 of /proc/PID/stat), to tell a process from a later one with its PID."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None
