"""Which adb client talks to which adb server (docs/adb.md, "Two clients").

- A server on a TCP port (a phone on this host's adb server, a lab's remote server, `--adb-server
  HOST:PORT`) is reached through adbutils' public API (`AdbClient`, `AdbDevice.shell2`, `AdbDevice.sync`,
  and the connections `open_transport` opens): the client real phones have answered for years.
- A server on a unix socket (the kit's private fleet, `localfilesystem:PATH`) is reached through the kit's
  own host-protocol client (adb_host.py): adbutils connects to TCP ports only.

adbutils (and requests under it, about 0.2 s) is imported the first time a TCP server is spoken to, so a
run on the virtual device never loads it; whether anything listens on a TCP port at all is asked with a
plain connect first, so that no call reaches adbutils' habit of starting a server where none answers
(pitfall 1). Both clients give the same `AdbLink`: bounded shell v2 calls, a service stream, pushes,
the device list and `host:connect`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from .adb_host import AdbConnection, AdbServerAddress, AdbServerError, device_states, host_request, server_answers

if TYPE_CHECKING:
    from adbutils import AdbClient, AdbDevice

V2_HEADER: Final = struct.Struct("<BI")  # shell v2 packets: id (0 stdin, 1 stdout, 2 stderr, 3 exit), length
# The largest shell v2 packet the kit reads: adb's own payloads are at most 1 MiB. A longer one is a broken
# or hostile stream, refused before anything of it is read.
MAX_V2_PACKET: Final = 1 << 20
# What one shell call may print in all (its two streams): getprop of a phone is tens of KiB.
MAX_SHELL_OUTPUT: Final = 16 << 20
SYNC_CHUNK: Final = 64 * 1024
LISTEN_PROBE_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class ShellResult:
    """What a shell v2 command gave: its exit status, its two streams, and both as they arrived."""

    returncode: int
    stdout: str
    stderr: str
    output: str


class ServiceStream(Protocol):
    """A connection to an adb server that becomes one device service's stream."""

    def open(self, adb_serial: str, service: str) -> None:
        """Switch to the device, open `service`; reads then wait as long as they must (callers bound them)."""

    def read_exact(self, size: int) -> bytes: ...

    def abort(self) -> None:
        """Break the stream from another thread: a blocked read returns (the device sees CLSE)."""

    def close(self) -> None: ...


class AdbLink(Protocol):
    """One adb server as the adb target talks to it."""

    @property
    def server(self) -> AdbServerAddress: ...

    @property
    def client_name(self) -> str:
        """Which client this is, for messages and docs/adb.md."""

    def answers(self, timeout: float) -> bool: ...

    def device_states(self) -> dict[str, str]: ...

    def connect_device(self, address: str) -> str: ...

    def shell(self, adb_serial: str, command: str, timeout: float) -> ShellResult: ...

    def stream(self, timeout: float) -> ServiceStream: ...

    def push(self, adb_serial: str, files: Mapping[str, bytes], mode: int, timeout: float) -> None: ...


def v2_length(length: int) -> int:
    """A shell v2 packet's length, refused past MAX_V2_PACKET."""
    if length > MAX_V2_PACKET:
        raise AdbServerError(f"a shell v2 packet of {length} bytes (the kit reads at most {MAX_V2_PACKET})")
    return length


def _decoded(out: bytes | bytearray, err: bytes | bytearray, both: bytes | bytearray, code: int) -> ShellResult:
    return ShellResult(code, *(bytes(b).decode("utf-8", errors="replace") for b in (out, err, both)))


# ---------------------------------------------------------------------------------------------
# the kit's own client: unix sockets (the private fleet)


class _KitStream:
    def __init__(self, server: AdbServerAddress, timeout: float) -> None:
        self.connection = AdbConnection(server, timeout)

    def open(self, adb_serial: str, service: str) -> None:
        self.connection.request(f"host:transport:{adb_serial}")
        self.connection.sock.settimeout(None)  # the caller's watchdog bounds every wait
        self.connection.request(service)

    def read_exact(self, size: int) -> bytes:
        return self.connection.read_exact(size)

    def abort(self) -> None:
        self.connection.abort()

    def close(self) -> None:
        self.connection.close()


@dataclass(frozen=True)
class KitLink:
    """The kit's host-protocol client (adb_host.py): every read bounded by a timeout and every packet and
    answer by a size."""

    server: AdbServerAddress
    client_name: str = "the kit's host-protocol client"

    def answers(self, timeout: float) -> bool:
        return server_answers(self.server, timeout)

    def device_states(self) -> dict[str, str]:
        return device_states(self.server)

    def connect_device(self, address: str) -> str:
        return host_request(self.server, f"host:connect:{address}")

    def shell(self, adb_serial: str, command: str, timeout: float) -> ShellResult:
        out, err, both = bytearray(), bytearray(), bytearray()
        with AdbConnection(self.server, timeout) as connection:
            connection.open_service(adb_serial, f"shell,v2,raw:{command}")
            while True:
                ident, length = V2_HEADER.unpack(connection.read_exact(V2_HEADER.size))
                payload = connection.read_exact(v2_length(length)) if length else b""
                if ident == 3:
                    return _decoded(out, err, both, payload[0] if payload else 255)
                if ident in (1, 2):
                    if len(both) + len(payload) > MAX_SHELL_OUTPUT:
                        raise AdbServerError(f"`{command.split(' ', 1)[0]}` printed more than {MAX_SHELL_OUTPUT} bytes")
                    (out if ident == 1 else err).extend(payload)
                    both.extend(payload)

    def stream(self, timeout: float) -> ServiceStream:
        return _KitStream(self.server, timeout)

    def push(self, adb_serial: str, files: Mapping[str, bytes], mode: int, timeout: float) -> None:
        """One sync session: a SEND per file, each answered before the next, then QUIT."""
        with AdbConnection(self.server, timeout) as connection:
            connection.open_service(adb_serial, "sync:")
            for destination, data in files.items():
                spec = f"{destination},{0o100000 | mode}".encode()
                parts = [b"SEND", struct.pack("<I", len(spec)), spec]
                for start in range(0, len(data), SYNC_CHUNK):
                    chunk = data[start : start + SYNC_CHUNK]
                    parts += [b"DATA", struct.pack("<I", len(chunk)), chunk]
                parts += [b"DONE", struct.pack("<I", int(time.time()))]
                connection.sock.sendall(b"".join(parts))
                status = connection.read_exact(8)
                if status[:4] != b"OKAY":
                    size = min(struct.unpack("<I", status[4:])[0], SYNC_CHUNK)
                    message = connection.read_exact(size).decode(errors="replace")
                    raise AdbServerError(f"push {destination}: {message}")
            connection.sock.sendall(b"QUIT" + struct.pack("<I", 0))


# ---------------------------------------------------------------------------------------------
# adbutils: TCP servers (phones, emulators, remote labs)


def listening(server: AdbServerAddress, timeout: float = LISTEN_PROBE_S) -> bool:
    """Whether something accepts connections at a TCP server's address (nothing is sent)."""
    try:
        with socket.create_connection((server.host, server.port), timeout=timeout):
            return True
    except OSError:
        return False


_environment_lock = threading.Lock()


def adbutils_errors() -> tuple[type[BaseException], ...]:
    """adbutils' errors, once adbutils is loaded (a run that never loads it never meets them)."""
    import sys

    module = sys.modules.get("adbutils.errors")
    return (module.AdbError,) if module is not None else ()


class _AdbutilsStream:
    def __init__(self, client: AdbClient, timeout: float) -> None:
        self.connection = client.make_connection(timeout=timeout)
        self._aborted = False

    def open(self, adb_serial: str, service: str) -> None:
        self.connection.send_command(f"host:transport:{adb_serial}")
        self.connection.check_okay()
        self.connection.conn.settimeout(None)  # the caller's watchdog bounds every wait
        self.connection.send_command(service)
        self.connection.check_okay()

    def read_exact(self, size: int) -> bytes:
        data: bytes = self.connection.read_exact(size)
        return data

    def abort(self) -> None:
        with contextlib.suppress(OSError, *adbutils_errors()):
            self.connection.conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError, *adbutils_errors()):
            self.connection.close()



class AdbutilsLink:
    """adbutils' public client for a TCP server. It is made (and adbutils imported) on first use, with
    ANDROID_ADB_SERVER_PORT set to the server's port: should the server vanish during a call, the
    `adb start-server` adbutils then runs starts one on that port, never on 5037 (pitfall 1)."""

    client_name = "adbutils"

    def __init__(self, server: AdbServerAddress) -> None:
        self.server = server
        self._client: AdbClient | None = None
        self._devices: dict[str, AdbDevice] = {}
        self._lock = threading.Lock()

    def client(self) -> AdbClient:
        with self._lock:
            if self._client is None:
                import adbutils

                with _environment_lock:
                    os.environ["ANDROID_ADB_SERVER_PORT"] = str(self.server.port)
                self._client = adbutils.AdbClient(host=self.server.host, port=self.server.port)
            return self._client

    def device(self, adb_serial: str) -> AdbDevice:
        """One AdbDevice per serial: it keeps the device's features, which shell2 asks for once."""
        client = self.client()
        with self._lock:
            found = self._devices.get(adb_serial)
            if found is None:
                found = self._devices[adb_serial] = client.device(serial=adb_serial)
            return found

    def answers(self, timeout: float) -> bool:
        if not listening(self.server, timeout):
            return False
        errors: tuple[type[BaseException], ...] = (OSError, EOFError, *adbutils_errors())
        try:
            self.client().server_version()
        except errors:
            return False
        return True

    def device_states(self) -> dict[str, str]:
        return {info.serial: info.state for info in self.client().list()}

    def connect_device(self, address: str) -> str:
        answer: str = self.client().connect(address, timeout=5.0)
        return answer

    def shell(self, adb_serial: str, command: str, timeout: float) -> ShellResult:
        result: Any = self.device(adb_serial).shell2(command, timeout=timeout, v2=True)
        return ShellResult(result.returncode, result.stdout or "", result.stderr or "", result.output or "")

    def stream(self, timeout: float) -> ServiceStream:
        return _AdbutilsStream(self.client(), timeout)

    def push(self, adb_serial: str, files: Mapping[str, bytes], mode: int, timeout: float) -> None:
        sync = self.device(adb_serial).sync
        for destination, data in files.items():
            sync.push(data, destination, mode=mode)


@functools.cache
def link_for(server: AdbServerAddress) -> AdbLink:
    """The client that talks to `server`: adbutils for a TCP port, the kit's own for a unix socket."""
    return KitLink(server) if server.is_unix else AdbutilsLink(server)
