"""Running the probe as a local process: the op-table check and one batch with its traces streamed back."""

from __future__ import annotations

import queue
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Final

from .trace import BatchOutcome, ScenarioTrace, api_missing_symbols, check_listed_op_table, exit_event_scenario

# Extra wall-clock the host allows beyond the probe's own per-scenario deadline before it
# declares the whole probe process hung (the probe enforces scenario timeouts itself).
HOST_SLACK_S: Final = 10.0


def check_op_table(probe_command: Sequence[str]) -> None:
    """Compare `npuconf-probe --list` with the kit's vocabulary; raise StaleProbe on any difference."""
    done = subprocess.run([*probe_command, "--list"], capture_output=True, text=True, timeout=60, check=False)
    check_listed_op_table(shlex.join(probe_command), done.stdout.splitlines(), done.returncode)


def _reader(stream: IO[str], sink: queue.Queue[str | None]) -> None:
    for line in stream:
        sink.put(line.rstrip("\n"))
    sink.put(None)


def run_batch(
    command: Sequence[str],
    program: str,
    scenario_ids: Sequence[str],
    per_scenario_limit_s: Sequence[float],
    on_trace: Callable[[ScenarioTrace], None],
    env: dict[str, str] | None = None,
) -> BatchOutcome:
    """Run one probe process over a program, handing each scenario's trace to on_trace as it ends.

    The probe enforces each scenario's deadline itself; the host only guards against the probe
    process as a whole hanging (no line for longer than a scenario's limit plus slack).
    """
    process = subprocess.Popen(
        [*command, "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        bufsize=1,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True).start()
    stderr_chunks: list[str] = []
    stderr_stream = process.stderr
    stderr_thread = threading.Thread(target=lambda: stderr_chunks.append(stderr_stream.read()), daemon=True)
    stderr_thread.start()
    writer = threading.Thread(target=_feed, args=(process.stdin, program), daemon=True)
    writer.start()

    completed: list[str] = []
    pending: list[str] = []
    api_missing: tuple[str, ...] | None = None
    started = time.monotonic()
    error: str | None = None
    for index, scenario_id in enumerate(scenario_ids):
        deadline_s = per_scenario_limit_s[index] + HOST_SLACK_S
        status = _collect_one(lines, pending, deadline_s)
        if status == "eof":
            missing = next((api_missing_symbols(line) for line in pending if api_missing_symbols(line)), None)
            if missing is not None:
                api_missing = missing
                break
            process.wait(timeout=30)
            error = _probe_died_message(process.returncode, "".join(stderr_chunks))
            on_trace(ScenarioTrace(scenario_id, tuple(pending), _ms_since(started), error))
            break
        if status == "hung":
            process.kill()
            error = f"probe produced no output for {deadline_s:.0f} s (scenario limit plus slack); it was killed"
            on_trace(ScenarioTrace(scenario_id, tuple(pending), _ms_since(started), error))
            break
        closed = exit_event_scenario(pending[-1])
        if closed != scenario_id:
            error = f"probe reported scenario {closed!r} where {scenario_id!r} was expected: the probe is out of step"
            on_trace(ScenarioTrace(scenario_id, tuple(pending), _ms_since(started), error))
            process.kill()
            break
        on_trace(ScenarioTrace(scenario_id, tuple(pending), _ms_since(started)))
        completed.append(scenario_id)
        pending = []
        started = time.monotonic()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    writer.join(timeout=5)
    stderr_thread.join(timeout=5)
    return BatchOutcome(tuple(completed), api_missing, error, "".join(stderr_chunks))


def _collect_one(lines: queue.Queue[str | None], pending: list[str], deadline_s: float) -> str:
    """Move lines into pending until an exit event: returns 'exit', 'eof' or 'hung'."""
    while True:
        try:
            line = lines.get(timeout=deadline_s)
        except queue.Empty:
            return "hung"
        if line is None:
            return "eof"
        pending.append(line)
        if exit_event_scenario(line) is not None:
            return "exit"


def _feed(stdin: IO[str], program: str) -> None:
    try:
        stdin.write(program)
        stdin.close()
    except BrokenPipeError:
        pass


def _probe_died_message(returncode: int | None, stderr: str) -> str:
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    return f"probe process ended unexpectedly (exit status {returncode}): {last}"


def _ms_since(started: float) -> float:
    return (time.monotonic() - started) * 1000.0
