"""Probe processes never outlive their run: every running probe group is known and killed when the run
ends early (Ctrl-C, SIGTERM, a host error), and what an implementation started in a session of its own
(`setsid()`) is found and killed when its batch ends.

The kit's process becomes a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), so a descendant whose
parent died is re-parented to the kit instead of init. Each batch's processes carry two marks by
which the kit tells them from its other children (adb servers, virtual devices): a token in their
environment, and an inherited descriptor of the batch's own anonymous file. A child that clears its
environment still holds the descriptor; one that also closes every descriptor it did not open is not
found (docs/hostile.md says so). Nothing in the kit's own session is ever taken for a leftover: a batch
starts in a session of its own and no descendant can rejoin the kit's, while a child the kit is
starting for another lane shares the kit's session (or holds the kit's descriptors close-on-exec)
until it execs.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Final

PR_SET_CHILD_SUBREAPER: Final = 36
BATCH_TOKEN_VAR: Final = "NPUCONF_BATCH_TOKEN"
REAP_ROUNDS: Final = 50  # a forking orphan is chased this many rounds (each a /proc scan)
REAP_PAUSE_S: Final = 0.005


class _RunningProbes:
    """The probe process groups running now in this process (one per lane); a lock, since lanes are threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, str] = {}

    def add(self, process: subprocess.Popen[bytes], token: str) -> None:
        with self._lock:
            self._running[process.pid] = token

    def discard(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.pop(process.pid, None)

    def kill_all(self) -> None:
        with self._lock:
            running = dict(self._running)
        for pid, token in running.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            kill_orphans(token)


# Process-wide by nature: the signal that ends a run reaches the process, not a lane.
RUNNING_PROBES: Final = _RunningProbes()
atexit.register(RUNNING_PROBES.kill_all)

_subreaper_lock = threading.Lock()
_subreaper = False


def become_subreaper() -> None:
    """Make orphaned descendants this process's children (once; nothing where the platform has no such call)."""
    global _subreaper
    with _subreaper_lock:
        if _subreaper:
            return
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _subreaper = True


class _BatchMarkers:
    """token -> the descriptor of the batch's marker file, which every process of the batch inherits, and
    that file's identity (st_dev, st_ino), taken when it is opened: a lane stopping the run reads the
    identity while the batch's own lane may be closing the descriptor, whose number the kernel may
    already have given to another file."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._markers: dict[str, tuple[int, tuple[int, int]]] = {}

    def open(self, token: str) -> int:
        fd = os.memfd_create(f"npuconf-batch-{token}")
        info = os.fstat(fd)
        with self._lock:
            self._markers[token] = fd, (info.st_dev, info.st_ino)
        return fd

    def fds(self, token: str) -> tuple[int, ...]:
        with self._lock:
            marker = self._markers.get(token)
        return () if marker is None else (marker[0],)

    def identity(self, token: str) -> tuple[int, int] | None:
        with self._lock:
            marker = self._markers.get(token)
        return None if marker is None else marker[1]

    def close(self, token: str) -> None:
        with self._lock:
            marker = self._markers.pop(token, None)
        if marker is not None:
            os.close(marker[0])


_MARKERS: Final = _BatchMarkers()


def new_batch_token() -> str:
    """A new batch's token; `batch_fds(token)` are the descriptors to pass to its process
    (`pass_fds`), and `end_batch(token)` forgets it once its orphans are killed."""
    token = secrets.token_hex(8)
    _MARKERS.open(token)
    return token


def batch_fds(token: str) -> tuple[int, ...]:
    return _MARKERS.fds(token)


def end_batch(token: str) -> None:
    _MARKERS.close(token)


def kill_orphans(token: str) -> int:
    """Kill (and reap) this process's children that carry `token`, until none is left; return how many."""
    killed = 0
    marker = f"{BATCH_TOKEN_VAR}={token}".encode()
    held = _MARKERS.identity(token)
    own_session, own_group = os.getsid(0), os.getpgrp()
    for _ in range(REAP_ROUNDS):
        found = [
            pid
            for pid in _children()
            if _session(pid) not in (own_session, None) and (marker in _environment(pid) or _holds(pid, held))
        ]
        if not found:
            return killed
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                group = os.getpgid(pid)
                if group != own_group:
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            killed += 1
        time.sleep(REAP_PAUSE_S)
    return killed


def _children() -> list[int]:
    """This process's children: from each of its threads' `children` list where the kernel keeps one (a
    read of a few files, where the scan of every process's stat costs milliseconds per batch on a busy
    host), else from that scan."""
    me = os.getpid()
    listed = _listed_children(me)
    return listed if listed is not None else _scanned_children(me)


def _listed_children(me: int) -> list[int] | None:
    """The children of every thread of process ``me`` (`/proc/<pid>/task/<tid>/children`, Linux 3.5 and
    later with CONFIG_PROC_CHILDREN); None where the main thread has no such file."""
    if not os.path.exists(f"/proc/{me}/task/{me}/children"):
        return None
    try:
        threads = os.listdir(f"/proc/{me}/task")
    except OSError:
        return None
    children: list[int] = []
    for tid in threads:
        try:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as listing:
                children.extend(int(pid) for pid in listing.read().split())
        except OSError:
            continue  # a thread that ended meanwhile: its children went to another thread's list
    return children


def _scanned_children(me: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[1] == str(me).encode():
            children.append(int(entry.name))
    return children


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _holds(pid: int, identity: tuple[int, int] | None) -> bool:
    """Whether process `pid` holds, as an inheritable descriptor, the file `identity` (st_dev, st_ino) names.

    Only an inheritable copy counts: the batch's processes got the marker through `pass_fds`, while a
    child that another lane is starting holds every descriptor of the kit, close-on-exec, between its
    fork and its exec; that child is not a leftover of this batch.
    """
    if identity is None:
        return False
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in names:
        try:
            info = os.stat(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == identity and not _close_on_exec(pid, name):
            return True
    return False


def _close_on_exec(pid: int, fd_name: str) -> bool:
    """Whether descriptor `fd_name` of `pid` is close-on-exec (its fdinfo `flags`, octal); unreadable: yes."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd_name}", "rb") as source:
            info = source.read(4096)
    except OSError:
        return True
    for line in info.splitlines():
        if line.startswith(b"flags:"):
            try:
                return bool(int(line.split()[1], 8) & os.O_CLOEXEC)
            except (IndexError, ValueError):
                return True
    return True


def _environment(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as source:
            return source.read(1 << 20)
    except OSError:
        return b""


def run_contained(argv: list[str], timeout_s: float, output_limit: int = 1 << 20) -> tuple[int, bytes]:
    """Run a short command that loads code from outside (a probe, an `--impl`): in a session of its own,
    its output to a file (a leftover child holding a pipe open cannot stall the kit), and everything it
    started killed when it ends. Returns its exit status and at most `output_limit` bytes of stdout;
    subprocess.TimeoutExpired when it outlives `timeout_s` (it is killed first)."""
    become_subreaper()
    token = new_batch_token()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.DEVNULL,
            env={**os.environ, BATCH_TOKEN_VAR: token}, start_new_session=True, pass_fds=batch_fds(token),
        )
        try:
            returncode = process.wait(timeout=timeout_s)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.kill()
            process.wait()
            kill_orphans(token)
            end_batch(token)
        output.seek(0)
        return returncode, output.read(output_limit)
