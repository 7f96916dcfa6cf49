"""A fleet: a private adb server and N connected virtual devices, recorded in a state file so that
`npuconf virtual-device stop` (or the next run, if this one was killed) can stop exactly them.

The server listens on a unix socket only the run's user can reach (or on a loopback port when one is
asked for, never 5037 nor 5555-5585), the devices on loopback, and the adb key stays in a private
HOME. Processes are stopped by the PIDs recorded when they were started, after checking that the PID
still runs the process that was started (PIDs get reused).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from floor.safe_io import UnsafeOutput, output_dir, remove_file, write_text

from ...errors import UsageError
from ..adb_host import LOOPBACK, AdbServerAddress, AdbServerError, host_request
from .adb_server import AdbServer, server_public_key, start_adb_server, stop_adb_server
from .auth import make_spare_key
from .launch import TEMP_SANDBOX_PREFIX, VirtualDevice, connect_device, device_markers, launch_devices, stop_device
from .processes import kill_uid, pid_runs
from .profile import DeviceProfile

STATE_NAME: Final = "virtual-devices.json"


@dataclass(frozen=True, slots=True)
class Fleet:
    server: AdbServer
    devices: tuple[VirtualDevice, ...]
    state_dir: Path

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_NAME

    def to_json(self) -> dict[str, Any]:
        return {
            "adb_server": {"address": str(self.server.address), "pid": self.server.pid,
                           "home": str(self.server.home)},
            "devices": [
                {"name": d.name, "serial": d.adb_serial, "port": d.port, "pid": d.pid, "root": str(d.root)}
                for d in self.devices
            ],
            "state_dir": str(self.state_dir),
        }

    @staticmethod
    def from_json(data: Any) -> Fleet:
        try:
            server = data["adb_server"]
            return Fleet(
                AdbServer(_address(server), int(server["pid"]), Path(server["home"])),
                tuple(
                    VirtualDevice(str(d["name"]), int(d["port"]), int(d["pid"]), Path(d["root"]))
                    for d in data["devices"]
                ),
                Path(data["state_dir"]),
            )
        except (KeyError, TypeError, ValueError, UsageError) as exc:
            raise UsageError(f"virtual device state file is not one npuconf wrote ({exc})") from None

    def write_state(self, path: Path | None = None) -> Path:
        return write_text(path or self.state_file, json.dumps(self.to_json(), indent=1) + "\n")


def _address(server: dict[str, Any]) -> AdbServerAddress:
    """The server's address in a state file; one written before servers had unix sockets names host and port."""
    if "address" in server:
        return AdbServerAddress.parse(str(server["address"]))
    return AdbServerAddress(str(server["host"]), int(server["port"]))


def read_state(path: Path) -> Fleet:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no virtual device state file; nothing was started with that state") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read the virtual device state ({exc})") from None
    return Fleet.from_json(data)


def start_fleet(
    count: int,
    state_dir: Path,
    adb_port: int | None = None,
    names: Sequence[str] | None = None,
    profiles: Sequence[DeviceProfile | None] | None = None,
) -> Fleet:
    """A private adb server and `count` connected virtual devices; the state file is written first thing."""
    if count < 1:
        raise UsageError(f"--devices {count}: expected at least one virtual device")
    names = list(names or [f"virtual-{i + 1}" for i in range(count)])
    # made (or reached) with no other user's symlink followed: a planted <out>/virtual-devices is refused
    state_dir = output_dir(Path(os.path.abspath(state_dir)))
    started: list[AdbServer] = []

    def server_key() -> Path:
        # Made while the device processes load (they wait for the key on stdin).
        started.append(
            start_adb_server(state_dir, AdbServerAddress(LOOPBACK, adb_port) if adb_port is not None else None)
        )
        return server_public_key(state_dir)

    try:
        devices = launch_devices(state_dir, names, profiles, key=server_key)
    except BaseException:
        for server in started:
            stop_adb_server(server)
        raise
    server = started[0]
    fleet = Fleet(server, (), state_dir)
    try:
        fleet = Fleet(server, devices, state_dir)
        fleet.write_state()
        for device in fleet.devices:
            connect_device(server, device)
    except BaseException:
        stop_fleet(fleet)
        raise
    return fleet


def _owner(root: Path) -> int | None:
    """The uid a device runs as, when the device took one of its own (its sandbox is that uid's)."""
    try:
        uid = os.stat(root, follow_symlinks=False).st_uid
    except OSError:
        return None
    return uid if uid not in (0, os.geteuid()) else None


def stop_fleet(fleet: Fleet, remove_state: bool = True) -> None:
    # The next fleet's adb key is made while this one stops (its devices and server mostly wait to exit):
    # made while the fleet works, it took a core from the probes for 60-150 ms of every run.
    spare = threading.Thread(target=make_spare_key, name="spare-adb-key", daemon=True)
    spare.start()
    try:
        _stop_fleet(fleet, remove_state)
    finally:
        spare.join()


def _stop_fleet(fleet: Fleet, remove_state: bool) -> None:
    for device in fleet.devices:
        with contextlib.suppress(OSError, AdbServerError):
            host_request(fleet.server.address, f"host:disconnect:{device.adb_serial}", timeout=1.0)
        if pid_runs(device.pid, *device_markers(device)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(device.pid, signal.SIGCONT)  # a stopped device cannot act on SIGTERM
        owner = _owner(device.root)
        stop_device(device)
        if owner is not None:
            kill_uid(owner)  # the device's own uid: what it left behind, even if the device died first
        sandbox = device.root.parent
        if sandbox.parent == Path(tempfile.gettempdir()) and sandbox.name.startswith(TEMP_SANDBOX_PREFIX):
            # the directory launch_devices made with mkdtemp; rmtree never follows a symlink inside it
            shutil.rmtree(sandbox, ignore_errors=True)
    stop_adb_server(fleet.server)
    if remove_state:
        with contextlib.suppress(FileNotFoundError, UnsafeOutput):
            remove_file(fleet.state_file)
