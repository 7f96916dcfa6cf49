"""The adb host protocol ("smart socket") as a client speaks it to an adb server: one `host:` request,
its answer (version, devices, connect and disconnect), or a connection switched to one device's service
(`host:transport:SERIAL`, then `shell,v2,raw:...` or `sync:`), whose stream is then the service's. It
talks to the servers adbutils cannot reach, the private fleet's unix sockets, and serves the fleet's own
bookkeeping (adb_clients.py says which client talks to which server).

An adb server is reached at a TCP address (`HOST:PORT`, a phone lab's servers) or at a unix socket
(`localfilesystem:PATH`, adb's own notation for `-L`): the kit's private servers listen on a socket in
a directory only the run's user may enter, so no other local user can connect (docs/adb.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from typing import Final

from ..errors import InfraError, UsageError

LOOPBACK: Final = "127.0.0.1"
DEFAULT_SERVER_PORT: Final = 5037
UNIX_PREFIX: Final = "localfilesystem:"
BACKLOG_RETRY_S: Final = 0.005


class AdbServerError(InfraError):
    """An adb server could not be started or answered wrongly."""


@dataclass(frozen=True, slots=True)
class AdbServerAddress:
    """Where an adb server listens: a TCP `host:port`, or a unix socket `path` (then host and port are unused)."""

    host: str = LOOPBACK
    port: int = 0
    path: str = ""

    @staticmethod
    def parse(text: str) -> AdbServerAddress:
        if text.startswith(UNIX_PREFIX):
            path = text[len(UNIX_PREFIX) :]
            if not path.startswith("/"):
                raise UsageError(f"--adb-server {text}: expected localfilesystem:/ABSOLUTE/PATH of the server's socket")
            return AdbServerAddress(path=path)
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(
                f"--adb-server {text}: expected HOST:PORT, e.g. 127.0.0.1:5037, or localfilesystem:PATH of a socket"
            )
        return AdbServerAddress(host.strip("[]"), int(port))

    @staticmethod
    def default() -> AdbServerAddress:
        """The server adb itself would use: `ADB_SERVER_SOCKET` (`localfilesystem:PATH` or `tcp:[HOST:]PORT`),
        else `ANDROID_ADB_SERVER_HOST` and `ANDROID_ADB_SERVER_PORT`, else 127.0.0.1:5037."""
        spec = os.environ.get("ADB_SERVER_SOCKET", "")
        if spec.startswith(UNIX_PREFIX) and spec[len(UNIX_PREFIX) :].startswith("/"):
            return AdbServerAddress(path=spec[len(UNIX_PREFIX) :])
        if spec.startswith("tcp:"):
            host, _, port_text = spec[4:].rpartition(":")
            if port_text.isdigit():
                return AdbServerAddress(host.strip("[]") or LOOPBACK, int(port_text))
        port = os.environ.get("ANDROID_ADB_SERVER_PORT", "")
        host = os.environ.get("ANDROID_ADB_SERVER_HOST", LOOPBACK)
        return AdbServerAddress(host, int(port) if port.isdigit() else DEFAULT_SERVER_PORT)

    @staticmethod
    def unix(path: str) -> AdbServerAddress:
        return AdbServerAddress(path=path)

    @property
    def is_unix(self) -> bool:
        return bool(self.path)

    def adb_option(self) -> tuple[str, str]:
        """The `adb` option that reaches this server: `-L localfilesystem:PATH` or `-P PORT`."""
        return ("-L", f"{UNIX_PREFIX}{self.path}") if self.is_unix else ("-P", str(self.port))

    def connect(self, timeout: float) -> socket.socket:
        """A connected socket to the server (raises OSError when nothing accepts there).

        adb listens with a backlog of 4: on a unix socket a full backlog is EAGAIN at once (TCP would
        retry the handshake by itself), so the connection is tried again until `timeout`."""
        if not self.is_unix:
            return socket.create_connection((self.host, self.port), timeout=timeout)
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(self.path)
            except BlockingIOError:
                sock.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(BACKLOG_RETRY_S)
                continue
            except BaseException:
                sock.close()
                raise
            return sock

    def __str__(self) -> str:
        return f"{UNIX_PREFIX}{self.path}" if self.is_unix else f"{self.host}:{self.port}"


def host_request(server: AdbServerAddress, request: str, timeout: float = 5.0) -> str:
    """Send one `host:` request to an adb server and return its answer (OKAY payload or FAIL raises)."""
    with server.connect(timeout) as sock:
        sock.settimeout(timeout)
        payload = request.encode()
        sock.sendall(f"{len(payload):04x}".encode() + payload)
        status = _recv_exactly(sock, 4)
        data = b""
        if status in (b"OKAY", b"FAIL"):
            with contextlib.suppress(OSError, ValueError):
                length = int(_recv_exactly(sock, 4), 16)
                data = _recv_exactly(sock, length)
        if status != b"OKAY":
            raise AdbServerError(f"adb server {server}: {request}: {data.decode(errors='replace') or status!r}")
        return data.decode(errors="replace")


class AdbConnection:
    """One connection to an adb server; after `open_service` its stream is that device service's own."""

    def __init__(self, server: AdbServerAddress, timeout: float) -> None:
        self.server = server
        self.sock = server.connect(timeout)
        self.sock.settimeout(timeout)

    def request(self, text: str) -> None:
        """Send one request and read its OKAY; a FAIL raises AdbServerError with the server's message."""
        payload = text.encode()
        self.sock.sendall(f"{len(payload):04x}".encode() + payload)
        status = self.read_exact(4)
        if status == b"OKAY":
            return
        message = b""
        if status == b"FAIL":
            with contextlib.suppress(OSError, ValueError):
                message = self.read_exact(int(self.read_exact(4), 16))
        service = text.split(":", 1)[0] if not text.startswith("host:") else text
        raise AdbServerError(f"adb server {self.server}: {service}: {message.decode(errors='replace') or status!r}")

    def open_service(self, adb_serial: str, service: str) -> None:
        """Switch to the device `adb_serial`, then open `service` there."""
        self.request(f"host:transport:{adb_serial}")
        self.request(service)

    def read_exact(self, size: int) -> bytes:
        return _recv_exactly(self.sock, size)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def abort(self) -> None:
        """Break the stream from another thread: a reader blocked on it returns (the device sees CLSE)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> AdbConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed by the adb server")
        data += chunk
    return data


def server_answers(server: AdbServerAddress, timeout: float = 0.3) -> bool:
    """True when an adb server answers `host:version` there (never starts one)."""
    try:
        host_request(server, "host:version", timeout=timeout)
    except (OSError, AdbServerError):
        return False
    return True


def device_states(server: AdbServerAddress) -> dict[str, str]:
    """serial -> state (`device`, `offline`, ...) as the server lists them."""
    listing = host_request(server, "host:devices")
    states: dict[str, str] = {}
    for line in listing.splitlines():
        serial, _, state = line.partition("\t")
        if serial:
            states[serial] = state.strip()
    return states
