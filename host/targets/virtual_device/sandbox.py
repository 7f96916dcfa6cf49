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

import posixpath
import re
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


class SandboxError(ValueError):
    """The sandbox directory cannot be used."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    root: Path

    @staticmethod
    def create(root: Path) -> Sandbox:
        root = root.resolve()
        if not SAFE_PATH.match(str(root)):
            raise SandboxError(f"{root}: a sandbox path may hold only letters, digits and _ . / + -")
        for directory in ("data/local/tmp", "sdcard", BIN_DIR):
            (root / directory).mkdir(parents=True, exist_ok=True)
        return Sandbox(root)

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
