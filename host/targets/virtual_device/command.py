"""`npuconf virtual-device start|stop`: virtual devices behind a private adb server, for use outside a run."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from floor.safe_io import remove_file
from reports.recorded.run_options import npuconf_command

from ...errors import UsageError
from .fleet import read_state, start_fleet, stop_fleet


def virtual_device_command(args: argparse.Namespace) -> int:
    state: Path = args.state
    if args.virtual_command == "start":
        if state.exists():
            stop = npuconf_command("virtual-device", "stop", "--state", str(state))
            raise UsageError(f"--state {state}: already exists; run `{stop}` first")
        fleet = start_fleet(args.count, state.resolve().parent / (state.stem + ".d"), adb_port=args.adb_port)
        fleet.write_state(state)
        address = fleet.server.address
        if address.is_unix:  # reachable by this user only: adb and the kit are told where, not a port
            run = npuconf_command("run", "--adb-server", str(address))
            print(f"adb server {address} (export ADB_SERVER_SOCKET={address}; {run})")
        else:
            print(f"adb server {address} (export ANDROID_ADB_SERVER_PORT={address.port})")
        for device in fleet.devices:
            print(device.adb_serial)
        print(f"state: {state}")
        return 0
    fleet = read_state(state)
    stop_fleet(fleet)
    with contextlib.suppress(FileNotFoundError):
        remove_file(state)
    print(f"stopped {len(fleet.devices)} virtual device(s) and the adb server at {fleet.server.address}")
    return 0
