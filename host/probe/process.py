"""Running the probe as a local process: the op-table check and one batch with its traces streamed back."""

from __future__ import annotations

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

from .batch_reader import BatchReader, Finished, ProbeEnded, Silent
from .output import BatchOutcome, BoundedBytes, LineSplitter, RawLine, ScenarioTrace, check_listed_op_table
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


class _PipeStdout:
    """The local probe's stdout for the batch reader: lines read on a thread into a bounded queue, then the
    process's end (waited for, killed past 30 s) with its stderr."""

    def __init__(self, process: subprocess.Popen[bytes], limits: TraceLimits) -> None:
        assert process.stdout is not None and process.stderr is not None
        self.process = process
        self.lines: queue.Queue[list[RawLine] | None] = queue.Queue(maxsize=QUEUE_CHUNKS)
        self.stderr = BoundedBytes(limits.stderr_bytes)
        self._ended = False
        self._reader = threading.Thread(target=_reader, args=(process.stdout, self.lines, limits.line_bytes),
                                        daemon=True)  # fmt: skip
        self._reader.start()
        self._stderr_reader = threading.Thread(target=_stderr_reader, args=(process.stderr, self.stderr), daemon=True)
        self._stderr_reader.start()

    def next_lines(self, deadline: float) -> list[RawLine] | ProbeEnded | None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            chunk = self.lines.get(timeout=remaining)
        except queue.Empty:
            return None
        if chunk is not None:
            return chunk
        self._ended = True
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill_group(self.process)
        self._stderr_reader.join(timeout=5)
        return ProbeEnded(self.process.returncode, self.stderr.text())

    def stop(self) -> None:
        kill_group(self.process)

    def close(self) -> None:
        """After the process is gone: let the reader threads end (a reader blocked on a full queue too)."""
        if not self._ended:
            _drain(self.lines)
        self._stderr_reader.join(timeout=5)
        self._reader.join(timeout=5)


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

    The probe enforces each scenario's deadline itself; the host only guards against the probe process as
    a whole hanging or flooding: a scenario with no `exit` within its limit plus slack is ERROR and ends
    the batch. The probe runs in its own process group, killed whole when the batch ends, with what it
    started in sessions of its own (host/probe/reaping.py).
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
    assert process.stdin is not None
    stdout = _PipeStdout(process, limits)
    writer = threading.Thread(target=_feed, args=(process.stdin, program), daemon=True)
    writer.start()
    reader = BatchReader(scenario_ids, [limit + HOST_SLACK_S for limit in per_scenario_limit_s], on_trace, limits)
    try:
        end = reader.read(stdout, time.monotonic())
        if isinstance(end, Silent):  # the probe keeps each scenario's deadline: silence past it is the probe's fault
            error = f"probe gave no exit within {end.wait_s:.0f} s (the scenario's limit plus slack); it was killed"
            on_trace(ScenarioTrace(end.scenario_id, end.lines, _ms_since(end.started), error))
            end = Finished(error=error)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
    finally:
        kill_group(process)
        process.wait()
        kill_orphans(token)
        RUNNING_PROBES.discard(process)
        end_batch(token)
        stdout.close()
        writer.join(timeout=5)
    return BatchOutcome(tuple(reader.closed), end.api_missing, end.error, stdout.stderr.text())


def _drain(lines: queue.Queue[list[RawLine] | None]) -> None:
    """Empty the queue so a reader blocked on a full queue can see EOF and end."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if lines.get(timeout=0.1) is None:
                return
        except queue.Empty:
            continue


def _feed(stdin: IO[bytes], program: str) -> None:
    try:
        stdin.write(program.encode("utf-8"))
        stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000.0
