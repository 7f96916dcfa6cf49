"""The kit's per-user cache: results of pure computations over this checkout's files (the parsed scenario
corpus, the compiled report templates, device discoveries), kept between commands so a short run does
not redo them. Each entry is named by a hash of everything it was computed from, so a changed input
is a new name, never a stale answer.

An entry is read back only when nobody but this user (or root) could have written it: the cache
directory is reached as output directories are (no other user's symlink followed), must be owned by
this user and not writable by group or others, and so must the entry, opened without following a
symlink. Anything else (a missing, foreign, oversized or unreadable entry) is a miss: the caller
computes the value again. A cache that cannot be written is silently skipped; it never fails a command.

`NPUCONF_CACHE_DIR`, else `$XDG_CACHE_HOME/npuconf`, else `~/.cache/npuconf`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from .safe_io import UnsafeOutput, checked_name, open_directory

# An entry larger than this is not read (the corpus pickles to about 1 MB).
ENTRY_MAX_BYTES: Final = 64 << 20
# Entries kept per namespace; older ones (by modification time) are removed when a new one is written.
ENTRIES_KEPT: Final = 16
_FOREIGN_WRITABLE: Final = stat.S_IWGRP | stat.S_IWOTH


def cache_dir() -> Path:
    explicit = os.environ.get("NPUCONF_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "npuconf"


def cache_key(*parts: bytes | str) -> str:
    """A hex name for an entry computed from `parts` (each length-prefixed, so no two lists collide)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", errors="surrogatepass") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _owned_privately(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & _FOREIGN_WRITABLE


def _private_dir_fd(directory: Path) -> int | None:
    """A descriptor of `directory` when this user owns it and no one else may write in it."""
    try:
        fd = open_directory(directory)
    except (OSError, UnsafeOutput):
        return None
    if _owned_privately(os.fstat(fd)):
        return fd
    os.close(fd)
    return None


def _namespace_fd(namespace: str, create: bool) -> int | None:
    """A descriptor of the namespace directory when it, and the cache directory, are this user's own."""
    root = cache_dir()
    directory = root / checked_name(namespace, "cache namespace")
    if create:
        with contextlib.suppress(OSError):
            root.parent.mkdir(parents=True, exist_ok=True)
            for made in (root, directory):
                with contextlib.suppress(FileExistsError):
                    made.mkdir(mode=0o700)
    root_fd = _private_dir_fd(root)
    if root_fd is None:
        return None
    os.close(root_fd)
    return _private_dir_fd(directory)


def read_entry(namespace: str, key: str) -> bytes | None:
    """The bytes of entry `key` of `namespace`, or None (a miss) unless only this user could have written it."""
    fd = _namespace_fd(namespace, create=False)
    if fd is None:
        return None
    try:
        entry = os.open(checked_name(key, "cache key"), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                        dir_fd=fd)  # fmt: skip
    except (OSError, UnsafeOutput):
        return None
    finally:
        os.close(fd)
    with os.fdopen(entry, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or not _owned_privately(info) or info.st_size > ENTRY_MAX_BYTES:
            return None
        try:
            data = handle.read(ENTRY_MAX_BYTES + 1)
        except OSError:
            return None
    return data if len(data) <= ENTRY_MAX_BYTES else None


def write_entry(namespace: str, key: str, data: bytes) -> None:
    """Store entry `key` of `namespace` (mode 0600, written whole then renamed); any failure is ignored."""
    if len(data) > ENTRY_MAX_BYTES:
        return
    fd = _namespace_fd(namespace, create=True)
    if fd is None:
        return
    temporary = f".{secrets.token_hex(8)}.tmp"
    try:
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                      dir_fd=fd)  # fmt: skip
        with os.fdopen(out, "wb") as handle:
            handle.write(data)
        os.replace(temporary, checked_name(key, "cache key"), src_dir_fd=fd, dst_dir_fd=fd)
        _prune(fd, keep=key)
    except (OSError, UnsafeOutput):
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=fd)
    finally:
        os.close(fd)


def _prune(fd: int, keep: str) -> None:
    """At most ENTRIES_KEPT entries: the oldest others are removed."""
    listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)  # fd is O_PATH
    try:
        names = [n for n in os.listdir(listing) if not n.startswith(".")]
    finally:
        os.close(listing)
    if len(names) <= ENTRIES_KEPT:
        return
    aged: list[tuple[float, str]] = []
    for name in names:
        with contextlib.suppress(OSError):
            aged.append((os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime, name))
    for _, name in sorted(aged)[: len(aged) - ENTRIES_KEPT]:
        if name != keep:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)


def source_fingerprint(files: Iterable[Path]) -> str:
    """A hash of source files' bytes: part of a key whenever the cached value depends on the kit's code."""
    return cache_key(*(path.read_bytes() for path in files))
