"""The device side of the adb protocol, so the real adb server sees the kit's virtual devices as phones.

`python -m host.targets.virtual_device` runs one device; `fleet` starts a private adb server and N
devices and supervises them. Exports the fleet API and the profile facts the adb target reads.
"""

from .command import virtual_device_command as virtual_device_command
from .fleet import AdbServerError as AdbServerError
from .fleet import Fleet as Fleet
from .fleet import FleetSupervisor as FleetSupervisor
from .fleet import adb_env as adb_env
from .fleet import device_states as device_states
from .fleet import free_port as free_port
from .fleet import host_request as host_request
from .fleet import pid_runs as pid_runs
from .fleet import read_state as read_state
from .fleet import reap_orphan_fleets as reap_orphan_fleets
from .fleet import server_answers as server_answers
from .fleet import start_fleet as start_fleet
from .fleet import stop_fleet as stop_fleet
from .profile import NPU_FEATURE as NPU_FEATURE
from .profile import VIRTUAL_PROP as VIRTUAL_PROP
from .profile import DeviceProfile as DeviceProfile
