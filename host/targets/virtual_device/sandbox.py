"""The device filesystem of a virtual device: one host directory, seen alike by sync and by shell.

Device paths under the known roots (`/data`, `/sdcard` and its aliases) live under the sandbox
directory. Sync maps every absolute path into the sandbox. Shell commands run on the host with
`/bin/sh -c`: before that, every absolute device path under a known root that appears in the
command text is rewritten to its sandbox location, and the working directory is the sandbox's
`/data/local/tmp`. Limits (docs/adb.md): paths built at run time inside the shell (`cd /; cd data`,
`$VAR/...` where VAR holds `/data`) are not rewritten, output shows host paths, and anything outside
the known roots is the host's own filesystem (read-only use is intended: /bin, /proc, /dev).
"""

from __future__ import annotations

import os
import posixpath
import pwd
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# Device prefix -> directory below the sandbox root. Longest prefixes first.
ALIASES: Final = (
    ("/storage/emulated/0", "sdcard"),
    ("/storage/self/primary", "sdcard"),
    ("/mnt/sdcard", "sdcard"),
    ("/sdcard", "sdcard"),
    ("/data", "data"),
)
HOME_DIR: Final = "/data/local/tmp"
BIN_DIR: Final = "system/bin"
# The sandbox path is spliced into shell text unquoted, so it must need no quoting.
SAFE_PATH: Final = re.compile(r"^[A-Za-z0-9_./+-]+$")
_REWRITE: Final = re.compile(
    r"(?<![\w.~$/-])(" + "|".join(re.escape(prefix) for prefix, _ in ALIASES) + r")(?=[/\s'\";&|)<>:`]|$)"
)


# Shell commands never run as root: as the first of these users that exists (see docs/adb.md).
SHELL_USERS: Final = ("npuconf-shell", "nobody")


class SandboxError(ValueError):
    """The sandbox directory cannot be used."""


def shell_identity() -> tuple[int, int] | None:
    """(uid, gid) shell commands run as when the device runs as root; None when it does not (nothing to drop)."""
    if os.geteuid() != 0:
        return None
    for name in SHELL_USERS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise SandboxError(f"running as root and none of the users {', '.join(SHELL_USERS)} exists for shell commands")


def drop_privileges(uid: int, gid: int) -> None:
    """Become the shell user for good: no supplementary groups, real, effective and saved ids all changed."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid):
        raise SandboxError(f"could not become uid {uid} for the device's services")


def reachable_by_others(path: Path) -> bool:
    """True when every directory above `path` lets other users through (o+x)."""
    for parent in path.resolve().parents:
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


@dataclass(frozen=True, slots=True)
class Sandbox:
    root: Path
    owner: tuple[int, int] | None = None  # the unprivileged shell user that owns data/ and sdcard/

    @staticmethod
    def create(root: Path, owner: tuple[int, int] | None = None) -> Sandbox:
        root = root.resolve()
        if not SAFE_PATH.match(str(root)):
            raise SandboxError(f"{root}: a sandbox path may hold only letters, digits and _ . / + -")
        for directory in ("data/local/tmp", "sdcard", BIN_DIR):
            (root / directory).mkdir(parents=True, exist_ok=True)
        sandbox = Sandbox(root, owner)
        if owner is not None:
            if not reachable_by_others(root):
                raise SandboxError(f"{root}: a directory above it is closed to other users; the shell user needs o+x")
            os.chmod(root, 0o755)
            for top in ("data", "sdcard"):
                for directory, _, files in os.walk(root / top):
                    sandbox.give(Path(directory))
                    for name in files:
                        sandbox.give(Path(directory) / name)
        for top in ("data", "sdcard"):
            # only root and the shell user get past the top: what is pushed stays the run's
            os.chmod(root / top, 0o700)
        return sandbox

    def give(self, path: Path) -> None:
        """Hand `path` (never a symlink's target) to the shell user, as adbd's files belong to shell."""
        if self.owner is not None:
            os.chown(path, *self.owner, follow_symlinks=False)

    def contains(self, host: Path) -> bool:
        """True when `host`, symlinks resolved, is the sandbox root or below it."""
        resolved = host.resolve()
        return resolved == self.root or self.root in resolved.parents

    @property
    def home(self) -> Path:
        return self.to_host(HOME_DIR)

    @property
    def bin(self) -> Path:
        return self.root / BIN_DIR

    def to_host(self, device_path: str) -> Path:
        """The host path of a device path (sync). Never outside the sandbox root."""
        path = posixpath.normpath("/" + device_path.lstrip("/")) if device_path else "/"
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        for prefix, directory in ALIASES:
            if path == prefix or path.startswith(prefix + "/"):
                rest = path[len(prefix) :].lstrip("/")
                return self.root / directory / rest if rest else self.root / directory
        rest = path.lstrip("/")
        return self.root / rest if rest else self.root

    def rewrite_command(self, command: str) -> str:
        """The command text with device paths under the known roots pointing into the sandbox."""

        def replace(match: re.Match[str]) -> str:
            return str(self.to_host(match.group(1)))

        return _REWRITE.sub(replace, command)
