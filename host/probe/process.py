"""Running the probe as a local process: the op-table check and one batch with its traces streamed back."""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Final

from floor.limits import TraceLimits
from reference_model.trace import missing_functions

from .output import (
    BatchOutcome,
    BoundedBytes,
    LineSplitter,
    PendingTrace,
    RawLine,
    ScenarioTrace,
    check_listed_op_table,
    exit_event_scenario,
)
from .reaping import (
    BATCH_TOKEN_VAR,
    RUNNING_PROBES,
    batch_fds,
    become_subreaper,
    end_batch,
    kill_orphans,
    new_batch_token,
    run_contained,
)

# Extra wall-clock the host allows beyond the probe's own per-scenario deadline before it
# declares the whole probe process hung (the probe enforces scenario timeouts itself).
HOST_SLACK_S: Final = 10.0
CHUNK_BYTES: Final = 1 << 16  # read size for the probe's stdout and stderr
QUEUE_CHUNKS: Final = 64  # chunks of lines in flight between the reader thread and the batch loop


def check_op_table(probe_command: Sequence[str]) -> None:
    """Compare `npuconf-probe --list` with the kit's vocabulary; raise StaleProbe on any difference."""
    returncode, stdout = run_contained([*probe_command, "--list"], timeout_s=60)
    check_listed_op_table(shlex.join(probe_command), stdout.decode("utf-8", errors="replace").splitlines(), returncode)


def _reader(stream: IO[bytes], sink: queue.Queue[list[RawLine] | None], line_bytes: int) -> None:
    """Read the probe's stdout as bytes, in chunks, into bounded lines (memory stays bounded)."""
    splitter = LineSplitter(line_bytes)
    try:
        while True:
            chunk = stream.read1(CHUNK_BYTES) if hasattr(stream, "read1") else stream.read(CHUNK_BYTES)
            if not chunk:
                break
            lines = splitter.feed(chunk)
            if lines:
                sink.put(lines)
        tail = splitter.end()
        if tail:
            sink.put(tail)
    except (OSError, ValueError):
        pass
    finally:
        sink.put(None)


def _stderr_reader(stream: IO[bytes], kept: BoundedBytes) -> None:
    try:
        while True:
            chunk = stream.read1(CHUNK_BYTES) if hasattr(stream, "read1") else stream.read(CHUNK_BYTES)
            if not chunk:
                return
            kept.add(chunk)
    except (OSError, ValueError):
        return


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the probe's whole process group: what an implementation forked does not outlive its batch."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


def run_batch(
    command: Sequence[str],
    program: str,
    scenario_ids: Sequence[str],
    per_scenario_limit_s: Sequence[float],
    on_trace: Callable[[ScenarioTrace], None],
    env: dict[str, str] | None = None,
    limits: TraceLimits | None = None,
) -> BatchOutcome:
    """Run one probe process over a program, handing each scenario's trace to on_trace as it ends.

    The probe enforces each scenario's deadline itself; the host only guards against the probe
    process as a whole hanging (no line for longer than a scenario's limit plus slack), and against a
    scenario that floods past the trace limits for longer than its limit. The probe runs in its own
    process group, killed whole when the batch ends, with what it started in sessions of its own
    (host/probe/reaping.py).
    """
    limits = limits or TraceLimits.current()
    become_subreaper()
    token = new_batch_token()
    process = subprocess.Popen(
        [*command, "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**(os.environ if env is None else env), BATCH_TOKEN_VAR: token},
        start_new_session=True,
        pass_fds=batch_fds(token),
    )
    RUNNING_PROBES.add(process, token)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    lines: queue.Queue[list[RawLine] | None] = queue.Queue(maxsize=QUEUE_CHUNKS)
    reader = threading.Thread(target=_reader, args=(process.stdout, lines, limits.line_bytes), daemon=True)
    reader.start()
    stderr_kept = BoundedBytes(limits.stderr_bytes)
    stderr_thread = threading.Thread(target=_stderr_reader, args=(process.stderr, stderr_kept), daemon=True)
    stderr_thread.start()
    writer = threading.Thread(target=_feed, args=(process.stdin, program), daemon=True)
    writer.start()

    completed: list[str] = []
    pending = PendingTrace(limits)
    backlog: collections.deque[RawLine] = collections.deque()
    api_missing: tuple[str, ...] | None = None
    started = time.monotonic()
    error: str | None = None
    try:
        for index, scenario_id in enumerate(scenario_ids):
            deadline_s = per_scenario_limit_s[index] + HOST_SLACK_S
            status = _collect_one(lines, backlog, pending, deadline_s, started)
            if status == "eof":
                missing = missing_functions(pending.lines)
                if missing is not None:
                    api_missing = missing
                    break
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    kill_group(process)
                stderr_thread.join(timeout=5)
                error = pending.problem or _probe_died_message(process.returncode, stderr_kept.text())
                on_trace(ScenarioTrace(scenario_id, tuple(pending.lines), _ms_since(started), error))
                break
            if status == "hung":
                kill_group(process)
                error = f"probe produced no output for {deadline_s:.0f} s (scenario limit plus slack); it was killed"
                on_trace(ScenarioTrace(scenario_id, tuple(pending.lines), _ms_since(started), error))
                break
            if status == "flood":
                kill_group(process)
                error = f"{pending.problem}; the probe was killed after the scenario's limit of {deadline_s:.0f} s"
                on_trace(ScenarioTrace(scenario_id, tuple(pending.lines), _ms_since(started), error))
                break
            closed = exit_event_scenario(pending.lines[-1])
            if closed != scenario_id:
                error = (
                    f"probe reported scenario {closed!r} where {scenario_id!r} was expected: the probe is out of step"
                )
                on_trace(ScenarioTrace(scenario_id, tuple(pending.lines), _ms_since(started), error))
                kill_group(process)
                break
            on_trace(ScenarioTrace(scenario_id, tuple(pending.lines), _ms_since(started), pending.problem))
            completed.append(scenario_id)
            pending.reset()
            started = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
    finally:
        kill_group(process)
        process.wait()
        kill_orphans(token)
        RUNNING_PROBES.discard(process)
        end_batch(token)
        _drain(lines)
        writer.join(timeout=5)
        stderr_thread.join(timeout=5)
        reader.join(timeout=5)
    return BatchOutcome(tuple(completed), api_missing, error, stderr_kept.text())


def _drain(lines: queue.Queue[list[RawLine] | None]) -> None:
    """Empty the queue so a reader blocked on a full queue can see EOF and end."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if lines.get(timeout=0.1) is None:
                return
        except queue.Empty:
            continue


def _collect_one(
    lines: queue.Queue[list[RawLine] | None],
    backlog: collections.deque[RawLine],
    pending: PendingTrace,
    deadline_s: float,
    started: float,
) -> str:
    """Move lines into pending until an exit event: returns 'exit', 'eof', 'hung' or 'flood'.

    `backlog` holds lines read past the last exit event (they belong to the next scenario).
    """
    while True:
        while backlog:
            if pending.add(backlog.popleft()) is not None:
                return "exit"
        if pending.problem is not None and time.monotonic() - started > deadline_s:
            return "flood"
        try:
            chunk = lines.get(timeout=deadline_s)
        except queue.Empty:
            return "hung"
        if chunk is None:
            lines.put(None)  # later scenarios of the batch see EOF too
            return "eof"
        backlog.extend(chunk)


def _feed(stdin: IO[bytes], program: str) -> None:
    try:
        stdin.write(program.encode("utf-8"))
        stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _probe_died_message(returncode: int | None, stderr: str) -> str:
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    return f"probe process ended unexpectedly (exit status {returncode}): {last}"


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000.0
