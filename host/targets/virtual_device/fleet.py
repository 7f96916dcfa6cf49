"""A fleet: a private adb server and N connected virtual devices, recorded in a state file so that
`npuconf virtual-device stop` (or the next run, if this one was killed) can stop exactly them.

Everything stays on loopback, never touches port 5037 nor 5555-5585, and keeps the adb key in a
private HOME. Processes are stopped by the PIDs recorded when they were started, after checking
that the PID still runs the process that was started (PIDs get reused).
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

from reports.safe_io import write_text

from ...errors import UsageError
from ..adb_host import AdbServerError, host_request
from .adb_server import AdbServer, server_public_key, start_adb_server, stop_adb_server
from .auth import make_spare_key
from .launch import TEMP_SANDBOX_PREFIX, VirtualDevice, connect_device, device_markers, launch_devices, stop_device
from .processes import pid_runs
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
            "adb_server": {"host": self.server.host, "port": self.server.port, "pid": self.server.pid,
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
                AdbServer(int(server["port"]), int(server["pid"]), Path(server["home"]), str(server["host"])),
                tuple(
                    VirtualDevice(str(d["name"]), int(d["port"]), int(d["pid"]), Path(d["root"]))
                    for d in data["devices"]
                ),
                Path(data["state_dir"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"virtual device state file is not one npuconf wrote ({exc})") from None

    def write_state(self, path: Path | None = None) -> Path:
        path = path or self.state_file
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(self.to_json(), indent=1) + "\n")
        return path


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
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    started: list[AdbServer] = []

    def server_key() -> Path:
        # Made while the device processes load (they wait for the key on stdin).
        started.append(start_adb_server(state_dir, adb_port))
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
    threading.Thread(target=make_spare_key, name="spare-adb-key", daemon=True).start()  # for the next fleet
    return fleet


def stop_fleet(fleet: Fleet, remove_state: bool = True) -> None:
    for device in fleet.devices:
        with contextlib.suppress(OSError, AdbServerError):
            host_request(fleet.server.port, f"host:disconnect:{device.adb_serial}", timeout=1.0)
        if pid_runs(device.pid, *device_markers(device)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(device.pid, signal.SIGCONT)  # a stopped device cannot act on SIGTERM
        stop_device(device)
        sandbox = device.root.parent
        if sandbox.parent == Path(tempfile.gettempdir()) and sandbox.name.startswith(TEMP_SANDBOX_PREFIX):
            shutil.rmtree(sandbox, ignore_errors=True)
    stop_adb_server(fleet.server)
    if remove_state:
        with contextlib.suppress(FileNotFoundError):
            fleet.state_file.unlink()
