"""The adb target: real devices, emulators and virtual devices through one or more adb servers.

adbutils talks to the adb servers. The probe and (on virtual devices) libvnpu are pushed to
/data/local/tmp/npuconf/ when their SHA-256 differs from what the device holds; each batch pushes its
program and runs the probe over one shell v2 stream whose stdout is split into per-scenario traces
as it arrives. A watchdog bounds every wait, because a hung device looks healthy to adb (docs/adb.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import re
import secrets
import shlex
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import adbutils
from adbutils import AdbClient, AdbDevice
from adbutils._adb import AdbConnection

from reference_model.vocabulary import PROBE_LIST_LINES

from .errors import InfraError, StaleProbe, UsageError
from .probe import (
    PROBE_NAME,
    REPO_ROOT,
    VNPU_NAME,
    BatchOutcome,
    ScenarioTrace,
    api_missing_symbols,
    exit_event_scenario,
)
from .virtual_device.fleet import AdbServerError, device_states, host_request, server_answers
from .virtual_device.profile import NPU_FEATURE, VIRTUAL_PROP
from .vnpu_profile import CAPACITY_PROP, VnpuProfile, declared_capacity

DEVICE_DIR: Final = "/data/local/tmp/npuconf"
RUN_DIR: Final = f"{DEVICE_DIR}/run"
PROFILE_NAME: Final = "vnpu-profile.conf"
DEFAULT_SERVER_PORT: Final = 5037
# adb ABI name -> the host build that runs there when the device is a virtual one (host ABI).
COMMAND_TIMEOUT_S: Final = 20.0
PUSH_TIMEOUT_S: Final = 60.0
# The host waits this multiple of a scenario's limit (plus a little) before it declares a timeout.
HOST_WAIT_FACTOR: Final = 1.5
HOST_WAIT_EXTRA_S: Final = 0.5
LOST_AFTER_TIMEOUTS: Final = 3
# After a broken stream: how long the device may take to be back before it is declared lost.
RECOVERY_GRACE_S: Final = 3.0
MAX_RECOVERIES: Final = 3
LOGCAT_LINES: Final = 200
SYNC_CHUNK: Final = 64 * 1024
STDERR_LIMIT: Final = 1024 * 1024  # what is kept of the probe's stderr per batch

T = TypeVar("T")


class DeviceLost(InfraError):
    """The device stopped answering (gone from adb, or hung): the rest of its plan is NOT_EXECUTED."""


@dataclass(frozen=True, slots=True)
class AdbServerAddress:
    host: str
    port: int

    @staticmethod
    def parse(text: str) -> AdbServerAddress:
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--adb-server {text}: expected HOST:PORT, e.g. 127.0.0.1:5037")
        return AdbServerAddress(host.strip("[]"), int(port))

    @staticmethod
    def default() -> AdbServerAddress:
        port = os.environ.get("ANDROID_ADB_SERVER_PORT", "")
        host = os.environ.get("ANDROID_ADB_SERVER_HOST", "127.0.0.1")
        return AdbServerAddress(host, int(port) if port.isdigit() else DEFAULT_SERVER_PORT)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


# -- adbutils, never starting a server ---------------------------------------------------------


class _Connection(AdbConnection):  # type: ignore[misc]
    """An adbutils connection that fails instead of running `adb start-server` (which would use 5037)."""

    def _safe_connect(self) -> socket.socket:
        sock: socket.socket = self._create_socket()
        return sock


class _Client(AdbClient):  # type: ignore[misc]
    def make_connection(self, timeout: float | None = None) -> AdbConnection:
        connection = _Connection(self.host, self.port)
        if timeout:
            connection.conn.settimeout(timeout)
        return connection


_client_lock = threading.Lock()


def adb_client(server: AdbServerAddress) -> AdbClient:
    """An adbutils client for one server; ANDROID_ADB_SERVER_PORT is pinned to it first."""
    with _client_lock:
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        return _Client(host=server.host, port=server.port)


def list_devices(server: AdbServerAddress) -> dict[str, str]:
    """serial -> state on one server; raises UsageError when no server answers there."""
    if not server_answers(server.port, server.host, timeout=1.0):
        raise UsageError(f"--adb-server {server}: no adb server answers there")
    return device_states(server.port, server.host)


def attached_devices(server: AdbServerAddress) -> list[str]:
    """Serials in state `device` on the server, or [] when no server runs there (never starts one)."""
    if not server_answers(server.port, server.host):
        return []
    try:
        return sorted(s for s, state in device_states(server.port, server.host).items() if state == "device")
    except (OSError, AdbServerError):
        return []


def _bounded(function: Callable[[], T], timeout: float, what: str) -> T:
    """Run function with a wall-clock bound (adbutils does not bound every phase of every call)."""
    box: list[T] = []
    error: list[BaseException] = []

    def call() -> None:
        try:
            box.append(function())
        except BaseException as exc:
            error.append(exc)

    worker = threading.Thread(target=call, name=f"adb-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"{what}: no answer within {timeout:.0f} s")
    if error:
        raise error[0]
    return box[0]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _parse_getprop(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for match in re.finditer(r"^\[([^\]]*)\]: \[(.*)\]$", text, flags=re.MULTILINE):
        props[match.group(1)] = match.group(2)
    return props


# -- one probe run over a shell v2 stream ------------------------------------------------------

_V2_HEADER: Final = struct.Struct("<BI")


@dataclass(frozen=True, slots=True)
class _Event:
    kind: str  # "line", "exit", "eof"
    text: str = ""
    code: int = 0


class _ProbeStream:
    """A shell v2 stream read on its own thread: stdout lines, the exit status, or EOF, into a queue."""

    def __init__(self, client: AdbClient, adb_serial: str, command: str) -> None:
        self.events: queue.Queue[_Event] = queue.Queue()
        self.stderr = bytearray()
        self._connection = client.make_connection(timeout=COMMAND_TIMEOUT_S)
        self._aborted = False
        self._thread = threading.Thread(target=self._read, args=(adb_serial, command), daemon=True)
        self._thread.start()

    def _read(self, adb_serial: str, command: str) -> None:
        connection = self._connection
        partial = b""
        try:
            connection.send_command(f"host:transport:{adb_serial}")
            connection.check_okay()
            connection.conn.settimeout(None)  # the watchdog in run_batch bounds every wait
            connection.send_command(f"shell,v2,raw:{command}")
            connection.check_okay()
            while True:
                ident, length = _V2_HEADER.unpack(connection.read_exact(_V2_HEADER.size))
                payload = connection.read_exact(length) if length else b""
                if ident == 1:
                    lines = (partial + payload).split(b"\n")
                    partial = lines.pop()
                    for line in lines:
                        self.events.put(_Event("line", line.decode("utf-8", errors="replace")))
                elif ident == 2 and len(self.stderr) < STDERR_LIMIT:
                    self.stderr += payload[: STDERR_LIMIT - len(self.stderr)]
                elif ident == 3:
                    if partial:
                        self.events.put(_Event("line", partial.decode("utf-8", errors="replace")))
                    self.events.put(_Event("exit", code=payload[0] if payload else 255))
                    return
        except (OSError, EOFError, adbutils.AdbError) as exc:
            reason = "aborted" if self._aborted else f"{type(exc).__name__}: {exc}"
            self.events.put(_Event("eof", reason))
        finally:
            with contextlib.suppress(OSError):
                connection.conn.close()

    def abort(self) -> None:
        """Break the stream from the watchdog: the device side sees CLSE and kills the probe."""
        self._aborted = True
        with contextlib.suppress(OSError, adbutils.AdbError):
            self._connection.conn.shutdown(socket.SHUT_RDWR)

    def stderr_text(self) -> str:
        return bytes(self.stderr).decode("utf-8", errors="replace")

    def stderr_tail(self) -> str:
        text = bytes(self.stderr).decode("utf-8", errors="replace").strip()
        return text.splitlines()[-1] if text else "no message"


def _split_program(program: str) -> tuple[str, list[str]]:
    """The header line and one text block per scenario (`scenario ...` up to its `end`)."""
    lines = program.splitlines(keepends=True)
    header = lines[0] if lines else ""
    blocks: list[str] = []
    current: list[str] = []
    for line in lines[1:]:
        if line.startswith("scenario ") and current:
            blocks.append("".join(current))
            current = []
        current.append(line)
    if current:
        blocks.append("".join(current))
    return header, blocks


@dataclass
class AdbTarget:
    """One device behind one adb server. `serial` names it in results; `adb_serial` reaches it."""

    server: AdbServerAddress
    adb_serial: str
    serial: str = ""
    profile: VnpuProfile = field(default_factory=VnpuProfile)
    timeout_multiplier: float = 1.0
    settle_ms: int = 1000
    build_root: Path = REPO_ROOT / "build"  # real devices: build/probe-android-<abi>
    host_build: Path | None = None  # virtual devices (host ABI): default build/probe
    # Set for virtual devices the kit started: restarts their adb server and reconnects them.
    restart_server: Callable[[], None] | None = None
    virtual: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.serial = self.serial or self.adb_serial
        self._client = adb_client(self.server)
        self._device: AdbDevice = self._client.device(serial=self.adb_serial)
        self._lock = threading.Lock()
        self._consecutive_timeouts = 0
        self._lost: str | None = None
        self._build_dir: Path | None = None

    # -- adb plumbing -----------------------------------------------------------------------

    @property
    def device(self) -> AdbDevice:
        return self._device

    def _shell(self, command: str, timeout: float = COMMAND_TIMEOUT_S) -> adbutils.ShellReturn:
        def run() -> adbutils.ShellReturn:
            result: adbutils.ShellReturn = self.device.shell2(command, timeout=timeout, v2=True)
            return result

        return self._retrying(run, timeout + 2.0, command.split(" ", 1)[0])

    def _retrying(self, function: Callable[[], T], timeout: float, what: str) -> T:
        """Run an adb call; after a transport failure recover once (server restart, reconnect) and retry."""
        try:
            return _bounded(function, timeout, what)
        except TimeoutError as exc:
            raise DeviceLost(f"{self.serial}: {exc} (device unresponsive)") from None
        except (OSError, EOFError, adbutils.AdbError) as exc:
            self._recover(f"{what}: {exc}")
        try:
            return _bounded(function, timeout, what)
        except TimeoutError as exc:
            raise DeviceLost(f"{self.serial}: {exc} (device unresponsive)") from None
        except (OSError, EOFError, adbutils.AdbError) as exc:
            raise DeviceLost(f"{self.serial}: {what}: {exc}") from None

    def _recover(self, why: str) -> None:
        """Bring the transport back if it can be: the server restarted, the device reconnected."""
        deadline = time.monotonic() + RECOVERY_GRACE_S
        if not server_answers(self.server.port, self.server.host):
            if self.restart_server is not None:
                try:
                    self.restart_server()
                except Exception as exc:
                    raise DeviceLost(f"{self.serial}: adb server gone and could not be restarted: {exc}") from None
            else:
                while not server_answers(self.server.port, self.server.host):
                    if time.monotonic() > deadline:
                        raise DeviceLost(f"{self.serial}: adb server {self.server} stopped answering ({why})")
                    time.sleep(0.1)
        connected = False
        while time.monotonic() < deadline:
            try:
                state = device_states(self.server.port, self.server.host).get(self.adb_serial)
            except (OSError, AdbServerError):
                state = None
            if state == "device":
                return
            if state is None and not connected and re.fullmatch(r"[\w.\-\[\]:]+:\d+", self.adb_serial):
                connected = True
                with contextlib.suppress(OSError, AdbServerError):
                    host_request(self.server.port, f"host:connect:{self.adb_serial}", host=self.server.host)
            time.sleep(0.1)
        raise DeviceLost(f"{self.serial}: gone from adb server {self.server} ({why})")

    def _push(self, source: Path | bytes, destination: str, mode: int = 0o755) -> None:
        data = source.read_bytes() if isinstance(source, Path) else source
        self._retrying(lambda: self._sync_send(data, destination, mode, PUSH_TIMEOUT_S), PUSH_TIMEOUT_S + 2.0, "push")

    def _sync_send(self, data: bytes, destination: str, mode: int, timeout: float) -> None:
        """One sync SEND over one adbutils connection (adbutils' own push opens three and sleeps in each)."""
        connection = self._client.make_connection(timeout=timeout)
        try:
            connection.send_command(f"host:transport:{self.adb_serial}")
            connection.check_okay()
            connection.send_command("sync:")
            connection.check_okay()
            spec = f"{destination},{0o100000 | mode}".encode()
            parts = [b"SEND", struct.pack("<I", len(spec)), spec]
            for start in range(0, len(data), SYNC_CHUNK):
                chunk = data[start : start + SYNC_CHUNK]
                parts += [b"DATA", struct.pack("<I", len(chunk)), chunk]
            parts += [b"DONE", struct.pack("<I", int(time.time()))]
            connection.conn.sendall(b"".join(parts))
            status = connection.read_exact(8)
            if status[:4] != b"OKAY":
                message = connection.read_exact(struct.unpack("<I", status[4:])[0]).decode(errors="replace")
                raise adbutils.AdbSyncError(f"push {destination}: {message}")
            connection.conn.sendall(b"QUIT" + struct.pack("<I", 0))
        finally:
            with contextlib.suppress(OSError):
                connection.conn.close()

    # -- Target ---------------------------------------------------------------------------------

    def prepare(self) -> dict[str, Any]:
        props = _parse_getprop(self._shell("getprop").stdout)
        if not props:
            raise InfraError(f"{self.serial}: `getprop` printed no properties; is it an Android device?")
        features = self._shell("pm list features").stdout
        self.virtual = props.get(VIRTUAL_PROP) == "1"
        abis = [a for a in props.get("ro.product.cpu.abilist", props.get("ro.product.cpu.abi", "")).split(",") if a]
        build_dir, abi = self._choose_build(abis)
        self._build_dir = build_dir
        self._deploy(build_dir)
        listed = self._shell(f"{shlex.quote(f'{DEVICE_DIR}/{PROBE_NAME}')} --list")
        self._check_op_table(listed.stdout.splitlines(), listed.returncode)
        sdk_text = props.get("ro.build.version.sdk", "")
        info: dict[str, Any] = {
            "serial": self.serial,
            "adb_serial": self.adb_serial,
            "adb_server": str(self.server),
            "fingerprint": props.get("ro.build.fingerprint", ""),
            "sdk": int(sdk_text) if sdk_text.isdigit() else sdk_text,
            "abis": abis,
            "abi": abi,
            "npu_feature": f"feature:{NPU_FEATURE}" in features.splitlines(),
            "model": props.get("ro.product.model", ""),
            "manufacturer": props.get("ro.product.manufacturer", ""),
            "probe_version": _sha256(build_dir / PROBE_NAME)[:12],
            "virtual": self.virtual,
        }
        if self.virtual:
            info |= {
                "personality": self.profile.personality,
                "policy": self.profile.policy,
                "capacity": self.profile.capacity,
            }
        else:
            declared = self.profile.declared_capacity
            prop = props.get(CAPACITY_PROP, "")
            info |= declared_capacity(declared if declared is not None else int(prop) if prop.isdigit() else None)
        return info

    def _choose_build(self, abis: Sequence[str]) -> tuple[Path, str]:
        if self.virtual:
            build = self.host_build or self.build_root / "probe"
            if not (build / PROBE_NAME).is_file() or not (build / VNPU_NAME).is_file():
                raise InfraError(f"{build}: no host probe build for the virtual device; run `npuconf probe build`")
            return build, abis[0] if abis else "host"
        for abi in abis:
            build = self.build_root / f"probe-android-{abi}"
            if (build / PROBE_NAME).is_file():
                return build, abi
        wanted = abis[0] if abis else "arm64-v8a"
        raise InfraError(
            f"{self.serial}: no probe build for ABI {', '.join(abis) or '(none reported)'}; "
            f"run `npuconf probe build --ndk PATH --abi {wanted}`"
        )

    def _deploy(self, build_dir: Path) -> None:
        """Push what differs (by SHA-256) from what the device already holds, atomically by rename."""
        files: dict[str, bytes] = {PROBE_NAME: (build_dir / PROBE_NAME).read_bytes()}
        if self.virtual:
            files[VNPU_NAME] = (build_dir / VNPU_NAME).read_bytes()
            files[PROFILE_NAME] = self.profile.render().encode()
        paths = " ".join(shlex.quote(f"{DEVICE_DIR}/{name}") for name in files)
        listed = self._shell(f"mkdir -p {shlex.quote(RUN_DIR)} && sha256sum {paths} 2>/dev/null; true")
        have: dict[str, str] = {}
        for line in listed.stdout.splitlines():
            digest, _, path = line.partition("  ")
            have[path.strip().rsplit("/", 1)[-1]] = digest.strip()
        moves: list[str] = []
        for name, data in files.items():
            if have.get(name) == hashlib.sha256(data).hexdigest():
                continue
            temporary = f"{RUN_DIR}/.{name}.{secrets.token_hex(4)}"
            self._push(data, temporary)
            moves.append(f"mv -f {shlex.quote(temporary)} {shlex.quote(f'{DEVICE_DIR}/{name}')}")
        if moves:
            done = self._shell(" && ".join(moves))
            if done.returncode != 0:
                raise InfraError(f"{self.serial}: could not install the probe in {DEVICE_DIR}: {done.output.strip()}")

    def _check_op_table(self, lines: Sequence[str], returncode: int) -> None:
        probe = f"{self.serial}:{DEVICE_DIR}/{PROBE_NAME}"
        got = tuple(line.rstrip("\r") for line in lines)
        if returncode == 0 and got == PROBE_LIST_LINES:
            return
        for probe_line, kit_line in zip(got + ("<missing>",) * len(PROBE_LIST_LINES), PROBE_LIST_LINES, strict=False):
            if probe_line != kit_line:
                raise StaleProbe(probe, probe_line, kit_line)
        raise StaleProbe(probe, got[len(PROBE_LIST_LINES)] if len(got) > len(PROBE_LIST_LINES) else "?", "<end>")

    def _probe_command(self, token: str) -> str:
        program = f"run/{token}.prog"
        pid_file = f"run/{token}.pid"
        env = f"NPUCONF_VNPU_PROFILE={shlex.quote(f'{DEVICE_DIR}/{PROFILE_NAME}')} " if self.virtual else ""
        probe = (
            f"{env}./{PROBE_NAME} --timeout-multiplier {self.timeout_multiplier:g} --settle-ms {int(self.settle_ms)} "
            f"{shlex.quote(program)}"
        )
        quoted_pid, quoted_program = shlex.quote(pid_file), shlex.quote(program)
        return (
            f"cd {shlex.quote(DEVICE_DIR)} || exit 125; {probe} & p=$!; echo $p > {quoted_pid}; wait $p; s=$?; "
            f"rm -f {quoted_program} {quoted_pid}; exit $s"
        )

    def _kill_probe(self, token: str) -> None:
        """Best effort: kill the on-device probe of a timed-out batch and its scenario children."""
        pid_file = shlex.quote(f"{RUN_DIR}/{token}.pid")
        command = (
            f'p=$(cat {pid_file} 2>/dev/null) && [ -n "$p" ] && {{ pkill -9 -P "$p"; kill -9 "$p"; }}; '
            f"rm -f {pid_file} {shlex.quote(f'{RUN_DIR}/{token}.prog')}; true"
        )

        def kill() -> None:
            with contextlib.suppress(Exception):
                self.device.shell2(command, timeout=5.0, v2=True)

        threading.Thread(target=kill, name=f"kill-{self.serial}", daemon=True).start()

    def failure_context(self, scenario_id: str) -> tuple[str, ...]:
        """The tail of logcat, attached to a failing result on a real device (virtual devices have none)."""
        if self.virtual or self._lost is not None:
            return ()
        try:
            done = _bounded(
                lambda: self.device.shell2(f"logcat -d -b main,system,crash -t {LOGCAT_LINES}", timeout=5.0, v2=True),
                7.0,
                "logcat",
            )
        except Exception:
            return ()
        return tuple(str(done.output).splitlines()[-LOGCAT_LINES:])

    def _note_timeout(self) -> None:
        with self._lock:
            self._consecutive_timeouts += 1
            if self._consecutive_timeouts >= LOST_AFTER_TIMEOUTS and self._lost is None:
                self._lost = f"{LOST_AFTER_TIMEOUTS} consecutive timeouts: the device is declared lost"

    def _note_progress(self) -> None:
        with self._lock:
            self._consecutive_timeouts = 0

    def _check_lost(self) -> None:
        if self._lost is not None:
            raise DeviceLost(f"{self.serial}: {self._lost}")

    def run_batch(
        self,
        program: str,
        scenario_ids: Sequence[str],
        limits_s: Sequence[float],
        on_trace: Callable[[ScenarioTrace], None],
    ) -> BatchOutcome:
        if self._build_dir is None:
            raise InfraError(f"{self.serial}: run_batch before prepare")
        header, blocks = _split_program(program)
        if len(blocks) != len(scenario_ids):
            raise InfraError(f"program holds {len(blocks)} scenarios where {len(scenario_ids)} were expected")
        completed: list[str] = []
        index = 0
        recoveries = 0
        while index < len(scenario_ids):
            self._check_lost()
            result = self._attempt(header, blocks, scenario_ids, limits_s, index, on_trace, completed)
            if isinstance(result, BatchOutcome):
                return result
            if result == index:  # the stream broke before anything completed
                recoveries += 1
                if recoveries > MAX_RECOVERIES:
                    raise DeviceLost(f"{self.serial}: the probe stream broke {recoveries} times without progress")
            else:
                recoveries = 0
            index = result
        return BatchOutcome(tuple(completed), None, None)

    def _attempt(
        self,
        header: str,
        blocks: Sequence[str],
        scenario_ids: Sequence[str],
        limits_s: Sequence[float],
        start: int,
        on_trace: Callable[[ScenarioTrace], None],
        completed: list[str],
    ) -> BatchOutcome | int:
        """One probe process over scenarios[start:]. Returns the outcome, or the index to resume at."""
        token = secrets.token_hex(6)
        began = time.monotonic()
        first_wait = limits_s[start] * HOST_WAIT_FACTOR + HOST_WAIT_EXTRA_S
        program = (header + "".join(blocks[start:])).encode()
        try:
            destination = f"{RUN_DIR}/{token}.prog"
            _bounded(lambda: self._sync_send(program, destination, 0o644, first_wait), first_wait, "push")
            stream = _ProbeStream(self._client, self.adb_serial, self._probe_command(token))
        except TimeoutError:
            self._timed_out(scenario_ids[start], (), began, first_wait, on_trace, completed)
            return start + 1
        except (OSError, EOFError, adbutils.AdbError) as exc:
            self._recover(f"starting the probe: {exc}")
            return start
        pending: list[str] = []
        index = start
        try:
            while index < len(scenario_ids):
                scenario_id = scenario_ids[index]
                wait_s = limits_s[index] * HOST_WAIT_FACTOR + HOST_WAIT_EXTRA_S
                event = self._next(stream, began + wait_s)
                if event is None:  # the watchdog: nothing conclusive within the wait
                    stream.abort()
                    self._kill_probe(token)
                    self._timed_out(scenario_id, pending, began, wait_s, on_trace, completed)
                    return index + 1
                if event.kind == "line":
                    pending.append(event.text)
                    closed = exit_event_scenario(event.text)
                    if closed is None:
                        continue
                    if closed != scenario_id:
                        stream.abort()
                        error = f"probe reported scenario {closed!r} where {scenario_id!r} was expected"
                        on_trace(ScenarioTrace(scenario_id, tuple(pending), (time.monotonic() - began) * 1000, error))
                        return BatchOutcome(tuple(completed), None, error)
                    self._note_progress()
                    on_trace(ScenarioTrace(scenario_id, tuple(pending), (time.monotonic() - began) * 1000.0))
                    completed.append(scenario_id)
                    pending = []
                    index += 1
                    began = time.monotonic()
                    continue
                if event.kind == "exit":
                    missing = next((m for m in map(api_missing_symbols, pending) if m is not None), None)
                    if missing is not None:
                        return BatchOutcome(tuple(completed), missing, None, stream.stderr_text())
                    error = (
                        f"probe process ended unexpectedly (exit status {event.code}): {stream.stderr_tail()}"
                        if event.code != 0
                        else "probe process ended before every scenario ran"
                    )
                    on_trace(ScenarioTrace(scenario_id, tuple(pending), (time.monotonic() - began) * 1000.0, error))
                    return BatchOutcome(tuple(completed), None, error, stream.stderr_text())
                # eof: the stream broke without an exit status (device gone, adb server restarted)
                self._recover(event.text)
                return index
            # every scenario reported: let the probe finish, without waiting on a slow device
            self._next(stream, time.monotonic() + 2.0)
            return BatchOutcome(tuple(completed), None, None, stream.stderr_text())
        finally:
            stream.abort()

    def _timed_out(
        self,
        scenario_id: str,
        pending: Sequence[str],
        began: float,
        wait_s: float,
        on_trace: Callable[[ScenarioTrace], None],
        completed: list[str],
    ) -> None:
        """Report a host-side timeout: the trace so far plus an `exit` event marked as written by the host."""
        self._note_timeout()
        line = (
            f'{{"ev":"exit","scenario":"{scenario_id}","status":"timeout","code":null,"signal":null,'
            f'"host":true,"t":{time.monotonic_ns()}}}'
        )
        reason = (
            f"no result from the device within {wait_s:.1f} s ({HOST_WAIT_FACTOR:g}x the scenario's limit"
            f"{' plus the program push' if not pending else ''}): device unresponsive"
        )
        elapsed_ms = (time.monotonic() - began) * 1000.0
        on_trace(ScenarioTrace(scenario_id, (*pending, line), elapsed_ms, timed_out=reason))
        completed.append(scenario_id)

    @staticmethod
    def _next(stream: _ProbeStream, deadline: float) -> _Event | None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            return stream.events.get(timeout=remaining)
        except queue.Empty:
            return None


def discover_targets(
    servers: Sequence[AdbServerAddress],
    serials: Sequence[str],
    make: Callable[[AdbServerAddress, str, str], AdbTarget],
) -> list[AdbTarget]:
    """Devices in state `device` on every server, filtered by --serial; names made unique across servers."""
    found: list[tuple[AdbServerAddress, str]] = []
    for server in servers:
        states = list_devices(server)
        found.extend((server, serial) for serial, state in sorted(states.items()) if state == "device")
    if serials:
        known = {serial for _, serial in found}
        missing = [s for s in serials if s not in known]
        if missing:
            where = ", ".join(map(str, servers))
            raise UsageError(f"--serial {missing[0]}: no such device in state `device` on {where} (see `adb devices`)")
        found = [(server, serial) for server, serial in found if serial in serials]
    if not found:
        where = ", ".join(map(str, servers))
        raise UsageError(f"no device in state `device` on {where}; attach one or use --target virtual")
    counts: dict[str, int] = {}
    for _, serial in found:
        counts[serial] = counts.get(serial, 0) + 1
    return [make(server, serial, serial if counts[serial] == 1 else f"{serial}@{server}") for server, serial in found]
