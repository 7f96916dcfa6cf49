"""The Linux cross builds the kit knows: Debian's cross compilers, whose probes run under qemu-user.

One table for the two sides that name them: the plan's `--cross` option (reports) and the build and its
qemu prefix (host.probe.toolchains). The kit proves portability to 64-bit and 32-bit ARM (32-bit off_t).
"""

from __future__ import annotations

from typing import Final, NamedTuple


class CrossTarget(NamedTuple):
    compiler: str  # Debian's cross gcc
    processor: str  # CMAKE_SYSTEM_PROCESSOR
    qemu: str  # the qemu-user binary that runs the probe
    sysroot: str  # qemu's -L: where the target's libc lives


CROSS_TARGETS: Final = {
    "aarch64": CrossTarget("aarch64-linux-gnu-gcc", "aarch64", "qemu-aarch64", "/usr/aarch64-linux-gnu"),
    "armhf": CrossTarget("arm-linux-gnueabihf-gcc", "arm", "qemu-arm", "/usr/arm-linux-gnueabihf"),
}
