"""Building, checking and running the probe; splitting its output into per-scenario traces."""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from reference_model.vocabulary import PROBE_LIST_LINES

from .errors import ProbeBuildError, StaleProbe

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
PROBE_SOURCE: Final = REPO_ROOT / "ndk_probe"
DEFAULT_BUILD_DIR: Final = REPO_ROOT / "build" / "probe"
PROBE_NAME: Final = "npuconf-probe"
VNPU_NAME: Final = "libvnpu.so"
# Extra wall-clock the host allows beyond the probe's own per-scenario deadline before it
# declares the whole probe process hung (the probe enforces scenario timeouts itself).
HOST_SLACK_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class ProbeBuild:
    directory: Path

    @property
    def probe(self) -> Path:
        return self.directory / PROBE_NAME

    @property
    def vnpu(self) -> Path:
        return self.directory / VNPU_NAME

    def exists(self) -> bool:
        return self.probe.is_file() and self.vnpu.is_file()


def build_probe(
    build_dir: Path = DEFAULT_BUILD_DIR, cmake_args: Sequence[str] = (), log: Callable[[str], None] | None = None
) -> ProbeBuild:
    """Configure and build the probe and libvnpu with CMake (host build unless cmake_args say otherwise)."""
    configure = [
        "cmake",
        "-S",
        str(PROBE_SOURCE),
        "-B",
        str(build_dir),
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
        *cmake_args,
    ]
    build = ["cmake", "--build", str(build_dir), "--parallel", str(os.cpu_count() or 2)]
    for command in (configure, build):
        if log:
            log("$ " + shlex.join(command))
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ProbeBuildError(shlex.join(command), done.stdout + done.stderr)
    return ProbeBuild(build_dir)


def check_op_table(probe_command: Sequence[str]) -> None:
    """Compare `npuconf-probe --list` with the kit's vocabulary; raise StaleProbe on any difference."""
    done = subprocess.run([*probe_command, "--list"], capture_output=True, text=True, timeout=60, check=False)
    lines = tuple(done.stdout.splitlines())
    if done.returncode != 0 or lines != PROBE_LIST_LINES:
        for probe_line, kit_line in zip(lines + ("<missing>",) * len(PROBE_LIST_LINES), PROBE_LIST_LINES, strict=False):
            if probe_line != kit_line:
                raise StaleProbe(shlex.join(probe_command), probe_line, kit_line)
        raise StaleProbe(shlex.join(probe_command), lines[len(PROBE_LIST_LINES)], "<end of table>")


@dataclass(frozen=True, slots=True)
class ScenarioTrace:
    """The raw trace lines of one scenario, ending with the probe's `exit` event when it has one."""

    scenario_id: str
    lines: tuple[str, ...]
    duration_ms: float
    infra_error: str | None = None  # the probe process itself failed: verdict ERROR
    timed_out: str | None = None  # the host's watchdog gave up on the device: verdict TIMEOUT


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    completed: tuple[str, ...]
    api_missing: tuple[str, ...] | None
    error: str | None
    stderr: str = ""  # what the probe and the implementation printed (sanitizer reports land here)


def exit_event_scenario(line: str) -> str | None:
    """The scenario an `exit` event closes, or None when the line is anything else."""
    if '"exit"' not in line:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if isinstance(event, dict) and event.get("ev") == "exit":
        scenario = event.get("scenario")
        if isinstance(scenario, str):
            return scenario
    return None


def api_missing_symbols(line: str) -> tuple[str, ...] | None:
    if '"api_missing"' not in line:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if isinstance(event, dict) and event.get("ev") == "api_missing":
        return tuple(str(s) for s in event.get("symbols", ()))
    return None


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
