"""The adb host protocol ("smart socket") as a client speaks it to an adb server: one `host:` request,
its answer; enough for version, devices, connect and disconnect. The real-phone adb target and the
virtual-device fleet both talk to their servers through this one client."""

from __future__ import annotations

import contextlib
import socket
from typing import Final

from ..errors import InfraError

LOOPBACK: Final = "127.0.0.1"


class AdbServerError(InfraError):
    """An adb server could not be started or answered wrongly."""


def host_request(port: int, request: str, timeout: float = 5.0, host: str = LOOPBACK) -> str:
    """Send one `host:` request to an adb server and return its answer (OKAY payload or FAIL raises)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
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
            raise AdbServerError(f"adb server {host}:{port}: {request}: {data.decode(errors='replace') or status!r}")
        return data.decode(errors="replace")


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed by the adb server")
        data += chunk
    return data


def server_answers(port: int, host: str = LOOPBACK, timeout: float = 0.3) -> bool:
    """True when an adb server answers `host:version` there (never starts one)."""
    try:
        host_request(port, "host:version", timeout=timeout, host=host)
    except (OSError, AdbServerError):
        return False
    return True


def device_states(port: int, host: str = LOOPBACK) -> dict[str, str]:
    """serial -> state (`device`, `offline`, ...) as the server lists them."""
    listing = host_request(port, "host:devices", host=host)
    states: dict[str, str] = {}
    for line in listing.splitlines():
        serial, _, state = line.partition("\t")
        if serial:
            states[serial] = state.strip()
    return states
