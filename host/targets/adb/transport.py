"""Reaching devices through adb servers: device listing, and one device's transport (bounded shell v2 calls,
the probe's service stream and pushes, recovery after a broken link), each through the client that talks to
that server (host/targets/adb_clients.py: adbutils for a TCP server, the kit's own client for a unix
socket)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from ...errors import InfraError, UsageError
from ..adb_clients import AdbLink, Cancel, ServiceStream, ShellResult, adbutils_errors, link_for
from ..adb_host import AdbServerAddress, AdbServerError, ForeignAdbServer

COMMAND_TIMEOUT_S: Final = 20.0
PUSH_TIMEOUT_S: Final = 60.0
# After a broken stream: how long the device may take to be back before it is declared lost.
RECOVERY_GRACE_S: Final = 3.0

T = TypeVar("T")
Made = TypeVar("Made")


class DeviceLost(InfraError):
    """The device stopped answering (gone from adb, or hung): the rest of its plan is NOT_EXECUTED."""


def adb_errors() -> tuple[type[BaseException], ...]:
    """What an adb call raises when its link broke or the server refused it: OSError, EOFError, AdbServerError,
    and adbutils' errors once adbutils is loaded."""
    return (OSError, EOFError, AdbServerError, *adbutils_errors())


def shell_v2(
    server: AdbServerAddress, adb_serial: str, command: str, timeout: float, cancel: Cancel | None = None
) -> ShellResult:
    """Run `command` on the device over one shell v2 stream (its exit status is in the stream), all of it
    within `timeout` seconds (TimeoutError past it), through the client that talks to `server`. Frames are
    read in pieces whatever length their header announces; of each stream at most `shell_output_bytes` is
    kept (the rest is read and dropped, with a note)."""
    return link_for(server).shell(adb_serial, command, timeout, cancel)


def list_devices(server: AdbServerAddress, given: bool = True) -> dict[str, str]:
    """serial -> state on one server; raises UsageError when no server answers there.

    `given`: the user named this server with --adb-server (else it is the default one, and the
    message must not blame an option the user never passed; and it must be this user's own)."""
    link = link_for(server)
    try:
        answers = link.answers(1.0)
    except ForeignAdbServer as exc:
        raise UsageError(str(exc)) from None
    if not answers:
        if given:
            raise UsageError(f"--adb-server {server}: no adb server answers there")
        raise UsageError(
            f"no adb server answers on {server} (the default adb server): start one with `adb start-server`, "
            "name another with --adb-server HOST:PORT, or use --target virtual"
        )
    return link.device_states()


def attached_devices(server: AdbServerAddress) -> list[str]:
    """Serials in state `device` on the server, or [] when no server runs there (never starts one). The
    default server of another user is a usage error (one line saying how to name it), never its devices."""
    link = link_for(server)
    try:
        if not link.answers(0.3):
            return []
        return sorted(s for s, state in link.device_states().items() if state == "device")
    except ForeignAdbServer as exc:
        raise UsageError(str(exc)) from None
    except adb_errors():
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
        link: AdbLink | None = None,
    ) -> None:
        self.server = server
        self.adb_serial = adb_serial
        self.serial = serial
        # Set for virtual devices the kit started: restarts their adb server and reconnects them.
        self.restart_server = restart_server
        self.link = link if link is not None else link_for(server)

    def shell(self, command: str, timeout: float = COMMAND_TIMEOUT_S) -> ShellResult:
        """A shell v2 command, bounded, recovered once after a broken link."""
        return self.retrying(
            lambda cancel: self.shell_once(command, timeout, cancel), timeout + 2.0, command.split(" ", 1)[0]
        )

    def shell_once(self, command: str, timeout: float, cancel: Cancel | None = None) -> ShellResult:
        """A shell v2 command, once, within `timeout` seconds in all."""
        return self.link.shell(self.adb_serial, command, timeout, cancel)

    def connect(self, timeout: float) -> ServiceStream:
        """A new connection to the device's adb server (a service of the device is opened on it next)."""
        return self.link.stream(timeout)

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
        if not self.link.answers(0.3):
            if self.restart_server is not None:
                try:
                    self.restart_server()
                except Exception as exc:
                    raise DeviceLost(f"{self.serial}: adb server gone and could not be restarted: {exc}") from None
            else:
                while not self.link.answers(0.3):
                    if time.monotonic() > deadline:
                        raise DeviceLost(f"{self.serial}: adb server {self.server} stopped answering ({why})")
                    time.sleep(0.1)
        connected = False
        while time.monotonic() < deadline:
            try:
                state = self.link.device_states().get(self.adb_serial)
            except adb_errors():
                state = None
            if state == "device":
                return
            if state is None and not connected and re.fullmatch(r"[\w.\-\[\]:]+:\d+", self.adb_serial):
                connected = True
                try:
                    self.link.connect_device(self.adb_serial)
                except adb_errors():
                    pass
            time.sleep(0.1)
        raise DeviceLost(f"{self.serial}: gone from adb server {self.server} ({why})")

    def push_all(self, files: Mapping[str, bytes], mode: int = 0o755) -> None:
        """Push each file (destination -> bytes) over one sync session, recovered once after a broken link."""
        self.retrying(
            lambda cancel: self.sync_send_all(files, mode, PUSH_TIMEOUT_S, cancel), PUSH_TIMEOUT_S + 2.0, "push"
        )

    def sync_send(self, data: bytes, destination: str, mode: int, timeout: float, cancel: Cancel | None = None) -> None:
        """One sync SEND."""
        self.sync_send_all({destination: data}, mode, timeout, cancel)

    def sync_send_all(
        self, files: Mapping[str, bytes], mode: int, timeout: float, cancel: Cancel | None = None
    ) -> None:
        """One sync session: a SEND per file, each answered before the next, then QUIT; all within `timeout`.
        An error names the device."""
        try:
            self.link.push(self.adb_serial, files, mode, timeout, cancel)
        except AdbServerError as exc:
            raise AdbServerError(f"{self.serial}: {exc}") from None
