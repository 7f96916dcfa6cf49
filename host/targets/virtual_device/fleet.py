"""Harness side of the virtual devices: a private adb server, N device processes, connect, state file.

Everything here stays on loopback, never touches port 5037 nor 5555-5585, and keeps the adb key in
a private HOME. Processes are stopped by the PIDs recorded when they were started, after checking
that the PID still runs the process that was started (PIDs get reused).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reports.safe_io import checked_name, host_state_dir, open_append, output_dir, write_text

from ...errors import InfraError, UsageError
from ...suite import REPO_ROOT
from .auth import generate_server_key
from .profile import DeviceProfile
from .sandbox import SAFE_PATH, reachable_by_others

TEMP_SANDBOX_PREFIX: Final = "npuconf-sandbox-"

LOOPBACK: Final = "127.0.0.1"
DEFAULT_ADB_PORT: Final = 5037
EMULATOR_PORTS: Final = range(5555, 5586)
PRIVATE_PORTS: Final = range(15000, 32000)  # below Linux's ephemeral range
READY_TIMEOUT_S: Final = 15.0
STATE_NAME: Final = "virtual-devices.json"


class AdbServerError(InfraError):
    """The private adb server could not be started or answered wrongly."""


class VirtualDeviceError(InfraError):
    """A virtual device could not be started or connected."""


# -- the adb host protocol (smart socket), enough for version / connect / devices -------------


def host_request(port: int, request: str, timeout: float = 5.0, host: str = LOOPBACK) -> str:
    """Send one `host:` request to an adb server and return its answer (OKAY payload or FAIL raises)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        payload = request.encode()
        sock.sendall(f"{len(payload):04x}".encode() + payload)
        status = _recv_exactly(sock, 4)
        data = b""
        if status in (b"OKAY", b"FAIL"):
            with contextlib.suppress(OSError, ValueError):
                length = int(_recv_exactly(sock, 4), 16)
                data = _recv_exactly(sock, length)
        if status != b"OKAY":
            raise AdbServerError(f"adb server {host}:{port}: {request}: {data.decode(errors='replace') or status!r}")
        return data.decode(errors="replace")


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed by the adb server")
        data += chunk
    return data


def server_answers(port: int, host: str = LOOPBACK, timeout: float = 0.3) -> bool:
    """True when an adb server answers `host:version` there (never starts one)."""
    try:
        host_request(port, "host:version", timeout=timeout, host=host)
    except (OSError, AdbServerError):
        return False
    return True


def device_states(port: int, host: str = LOOPBACK) -> dict[str, str]:
    """serial -> state (`device`, `offline`, ...) as the server lists them."""
    listing = host_request(port, "host:devices", host=host)
    states: dict[str, str] = {}
    for line in listing.splitlines():
        serial, _, state = line.partition("\t")
        if serial:
            states[serial] = state.strip()
    return states


def free_port(avoid: Sequence[int] = ()) -> int:
    """A free loopback TCP port in the private range (not 5037, not 5555-5585)."""
    for _ in range(200):
        port = random.randrange(PRIVATE_PORTS.start, PRIVATE_PORTS.stop)
        if port in avoid:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    raise AdbServerError("no free loopback port found in 15000-31999")


def check_private_port(port: int, what: str) -> None:
    if port == DEFAULT_ADB_PORT or port in EMULATOR_PORTS or not 1024 <= port <= 65535:
        raise UsageError(f"{what} {port}: choose a port in 1024-65535 other than 5037 and 5555-5585")


# -- processes --------------------------------------------------------------------------------


def pid_runs(pid: int, *markers: str) -> bool:
    """True when `pid` is alive and its command line contains every marker (guards against PID reuse)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if not raw:
        return False  # a zombie
    command = raw.replace(b"\0", b" ").decode(errors="replace")
    return all(marker in command for marker in markers)


def kill_pid(pid: int, *markers: str, grace_s: float = 1.0) -> None:
    """SIGTERM, then SIGKILL after grace_s, the process `pid` if it still runs what markers say."""
    if not pid_runs(pid, *markers):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not pid_runs(pid, *markers):
            break
        time.sleep(0.02)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def server_public_key(state_dir: Path) -> Path:
    """The adb-format public key of the fleet's private server (its devices accept only that key)."""
    return state_dir / "adb-home" / ".android" / "adbkey.pub"


def adb_env(port: int, home: Path) -> dict[str, str]:
    """Environment for anything that talks to the private server: pinned port, hermetic adb key."""
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(port), HOME=str(home), ANDROID_USER_HOME=str(home / ".android"))
    env.pop("ADB_VENDOR_KEYS", None)  # the private server signs with the run's key only
    return env


@dataclass(frozen=True, slots=True)
class AdbServer:
    port: int
    pid: int
    home: Path
    host: str = LOOPBACK

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def adb_binary() -> str:
    found = shutil.which("adb")
    if found is None:
        raise AdbServerError("adb not found on PATH; install Debian's `adb` package (see .ci/setup)")
    return found


def start_adb_server(state_dir: Path, port: int | None = None) -> AdbServer:
    """Start `adb nodaemon server` on a private loopback port with a private HOME."""
    if port is not None:
        check_private_port(port, "--adb-port")
        if server_answers(port):
            raise UsageError(f"--adb-port {port}: an adb server already answers there; choose another port")
    port = port or free_port()
    home = state_dir / "adb-home"
    output_dir(home / ".android")
    if not server_public_key(state_dir).is_file():
        generate_server_key(home)  # the server's only key: the run's virtual devices accept no other
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open_append(logs / "adb-server.log") as log:
        process = subprocess.Popen(
            [adb_binary(), "-P", str(port), "nodaemon", "server"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=adb_env(port, home),
            start_new_session=True,
        )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server_answers(port):
            return AdbServer(port, process.pid, home)
        if process.poll() is not None:
            break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()
    raise AdbServerError(f"the private adb server did not start on port {port}; see {logs / 'adb-server.log'}")


def stop_adb_server(server: AdbServer) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError, AdbServerError):
        subprocess.run(
            [adb_binary(), "-P", str(server.port), "kill-server"],
            env=adb_env(server.port, server.home),
            capture_output=True,
            timeout=10,
            check=False,
        )
    kill_pid(server.pid, "adb", str(server.port))


@dataclass(frozen=True, slots=True)
class VirtualDevice:
    name: str
    port: int
    pid: int
    root: Path

    @property
    def adb_serial(self) -> str:
        return f"{LOOPBACK}:{self.port}"


def _device_markers(device: VirtualDevice) -> tuple[str, ...]:
    return ("host.targets.virtual_device", str(device.root))


def launch_devices(
    state_dir: Path, names: Sequence[str], profiles: Sequence[DeviceProfile | None] | None = None
) -> tuple[VirtualDevice, ...]:
    """Start one device process per name (in parallel); wait for each readiness line."""
    launched: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # REPO_ROOT holds the host package in a checkout and in a wheel install (site-packages) alike.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    key = server_public_key(state_dir)
    auth = ["--auth-key", str(key)] if key.is_file() else []
    for index, name in enumerate(names):
        checked_name(name, "virtual device name")
        root = (state_dir / "devices" / name).resolve()
        if not SAFE_PATH.match(str(root)) or (os.geteuid() == 0 and not reachable_by_others(root)):
            # the sandbox path is spliced into shell text, so it must need no quoting; and the
            # unprivileged shell user must be able to reach it (removed again by stop_fleet)
            root = Path(tempfile.mkdtemp(prefix=f"{TEMP_SANDBOX_PREFIX}{name}-"))
            root.chmod(0o755)
        root.mkdir(parents=True, exist_ok=True)
        profile = profiles[index] if profiles is not None and index < len(profiles) else None
        profile = profile or DeviceProfile.default(name)
        # beside the device's filesystem, in its own directory: never a shared temporary directory
        profile_path = root / "profile.json"
        write_text(profile_path, json.dumps(profile.to_json(), indent=1))
        with open_append(logs / f"{name}.log") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "host.targets.virtual_device", "--port", "0", "--root", str(root / "fs"),
                 "--profile", str(profile_path), *auth],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        launched.append((name, root / "fs", process))
    devices: list[VirtualDevice] = []
    try:
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
    answer = host_request(server.port, f"host:connect:{device.adb_serial}")
    if "connected" not in answer:
        raise VirtualDeviceError(f"adb could not connect {device.adb_serial}: {answer}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if device_states(server.port).get(device.adb_serial) == "device":
            return
        time.sleep(0.02)
    raise VirtualDeviceError(f"{device.adb_serial} did not come online within {timeout:.0f} s")


def stop_device(device: VirtualDevice) -> None:
    kill_pid(device.pid, *_device_markers(device))


@dataclass(frozen=True, slots=True)
class Fleet:
    server: AdbServer
    devices: tuple[VirtualDevice, ...]
    state_dir: Path

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_NAME

    def to_json(self) -> dict[str, Any]:
        return {
            "adb_server": {"host": self.server.host, "port": self.server.port, "pid": self.server.pid,
                           "home": str(self.server.home)},
            "devices": [
                {"name": d.name, "serial": d.adb_serial, "port": d.port, "pid": d.pid, "root": str(d.root)}
                for d in self.devices
            ],
            "state_dir": str(self.state_dir),
        }

    @staticmethod
    def from_json(data: Any) -> Fleet:
        try:
            server = data["adb_server"]
            return Fleet(
                AdbServer(int(server["port"]), int(server["pid"]), Path(server["home"]), str(server["host"])),
                tuple(
                    VirtualDevice(str(d["name"]), int(d["port"]), int(d["pid"]), Path(d["root"]))
                    for d in data["devices"]
                ),
                Path(data["state_dir"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"virtual device state file is not one npuconf wrote ({exc})") from None

    def write_state(self, path: Path | None = None) -> Path:
        path = path or self.state_file
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(self.to_json(), indent=1) + "\n")
        return path


def read_state(path: Path) -> Fleet:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no virtual device state file; nothing was started with that state") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read the virtual device state ({exc})") from None
    return Fleet.from_json(data)


def start_fleet(
    count: int,
    state_dir: Path,
    adb_port: int | None = None,
    names: Sequence[str] | None = None,
    profiles: Sequence[DeviceProfile | None] | None = None,
) -> Fleet:
    """A private adb server and `count` connected virtual devices; the state file is written first thing."""
    if count < 1:
        raise UsageError(f"--devices {count}: expected at least one virtual device")
    names = list(names or [f"virtual-{i + 1}" for i in range(count)])
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    server = start_adb_server(state_dir, adb_port)
    fleet = Fleet(server, (), state_dir)
    try:
        fleet = Fleet(server, launch_devices(state_dir, names, profiles), state_dir)
        fleet.write_state()
        for device in fleet.devices:
            connect_device(server, device)
    except BaseException:
        stop_fleet(fleet)
        raise
    return fleet


def stop_fleet(fleet: Fleet, remove_state: bool = True) -> None:
    for device in fleet.devices:
        with contextlib.suppress(OSError, AdbServerError):
            host_request(fleet.server.port, f"host:disconnect:{device.adb_serial}", timeout=1.0)
        if pid_runs(device.pid, *_device_markers(device)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(device.pid, signal.SIGCONT)  # a stopped device cannot act on SIGTERM
        stop_device(device)
        sandbox = device.root.parent
        if sandbox.parent == Path(tempfile.gettempdir()) and sandbox.name.startswith(TEMP_SANDBOX_PREFIX):
            shutil.rmtree(sandbox, ignore_errors=True)
    stop_adb_server(fleet.server)
    if remove_state:
        with contextlib.suppress(FileNotFoundError):
            fleet.state_file.unlink()


def _process_start(pid: int) -> str | None:
    """The start time of `pid` (field 22 of /proc/PID/stat), to tell a process from a later one with its PID."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _registry() -> Path:
    return host_state_dir() / "fleets"


def register_fleet(fleet: Fleet) -> Path:
    """Record, on this host, that this process owns `fleet` (so a later run can stop it if we are killed)."""
    entry = _registry() / f"{os.getpid()}-{secrets.token_hex(4)}.json"
    owner = {"pid": os.getpid(), "start": _process_start(os.getpid()), "state_file": str(fleet.state_file)}
    write_text(entry, json.dumps(owner) + "\n")
    return entry


def reap_orphan_fleets() -> int:
    """Stop the fleets whose owning `npuconf` process is gone (SIGKILL, power loss); how many were stopped."""
    directory = _registry()
    if not directory.is_dir():
        return 0
    stopped = 0
    for entry in sorted(directory.glob("*.json")):
        try:
            owner = json.loads(entry.read_text(encoding="utf-8"))
            pid, start, state_file = int(owner["pid"]), owner.get("start"), Path(str(owner["state_file"]))
        except (OSError, ValueError, KeyError, TypeError):
            entry.unlink(missing_ok=True)
            continue
        if start is not None and _process_start(pid) == start:
            continue  # its owner still runs
        with contextlib.suppress(UsageError, OSError):
            stop_fleet(read_state(state_file))
            stopped += 1
        entry.unlink(missing_ok=True)
    return stopped


class FleetSupervisor:
    """Owns a running fleet for one session: restarts its adb server when it dies, stops it all at the end.

    The fleet is recorded in this host's registry while it runs: if this process is killed, the next
    `npuconf run` or `--resume` stops it (reap_orphan_fleets).
    """

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._lock = threading.Lock()
        self._entry: Path | None = register_fleet(fleet)

    def restart_server(self) -> None:
        """Start the adb server again on the same port (if it is gone) and reconnect the live devices."""
        with self._lock:
            fleet = self.fleet
            if not server_answers(fleet.server.port):
                server = start_adb_server(fleet.state_dir, fleet.server.port)
                fleet = Fleet(server, fleet.devices, fleet.state_dir)
                self.fleet = fleet
                fleet.write_state()
            states = device_states(fleet.server.port)
            for device in fleet.devices:
                if states.get(device.adb_serial) != "device" and pid_runs(device.pid, *_device_markers(device)):
                    with contextlib.suppress(InfraError, OSError):
                        connect_device(fleet.server, device, timeout=5.0)

    def stop(self) -> None:
        with self._lock:
            stop_fleet(self.fleet, remove_state=False)
            if self._entry is not None:
                self._entry.unlink(missing_ok=True)
                self._entry = None
