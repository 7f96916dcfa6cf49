"""Where the probe runs. `Target` is the seam (prepare a device, run a batch, stream traces back) and
`VnpuProfile` configures the virtual NPU; both are exported here. Each kind of target is imported from
its own module: `local` (`LocalTarget`: the host build against libvnpu or an `--impl` library, checked
by `impl_check`), `adb` (`AdbTarget`: phones, emulators and the embedded virtual devices through adb
servers) and `virtual_device` (the kit's virtual devices). A virtual device's process, which imports
this package first, so loads no probe or adb client code."""

from .base import Device as Device
from .base import Target as Target
from .vnpu_profile import DEFAULT_CAPACITY as DEFAULT_CAPACITY
from .vnpu_profile import DEFAULT_PAIRS as DEFAULT_PAIRS
from .vnpu_profile import PERSONALITIES as PERSONALITIES
from .vnpu_profile import VnpuProfile as VnpuProfile
from .vnpu_profile import declared_capacity as declared_capacity
