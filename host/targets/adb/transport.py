"""Reaching devices through adb servers: device listing, and one device's transport (bounded shell v2 calls
and pushes over the kit's own host-protocol client, recovery after a broken link). An adbutils client
that never starts a server (`adb_client`) is there for the kit's tests and benches, which check the
virtual devices with a third-party client; a run does not import adbutils."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from reports.floor.limits import limit, over

from ...errors import InfraError, UsageError
from ..adb_host import (
    MESSAGE_MAX_BYTES,
    AdbConnection,
    AdbServerAddress,
    AdbServerError,
    ForeignAdbServer,
    device_states,
    host_request,
    server_answers,
)

if TYPE_CHECKING:
    from adbutils import AdbClient

COMMAND_TIMEOUT_S: Final = 20.0
PUSH_TIMEOUT_S: Final = 60.0
# After a broken stream: how long the device may take to be back before it is declared lost.
RECOVERY_GRACE_S: Final = 3.0
SYNC_CHUNK: Final = 64 * 1024
CONNECT_TIMEOUT_S: Final = 3.0  # as adbutils bounds its own connect

T = TypeVar("T")
Made = TypeVar("Made")


class DeviceLost(InfraError):
    """The device stopped answering (gone from adb, or hung): the rest of its plan is NOT_EXECUTED."""


@functools.cache
def _client_class() -> type[AdbClient]:
    """adbutils' client, with connections that fail instead of running `adb start-server` (which would use
    5037) and that reach a server on a unix socket as well as on a TCP port. Built on first use: adbutils
    (and requests, PIL under it) is imported only by the tests and benches that use it."""
    from adbutils import AdbClient
    from adbutils._adb import AdbConnection as AdbutilsConnection
    from adbutils.errors import AdbConnectionError

    class _Connection(AdbutilsConnection):  # type: ignore[misc]
        def __init__(self, server: AdbServerAddress) -> None:
            self._server = server
            super().__init__(server.host, server.port)

        def _safe_connect(self) -> socket.socket:
            if not self._server.is_unix:
                sock: socket.socket = self._create_socket()
                return sock
            try:
                sock = self._server.connect(timeout=CONNECT_TIMEOUT_S)
            except OSError as exc:
                raise AdbConnectionError(f"connect to adb server {self._server} failed: {exc}") from None
            sock.settimeout(None)
            return sock

    class _Client(AdbClient):  # type: ignore[misc]
        def __init__(self, server: AdbServerAddress) -> None:
            super().__init__(host=server.host, port=server.port)
            self._server = server

        def make_connection(self, timeout: float | None = None) -> AdbutilsConnection:
            connection = _Connection(self._server)
            if timeout:
                connection.conn.settimeout(timeout)
            return connection

    return _Client


def adb_errors() -> tuple[type[BaseException], ...]:
    """What an adb call raises when its link broke or the server refused it: OSError, EOFError, AdbServerError."""
    return (OSError, EOFError, AdbServerError)


V2_HEADER: Final = struct.Struct("<BI")  # shell v2 packets: id (0 stdin, 1 stdout, 2 stderr, 3 exit), length


@dataclass(frozen=True, slots=True)
class ShellResult:
    """What a shell v2 command gave: its exit status, its two streams, and both as they arrived."""

    returncode: int
    stdout: str
    stderr: str
    output: str


class Cancel:
    """Lets `bounded` end, from its own thread, the wait of a call that outlived its bound: the call hands
    over its connection (`attach`), and `cancel` breaks it, so the reader thread stops instead of reading on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: AdbConnection | None = None
        self.cancelled = False

    def attach(self, connection: AdbConnection) -> None:
        with self._lock:
            self._connection = connection
            cancelled = self.cancelled
        if cancelled:
            connection.abort()

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            connection = self._connection
        if connection is not None:
            connection.abort()


def shell_v2(
    server: AdbServerAddress, adb_serial: str, command: str, timeout: float, cancel: Cancel | None = None
) -> ShellResult:
    """Run `command` on the device over one shell v2 stream (its exit status is in the stream), all of it
    within `timeout` seconds (TimeoutError past it). Frames are read in pieces whatever length their
    header announces; of each stream at most `shell_output_bytes` is kept (the rest is read and dropped,
    with a note)."""
    keep = limit("shell_output_bytes")
    out, err, both = bytearray(), bytearray(), bytearray()
    with AdbConnection(server, timeout, deadline=time.monotonic() + timeout) as connection:
        if cancel is not None:
            cancel.attach(connection)
        connection.open_service(adb_serial, f"shell,v2,raw:{command}")
        while True:
            ident, length = V2_HEADER.unpack(connection.read_exact(V2_HEADER.size))
            if ident == 3:
                status = connection.read_exact(min(length, 1)) if length else b""
                connection.skip(length - len(status))
                code = status[0] if status else 255
                break
            for chunk in connection.read_chunks(length):
                if ident in (1, 2):
                    for buffer in (out if ident == 1 else err, both):
                        _keep(buffer, chunk, keep)
    return ShellResult(code, *(bytes(b).decode("utf-8", errors="replace") for b in (out, err, both)))


def _keep(buffer: bytearray, chunk: bytes, keep: int) -> None:
    """Append `chunk` to `buffer` up to `keep` bytes; the first cut adds a note naming the limit."""
    room = keep - len(buffer)
    if room > 0:
        buffer.extend(chunk[:room])
        if len(chunk) > room:
            buffer.extend(f"\n[npuconf: {over('shell_output_bytes', 'output cut')}]\n".encode())


_client_lock = threading.Lock()


def adb_client(server: AdbServerAddress) -> AdbClient:
    """An adbutils client for one server; ANDROID_ADB_SERVER_PORT is pinned to a TCP server first."""
    with _client_lock:
        if not server.is_unix:
            os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        return _client_class()(server)


def list_devices(server: AdbServerAddress, given: bool = True) -> dict[str, str]:
    """serial -> state on one server; raises UsageError when no server answers there.

    `given`: the user named this server with --adb-server (else it is the default one, and the
    message must not blame an option the user never passed; and it must be this user's own)."""
    try:
        answers = server_answers(server, timeout=1.0)
    except ForeignAdbServer as exc:
        raise UsageError(str(exc)) from None
    if not answers:
        if given:
            raise UsageError(f"--adb-server {server}: no adb server answers there")
        raise UsageError(
            f"no adb server answers on {server} (the default adb server): start one with `adb start-server`, "
            "name another with --adb-server HOST:PORT, or use --target virtual"
        )
    return device_states(server)


def attached_devices(server: AdbServerAddress) -> list[str]:
    """Serials in state `device` on the server, or [] when no server runs there (never starts one). The
    default server of another user is a usage error (one line saying how to name it), never its devices."""
    try:
        if not server_answers(server):
            return []
    except ForeignAdbServer as exc:
        raise UsageError(str(exc)) from None
    try:
        return sorted(s for s, state in device_states(server).items() if state == "device")
    except (OSError, AdbServerError):
        return []


def discover_targets(
    servers: Sequence[AdbServerAddress],
    serials: Sequence[str],
    make: Callable[[AdbServerAddress, str, str], Made],
    servers_given: bool = True,
) -> list[Made]:
    """Devices in state `device` on every server, filtered by --serial; names made unique across servers."""
    found: list[tuple[AdbServerAddress, str]] = []
    for server in servers:
        states = list_devices(server, servers_given)
        found.extend((server, serial) for serial, state in sorted(states.items()) if state == "device")
    if serials:
        known = {serial for _, serial in found}
        missing = [s for s in serials if s not in known]
        if missing:
            where = ", ".join(map(str, servers))
            raise UsageError(f"--serial {missing[0]}: no such device in state `device` on {where} (see `adb devices`)")
        found = [(server, serial) for server, serial in found if serial in serials]
    if not found:
        where = ", ".join(map(str, servers))
        raise UsageError(f"no device in state `device` on {where}; attach one or use --target virtual")
    counts: dict[str, int] = {}
    for _, serial in found:
        counts[serial] = counts.get(serial, 0) + 1
    return [make(server, serial, serial if counts[serial] == 1 else f"{serial}@{server}") for server, serial in found]


def bounded(function: Callable[[], T], timeout: float, what: str, cancel: Cancel | None = None) -> T:
    """Run function with a wall-clock bound; past it, `cancel` (which the call's connection was attached to)
    breaks the connection, so the thread left behind stops reading instead of reading on."""
    box: list[T] = []
    error: list[BaseException] = []

    def call() -> None:
        try:
            box.append(function())
        except BaseException as exc:
            error.append(exc)

    worker = threading.Thread(target=call, name=f"adb-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        if cancel is not None:
            cancel.cancel()
        raise TimeoutError(f"{what}: no answer within {timeout:.0f} s")
    if error:
        raise error[0]
    return box[0]


class DeviceTransport:
    """One device behind one adb server: bounded shell calls and pushes, recovered once after a broken link."""

    def __init__(
        self,
        server: AdbServerAddress,
        adb_serial: str,
        serial: str,
        restart_server: Callable[[], None] | None = None,
    ) -> None:
        self.server = server
        self.adb_serial = adb_serial
        self.serial = serial
        # Set for virtual devices the kit started: restarts their adb server and reconnects them.
        self.restart_server = restart_server

    def shell(self, command: str, timeout: float = COMMAND_TIMEOUT_S) -> ShellResult:
        """A shell v2 command, bounded, recovered once after a broken link."""
        return self.retrying(
            lambda cancel: self.shell_once(command, timeout, cancel), timeout + 2.0, command.split(" ", 1)[0]
        )

    def shell_once(self, command: str, timeout: float, cancel: Cancel | None = None) -> ShellResult:
        """A shell v2 command, once, within `timeout` seconds in all."""
        return shell_v2(self.server, self.adb_serial, command, timeout, cancel)

    def connect(self, timeout: float) -> AdbConnection:
        """A new connection to the device's adb server (a service of the device is opened on it next)."""
        return AdbConnection(self.server, timeout)

    def retrying(self, function: Callable[[Cancel], T], timeout: float, what: str) -> T:
        """Run an adb call (given the Cancel its connection attaches to); after a transport failure recover
        once (server restart, reconnect) and retry."""
        cancel = Cancel()
        try:
            return bounded(lambda: function(cancel), timeout, what, cancel)
        except TimeoutError as exc:
            raise DeviceLost(f"{self.serial}: {exc} (device unresponsive)") from None
        except adb_errors() as exc:
            self.recover(f"{what}: {exc}")
        cancel = Cancel()
        try:
            return bounded(lambda: function(cancel), timeout, what, cancel)
        except TimeoutError as exc:
            raise DeviceLost(f"{self.serial}: {exc} (device unresponsive)") from None
        except adb_errors() as exc:
            raise DeviceLost(f"{self.serial}: {what}: {exc}") from None

    def recover(self, why: str) -> None:
        """Bring the transport back if it can be: the server restarted, the device reconnected."""
        deadline = time.monotonic() + RECOVERY_GRACE_S
        if not server_answers(self.server):
            if self.restart_server is not None:
                try:
                    self.restart_server()
                except Exception as exc:
                    raise DeviceLost(f"{self.serial}: adb server gone and could not be restarted: {exc}") from None
            else:
                while not server_answers(self.server):
                    if time.monotonic() > deadline:
                        raise DeviceLost(f"{self.serial}: adb server {self.server} stopped answering ({why})")
                    time.sleep(0.1)
        connected = False
        while time.monotonic() < deadline:
            try:
                state = device_states(self.server).get(self.adb_serial)
            except (OSError, AdbServerError):
                state = None
            if state == "device":
                return
            if state is None and not connected and re.fullmatch(r"[\w.\-\[\]:]+:\d+", self.adb_serial):
                connected = True
                with contextlib.suppress(OSError, AdbServerError):
                    host_request(self.server, f"host:connect:{self.adb_serial}")
            time.sleep(0.1)
        raise DeviceLost(f"{self.serial}: gone from adb server {self.server} ({why})")

    def push(self, data: bytes, destination: str, mode: int = 0o755) -> None:
        self.push_all({destination: data}, mode)

    def push_all(self, files: Mapping[str, bytes], mode: int = 0o755) -> None:
        """Push each file (destination -> bytes) over one sync session, recovered once after a broken link."""
        self.retrying(
            lambda cancel: self.sync_send_all(files, mode, PUSH_TIMEOUT_S, cancel), PUSH_TIMEOUT_S + 2.0, "push"
        )

    def sync_send(self, data: bytes, destination: str, mode: int, timeout: float, cancel: Cancel | None = None) -> None:
        """One sync SEND over one connection."""
        self.sync_send_all({destination: data}, mode, timeout, cancel)

    def sync_send_all(
        self, files: Mapping[str, bytes], mode: int, timeout: float, cancel: Cancel | None = None
    ) -> None:
        """One sync session: a SEND per file, each answered before the next, then QUIT; all within `timeout`."""
        with AdbConnection(self.server, timeout, deadline=time.monotonic() + timeout) as connection:
            if cancel is not None:
                cancel.attach(connection)
            connection.open_service(self.adb_serial, "sync:")
            for destination, data in files.items():
                spec = f"{destination},{0o100000 | mode}".encode()
                parts = [b"SEND", struct.pack("<I", len(spec)), spec]
                for start in range(0, len(data), SYNC_CHUNK):
                    chunk = data[start : start + SYNC_CHUNK]
                    parts += [b"DATA", struct.pack("<I", len(chunk)), chunk]
                parts += [b"DONE", struct.pack("<I", int(time.time()))]
                connection.send(b"".join(parts))
                status = connection.read_exact(8)
                if status[:4] != b"OKAY":
                    length = struct.unpack("<I", status[4:])[0]
                    message = b"".join(connection.read_chunks(min(length, MESSAGE_MAX_BYTES)))
                    raise AdbServerError(f"{self.serial}: push {destination}: {message.decode(errors='replace')}")
            connection.send(b"QUIT" + struct.pack("<I", 0))
