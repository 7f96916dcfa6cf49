"""The fleet's processes, found again by PID: checked against their command line (PIDs get reused) and
their start time before anything is sent to them; and what a device's shell commands leave behind (in
sessions of their own), killed when the device stops."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import signal
import time
from pathlib import Path
from typing import Final

from .identity import PRIVATE_ID_WINDOWS


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


PR_SET_CHILD_SUBREAPER: Final = 36
REAP_ROUNDS: Final = 50


def become_subreaper() -> None:
    """Orphaned descendants (a `setsid` and a double fork in a shell command) become this process's children,
    so that `kill_descendants` finds them when the device stops."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)


def _children(pid: int) -> list[int]:
    """The live children of `pid`, from /proc (a zombie is not live)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        fields = raw.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[0] != "Z" and fields[1] == str(pid):
            found.append(int(entry))
    return found


def kill_descendants() -> int:
    """SIGKILL every descendant of this process: its children, then (this process being a subreaper) the
    orphans they leave, round after round until none is left; how many were killed."""
    killed = 0
    for _ in range(REAP_ROUNDS):
        children = _children(os.getpid())
        if not children:
            break
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline and any(pid in _children(os.getpid()) for pid in children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(-1, os.WNOHANG)
            time.sleep(0.005)
    return killed


def kill_uid(uid: int) -> int:
    """SIGKILL every process whose real uid is `uid` (a virtual device's own uid, which nothing else uses);
    how many. Only for a root caller and a device's uid: one of the private windows devices draw from that
    no account has (a state file naming another sandbox never makes the kit kill an account's processes)."""
    if os.geteuid() != 0 or not any(uid in window for window in PRIVATE_ID_WINDOWS) or _account(uid):
        return 0
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
        fields = line.split()
        if len(fields) > 1 and fields[1] == str(uid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
    return killed


def _account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
