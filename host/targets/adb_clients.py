"""Which adb client talks to which adb server (docs/adb.md, "Two clients").

- A server on a TCP port (a phone on this host's adb server, a lab's remote server, `--adb-server
  HOST:PORT`) is reached through adbutils' public API: `AdbClient` for the server's own requests
  (`server_version`, `list`, `connect`) and the connections `AdbClient.make_connection` opens, on which
  a device's shell v2 and sync services are spoken with the kit's bounded reads: the client real phones
  have answered for years, its frames read the way the kit reads every frame.
- A server on a unix socket (the kit's private fleet, `localfilesystem:PATH`) is reached through the kit's
  own host-protocol client (adb_host.py): adbutils connects to TCP ports only.

adbutils (and requests under it, about 0.2 s) is imported the first time a TCP server is spoken to, so a
run on the virtual device never loads it; whether anything listens on a TCP port at all is asked with a
plain connect first, so that no call reaches adbutils' habit of starting a server where none answers
(pitfall 1). Both clients give the same `AdbLink`: shell v2 calls and pushes within a deadline (and
broken from another thread by a `Cancel`), a service stream, the device list and `host:connect`. Both
read a shell v2 frame in pieces, whatever length its header announces, keep at most `shell_output_bytes`
of what a command prints, and use a server the user did not name (`must_be_own`) only while the kernel
shows it is this user's (adb_host.socket_peer_owner).
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from floor.limits import limit, over

from .adb_host import (
    MESSAGE_MAX_BYTES,
    AdbConnection,
    AdbServerAddress,
    AdbServerError,
    ForeignAdbServer,
    device_states,
    host_request,
    server_answers,
    socket_peer_owner,
)

if TYPE_CHECKING:
    from adbutils import AdbClient
    from adbutils._adb import AdbConnection as AdbutilsConnection

V2_HEADER: Final = struct.Struct("<BI")  # shell v2 packets: id (0 stdin, 1 stdout, 2 stderr, 3 exit), length
# The largest shell v2 packet the kit reads: adb's own payloads are at most 1 MiB. A longer one is a broken
# or hostile stream, refused before anything of it is read; a shorter one is read in pieces as it arrives.
MAX_V2_PACKET: Final = 1 << 20
SYNC_CHUNK: Final = 64 * 1024
LISTEN_PROBE_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class ShellResult:
    """What a shell v2 command gave: its exit status, its two streams, and both as they arrived."""

    returncode: int
    stdout: str
    stderr: str
    output: str


class Breakable(Protocol):
    def abort(self) -> None: ...


class Cancel:
    """Lets `bounded` (transport.py) end, from its own thread, the wait of a call that outlived its bound:
    the call hands over its connection (`attach`), and `cancel` breaks it, so the reader thread stops
    instead of reading on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: Breakable | None = None
        self.cancelled = False

    def attach(self, connection: Breakable) -> None:
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


class ServiceStream(Protocol):
    """A connection to an adb server that becomes one device service's stream."""

    def open(self, adb_serial: str, service: str) -> None:
        """Switch to the device, open `service`; reads then wait as long as they must (callers bound them)."""

    def read_exact(self, size: int) -> bytes:
        """Exactly `size` bytes: for a small, fixed size only (headers, status words)."""

    def read_chunks(self, size: int) -> Iterator[bytes]:
        """The next `size` bytes in pieces as they arrive (a length the device announces is read so)."""

    def skip(self, size: int) -> None: ...

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

    def answers(self, timeout: float) -> bool:
        """Whether an adb server answers there; ForeignAdbServer when it answers but the user did not name
        it and the kernel does not show it is theirs."""

    def device_states(self) -> dict[str, str]: ...

    def connect_device(self, address: str) -> str: ...

    def shell(self, adb_serial: str, command: str, timeout: float, cancel: Cancel | None = None) -> ShellResult:
        """`command` over one shell v2 stream, all of it within `timeout` seconds (TimeoutError past it)."""

    def stream(self, timeout: float) -> ServiceStream: ...

    def push(
        self, adb_serial: str, files: Mapping[str, bytes], mode: int, timeout: float, cancel: Cancel | None = None
    ) -> None:
        """One sync session pushing every file, all of it within `timeout` seconds."""


def v2_length(length: int) -> int:
    """A shell v2 packet's length, refused past MAX_V2_PACKET."""
    if length > MAX_V2_PACKET:
        raise AdbServerError(f"a shell v2 packet of {length} bytes (the kit reads at most {MAX_V2_PACKET})")
    return length


def read_shell_v2(connection: AdbConnection) -> ShellResult:
    """The rest of a shell v2 stream up to its exit packet. Each packet is read in pieces as they arrive,
    whatever length its header announces (and refused past MAX_V2_PACKET); of each stream, and of both
    together, at most `shell_output_bytes` is kept: the rest is read and dropped, with a note."""
    keep = limit("shell_output_bytes")
    out, err, both = bytearray(), bytearray(), bytearray()
    while True:
        ident, length = V2_HEADER.unpack(connection.read_exact(V2_HEADER.size))
        length = v2_length(length)
        if ident == 3:
            status = connection.read_exact(min(length, 1)) if length else b""
            connection.skip(length - len(status))
            code = status[0] if status else 255
            return ShellResult(code, *(bytes(b).decode("utf-8", errors="replace") for b in (out, err, both)))
        for chunk in connection.read_chunks(length):
            if ident in (1, 2):
                for buffer in (out if ident == 1 else err, both):
                    _keep(buffer, chunk, keep)


def _keep(buffer: bytearray, chunk: bytes, keep: int) -> None:
    """Append `chunk` to `buffer` up to `keep` bytes; the first cut adds a note naming the limit."""
    room = keep - len(buffer)
    if room > 0:
        buffer.extend(chunk[:room])
        if len(chunk) > room:
            buffer.extend(f"\n[npuconf: {over('shell_output_bytes', 'output cut')}]\n".encode())


def send_files(connection: AdbConnection, files: Mapping[str, bytes], mode: int) -> None:
    """One sync session on a connection switched to `sync:`: a SEND per file, each answered before the
    next, then QUIT. A FAIL's message is read up to MESSAGE_MAX_BYTES, whatever length it announces."""
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
            raise AdbServerError(f"push {destination}: {message.decode(errors='replace')}")
    connection.send(b"QUIT" + struct.pack("<I", 0))


def _deadline(timeout: float) -> float:
    return time.monotonic() + timeout


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

    def read_chunks(self, size: int) -> Iterator[bytes]:
        return self.connection.read_chunks(size)

    def skip(self, size: int) -> None:
        self.connection.skip(size)

    def abort(self) -> None:
        self.connection.abort()

    def close(self) -> None:
        self.connection.close()


@dataclass(frozen=True)
class KitLink:
    """The kit's host-protocol client (adb_host.py): every call within its deadline, every packet and
    answer read in pieces and bounded by a size, every connection to a server the user did not name checked
    to be this user's (its peer credentials)."""

    server: AdbServerAddress
    client_name: str = "the kit's host-protocol client"

    def answers(self, timeout: float) -> bool:
        return server_answers(self.server, timeout)

    def device_states(self) -> dict[str, str]:
        return device_states(self.server)

    def connect_device(self, address: str) -> str:
        return host_request(self.server, f"host:connect:{address}")

    def shell(self, adb_serial: str, command: str, timeout: float, cancel: Cancel | None = None) -> ShellResult:
        with AdbConnection(self.server, timeout, deadline=_deadline(timeout)) as connection:
            if cancel is not None:
                cancel.attach(connection)
            connection.open_service(adb_serial, f"shell,v2,raw:{command}")
            return read_shell_v2(connection)

    def stream(self, timeout: float) -> ServiceStream:
        return _KitStream(self.server, timeout)

    def push(
        self, adb_serial: str, files: Mapping[str, bytes], mode: int, timeout: float, cancel: Cancel | None = None
    ) -> None:
        with AdbConnection(self.server, timeout, deadline=_deadline(timeout)) as connection:
            if cancel is not None:
                cancel.attach(connection)
            connection.open_service(adb_serial, "sync:")
            send_files(connection, files, mode)


# ---------------------------------------------------------------------------------------------
# adbutils: TCP servers (phones, emulators, remote labs)


def listening(server: AdbServerAddress, timeout: float = LISTEN_PROBE_S) -> bool:
    """Whether something accepts connections at a TCP server's address (nothing is sent). A server the user
    did not name that is not this user's raises ForeignAdbServer (AdbServerAddress.connect)."""
    try:
        server.connect(timeout).close()
    except OSError:
        return False
    return True


_environment_lock = threading.Lock()


def adbutils_errors() -> tuple[type[BaseException], ...]:
    """adbutils' errors, once adbutils is loaded (a run that never loads it never meets them)."""
    module = sys.modules.get("adbutils.errors")
    return (module.AdbError,) if module is not None else ()


class _AdbutilsConnection(AdbConnection):
    """A connection adbutils made (`AdbClient.make_connection`), checked like every connection of the kit's
    (the server's owner, when the user did not name it) and read through the kit's bounded reads: within
    `deadline`, in pieces, broken by `abort` from another thread."""

    def __init__(self, link: AdbutilsLink, timeout: float, deadline: float | None = None) -> None:
        self.server = link.server
        self.timeout = timeout
        self.deadline = deadline
        self.made: AdbutilsConnection = link.client().make_connection(timeout=timeout)
        self.sock = self.made.conn
        if self.server.must_be_own:
            owner = socket_peer_owner(self.sock)
            if owner != os.geteuid():
                self.close()
                raise ForeignAdbServer(self.server, owner)
        self.sock.settimeout(timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError, *adbutils_errors()):
            self.made.close()


class _AdbutilsStream(_KitStream):
    def __init__(self, link: AdbutilsLink, timeout: float) -> None:
        self.connection = _AdbutilsConnection(link, timeout)


class AdbutilsLink:
    """adbutils' public client for a TCP server. It is made (and adbutils imported) on first use, with
    ANDROID_ADB_SERVER_PORT set to the server's port: should the server vanish during a call, the
    `adb start-server` adbutils then runs starts one on that port, never on 5037 (pitfall 1).

    The server's own requests go through `AdbClient`, each after a connection of the kit's showed the server
    is this user's when it must be; device services go over connections `make_connection` opened, each
    checked itself (docs/adb.md, "Two clients", says what adbutils' own calls cannot be made to promise)."""

    client_name = "adbutils"

    def __init__(self, server: AdbServerAddress) -> None:
        self.server = server
        self._client: AdbClient | None = None
        self._lock = threading.Lock()

    def client(self) -> AdbClient:
        with self._lock:
            if self._client is None:
                import adbutils  # a heavy library, loaded only by runs that talk to a TCP adb server

                with _environment_lock:
                    os.environ["ANDROID_ADB_SERVER_PORT"] = str(self.server.port)
                self._client = adbutils.AdbClient(host=self.server.host, port=self.server.port)
            return self._client

    def _own(self, timeout: float = LISTEN_PROBE_S) -> None:
        """Before a request adbutils sends on a connection of its own: ForeignAdbServer when the server, which
        the user did not name, is not this user's (an OSError when none listens is adbutils' to meet)."""
        if self.server.must_be_own:
            listening(self.server, timeout)

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
        self._own()
        return {info.serial: info.state for info in self.client().list()}

    def connect_device(self, address: str) -> str:
        self._own()
        answer: str = self.client().connect(address, timeout=5.0)
        return answer

    def shell(self, adb_serial: str, command: str, timeout: float, cancel: Cancel | None = None) -> ShellResult:
        with _AdbutilsConnection(self, timeout, deadline=_deadline(timeout)) as connection:
            if cancel is not None:
                cancel.attach(connection)
            connection.open_service(adb_serial, f"shell,v2,raw:{command}")
            return read_shell_v2(connection)

    def stream(self, timeout: float) -> ServiceStream:
        return _AdbutilsStream(self, timeout)

    def push(
        self, adb_serial: str, files: Mapping[str, bytes], mode: int, timeout: float, cancel: Cancel | None = None
    ) -> None:
        with _AdbutilsConnection(self, timeout, deadline=_deadline(timeout)) as connection:
            if cancel is not None:
                cancel.attach(connection)
            connection.open_service(adb_serial, "sync:")
            send_files(connection, files, mode)


def link_for(server: AdbServerAddress) -> AdbLink:
    """The client that talks to `server`: adbutils for a TCP port, the kit's own for a unix socket. One link
    per server and per `must_be_own` (which address equality leaves out): a server the user named never
    lends its unchecked link to the same address taken by default."""
    return _link_for(server, server.must_be_own)


@functools.cache
def _link_for(server: AdbServerAddress, must_be_own: bool) -> AdbLink:
    return KitLink(server) if server.is_unix else AdbutilsLink(server)
