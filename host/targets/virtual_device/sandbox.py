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

import contextlib
import os
import posixpath
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floor.safe_io import UnsafeOutput, open_directory

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


class SandboxError(ValueError):
    """The sandbox directory cannot be used."""


def reachable_by_others(path: Path) -> bool:
    """True when every directory above `path` lets other users through (o+x)."""
    for parent in path.resolve().parents:
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


TOP_DIRS: Final = ("data/local/tmp", "sdcard", BIN_DIR)
OWNED_DIRS: Final = ("data", "data/local", "data/local/tmp", "sdcard")  # the device's own, as adbd's are shell's


@dataclass(frozen=True, slots=True)
class Sandbox:
    root: Path
    owner: tuple[int, int] | None = None  # the device's own uid and gid while root prepares the sandbox

    @staticmethod
    def create(root: Path, owner: tuple[int, int] | None = None, tools: Mapping[str, str] | None = None) -> Sandbox:
        """The sandbox at `root`, with `tools` (name -> text) in its /system/bin.

        Every operation is relative to a directory descriptor reached with no other user's symlink
        followed (floor/safe_io.py). With `owner` (the device runs as root), a sandbox that survived
        an earlier device is removed whole first (its files belong to that device's identity; a hard
        link planted in it is unlinked, never handed over), and the new one is made, filled and then
        given to `owner`: the sandbox root 0700, its data/ and sdcard/ trees, so nobody else gets in.
        """
        root = Path(os.path.abspath(root))
        if not SAFE_PATH.match(str(root)):
            raise SandboxError(f"{root}: a sandbox path may hold only letters, digits and _ . / + -")
        if owner is not None and not reachable_by_others(root):
            raise SandboxError(f"{root}: a directory above it is closed to other users; the device's own uid needs o+x")
        try:
            parent = open_directory(root.parent, create=True)
        except UnsafeOutput as exc:
            raise SandboxError(str(exc)) from None
        try:
            if owner is not None:
                _remove(parent, root.name, root)
            with contextlib.suppress(FileExistsError):
                os.mkdir(root.name, 0o700, dir_fd=parent)
            _prepare(_open_dir(parent, root.name), owner, tools or {})
        except OSError as exc:
            raise SandboxError(f"{root}: cannot prepare the device filesystem ({exc.strerror or exc})") from None
        finally:
            os.close(parent)
        return Sandbox(root.resolve(), owner)

    def give(self, path: Path) -> None:
        """Hand `path` (never a symlink's target) to the device's own identity, as adbd's files belong to shell."""
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


def _open_dir(parent: int, name: str) -> int:
    """A descriptor of the directory `name` in `parent`, never through a symlink (O_NOFOLLOW)."""
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)


def _remove(parent: int, name: str, shown: Path) -> None:
    """Remove `name` from `parent` whole, symlinks and hard links unlinked, never followed (rmtree's
    descriptor-based walk on Linux)."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent)
        return

    def refuse(function: object, path: str, error: object) -> None:
        raise SandboxError(f"{shown}: cannot remove the earlier device's filesystem ({path})")

    shutil.rmtree(name, onerror=refuse, dir_fd=parent)


def _prepare(fs: int, owner: tuple[int, int] | None, tools: Mapping[str, str]) -> None:
    """Directories and tools in the sandbox `fs` (a descriptor, closed here), each directory reached
    from `fs` one component at a time, never through a symlink; then ownership and modes."""
    try:
        for path in TOP_DIRS:
            directory = os.dup(fs)
            walked: list[str] = []
            try:
                for name in path.split("/"):
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o755, dir_fd=directory)
                    below = _open_dir(directory, name)
                    os.close(directory)
                    directory = below
                    walked.append(name)
                    _own(directory, "/".join(walked), owner)
                if path == BIN_DIR:
                    _write_tools(directory, tools)
            finally:
                os.close(directory)
        if owner is not None:
            os.fchown(fs, *owner)
        os.fchmod(fs, 0o700)
    finally:
        os.close(fs)


def _own(directory: int, path: str, owner: tuple[int, int] | None) -> None:
    """data/ and sdcard/ (0700) and what is below them belong to the device, as adbd's files to shell."""
    if path not in OWNED_DIRS:
        return
    if owner is not None:
        os.fchown(directory, *owner)
    if "/" not in path:
        os.fchmod(directory, 0o700)  # only the device gets past data/ and sdcard/


def _write_tools(directory: int, tools: Mapping[str, str]) -> None:
    """The stub tools (`getprop`, `pm`, executable) and their data files in /system/bin, root's."""
    for name, text in tools.items():
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(name, flags, 0o644, dir_fd=directory), "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o644 if "." in name else 0o755)
            handle.write(text)
