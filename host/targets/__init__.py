"""Where the probe runs. `Target` is the seam (prepare a device, run a batch, stream traces back); the
kinds of target (`kinds/`: local, virtual, adb) are listed in `KINDS`, each opening its targets;
`LocalTarget` runs the host build against libvnpu or an `--impl` library; `AdbTarget` reaches phones,
emulators and the embedded virtual devices (`virtual_device`) through adb servers; `VnpuProfile`
configures the virtual NPU."""

from typing import TYPE_CHECKING, Final

from floor.lazy_names import lazy_names

from .base import Device as Device
from .base import Target as Target
from .kinds import AUTO as AUTO
from .kinds import DEFAULT_KIND as DEFAULT_KIND
from .kinds import DEFAULT_LANES as DEFAULT_LANES
from .kinds import KIND_NAMES as KIND_NAMES
from .kinds import KINDS as KINDS
from .kinds import LaunchedDevices as LaunchedDevices
from .kinds import Opening as Opening
from .kinds import TargetKind as TargetKind
from .kinds import fleet_targets as fleet_targets
from .kinds import own_options as own_options
from .kinds import resolve_kind as resolve_kind
from .kinds import target_kind as target_kind
from .vnpu_profile import DEFAULT_CAPACITY as DEFAULT_CAPACITY
from .vnpu_profile import DEFAULT_PAIRS as DEFAULT_PAIRS
from .vnpu_profile import VnpuProfile as VnpuProfile
from .vnpu_profile import declared_capacity as declared_capacity

if TYPE_CHECKING:
    from .adb import DEVICE_DIR as DEVICE_DIR
    from .adb import PROFILE_NAME as PROFILE_NAME
    from .adb import AdbServerAddress as AdbServerAddress
    from .adb import AdbTarget as AdbTarget
    from .adb import attached_devices as attached_devices
    from .adb import discover_targets as discover_targets
    from .impl_check import API_FUNCTIONS as API_FUNCTIONS
    from .impl_check import check_impl as check_impl
    from .local import PROBE_STDERR_LOG as PROBE_STDERR_LOG
    from .local import LocalTarget as LocalTarget
    from .virtual_device import Fleet as Fleet
    from .virtual_device import FleetSupervisor as FleetSupervisor
    from .virtual_device import reap_orphan_fleets as reap_orphan_fleets
    from .virtual_device import start_fleet as start_fleet

# Each target's code is imported when a name of its is first used: a run on the local target loads no
# adb code (adbutils, an asyncio server, RSA keys), a virtual device's process no probe code.
_LATER: Final = {
    **dict.fromkeys(("API_FUNCTIONS", "check_impl"), ".impl_check"),
    **dict.fromkeys(("PROBE_STDERR_LOG", "LocalTarget"), ".local"),
    **dict.fromkeys(
        ("DEVICE_DIR", "PROFILE_NAME", "AdbServerAddress", "AdbTarget", "attached_devices", "discover_targets"),
        ".adb",
    ),
    **dict.fromkeys(("Fleet", "FleetSupervisor", "reap_orphan_fleets", "start_fleet"), ".virtual_device"),
}  # fmt: skip


__getattr__ = lazy_names(__name__, _LATER)
