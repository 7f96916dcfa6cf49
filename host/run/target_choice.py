"""Which target a run uses (`--target`, or `auto`), and the options that belong to other targets."""

from __future__ import annotations

from typing import Final

from ..errors import UsageError
from .plan import RunRequest

TARGETS: Final = ("local", "virtual", "adb")
# The fleet of a run's virtual devices keeps its state here, in the run directory.
VIRTUAL_STATE_DIR: Final = "virtual-devices"


def resolve_target(request: RunRequest) -> str:
    """The target a request runs on; `auto` is attached adb devices if any on the default server, else virtual."""
    if request.target != "auto":
        return request.target
    if request.impl is not None or request.options.cross is not None:
        return "local"
    if request.options.adb_servers or request.options.serials:
        return "adb"
    from ..targets import AdbServerAddress, attached_devices  # adb code only where adb is asked about

    return "adb" if attached_devices(AdbServerAddress.default()) else "virtual"


def check_target_request(request: RunRequest, target_name: str) -> None:
    """The options that belong to other targets than `target_name`: usage errors."""
    if target_name not in TARGETS:
        raise UsageError(f"--target {target_name}: expected one of {', '.join(TARGETS)}")
    if target_name == "local":
        if request.options.serials or request.options.adb_servers:
            raise UsageError("--serial and --adb-server are for --target adb")
        return
    if request.impl is not None or request.options.cross is not None:
        raise UsageError(f"--impl and --cross are for --target local, not --target {target_name}")
    if target_name == "virtual" and (request.options.serials or request.options.adb_servers):
        raise UsageError("--serial and --adb-server select real devices: use them with --target adb")
