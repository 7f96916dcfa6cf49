"""The adb target: devices reached through adb servers (phones, emulators, the kit's virtual devices).

Exports `AdbTarget` (one device: transport + deployment + batch runner), `AdbServerAddress`,
`attached_devices`, `discover_targets` and the device-side paths `DEVICE_DIR` and `PROFILE_NAME`. Which
client talks to which server is host/targets/adb_clients.py.
"""

from ..adb_host import AdbServerAddress as AdbServerAddress
from .deployment import DEVICE_DIR as DEVICE_DIR
from .deployment import PROFILE_NAME as PROFILE_NAME
from .target import AdbTarget as AdbTarget
from .transport import DeviceLost as DeviceLost
from .transport import attached_devices as attached_devices
from .transport import discover_targets as discover_targets
