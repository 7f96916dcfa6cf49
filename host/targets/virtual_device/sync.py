"""The `sync:` service: v1 STAT/LIST/SEND/RECV/QUIT plus STA2/LST2/LIS2, on the sandbox."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import tempfile
from pathlib import Path
from typing import Final

from .sandbox import Sandbox
from .streams import ByteReader, Stream, StreamClosed

REQUEST: Final = struct.Struct("<4sI")
STAT_V1: Final = struct.Struct("<4sIII")  # id mode size mtime
DENT_V1: Final = struct.Struct("<4sIIII")  # id mode size mtime namelen
STAT_V2: Final = struct.Struct("<4sIQQIIIIQqqq")  # 72 bytes
DENT_V2: Final = struct.Struct("<4sIQQIIIIQqqqI")  # 76 bytes, then the name
SYNC_DATA_MAX: Final = 64 * 1024
MAX_PATH: Final = 4096


def _stat_v2(ident: bytes, st: os.stat_result | None, error: int = 0) -> bytes:
    if st is None:
        return STAT_V2.pack(ident, error, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return STAT_V2.pack(
        ident,
        0,
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
        st.st_size,
        int(st.st_atime),
        int(st.st_mtime),
        int(st.st_ctime),
    )


def _u32(value: int) -> int:
    return value & 0xFFFFFFFF


class SyncService:
    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def run(self, stream: Stream) -> None:
        reader = ByteReader(stream)
        try:
            while True:
                ident, length = REQUEST.unpack(await reader.read_exactly(REQUEST.size))
                if ident == b"QUIT":
                    break
                if length > MAX_PATH:
                    await self._fail(stream, f"path too long ({length} bytes)")
                    break
                path = (await reader.read_exactly(length)).decode("utf-8", errors="surrogateescape")
                if ident == b"STAT":
                    await stream.write(self._stat_v1(path))
                elif ident in (b"STA2", b"LST2"):
                    await stream.write(self._stat2(ident, path, follow=ident == b"STA2"))
                elif ident == b"LIST":
                    await stream.write(self._list(path, v2=False))
                elif ident == b"LIS2":
                    await stream.write(self._list(path, v2=True))
                elif ident == b"SEND":
                    await self._send(stream, reader, path)
                elif ident == b"RECV":
                    await self._recv(stream, path)
                else:
                    await self._fail(stream, f"unknown sync request {ident!r}")
                    break
        except StreamClosed:
            return
        finally:
            await stream.close()

    async def _fail(self, stream: Stream, message: str) -> None:
        data = message.encode()
        await stream.write(REQUEST.pack(b"FAIL", len(data)) + data)

    def _stat_v1(self, path: str) -> bytes:
        try:
            st = os.lstat(self.sandbox.to_host(path))
        except OSError:
            return STAT_V1.pack(b"STAT", 0, 0, 0)
        return STAT_V1.pack(b"STAT", _u32(st.st_mode), _u32(st.st_size), _u32(int(st.st_mtime)))

    def _stat2(self, ident: bytes, path: str, follow: bool) -> bytes:
        host = self.sandbox.to_host(path)
        try:
            st = os.stat(host) if follow else os.lstat(host)
        except OSError as exc:
            return _stat_v2(ident, None, exc.errno or errno.EIO)
        return _stat_v2(ident, st)

    def _list(self, path: str, v2: bool) -> bytes:
        host = self.sandbox.to_host(path)
        parts: list[bytes] = []
        names: list[str] = []
        with contextlib.suppress(OSError):
            names = [".", "..", *sorted(os.listdir(host))]
        for name in names:
            try:
                st = os.lstat(host / name)
            except OSError:
                continue
            raw = name.encode("utf-8", errors="surrogateescape")
            if v2:
                parts.append(_stat_v2(b"DNT2", st)[: STAT_V2.size] + struct.pack("<I", len(raw)) + raw)
            else:
                parts.append(
                    DENT_V1.pack(b"DENT", _u32(st.st_mode), _u32(st.st_size), _u32(int(st.st_mtime)), len(raw)) + raw
                )
        parts.append(DENT_V2.pack(b"DONE", *([0] * 12)) if v2 else DENT_V1.pack(b"DONE", 0, 0, 0, 0))
        return b"".join(parts)

    async def _send(self, stream: Stream, reader: ByteReader, spec: str) -> None:
        path, _, mode_text = spec.rpartition(",")
        error: str | None = None
        try:
            mode = int(mode_text, 10)  # decimal: "0755" must not be read as octal
        except ValueError:
            path, mode, error = spec, 0o100644, None
        chunks: list[bytes] = []
        mtime = 0
        while True:  # swallow every DATA until DONE, even after an error
            ident, length = REQUEST.unpack(await reader.read_exactly(REQUEST.size))
            if ident == b"DATA":
                if length > SYNC_DATA_MAX:  # refused before its bytes are read: a header is not a reason to hold them
                    await self._fail(stream, f"DATA chunk of {length} bytes exceeds {SYNC_DATA_MAX}")
                    raise StreamClosed
                chunks.append(await reader.read_exactly(length))
                continue
            if ident == b"DONE":
                mtime = length
                break
            await self._fail(stream, f"unexpected {ident!r} during SEND")
            raise StreamClosed
        if error is None:
            error = self._store(self.sandbox.to_host(path), mode, b"".join(chunks), mtime)
        if error is None:
            await stream.write(REQUEST.pack(b"OKAY", 0))
        else:
            await self._fail(stream, error)

    def _store(self, host: Path, mode: int, data: bytes, mtime: int) -> str | None:
        try:
            existing = host.parent
            created: list[Path] = []
            while not existing.exists() and not existing.is_symlink():
                created.append(existing)
                existing = existing.parent
            if not self.sandbox.contains(existing) or (host.is_symlink() and not stat.S_ISLNK(mode)
                                                       and not self.sandbox.contains(host)):
                return f"{host.name}: a symlink leads outside the device filesystem"
            host.parent.mkdir(parents=True, exist_ok=True)
            for directory in reversed(created):
                self.sandbox.give(directory)
            if stat.S_ISLNK(mode):
                with contextlib.suppress(FileNotFoundError):
                    host.unlink()
                os.symlink(data.decode("utf-8", errors="surrogateescape"), host)
                self.sandbox.give(host)
                return None
            if host.is_dir():
                return f"{host.name}: Is a directory"
            perms = mode & 0o700  # owner-only: other local users must not read or replace the probe
            # Write beside and rename: a probe that is running keeps its old binary.
            fd, temporary = tempfile.mkstemp(dir=host.parent, prefix=f".{host.name}.")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                os.chmod(temporary, perms)
                self.sandbox.give(Path(temporary))
                if mtime:
                    os.utime(temporary, (mtime, mtime))
                os.replace(temporary, host)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as exc:
            return f"{exc.strerror or exc}"
        return None

    async def _recv(self, stream: Stream, path: str) -> None:
        host = self.sandbox.to_host(path)
        if not self.sandbox.contains(host):
            await self._fail(stream, f"{path}: a symlink leads outside the device filesystem")
            return
        try:
            with open(host, "rb") as source:
                while chunk := source.read(SYNC_DATA_MAX):
                    await stream.write(REQUEST.pack(b"DATA", len(chunk)) + chunk)
        except OSError as exc:
            await self._fail(stream, exc.strerror or str(exc))
            return
        await stream.write(REQUEST.pack(b"DONE", 0))
