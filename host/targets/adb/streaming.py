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
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from floor.limits import TraceLimits
from reference_model.trace import missing_functions

from ...errors import InfraError
from ...probe import (
    PROBE_NAME,
    BatchOutcome,
    BoundedBytes,
    LineSplitter,
    PendingTrace,
    RawLine,
    ScenarioTrace,
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



@dataclass(frozen=True, slots=True)
class _Event:
    kind: str  # "lines", "exit", "eof"
    text: str = ""  # eof: why the stream broke
    code: int = 0
    # "lines": (text, problem) in order; a problem (a line over a limit or not UTF-8) makes its scenario ERROR
    lines: tuple[RawLine, ...] = ()


class _ProbeStream:
    """A shell v2 stream read on its own thread: stdout lines (those of one frame together), the exit
    status, or EOF, into a queue, which `next_event` reads in order."""

    def __init__(self, transport: DeviceTransport, command: str) -> None:
        self.events: queue.Queue[_Event] = queue.Queue(maxsize=EVENT_QUEUE)
        self._lines: deque[RawLine] = deque()  # of the last "lines" event, not read yet
        self.limits = TraceLimits.current()
        self.stderr = BoundedBytes(self.limits.stderr_bytes)
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
                    self._put(_Event("exit", code=status[0] if status else 255))
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
                self._put(_Event("eof", reason))
        except _Aborted:
            pass
        finally:
            connection.close()

    def _put(self, event: _Event) -> None:
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
            self._put(_Event("lines", lines=tuple(lines[start : start + LINES_PER_EVENT])))

    def next_event(self, deadline: float) -> _Event | RawLine | None:
        """The next line, else the next exit or eof; None when nothing came before `deadline` (monotonic)."""
        while not self._lines:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                return None
            if event.kind != "lines":
                return event
            self._lines.extend(event.lines)
        return self._lines.popleft()

    def abort(self) -> None:
        """Break the stream from the watchdog: the device side sees CLSE and kills the probe."""
        self._aborted = True
        self._connection.abort()

    def stderr_text(self) -> str:
        return self.stderr.text()

    def stderr_tail(self) -> str:
        text = self.stderr_text().strip()
        return text.splitlines()[-1] if text else "no message"


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
        first_wait = limits_s[start] * HOST_WAIT_FACTOR + HOST_WAIT_EXTRA_S
        program = (header + "".join(blocks[start:])).encode()
        transport = self.transport
        try:
            destination = f"{RUN_DIR}/{token}.prog"
            cancel = Cancel()
            bounded(lambda: transport.sync_send(program, destination, 0o644, first_wait, cancel), first_wait, "push",
                    cancel)  # fmt: skip
            stream = _ProbeStream(transport, self._probe_command(token))
        except TimeoutError:
            self._timed_out(scenario_ids[start], (), began, first_wait, on_trace, completed)
            return start + 1
        except adb_errors() as exc:
            transport.recover(f"starting the probe: {exc}")
            return start
        pending = PendingTrace(stream.limits)
        index = start
        try:
            while index < len(scenario_ids):
                scenario_id = scenario_ids[index]
                wait_s = limits_s[index] * HOST_WAIT_FACTOR + HOST_WAIT_EXTRA_S
                event = stream.next_event(began + wait_s)
                if event is None and pending.problem is not None:  # a flood past a limit, for the whole wait
                    stream.abort()
                    self._kill_probe(token)
                    error = f"{pending.problem}; the probe was stopped after {wait_s:.1f} s"
                    on_trace(ScenarioTrace(scenario_id, tuple(pending.lines), (time.monotonic() - began) * 1000, error))
                    return BatchOutcome(tuple(completed), None, error, stream.stderr_text())
                if event is None:  # the watchdog: nothing conclusive within the wait
                    stream.abort()
                    self._kill_probe(token)
                    self._timed_out(scenario_id, pending.lines, began, wait_s, on_trace, completed)
                    return index + 1
                if isinstance(event, tuple):  # a line
                    closed = pending.add(event)
                    if closed is None:
                        continue
                    if closed != scenario_id:
                        stream.abort()
                        error = f"probe reported scenario {closed!r} where {scenario_id!r} was expected"
                        lines = tuple(pending.lines)
                        on_trace(ScenarioTrace(scenario_id, lines, (time.monotonic() - began) * 1000, error))
                        return BatchOutcome(tuple(completed), None, error)
                    self._note_progress()
                    lines, problem = tuple(pending.lines), pending.problem
                    on_trace(ScenarioTrace(scenario_id, lines, (time.monotonic() - began) * 1000.0, problem))
                    completed.append(scenario_id)
                    pending.reset()
                    index += 1
                    began = time.monotonic()
                    continue
                if event.kind == "exit":
                    missing = missing_functions(pending.lines)
                    if missing is not None:
                        return BatchOutcome(tuple(completed), missing, None, stream.stderr_text())
                    error = (
                        f"probe process ended unexpectedly (exit status {event.code}): {stream.stderr_tail()}"
                        if event.code != 0
                        else "probe process ended before every scenario ran"
                    )
                    error = pending.problem or error
                    lines = tuple(pending.lines)
                    on_trace(ScenarioTrace(scenario_id, lines, (time.monotonic() - began) * 1000.0, error))
                    return BatchOutcome(tuple(completed), None, error, stream.stderr_text())
                # eof: the stream broke without an exit status (device gone, adb server restarted)
                transport.recover(event.text)
                return index
            # every scenario reported: let the probe finish, without waiting on a slow device
            stream.next_event(time.monotonic() + 2.0)
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
        reason = (
            f"no result from the device within {wait_s:.1f} s ({HOST_WAIT_FACTOR:g}x the scenario's limit"
            f"{' plus the program push' if not pending else ''}): device unresponsive"
        )
        line = host_exit_line(scenario_id, "timeout", reason)
        elapsed_ms = (time.monotonic() - began) * 1000.0
        on_trace(ScenarioTrace(scenario_id, (*pending, line), elapsed_ms, timed_out=reason))
        completed.append(scenario_id)

