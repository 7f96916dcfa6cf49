"""`npuconf virtual-device start|stop`: virtual devices behind a private adb server, for use outside a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...errors import UsageError
from .fleet import read_state, start_fleet, stop_fleet


def virtual_device_command(args: argparse.Namespace) -> int:
    state: Path = args.state
    if args.virtual_command == "start":
        if state.exists():
            raise UsageError(f"--state {state}: already exists; run `npuconf virtual-device stop` first")
        fleet = start_fleet(args.count, state.resolve().parent / (state.stem + ".d"), adb_port=args.adb_port)
        fleet.write_state(state)
        print(f"adb server 127.0.0.1:{fleet.server.port} (export ANDROID_ADB_SERVER_PORT={fleet.server.port})")
        for device in fleet.devices:
            print(device.adb_serial)
        print(f"state: {state}")
        return 0
    fleet = read_state(state)
    stop_fleet(fleet)
    state.unlink(missing_ok=True)
    print(f"stopped {len(fleet.devices)} virtual device(s) and the adb server on port {fleet.server.port}")
    return 0
