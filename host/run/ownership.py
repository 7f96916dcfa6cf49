"""Which run directories this user created on this host: `--resume` trusts a plan's options only for those.

`npuconf run` writes a random token into RUN_DIR/.npuconf-host (mode 0600: no other user learns it) and
records, in this user's private state directory (floor.safe_io.host_state_dir, `runs/<token>`),
the directory's resolved path, its identity (st_dev, st_ino) and its owner. A directory is trusted on
`--resume` only when all of these hold: it is owned by the user resuming, no group or other user may
write in it, its marker is this user's private file holding a registered token, and the registry entry
names this very directory (path, device and inode). A directory recreated at the same path by someone
else (with a token they learned or guessed) is another inode, another owner: it is never trusted.

The registry forgets a run once nothing of it is left to resume (`forget`), and entries whose
directory is gone or is no longer the one registered are removed whenever a run claims a directory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Final

from floor.safe_io import UnsafeOutput, host_state_dir, open_directory, owned_privately, write_text
from reference_model.verdicts import Verdict
from reports.recorded.results import RunResults

MARKER: Final = ".npuconf-host"
_TOKEN: Final = re.compile(r"[0-9a-f]{32}")
ENTRY_MAX_BYTES: Final = 8192
# Registry entries looked at (for removal) per claim: the registry stays small without a scan of thousands.
PRUNE_PER_CLAIM: Final = 256


def _registry() -> Path:
    return host_state_dir() / "runs"


def _identity(run_dir: Path) -> os.stat_result:
    """The run directory as reached without another user's symlink (UnsafeOutput, OSError otherwise)."""
    fd = open_directory(run_dir)
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def claim(run_dir: Path) -> str:
    """Mark `run_dir` as created by this user on this host (private marker plus registry entry)."""
    _prune()
    token = secrets.token_hex(16)
    info = _identity(run_dir)
    entry = {"path": str(run_dir.resolve()), "dev": info.st_dev, "ino": info.st_ino, "uid": info.st_uid}
    write_text(_registry() / token, json.dumps(entry) + "\n", mode=0o600)
    write_text(run_dir / MARKER, token + "\n", mode=0o600)
    return token


def unclaim(token: str) -> None:
    """Forget a claim (its run directory was removed, or nothing of it is left to resume)."""
    if _TOKEN.fullmatch(token):
        with contextlib.suppress(OSError, UnsafeOutput):
            (_registry() / token).unlink()


def forget_if_finished(run_dir: Path, run: RunResults) -> None:
    """When nothing of the run is left to resume (every planned pair has a result that a resume would keep),
    its registry entry and its marker go: a finished run is never trusted again."""
    left = any(not r.recorded or r.verdict is Verdict.NOT_EXECUTED or r.origin == "host" for r in run.results)
    if run.plan is not None and not left:
        forget(run_dir)


def forget(run_dir: Path) -> None:
    """Nothing of the run in `run_dir` is left to resume: its registry entry and its marker go."""
    token = _read_marker(run_dir)
    if token is not None and why_untrusted(run_dir) is None:
        unclaim(token)
        with contextlib.suppress(OSError):
            (run_dir / MARKER).unlink()


def _read_private(directory: int | None, name: str | Path) -> bytes | None:
    """A small regular file this user owns and no one else may read or write; None otherwise."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=directory)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return None
        data = handle.read(ENTRY_MAX_BYTES + 1)
    return data if len(data) <= ENTRY_MAX_BYTES else None


def _read_marker(run_dir: Path) -> str | None:
    try:
        fd = open_directory(run_dir)
    except (OSError, UnsafeOutput):
        return None
    try:
        marker = _read_private(fd, MARKER)
    finally:
        os.close(fd)
    token = marker.decode("ascii", errors="replace").strip() if marker is not None else ""
    return token if _TOKEN.fullmatch(token) else None


def _entry(token: str) -> dict[str, object] | None:
    try:
        raw = _read_private(None, _registry() / token)
    except UnsafeOutput:
        return None
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


def why_untrusted(run_dir: Path) -> str | None:
    """None when `run_dir` is a directory this user created on this host (see the module docstring); else
    what fails, as a phrase for a one-line message."""
    try:
        info = _identity(run_dir)
    except (OSError, UnsafeOutput) as exc:
        return f"it cannot be reached safely ({exc})"
    if info.st_uid != os.geteuid():
        return f"it belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})"
    if not owned_privately(info):
        return f"group or other users may write in it (mode {stat.S_IMODE(info.st_mode):04o})"
    token = _read_marker(run_dir)
    if token is None:
        return f"it holds no private {MARKER} marker of this user's"
    entry = _entry(token)
    if entry is None:
        return "this host did not create the run directory (its marker is registered nowhere here)"
    if entry.get("path") != str(run_dir.resolve()):
        return "this host created its marker for another directory"
    if (entry.get("dev"), entry.get("ino"), entry.get("uid")) != (info.st_dev, info.st_ino, info.st_uid):
        return "it is not the directory this host created there (another inode: it was removed and made again)"
    return None


def _prune() -> None:
    """Remove registry entries whose directory is gone or is no longer the directory registered."""
    registry = _registry()
    try:
        names = [n for n in os.listdir(registry) if _TOKEN.fullmatch(n)][:PRUNE_PER_CLAIM]
    except OSError:
        return
    for name in names:
        entry = _entry(name)
        if entry is None:
            continue
        path = entry.get("path")
        try:
            info = os.stat(str(path), follow_symlinks=False) if isinstance(path, str) else None
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                continue
            info = None
        if info is None or (info.st_dev, info.st_ino) != (entry.get("dev"), entry.get("ino")):
            unclaim(name)
