"""Where the probe runs. `Target` is the seam (prepare a device, run a batch, stream traces back);
`LocalTarget` runs the host build against libvnpu or an `--impl` library; `AdbTarget` reaches phones,
emulators and the embedded virtual devices (`virtual_device`) through adb servers; `VnpuProfile`
configures the virtual NPU."""

from typing import TYPE_CHECKING, Final

from reports.floor.lazy_names import lazy_names

from .base import Device as Device
from .base import Target as Target
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
