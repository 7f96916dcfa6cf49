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
import pwd
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from ..errors import InfraError, UsageError

LOOPBACK: Final = "127.0.0.1"
DEFAULT_SERVER_PORT: Final = 5037
UNIX_PREFIX: Final = "localfilesystem:"
BACKLOG_RETRY_S: Final = 0.005


class AdbServerError(InfraError):
    """An adb server could not be started or answered wrongly."""


class ForeignAdbServer(AdbServerError):
    """The default adb server, which the user did not name, is not this user's: its devices are someone else's."""

    def __init__(self, server: AdbServerAddress, owner: int | None) -> None:
        self.server = server
        self.owner = owner
        whose = f"belongs to {_user(owner)}" if owner is not None else "has an owner the kernel does not show"
        super().__init__(
            f"the adb server on {server} {whose}, not to this user ({_user(os.geteuid())}); the kit uses another "
            f"user's adb server only when it is named: pass --adb-server {server} to use it, or --target virtual"
        )


def _user(uid: int | None) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})" if uid is not None else "nobody known"
    except KeyError:
        return f"uid {uid}"


LOCAL_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True, slots=True)
class AdbServerAddress:
    """Where an adb server listens: a TCP `host:port`, or a unix socket `path` (then host and port are unused)."""

    host: str = LOOPBACK
    port: int = 0
    path: str = ""
    # The default server, which the user did not name: used only while it is this user's (each connection's
    # server is checked against the kernel's record of who owns it).
    must_be_own: bool = field(default=False, compare=False)

    @staticmethod
    def parse(text: str, named: bool = True) -> AdbServerAddress:
        """The address `text` names; `named` False: the user did not name it (a plan they did not write did),
        so the server there is used only while the kernel shows it is this user's (`must_be_own`; a server
        on another machine never is: the user names it with --adb-server to use it)."""
        if text.startswith(UNIX_PREFIX):
            path = text[len(UNIX_PREFIX) :]
            if not path.startswith("/"):
                raise UsageError(f"--adb-server {text}: expected localfilesystem:/ABSOLUTE/PATH of the server's socket")
            return AdbServerAddress(path=path, must_be_own=not named)
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(
                f"--adb-server {text}: expected HOST:PORT, e.g. 127.0.0.1:5037, or localfilesystem:PATH of a socket"
            )
        host = host.strip("[]")
        return AdbServerAddress(host, int(port), must_be_own=not named)

    @staticmethod
    def default() -> AdbServerAddress:
        """The server adb itself would use: `ADB_SERVER_SOCKET` (`localfilesystem:PATH` or `tcp:[HOST:]PORT`),
        else `ANDROID_ADB_SERVER_HOST` and `ANDROID_ADB_SERVER_PORT`, else 127.0.0.1:5037.

        On this host (a unix socket, a loopback address) any local user may have started the server
        listening there: it is used only while it is this user's (`must_be_own`); a server on another
        machine, named by those variables, is taken as named."""
        spec = os.environ.get("ADB_SERVER_SOCKET", "")
        if spec.startswith(UNIX_PREFIX) and spec[len(UNIX_PREFIX) :].startswith("/"):
            return AdbServerAddress(path=spec[len(UNIX_PREFIX) :], must_be_own=True)
        host, port = os.environ.get("ANDROID_ADB_SERVER_HOST", LOOPBACK), DEFAULT_SERVER_PORT
        if spec.startswith("tcp:"):
            named, _, port_text = spec[4:].rpartition(":")
            if port_text.isdigit():
                host, port = named.strip("[]") or LOOPBACK, int(port_text)
        elif os.environ.get("ANDROID_ADB_SERVER_PORT", "").isdigit():
            port = int(os.environ["ANDROID_ADB_SERVER_PORT"])
        return AdbServerAddress(host, port, must_be_own=host in LOCAL_HOSTS)

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
        retry the handshake by itself), so the connection is tried again until `timeout`. For the default
        server (`must_be_own`), a server that is not this user's raises ForeignAdbServer before a byte is sent."""
        sock = self._connect(timeout)
        if self.must_be_own:
            owner = socket_peer_owner(sock)
            if owner != os.geteuid():
                sock.close()
                raise ForeignAdbServer(self, owner)
        return sock

    def _connect(self, timeout: float) -> socket.socket:
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


_UCRED: Final = struct.Struct("=iII")  # pid, uid, gid
_TCP_TABLES: Final = ("/proc/net/tcp", "/proc/net/tcp6")
_LISTEN: Final = "0A"
_V4_MAPPED: Final = bytes(10) + b"\xff\xff"


def socket_peer_owner(sock: socket.socket) -> int | None:
    """The uid owning the server end of the connected socket `sock`, from the kernel: SO_PEERCRED on a unix
    socket; on TCP, the uid the kernel's tables (/proc/net/tcp, tcp6) show for the server's end of this very
    connection (an accepted socket is its listener's owner's), else for the socket listening on its port.
    None when the kernel shows neither."""
    if sock.family == socket.AF_UNIX:
        _, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        return int(uid)
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    mine, theirs = _forms(sock.getsockname(), sock.family), _forms(sock.getpeername(), sock.family)
    port = next(iter(theirs))[1]
    listening: int | None = None
    for table in _TCP_TABLES:
        try:
            with open(table, encoding="ascii", errors="replace") as handle:
                next(handle, None)
                for line in handle:
                    fields = line.split()
                    if len(fields) < 8:
                        continue
                    local, remote = _table_endpoint(fields[1]), _table_endpoint(fields[2])
                    if local in theirs and remote in mine:
                        return int(fields[7])
                    if fields[3] == _LISTEN and local is not None and local[1] == port and (
                        local in theirs or not local[0].strip(b"\0")
                    ):
                        listening = int(fields[7])
        except (OSError, ValueError):
            continue
    return listening


def _forms(address: tuple[object, ...], family: int) -> frozenset[tuple[bytes, int]]:
    """An endpoint as the kernel's tables may show it: IPv4 also as an IPv4-mapped IPv6 address."""
    raw, port = socket.inet_pton(family, str(address[0])), int(str(address[1]))
    return frozenset({(raw, port), (_V4_MAPPED + raw, port)} if family == socket.AF_INET else {(raw, port)})


def _table_endpoint(text: str) -> tuple[bytes, int] | None:
    """An address of /proc/net/tcp(6): the address as 32-bit words in host order (hex), a colon, the port."""
    address, _, port = text.partition(":")
    try:
        raw = b"".join(struct.pack("=I", int(address[i : i + 8], 16)) for i in range(0, len(address), 8))
        return raw, int(port, 16)
    except (ValueError, struct.error):
        return None


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


# What the kit reads of a stream at a time, whatever length a frame header announces: a header is a
# claim of the device's, and nothing is allocated for it before the bytes arrive.
READ_CHUNK: Final = 64 * 1024
# A FAIL message (adb servers send a few hundred bytes; a sync FAIL's length is a 32-bit word).
MESSAGE_MAX_BYTES: Final = 64 * 1024


class AdbConnection:
    """One connection to an adb server; after `open_service` its stream is that device service's own.

    With `deadline` (a time.monotonic() value), every read and send waits at most until then: a device
    that trickles a byte at a time cannot keep a reader busy past it, and the reader raises TimeoutError
    (`abort` from another thread ends a wait at once)."""

    def __init__(self, server: AdbServerAddress, timeout: float, deadline: float | None = None) -> None:
        self.server = server
        self.timeout = timeout
        self.deadline = deadline
        self.sock = server.connect(timeout)
        self.sock.settimeout(timeout)

    def _wait_bound(self) -> None:
        if self.deadline is None:
            return
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"adb server {self.server}: no answer within the call's time")
        self.sock.settimeout(min(left, self.timeout))

    def _recv(self, size: int) -> bytes:
        self._wait_bound()
        try:
            chunk = self.sock.recv(min(size, READ_CHUNK))
        except TimeoutError:
            raise TimeoutError(f"adb server {self.server}: no answer within the call's time") from None
        if not chunk:
            raise OSError("connection closed by the adb server")
        return chunk

    def send(self, data: bytes) -> None:
        self._wait_bound()
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise TimeoutError(f"adb server {self.server}: no answer within the call's time") from None

    def request(self, text: str) -> None:
        """Send one request and read its OKAY; a FAIL raises AdbServerError with the server's message."""
        payload = text.encode()
        self.send(f"{len(payload):04x}".encode() + payload)
        status = self.read_exact(4)
        if status == b"OKAY":
            return
        message = b""
        if status == b"FAIL":
            with contextlib.suppress(OSError, ValueError):
                message = self.read_exact(int(self.read_exact(4), 16))  # 4 hex digits: at most 64 KiB
        service = text.split(":", 1)[0] if not text.startswith("host:") else text
        raise AdbServerError(f"adb server {self.server}: {service}: {message.decode(errors='replace') or status!r}")

    def open_service(self, adb_serial: str, service: str) -> None:
        """Switch to the device `adb_serial`, then open `service` there."""
        self.request(f"host:transport:{adb_serial}")
        self.request(service)

    def read_exact(self, size: int) -> bytes:
        """Exactly `size` bytes; for a small, fixed size only (headers, status words): a length a device
        announces is read with `read_chunks`."""
        data = bytearray()
        while len(data) < size:
            data += self._recv(size - len(data))
        return bytes(data)

    def read_chunks(self, size: int) -> Iterator[bytes]:
        """The next `size` bytes of the stream, in pieces of at most READ_CHUNK as they arrive."""
        left = size
        while left:
            chunk = self._recv(left)
            left -= len(chunk)
            yield chunk

    def skip(self, size: int) -> None:
        """Read past `size` bytes, keeping none."""
        for _ in self.read_chunks(size):
            pass

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
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), READ_CHUNK))
        if not chunk:
            raise OSError("connection closed by the adb server")
        data += chunk
    return bytes(data)


def server_answers(server: AdbServerAddress, timeout: float = 0.3) -> bool:
    """True when an adb server answers `host:version` there (never starts one). A default server that is
    another user's raises ForeignAdbServer: it answers, but not for this user."""
    try:
        host_request(server, "host:version", timeout=timeout)
    except ForeignAdbServer:
        raise
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
