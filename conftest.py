"""Plugin registration and the --npu-* options only. Fixtures live in conformance/conftest.py."""

from pathlib import Path


def _user_path(text):
    # Absolute against the directory pytest was started in, as `npuconf` does with its paths:
    # `./libX.so` must stay a path, not become a name dlopen looks up on the library path.
    return Path(text).absolute()


def pytest_addoption(parser):
    group = parser.getgroup("npuconf", "npuconf conformance suite")
    group.addoption("--npu-target", choices=["local", "virtual", "adb"], default="local", help="Where the probe runs")
    group.addoption("--npu-devices", type=int, default=1, help="Virtual target: number of virtual devices")
    group.addoption("--npu-serial", action="append", default=[], help="Adb target: only this device (repeatable)")
    group.addoption(
        "--npu-adb-server", action="append", default=[], metavar="HOST:PORT", help="Adb target: adb server (repeatable)"
    )
    group.addoption(
        "--npu-impl", type=_user_path, default=None, help="Local target: a Linux library exporting the 18 functions"
    )
    group.addoption("--npu-profile", choices=["published-37", "aosp-2026"], default="published-37", help="Spec profile")
    group.addoption(
        "--npu-personality", choices=["published", "aosp-2026"], default="published", help="Virtual NPU personality"
    )
    group.addoption("--npu-timeout-multiplier", type=float, default=1.0, help="Scale every timeout")
