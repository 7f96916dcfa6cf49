"""Running batches on a device: the program pushed, the probe run over one shell v2 stream whose stdout is
split into per-scenario traces as it arrives, a watchdog on every wait, and timeouts counted toward a lost
device (a hung device looks healthy to adb; see docs/adb.md)."""

from __future__ import annotations

import contextlib
import queue
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final

from floor.limits import TraceLimits

from ...errors import InfraError
from ...probe import (
    PROBE_NAME,
    BatchOutcome,
    BatchReader,
    BoundedBytes,
    LineSplitter,
    ProbeEnded,
    RawLine,
    ScenarioTrace,
    Silent,
    host_exit_line,
)
from ..adb_clients import V2_HEADER, Cancel, v2_length
from .deployment import DEVICE_DIR, PROFILE_NAME, RUN_DIR
from .transport import COMMAND_TIMEOUT_S, DeviceLost, DeviceTransport, adb_errors, bounded

# The host waits this multiple of a scenario's limit (plus a little) before it declares a timeout.
HOST_WAIT_FACTOR: Final = 1.5
HOST_WAIT_EXTRA_S: Final = 0.5
LOST_AFTER_TIMEOUTS: Final = 3
MAX_RECOVERIES: Final = 3
# Lines in flight between the stream's reader thread and the batch loop: a frame's lines go in events of
# up to LINES_PER_EVENT (a queue handoff per line was most of the adb path's extra host CPU), at most
# EVENT_QUEUE events at a time, so no more than 4096 lines wait however the device frames its output.
LINES_PER_EVENT: Final = 256
EVENT_QUEUE: Final = 16


class _Aborted(Exception):
    """The watchdog aborted the stream while the reader waited to queue a line."""


class StreamBroken(InfraError):
    """The probe's stream broke without an exit status (device gone, adb server restarted)."""


class _ProbeStream:
    """A shell v2 stream read on its own thread: stdout lines (those of one frame together), then the probe's
    end or the broken stream, into a queue, which `next_lines` reads in order (the batch reader's
    `ProbeStdout`)."""

    def __init__(self, transport: DeviceTransport, command: str, kill: Callable[[], None] | None = None) -> None:
        self.events: queue.Queue[tuple[RawLine, ...] | ProbeEnded | StreamBroken] = queue.Queue(maxsize=EVENT_QUEUE)
        self.limits = TraceLimits.current()
        self.stderr = BoundedBytes(self.limits.stderr_bytes)
        self._kill = kill  # kills the probe on the device when the stream alone may not
        self._connection = transport.connect(COMMAND_TIMEOUT_S)
        adb_serial = transport.adb_serial
        self._aborted = False
        self._thread = threading.Thread(target=self._read, args=(adb_serial, command), daemon=True)
        self._thread.start()

    def _read(self, adb_serial: str, command: str) -> None:
        connection = self._connection
        splitter = LineSplitter(self.limits.line_bytes)
        try:
            connection.open(adb_serial, f"shell,v2,raw:{command}")  # the watchdog in BatchRunner bounds every wait
            while True:
                ident, length = V2_HEADER.unpack(connection.read_exact(V2_HEADER.size))
                length = v2_length(length)  # past adb's own payloads: refused before a byte of it is read
                if ident == 3:
                    status = connection.read_exact(min(length, 1)) if length else b""
                    connection.skip(length - len(status))
                    self._put_lines(splitter.end())
                    self._put(ProbeEnded(status[0] if status else 255, self.stderr.text()))
                    return
                # a frame is read in pieces as they arrive: the splitter and the stderr buffer keep within
                # their limits, so nothing a header announces is allocated before its bytes are there
                for chunk in connection.read_chunks(length):
                    if ident == 1:
                        self._put_lines(splitter.feed(chunk))
                    elif ident == 2:
                        self.stderr.add(chunk)
        except adb_errors() as exc:
            reason = "aborted" if self._aborted else f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(_Aborted):
                self._put(StreamBroken(reason))
        except _Aborted:
            pass
        finally:
            connection.close()

    def _put(self, event: tuple[RawLine, ...] | ProbeEnded | StreamBroken) -> None:
        """Queue an event; while the queue is full, wait (the reader never holds more than EVENT_QUEUE)."""
        while True:
            if self._aborted:
                raise _Aborted
            try:
                self.events.put(event, timeout=0.2)
                return
            except queue.Full:
                continue

    def _put_lines(self, lines: list[RawLine]) -> None:
        for start in range(0, len(lines), LINES_PER_EVENT):
            self._put(tuple(lines[start : start + LINES_PER_EVENT]))

    def next_lines(self, deadline: float) -> tuple[RawLine, ...] | ProbeEnded | None:
        """The next lines of a frame, else the probe's end; None when nothing came before `deadline` (monotonic).
        Raises StreamBroken when the stream broke without an exit status."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            event = self.events.get(timeout=remaining)
        except queue.Empty:
            return None
        if isinstance(event, StreamBroken):
            raise event
        return event

    def stop(self) -> None:
        """The batch reader gave up on the probe: the stream is broken and the probe killed by its PID file."""
        self.abort()
        if self._kill is not None:
            self._kill()

    def abort(self) -> None:
        """Break the stream from the watchdog: the device side sees CLSE and kills the probe."""
        self._aborted = True
        self._connection.abort()

    def stderr_text(self) -> str:
        return self.stderr.text()


def split_program(program: str) -> tuple[str, list[str]]:
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


class BatchRunner:
    """Runs batches on one deployed device; three consecutive timeouts declare the device lost."""

    def __init__(self, transport: DeviceTransport, virtual: bool, timeout_multiplier: float, settle_ms: int) -> None:
        self.transport = transport
        self.virtual = virtual
        self.timeout_multiplier = timeout_multiplier
        self.settle_ms = settle_ms
        self._lock = threading.Lock()
        self._consecutive_timeouts = 0
        self.lost: str | None = None

    @property
    def serial(self) -> str:
        return self.transport.serial

    def run_batch(
        self,
        program: str,
        scenario_ids: Sequence[str],
        limits_s: Sequence[float],
        on_trace: Callable[[ScenarioTrace], None],
    ) -> BatchOutcome:
        header, blocks = split_program(program)
        if len(blocks) != len(scenario_ids):
            raise InfraError(f"program holds {len(blocks)} scenarios where {len(scenario_ids)} were expected")
        completed: list[str] = []
        index = 0
        recoveries = 0
        while index < len(scenario_ids):
            if self.lost is not None:
                raise DeviceLost(f"{self.serial}: {self.lost}")
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
        transport = self.transport

        def kill() -> None:
            with contextlib.suppress(Exception):
                transport.shell_once(command, 5.0)

        threading.Thread(target=kill, name=f"kill-{self.serial}", daemon=True).start()

    def _note_timeout(self) -> None:
        with self._lock:
            self._consecutive_timeouts += 1
            if self._consecutive_timeouts >= LOST_AFTER_TIMEOUTS and self.lost is None:
                self.lost = f"{LOST_AFTER_TIMEOUTS} consecutive timeouts: the device is declared lost"

    def _note_progress(self) -> None:
        with self._lock:
            self._consecutive_timeouts = 0

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
        waits_s = [limit_s * HOST_WAIT_FACTOR + HOST_WAIT_EXTRA_S for limit_s in limits_s[start:]]
        first_wait = waits_s[0]  # the push counts toward the first scenario's wait
        program = (header + "".join(blocks[start:])).encode()
        transport = self.transport
        try:
            destination = f"{RUN_DIR}/{token}.prog"
            cancel = Cancel()
            bounded(lambda: transport.sync_send(program, destination, 0o644, first_wait, cancel), first_wait, "push",
                    cancel)  # fmt: skip
            stream = _ProbeStream(transport, self._probe_command(token), lambda: self._kill_probe(token))
        except TimeoutError:
            self._timed_out(scenario_ids[start], (), began, first_wait, on_trace, completed)
            return start + 1
        except adb_errors() as exc:
            transport.recover(f"starting the probe: {exc}")
            return start
        reader = BatchReader(scenario_ids[start:], waits_s, on_trace, stream.limits,
                             on_closed=lambda _: self._note_progress())  # fmt: skip
        try:
            try:
                end = reader.read(stream, began)
            except StreamBroken as exc:  # the interrupted scenario runs again once the transport is back
                completed.extend(reader.closed)
                transport.recover(str(exc))
                return start + len(reader.closed)
            completed.extend(reader.closed)
            if isinstance(end, Silent):  # the watchdog: nothing conclusive within the wait
                self._timed_out(end.scenario_id, end.lines, end.started, end.wait_s, on_trace, completed)
                return start + len(reader.closed) + 1
            if end.error is None and end.api_missing is None:  # every scenario reported: let the probe finish,
                with contextlib.suppress(StreamBroken):  # without waiting on a slow device
                    stream.next_lines(time.monotonic() + 2.0)
            return BatchOutcome(tuple(completed), end.api_missing, end.error, stream.stderr_text())
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
        reason = (
            f"no result from the device within {wait_s:.1f} s ({HOST_WAIT_FACTOR:g}x the scenario's limit"
            f"{' plus the program push' if not pending else ''}): device unresponsive"
        )
        line = host_exit_line(scenario_id, "timeout", reason)
        elapsed_ms = (time.monotonic() - began) * 1000.0
        on_trace(ScenarioTrace(scenario_id, (*pending, line), elapsed_ms, timed_out=reason))
        completed.append(scenario_id)
