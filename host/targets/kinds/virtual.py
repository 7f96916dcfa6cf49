"""The virtual target: the kit's own virtual devices behind a private adb server, started for the run
(`Opening.launch`) and stopped with it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from reports.recorded.plan_options import PlanOptions

from ...errors import UsageError
from ..base import Target
from ..vnpu_profile import VnpuProfile
from .base import DEFAULT_LANES, Opening, Resumed, launched_targets

if TYPE_CHECKING:
    from ..adb import AdbTarget
    from ..virtual_device import Fleet

NAME: Final = "virtual"


@dataclass(frozen=True, slots=True)
class VirtualKind:
    name: str = NAME
    shared_devices: bool = False  # every lane's probe loads its own vnpu on the device
    launches_devices: bool = True

    def default_lanes(self, devices: int) -> int:
        """The lanes are shared among the run's devices (8 // --devices, at least 1)."""
        return max(1, DEFAULT_LANES // max(devices, 1))

    def chosen_by(self, options: PlanOptions) -> bool:
        return False  # the default when no adb device is attached, never chosen by an option

    def check(self, options: PlanOptions) -> None:
        if options.impl is not None or options.cross is not None:
            raise UsageError(f"--impl and --cross are for --target local, not --target {NAME}")
        if options.serials or options.adb_servers:
            raise UsageError("--serial and --adb-server select real devices: use them with --target adb")

    @contextmanager
    def open(self, opening: Opening) -> Iterator[list[Target]]:
        yield from launched_targets(opening)

    def resumed(self, options: PlanOptions, devices: tuple[str, ...]) -> Resumed:
        """The same names as before."""
        return Resumed(dataclasses.replace(options, serials=(), adb_servers=()), device_names=devices)


def fleet_targets(
    fleet: Fleet,
    profile: VnpuProfile,
    timeout_multiplier: float,
    build_dir: Path | None = None,
    restart_server: Callable[[], None] | None = None,
) -> list[AdbTarget]:
    """One adb target per device of a fleet the kit launched, named as the fleet names its devices."""
    from ..adb import AdbTarget

    return [
        AdbTarget(
            fleet.server.address,
            device.adb_serial,
            serial=device.name,
            profile=profile,
            timeout_multiplier=timeout_multiplier,
            host_build=build_dir,
            restart_server=restart_server,
            launched_virtual=True,
        )
        for device in fleet.devices
    ]


KIND: Final = VirtualKind()
