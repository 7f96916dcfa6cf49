"""The device side of the adb protocol, so the real adb server sees the kit's virtual devices as phones.

`python -m host.targets.virtual_device` runs one device (server.py and the services it routes to);
the harness side is split by job: `adb_server` (the private adb server), `launch` (device processes),
`fleet` (server + devices + their state file), `registry` (fleets this host owns), `supervisor` (a
session's fleet, kept alive), `processes` (PIDs checked before they are signalled). Exports the fleet
API and the profile facts the adb target reads.
"""

from .adb_server import adb_env as adb_env
from .adb_server import free_port as free_port
from .command import virtual_device_command as virtual_device_command
from .fleet import Fleet as Fleet
from .fleet import read_state as read_state
from .fleet import start_fleet as start_fleet
from .fleet import stop_fleet as stop_fleet
from .processes import pid_runs as pid_runs
from .profile import NPU_FEATURE as NPU_FEATURE
from .profile import VIRTUAL_PROP as VIRTUAL_PROP
from .profile import DeviceProfile as DeviceProfile
from .registry import reap_orphan_fleets as reap_orphan_fleets
from .supervisor import FleetSupervisor as FleetSupervisor
