"""The fleet's private adb server: Debian's `adb` listening on a unix socket in a directory only the run's
user may enter (or, when asked, on a loopback port of the private range: never 5037 nor 5555-5585),
with a private HOME holding the only key the run's virtual devices accept."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from floor.safe_io import open_append, output_dir

from ...errors import UsageError
from ..adb_host import LOOPBACK, AdbServerAddress, AdbServerError, server_answers
from .auth import generate_server_key
from .processes import kill_pid

DEFAULT_ADB_PORT: Final = 5037
EMULATOR_PORTS: Final = range(5555, 5586)
PRIVATE_PORTS: Final = range(15000, 32000)  # below Linux's ephemeral range
READY_TIMEOUT_S: Final = 15.0
SOCKET_DIR_PREFIX: Final = "npuconf-adb-"
SOCKET_NAME: Final = "adb.sock"


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


def server_public_key(state_dir: Path) -> Path:
    """The adb-format public key of the fleet's private server (its devices accept only that key)."""
    return state_dir / "adb-home" / ".android" / "adbkey.pub"


def adb_env(server: AdbServerAddress, home: Path) -> dict[str, str]:
    """Environment for anything that talks to the private server: pinned address, hermetic adb key."""
    env = dict(os.environ, HOME=str(home), ANDROID_USER_HOME=str(home / ".android"))
    env.pop("ADB_VENDOR_KEYS", None)  # the private server signs with the run's key only
    if server.is_unix:
        env["ADB_SERVER_SOCKET"] = str(server)
        env.pop("ANDROID_ADB_SERVER_PORT", None)
    else:
        env["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        env.pop("ADB_SERVER_SOCKET", None)
    return env


@dataclass(frozen=True, slots=True)
class AdbServer:
    address: AdbServerAddress
    pid: int
    home: Path


def adb_binary() -> str:
    found = shutil.which("adb")
    if found is None:
        raise AdbServerError("adb not found on PATH; install Debian's `adb` package (see .ci/setup)")
    return found


def private_socket() -> AdbServerAddress:
    """A unix socket address in a fresh directory only this user may enter (mkdtemp: mode 0700, a name
    nobody could have planted): no other local user can connect to a server listening there."""
    directory = tempfile.mkdtemp(prefix=SOCKET_DIR_PREFIX)
    return AdbServerAddress.unix(os.path.join(directory, SOCKET_NAME))


def _check_socket_directory(server: AdbServerAddress) -> None:
    """Before a server is started again on its socket: the directory is still this user's and closed to others."""
    directory = os.path.dirname(server.path)
    try:
        info = os.lstat(directory)
    except OSError as exc:
        raise AdbServerError(f"{directory}: the adb server's socket directory is gone ({exc.strerror})") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise AdbServerError(f"{directory}: the adb server's socket directory is no longer this user's alone")


def start_adb_server(state_dir: Path, address: AdbServerAddress | None = None) -> AdbServer:
    """Start `adb nodaemon server` with a private HOME, listening on `address` (default: a unix socket in a
    private directory; a TCP port only when one is asked for, --adb-port)."""
    if address is None:
        address = private_socket()
    elif address.is_unix:
        _check_socket_directory(address)
    else:
        check_private_port(address.port, "--adb-port")
        if server_answers(address):
            raise UsageError(f"--adb-port {address.port}: an adb server already answers there; choose another port")
    home = state_dir / "adb-home"
    output_dir(home / ".android")
    if not server_public_key(state_dir).is_file():
        generate_server_key(home)  # the server's only key: the run's virtual devices accept no other
    logs = output_dir(state_dir / "logs")
    with open_append(logs / "adb-server.log") as log:
        process = subprocess.Popen(
            [adb_binary(), *address.adb_option(), "nodaemon", "server"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=adb_env(address, home),
            start_new_session=True,
        )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server_answers(address):
            return AdbServer(address, process.pid, home)
        if process.poll() is not None:
            break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()
    raise AdbServerError(f"the private adb server did not start on {address}; see {logs / 'adb-server.log'}")


def server_markers(server: AdbServer) -> tuple[str, ...]:
    """What the server's command line holds (its PID is checked against these before it is signalled)."""
    return ("adb", server.address.adb_option()[1])


def stop_adb_server(server: AdbServer) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError, AdbServerError):
        subprocess.run(
            [adb_binary(), *server.address.adb_option(), "kill-server"],
            env=adb_env(server.address, server.home),
            capture_output=True,
            timeout=10,
            check=False,
        )
    kill_pid(server.pid, *server_markers(server))
    if server.address.is_unix:
        directory = Path(server.address.path).parent
        if directory.parent == Path(tempfile.gettempdir()) and directory.name.startswith(SOCKET_DIR_PREFIX):
            shutil.rmtree(directory, ignore_errors=True)  # the private directory start_adb_server made
