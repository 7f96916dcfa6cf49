"""Virtual device processes: started in parallel, each reporting the port it listens on, then
connected through the fleet's adb server."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floor.safe_io import checked_name, open_append, output_dir, write_text

from ... import REPO_ROOT
from ...errors import InfraError
from ..adb_host import LOOPBACK, device_states, host_request
from .adb_server import READY_TIMEOUT_S, AdbServer, server_public_key
from .processes import kill_pid
from .profile import DeviceProfile
from .sandbox import SAFE_PATH, reachable_by_others

TEMP_SANDBOX_PREFIX: Final = "npuconf-sandbox-"


class VirtualDeviceError(InfraError):
    """A virtual device could not be started or connected."""


@dataclass(frozen=True, slots=True)
class VirtualDevice:
    name: str
    port: int
    pid: int
    root: Path

    @property
    def adb_serial(self) -> str:
        return f"{LOOPBACK}:{self.port}"


def device_markers(device: VirtualDevice) -> tuple[str, ...]:
    return ("host.targets.virtual_device", str(device.root))


def launch_devices(
    state_dir: Path,
    names: Sequence[str],
    profiles: Sequence[DeviceProfile | None] | None = None,
    key: Callable[[], Path] | None = None,
) -> tuple[VirtualDevice, ...]:
    """Start one device process per name (in parallel); wait for each readiness line.

    With `key`, the devices start at once and `key()` (which may start the adb server and make its key)
    runs while they load; the public key it returns is then written to each device's stdin. Without it
    the devices accept the key the state directory holds, if any."""
    launched: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
    logs = output_dir(state_dir / "logs")
    # REPO_ROOT holds the host package in a checkout and in a wheel install (site-packages) alike.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    held = server_public_key(state_dir)
    auth = ["--auth-key", "-"] if key is not None else ["--auth-key", str(held)] if held.is_file() else []
    for index, name in enumerate(names):
        checked_name(name, "virtual device name")
        root = output_dir(state_dir / "devices" / name)  # no other user's symlink followed on the way
        if not SAFE_PATH.match(str(root)) or (os.geteuid() == 0 and not reachable_by_others(root)):
            # the sandbox path is spliced into shell text, so it must need no quoting; and the device's
            # unprivileged identity must be able to reach it (removed again by stop_fleet)
            root = Path(tempfile.mkdtemp(prefix=f"{TEMP_SANDBOX_PREFIX}{name}-"))
            os.chmod(root, 0o755)  # made by mkdtemp a moment ago: 0700 and a name nobody could plant
        profile = profiles[index] if profiles is not None and index < len(profiles) else None
        profile = profile or DeviceProfile.default(name)
        # beside the device's filesystem, in its own directory: never a shared temporary directory
        profile_path = root / "profile.json"
        write_text(profile_path, json.dumps(profile.to_json(), indent=1))
        with open_append(logs / f"{name}.log") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "host.targets.virtual_device", "--port", "0", "--root", str(root / "fs"),
                 "--profile", str(profile_path), *auth],
                stdin=subprocess.PIPE if key is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        launched.append((name, root / "fs", process))
    devices: list[VirtualDevice] = []
    try:
        if key is not None:
            text = key().read_bytes()
            for _, _, process in launched:
                assert process.stdin is not None
                with contextlib.suppress(BrokenPipeError):  # a device that died says so in _read_ready
                    process.stdin.write(text)
                process.stdin.close()
        for name, root, process in launched:
            port = _read_ready(process, logs / f"{name}.log")
            devices.append(VirtualDevice(name, port, process.pid, root))
    except BaseException:
        for _, _, process in launched:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        raise
    return tuple(devices)


def _read_ready(process: subprocess.Popen[bytes], log: Path) -> int:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_S)
    line = process.stdout.readline().decode(errors="replace") if ready else ""
    process.stdout.close()
    words = line.split()
    if len(words) != 3 or words[0] != "LISTENING" or words[2] != f"pid={process.pid}":
        raise VirtualDeviceError(f"virtual device did not report ready (got {line.strip()!r}); see {log}")
    return int(words[1])


def connect_device(server: AdbServer, device: VirtualDevice, timeout: float = 10.0) -> None:
    """`host:connect:` through the server, then wait until it lists the device as `device`."""
    answer = host_request(server.address, f"host:connect:{device.adb_serial}")
    if "connected" not in answer:
        raise VirtualDeviceError(f"adb could not connect {device.adb_serial}: {answer}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if device_states(server.address).get(device.adb_serial) == "device":
            return
        time.sleep(0.02)
    raise VirtualDeviceError(f"{device.adb_serial} did not come online within {timeout:.0f} s")


def stop_device(device: VirtualDevice) -> None:
    kill_pid(device.pid, *device_markers(device))
