"""The local target: the host probe build against libvnpu or an `--impl` library (or a cross build under
qemu-user), one device named `local`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reports.recorded.plan_options import PlanOptions

from ...errors import UsageError
from ..base import Target
from .base import DEFAULT_LANES, Opening, Resumed

NAME: Final = "local"


@dataclass(frozen=True, slots=True)
class LocalKind:
    name: str = NAME
    shared_devices: bool = False  # every lane's probe loads its own vnpu
    launches_devices: bool = False

    def default_lanes(self, devices: int) -> int:
        return max(1, DEFAULT_LANES // max(devices, 1))

    def chosen_by(self, options: PlanOptions) -> bool:
        return options.impl is not None or options.cross is not None

    def check(self, options: PlanOptions) -> None:
        if options.serials or options.adb_servers:
            raise UsageError("--serial and --adb-server are for --target adb")

    @contextmanager
    def open(self, opening: Opening) -> Iterator[list[Target]]:
        from ...probe import DEFAULT_BUILD_DIR, cross_build_dir, qemu_prefix
        from ..local import LocalTarget

        options, cross = opening.options, opening.options.cross
        yield [
            LocalTarget(
                profile=opening.profile,
                work_dir=opening.work_dir,
                impl=None if options.impl is None else Path(options.impl),
                build_dir=opening.build_dir or (cross_build_dir(cross) if cross else DEFAULT_BUILD_DIR),
                timeout_multiplier=float(options.given("timeout_multiplier")),
                exec_prefix=tuple(qemu_prefix(cross)) if cross else (),
                serial=f"local-{cross}" if cross else "local",
            )
        ]

    def resumed(self, options: PlanOptions, devices: tuple[str, ...]) -> Resumed:
        return Resumed(dataclasses.replace(options, serials=(), adb_servers=()))


KIND: Final = LocalKind()
