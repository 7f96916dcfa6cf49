"""Files the offline commands write at a path the user gives: they replace only a file the kit wrote.

`npuconf spec --out FILE` and `npuconf errata --out DIR` write pages at paths the user names. A path
that already holds something else (a typo, `--out /etc/passwd` run as root) is refused in one line,
never overwritten: a file is replaced only when its first bytes show it is the same kind of page the kit
writes there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from floor.safe_io import read_small

from ..errors import UsageError

_HEAD_BYTES: Final = 4096  # the kit's pages name themselves within their first lines


def check_replaceable(path: Path, signature: bytes, option: str) -> None:
    """Raise UsageError unless `path` is absent or a regular file whose first bytes hold `signature`."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot look at it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{option} {path}: exists and is not a regular file; give a new path")
    head = read_small(path, info.st_size) if info.st_size <= _HEAD_BYTES else _head(path)
    if head is None or signature not in head:
        raise UsageError(
            f"{option} {path}: exists and is not a page npuconf wrote; give a new path, or remove it first"
        )


def _head(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(_HEAD_BYTES)
