"""The fleet of one session, owned while it runs: its adb server restarted when it dies, everything
stopped at the end, and the fleet recorded in this host's registry meanwhile."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from floor.safe_io import UnsafeOutput, remove_file

from ...errors import InfraError
from ..adb_host import device_states, server_answers
from .adb_server import start_adb_server
from .fleet import Fleet, stop_fleet
from .launch import connect_device, device_markers
from .processes import pid_runs
from .registry import register_fleet


class FleetSupervisor:
    """Owns a running fleet for one session: restarts its adb server when it dies, stops it all at the end.

    The fleet is recorded in this host's registry while it runs: if this process is killed, the next
    `npuconf run` or `--resume` stops it (reap_orphan_fleets).
    """

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._lock = threading.Lock()
        self._entry: Path | None = register_fleet(fleet)

    def restart_server(self) -> None:
        """Start the adb server again on the same port (if it is gone) and reconnect the live devices."""
        with self._lock:
            fleet = self.fleet
            if not server_answers(fleet.server.address):
                server = start_adb_server(fleet.state_dir, fleet.server.address)
                fleet = Fleet(server, fleet.devices, fleet.state_dir)
                self.fleet = fleet
                fleet.write_state()
            states = device_states(fleet.server.address)
            for device in fleet.devices:
                if states.get(device.adb_serial) != "device" and pid_runs(device.pid, *device_markers(device)):
                    with contextlib.suppress(InfraError, OSError):
                        connect_device(fleet.server, device, timeout=5.0)

    def stop(self) -> None:
        with self._lock:
            stop_fleet(self.fleet, remove_state=False)
            if self._entry is not None:
                with contextlib.suppress(FileNotFoundError, UnsafeOutput):
                    remove_file(self._entry)
                self._entry = None
