"""`shell:`, `shell,v2,...:` and `exec:` services: host processes in the device's sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import struct
from dataclasses import dataclass
from typing import Any, Final

from .profile import DeviceProfile
from .sandbox import Sandbox
from .streams import ByteReader, Stream, StreamClosed

ID_STDIN: Final = 0
ID_STDOUT: Final = 1
ID_STDERR: Final = 2
ID_EXIT: Final = 3
ID_CLOSE_STDIN: Final = 4
ID_WINDOW_SIZE: Final = 5
V2_HEADER: Final = struct.Struct("<BI")
READ_CHUNK: Final = 64 * 1024
STDIN_FRAME_MAX: Final = 1 << 20
PR_SET_PDEATHSIG: Final = 1


@dataclass(frozen=True, slots=True)
class ShellRequest:
    command: str
    v2: bool
    merge_stderr: bool  # legacy shell and exec: stderr goes into the one output stream


def parse_service(service: str) -> ShellRequest | None:
    """The shell request a service string names (`shell:`, `shell,v2,TERM=xterm,raw:`, `exec:`), or None."""
    if service.startswith("exec:"):
        return ShellRequest(service[5:], v2=False, merge_stderr=True)
    if not service.startswith("shell"):
        return None
    head, sep, command = service.partition(":")
    if not sep:
        return None
    options = head.split(",")[1:]
    if head.split(",")[0] != "shell":
        return None
    return ShellRequest(command, v2="v2" in options, merge_stderr="v2" not in options)


def _die_with_parent() -> None:
    """Child setup: the shell dies with the device process (PR_SET_PDEATHSIG), no orphaned shells."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class ShellService:
    def __init__(self, sandbox: Sandbox, profile: DeviceProfile) -> None:
        self.sandbox = sandbox
        self.profile = profile
        # never root: the shell user owns data/ and sdcard/ (sandbox.owner); None when not running as root
        self._identity: dict[str, Any] = (
            {"user": sandbox.owner[0], "group": sandbox.owner[1], "extra_groups": []} if sandbox.owner else {}
        )
        bin_dir = str(sandbox.bin)
        self.env = {
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(sandbox.home),
            "TMPDIR": str(sandbox.home),
            "ANDROID_DATA": str(sandbox.to_host("/data")),
            "EXTERNAL_STORAGE": str(sandbox.to_host("/sdcard")),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }

    async def run(self, stream: Stream, request: ShellRequest) -> None:
        try:
            builtin = self.profile.builtin(request.command)
            if builtin is not None:
                output, status = builtin
                await self._send(stream, request.v2, ID_STDOUT, output.encode())
                if request.v2:
                    await stream.write(V2_HEADER.pack(ID_EXIT, 1) + bytes([status]))
            else:
                await self._run_process(stream, request)
        except StreamClosed:
            pass
        finally:
            await stream.close()

    async def _send(self, stream: Stream, v2: bool, ident: int, data: bytes) -> None:
        if not data:
            return
        if not v2:
            await stream.write(data)
            return
        step = max(1, stream.sender.max_payload - V2_HEADER.size)
        for start in range(0, len(data), step):
            part = data[start : start + step]
            await stream.write(V2_HEADER.pack(ident, len(part)) + part)

    async def _run_process(self, stream: Stream, request: ShellRequest) -> None:
        command = request.command.strip()
        argv = ["/bin/sh", "-c", self.sandbox.rewrite_command(command)] if command else ["/bin/sh"]
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if request.merge_stderr else asyncio.subprocess.PIPE,
            cwd=str(self.sandbox.home),
            env=self.env,
            start_new_session=True,  # its own process group: a CLSE kills the whole tree
            preexec_fn=_die_with_parent,
            **self._identity,
        )
        assert process.stdout is not None and process.stdin is not None
        outputs = [asyncio.create_task(self._pump_out(stream, request.v2, ID_STDOUT, process.stdout))]
        if process.stderr is not None:
            outputs.append(asyncio.create_task(self._pump_out(stream, request.v2, ID_STDERR, process.stderr)))
        feeder = asyncio.create_task(self._pump_in(stream, request.v2, process.stdin))
        closed = asyncio.create_task(stream.peer_closed.wait())
        finished = asyncio.create_task(self._finish(process, outputs))
        try:
            done, _ = await asyncio.wait({closed, finished}, return_when=asyncio.FIRST_COMPLETED)
            if finished in done and not stream.closed:
                status = finished.result()
                if request.v2:
                    await stream.write(V2_HEADER.pack(ID_EXIT, 1) + bytes([status & 0xFF]))
        finally:
            _kill_group(process.pid)
            for task in (*outputs, feeder, closed, finished):
                task.cancel()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    async def _finish(self, process: asyncio.subprocess.Process, outputs: list[asyncio.Task[None]]) -> int:
        await asyncio.gather(*outputs, return_exceptions=True)
        code = await process.wait()
        return 128 - code if code < 0 else code

    async def _pump_out(self, stream: Stream, v2: bool, ident: int, pipe: asyncio.StreamReader) -> None:
        while True:
            data = await pipe.read(READ_CHUNK)
            if not data:
                return
            await self._send(stream, v2, ident, data)

    async def _pump_in(self, stream: Stream, v2: bool, stdin: asyncio.StreamWriter) -> None:
        try:
            if not v2:
                while (chunk := await stream.read()) is not None:
                    stdin.write(chunk)
                    await stdin.drain()
                return
            reader = ByteReader(stream)
            while True:
                ident, length = V2_HEADER.unpack(await reader.read_exactly(V2_HEADER.size))
                if length > STDIN_FRAME_MAX:  # adb frames stdin in packets of at most its max payload
                    return
                payload = await reader.read_exactly(length) if length else b""
                if ident == ID_STDIN:
                    stdin.write(payload)
                    await stdin.drain()
                elif ident == ID_CLOSE_STDIN:
                    stdin.close()
                    return
                # window-size changes and unknown ids are ignored (no pty)
        except (StreamClosed, ConnectionError, BrokenPipeError):
            return


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
