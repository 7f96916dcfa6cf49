"""Writing files safely, the one primitive every writer of the kit uses (reports, results, bundles, runs).

The kit often runs as root on run directories other people made. So:
- a file is written to a temporary file created exclusively (O_EXCL | O_NOFOLLOW) in the target's own
  directory, then renamed over the target: an existing symlink at the target or at a predictable
  temporary name is never written through (the rename replaces the link itself);
- an output directory is reached component by component with no symlink followed unless root or the
  kit's own user made it, and every file operation is relative to that one directory descriptor
  (`open_directory`): a directory swapped for a symlink mid-write redirects nothing; an output
  directory that is itself a symlink is refused (`UnsafeOutput`, one line);
- appends (results.jsonl, logs) open with O_NOFOLLOW: a symlink there is refused;
- a name taken from run data (run id, device name, serial, ABI, scenario id) becomes part of a path
  only through `checked_name`;
- a full disk (ENOSPC, EDQUOT, EFBIG) is `OutputFailed`, which the command line reports in one line
  naming the path, with exit 2.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final

from reference_model.errors import KitError

# Errors that mean "the host could not store what it had to": the run is incomplete (exit 2).
DISK_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=,-]*")
NAME_MAX: Final = 128

# C0/C1 controls, and the invisible format characters that reorder or hide what a terminal shows
# (bidirectional overrides and isolates such as U+202E, zero-width characters, line separators).
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
# Characters XML 1.0 forbids (and lone surrogates, which no UTF-8 writer accepts).
_FORBIDDEN: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class UnsafeOutput(KitError):
    """The kit was asked to write through a symlink, or to build a path from an unsafe name (exit 3)."""


class OutputFailed(KitError):
    """The host could not write a file it needed (disk full, quota): the run is incomplete (exit 2)."""

    def __init__(self, path: Path | str, cause: OSError) -> None:
        self.path = str(path)
        self.cause = cause
        super().__init__(f"cannot write {path}: {cause.strerror or cause}; free space there and run again")


def checked_name(value: object, what: str) -> str:
    """`value` when it is safe as one path component; UnsafeOutput otherwise.

    Safe: 1 to 128 characters from letters, digits and `._:@+=,-`, starting with a letter or digit,
    and not `..`-bearing. This is the one validator for run ids, device names, serials, ABI strings
    and scenario ids.
    """
    text = value if isinstance(value, str) else repr(value)
    if (
        not isinstance(value, str)
        or len(value) > NAME_MAX
        or not _NAME.fullmatch(value)
        or ".." in value
    ):
        shown = console_text(text[:80]) + ("…" if len(text) > 80 else "")
        raise UnsafeOutput(
            f"{what} {shown!r} is not a safe name (1-{NAME_MAX} of letters, digits and ._:@+=,- "
            "starting with a letter or digit, no '..'); it is never used as part of a path"
        )
    return value


def console_text(text: str) -> str:
    """`text` with terminal control characters (escape sequences, carriage returns) shown as `\\xNN`, and
    invisible reordering characters (U+202E and the like) as `\\uNNNN`."""
    return _CONTROL.sub(visible_escape, text)


def safe_text(text: str) -> str:
    """`text` with every character XML 1.0 forbids written as a visible escape (`\\x1b`, `\\ud800`)."""
    return _FORBIDDEN.sub(visible_escape, text)


def visible_escape(match: re.Match[str]) -> str:
    """The matched character as `\\xNN` (below U+0100) or `\\uNNNN`, for text shown where it may not act."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _disk(exc: OSError, path: Path | str) -> OSError | OutputFailed:
    return OutputFailed(path, exc) if exc.errno in DISK_ERRNOS else exc


SYMLINK_HOPS: Final = 40  # as the kernel's own limit on symlinks in one path


def _trusted_link(info: os.stat_result) -> bool:
    """A symlink the kit follows on the way to an output directory: one root or the kit's own user made.
    Anyone else's symlink (the only kind another local user can swap in) is never followed."""
    return info.st_uid in (0, os.geteuid())


def open_directory(directory: Path, create: bool = False) -> int:
    """An O_PATH descriptor of `directory`, reached component by component from `/` with no symlink
    followed unless root or the kit's own user owns it; the last component is never a symlink.
    With `create`, missing directories are made (mkdirat) on the way. A directory swapped for
    someone else's symlink between two writes makes the walk fail (UnsafeOutput), never write there."""
    parts = list(Path(os.path.abspath(directory)).parts[1:])
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    hops = 0
    try:
        while parts:
            name = parts.pop(0)
            last = not parts
            try:
                next_fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
                parts.insert(0, name)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISLNK(info.st_mode):
                    raise UnsafeOutput(f"{directory}: {name} exists and is not a directory") from None
                if last:
                    raise UnsafeOutput(
                        f"{directory}: is a symlink; the kit never writes into a directory through a symlink"
                    ) from None
                hops += 1
                if hops > SYMLINK_HOPS or not _trusted_link(info):
                    raise UnsafeOutput(
                        f"{directory}: {name} is a symlink of uid {info.st_uid} (neither root nor this user); "
                        "the kit never writes through another user's symlink"
                    ) from None
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    os.close(fd)
                    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                parts[:0] = [p for p in Path(target).parts if p != "/"]
                continue
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


def output_dir(directory: Path) -> Path:
    """Create `directory` (and its parents) if needed; refuse it when it is a symlink or not a directory."""
    os.close(_output_dir_fd(directory))
    return directory


def _output_dir_fd(directory: Path) -> int:
    try:
        return open_directory(directory, create=True)
    except UnsafeOutput:
        raise
    except OSError as exc:
        raise _disk(exc, directory) from None


@contextlib.contextmanager
def atomic_output(path: Path, mode: int | None = None) -> Iterator[IO[bytes]]:
    """A binary file that becomes `path` (by rename) when the block ends without an exception.

    Every step (create, write, rename, clean-up) is relative to one descriptor of the directory, so a
    swap of the directory during the write cannot redirect any of them. With `mode`, the file has that
    mode before it gets its name (a private key is never readable by others, not even for a moment)."""
    dir_fd = _output_dir_fd(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    temporary = f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        try:
            fd = os.open(temporary, flags, 0o644, dir_fd=dir_fd)
        except OSError as exc:
            raise _disk(exc, path.parent / temporary) from None
        try:
            with os.fdopen(fd, "wb") as handle:
                if mode is not None:
                    os.fchmod(handle.fileno(), mode)
                yield handle
            os.replace(temporary, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise _disk(exc, path) from None
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> Path:
    """Replace `path` with `data` safely (exclusive temporary file in the same directory, then rename)."""
    with atomic_output(path, mode) as handle:
        handle.write(data)
    return path


def write_text(path: Path, text: str, mode: int | None = None) -> Path:
    """`write_bytes` of UTF-8 text; lone surrogates are written as U+FFFD, never an exception."""
    return write_bytes(path, text.encode("utf-8", errors="replace"), mode)


def create_exclusive(path: Path, data: bytes, mode: int) -> bool:
    """Create `path` holding `data` with `mode` unless something (a file, a symlink) is already there:
    True when this call created it. Its directory is reached as `open_directory` reaches one."""
    dir_fd = _output_dir_fd(path.parent)
    try:
        try:
            fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                         dir_fd=dir_fd)  # fmt: skip
        except FileExistsError:
            return False
        except OSError as exc:
            raise _disk(exc, path) from None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "wb") as handle:
        try:
            handle.write(data)
        except OSError as exc:
            raise _disk(exc, path) from None
    return True


def remove_file(path: Path) -> None:
    """Remove the file (or symlink) `path`, its directory reached as `open_directory` reaches one: the name
    is removed there, never anything a symlink on the way leads to. FileNotFoundError when absent."""
    dir_fd = open_directory(path.parent)
    try:
        os.unlink(path.name, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def refuse_foreign_symlink(dir_fd: int, name: str, shown: Path) -> None:
    """UnsafeOutput when `name` in the directory `dir_fd` is a symlink neither root nor this user made
    (the rule `open_directory` applies on the way to a directory, applied to a file opened by name)."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) and not _trusted_link(info):
        raise UnsafeOutput(
            f"{shown}: is a symlink of uid {info.st_uid} (neither root nor this user); "
            "the kit never opens a file through another user's symlink"
        )


def open_append(path: Path) -> IO[bytes]:
    """Open `path` for appending in binary, creating it; a symlink there is refused (O_NOFOLLOW)."""
    dir_fd = _output_dir_fd(path.parent)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path.name, flags, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeOutput(f"{path}: is a symlink; the kit never appends through a symlink") from None
        raise _disk(exc, path) from None
    finally:
        os.close(dir_fd)
    return os.fdopen(fd, "ab")


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` to `path` (see `open_append`); a full disk is OutputFailed."""
    with open_append(path) as handle:
        try:
            handle.write(data)
            handle.flush()
        except OSError as exc:
            raise _disk(exc, path) from None


def repair_torn_tail(path: Path) -> int:
    """Cut a last line that has no newline (a write torn by a full disk or a kill); bytes removed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeOutput(f"{path}: is a symlink; the kit never repairs a file through a symlink") from None
        raise
    with os.fdopen(fd, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        # find the last newline, reading backwards in blocks
        position = size
        keep = 0
        while position > 0:
            start = max(0, position - 65536)
            handle.seek(start)
            block = handle.read(position - start)
            index = block.rfind(b"\n")
            if index >= 0:
                keep = start + index + 1
                break
            position = start
        handle.truncate(keep)
        return size - keep


FOREIGN_WRITABLE: Final = stat.S_IWGRP | stat.S_IWOTH


def owned_privately(info: os.stat_result) -> bool:
    """This user's own, and writable by no group or other user: nobody else could have put it there or changed it."""
    return info.st_uid == os.geteuid() and not info.st_mode & FOREIGN_WRITABLE


def state_location() -> Path:
    """`NPUCONF_STATE_DIR`, else `$XDG_STATE_HOME/npuconf`, else `~/.local/state/npuconf` (not checked)."""
    explicit = os.environ.get("NPUCONF_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "npuconf"


def host_state_dir() -> Path:
    """Where this host keeps what it must remember between commands (runs it created, fleets it started,
    its host id): `state_location()`, made private (0700) when missing. What is kept there is trusted, so
    a directory another user owns, or one others may write in, is refused in one line (UnsafeOutput)."""
    path = state_location()
    private_directory(path, "the kit's state directory", "choose another with NPUCONF_STATE_DIR")
    return path


def shared_default(path: Path, hops: int = 0) -> str | None:
    """Why the kit may not use `path` as a default location (a file or directory the user did not name):
    None when its directory belongs to this user or root and no one else may write in it, and `path`, if
    there, is this user's and writable by no one else. A default in a directory others can write (the
    shared temporary directory) could be planted, or swapped, by any local user; so could one of theirs."""
    directory = path.parent
    try:
        fd = open_directory(directory)
    except FileNotFoundError:
        return None  # made by the kit, for this user
    except (OSError, UnsafeOutput) as exc:
        return f"its directory {directory} cannot be reached safely ({exc})"
    try:
        info = os.fstat(fd)
        if info.st_uid not in (0, os.geteuid()):
            return f"its directory {directory} belongs to uid {info.st_uid}"
        if info.st_mode & FOREIGN_WRITABLE:
            return f"its directory {directory} is writable by other users (mode {stat.S_IMODE(info.st_mode):04o})"
        try:
            own = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"it cannot be examined ({exc.strerror or exc})"
    finally:
        os.close(fd)
    if stat.S_ISLNK(own.st_mode):
        if not _trusted_link(own):
            return f"it is a symlink of uid {own.st_uid}"
        if hops >= SYMLINK_HOPS:
            return "too many symlinks"
        return shared_default(directory / os.readlink(path), hops + 1)
    if not stat.S_ISLNK(own.st_mode) and not owned_privately(own):
        whose = f"belongs to uid {own.st_uid}" if own.st_uid != os.geteuid() else "is writable by other users"
        return f"it {whose}"
    return None


def private_directory(path: Path, what: str, fix: str) -> None:
    """Create the directory `path` (mode 0700; its parents as `output_dir` makes them) when missing; refuse it
    (UnsafeOutput, one line naming `what` and `fix`) unless it is this user's and no one else may write in it.
    A symlink at `path` is followed only when root or this user made it."""
    parent = _output_dir_fd(path.parent)
    try:
        try:
            os.mkdir(path.name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _disk(exc, path) from None
        info = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            if not _trusted_link(info):
                raise UnsafeOutput(
                    f"{path}: {what} is a symlink of uid {info.st_uid} (neither root nor this user); {fix}"
                )
            info = os.stat(path.name, dir_fd=parent)
    finally:
        os.close(parent)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeOutput(f"{path}: {what} is not a directory; {fix}")
    if info.st_uid != os.geteuid():
        raise UnsafeOutput(
            f"{path}: {what} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()}); "
            f"the kit trusts nothing another user could have put there; {fix}"
        )
    if info.st_mode & FOREIGN_WRITABLE:
        raise UnsafeOutput(
            f"{path}: {what} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"the kit trusts nothing another user could have put there; chmod go-w it, or {fix}"
        )


def read_unfollowed(path: Path, limit_bytes: int | None = None) -> bytes:
    """The bytes of the regular file `path`: its directory reached as `open_directory` reaches one, the
    file opened without following a symlink. A run's results.jsonl swapped for a link to a file only
    root may read is never read, so never published in a report. Raises OSError (ELOOP for a symlink,
    EINVAL for a file that is not regular) or UnsafeOutput (another user's symlink on the way). With
    `limit_bytes`, at most that many bytes and one more are read (the caller refuses the file then)."""
    directory = open_directory(path.parent)
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=directory)
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return handle.read() if limit_bytes is None else handle.read(limit_bytes + 1)


_KINDS: Final = (
    (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
)  # fmt: skip


def read_regular(path: Path, limit_bytes: int) -> bytes:
    """At most `limit_bytes` + 1 bytes of the file a user named (a symlink the user named is followed): the
    caller refuses more than `limit_bytes`. It is opened without blocking, so a FIFO never waits for a
    writer, and anything but a regular file (a FIFO, /dev/zero, a socket, a directory) is refused before
    a byte is read: OSError(EINVAL) saying what it is. Other OSErrors as they come."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        return handle.read(limit_bytes + 1)


def read_small(path: Path, limit_bytes: int) -> bytes | None:
    """The bytes of a small regular file, not following a symlink; None when absent, unsafe or too large."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(limit_bytes + 1)
    return data if len(data) <= limit_bytes else None
