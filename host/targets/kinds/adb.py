"""The adb target: phones, emulators and any device an adb server reaches (`--adb-server`, `--serial`);
its lanes share one NPU service."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from reports.recorded.plan_options import PlanOptions

from ...errors import UsageError
from ..base import Target
from .base import Opening, Resumed

if TYPE_CHECKING:
    from ..adb import AdbServerAddress, AdbTarget

NAME: Final = "adb"


@dataclass(frozen=True, slots=True)
class AdbKind:
    name: str = NAME
    shared_devices: bool = True  # a phone's lanes would share its NPU service
    launches_devices: bool = False

    def default_lanes(self, devices: int) -> int:
        return 1

    def chosen_by(self, options: PlanOptions) -> bool:
        return bool(options.adb_servers or options.serials)

    def check(self, options: PlanOptions) -> None:
        if options.impl is not None or options.cross is not None:
            raise UsageError(f"--impl and --cross are for --target local, not --target {NAME}")

    @contextmanager
    def open(self, opening: Opening) -> Iterator[list[Target]]:
        from ..adb import AdbServerAddress, AdbTarget, discover_targets

        options = opening.options
        multiplier = float(options.given("timeout_multiplier"))
        servers = [
            AdbServerAddress.parse(text, named=opening.adb_servers_named) for text in options.adb_servers
        ] or [AdbServerAddress.default()]

        def make(server: AdbServerAddress, adb_serial: str, name: str) -> AdbTarget:
            return AdbTarget(
                server,
                adb_serial,
                serial=name,
                profile=opening.profile,
                timeout_multiplier=multiplier,
                host_build=opening.build_dir,
            )

        yield list(discover_targets(servers, options.serials, make, servers_given=bool(options.adb_servers)))

    def resumed(self, options: PlanOptions, devices: tuple[str, ...]) -> Resumed:
        """Only the devices left to run, on the plan's servers."""
        return Resumed(dataclasses.replace(options, serials=tuple(d.split("@", 1)[0] for d in devices)))


def devices_attached() -> bool:
    """Whether the default adb server has devices attached (`--target` not given: adb if so)."""
    from ..adb import AdbServerAddress, attached_devices  # adb code only where adb is asked about

    return bool(attached_devices(AdbServerAddress.default()))


KIND: Final = AdbKind()
