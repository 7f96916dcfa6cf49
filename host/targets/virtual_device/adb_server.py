"""The fleet's private adb server: Debian's `adb` on a loopback port of the private range (never 5037
nor 5555-5585), with a private HOME holding the only key the run's virtual devices accept."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reports.safe_io import open_append, output_dir

from ...errors import UsageError
from ..adb_host import LOOPBACK, AdbServerError, server_answers
from .auth import generate_server_key
from .processes import kill_pid

DEFAULT_ADB_PORT: Final = 5037
EMULATOR_PORTS: Final = range(5555, 5586)
PRIVATE_PORTS: Final = range(15000, 32000)  # below Linux's ephemeral range
READY_TIMEOUT_S: Final = 15.0


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
