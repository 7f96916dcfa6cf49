"""One probe batch's stdout split into per-scenario traces, whichever transport brings it.

A transport (the local process's pipe, an adb shell stream) hands the reader the lines it has read, then the
probe's end (`ProbeStdout`). The reader holds each scenario's lines within the trace limits until the `exit`
event that closes it and hands each trace on as it ends; it decides when the probe is out of step, flooding
or silent past a scenario's wait. How bytes arrive, how the probe is stopped, what a silent probe means and a
broken stream stay the transport's.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from floor.limits import TraceLimits, over
from reference_model.trace import missing_functions

from .output import RawLine, ScenarioTrace, exit_event_scenario


@dataclass(frozen=True, slots=True)
class ProbeEnded:
    """The probe's stdout ended: its exit status (None when unknown) and what it printed on stderr."""

    status: int | None
    stderr: str


class ProbeStdout(Protocol):
    """A batch's stdout as a transport reads it. `next_lines` may raise the transport's own errors (a broken
    stream): the reader lets them through, having handed on every scenario closed before."""

    def next_lines(self, deadline: float) -> Sequence[RawLine] | ProbeEnded | None:
        """The next lines read, in order; the probe's end; or None when nothing came by `deadline` (monotonic)."""
        ...

    def stop(self) -> None:
        """Stop the probe: the reader gave up on it while it may still run."""
        ...


@dataclass(frozen=True, slots=True)
class Finished:
    """The batch is over: every scenario closed, or the implementation lacks `api_missing`, or `error` ended it
    (the last trace handed on carries it)."""

    api_missing: tuple[str, ...] | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Silent:
    """No `exit` closed the scenario within its wait and the probe was stopped; no trace was handed on for it,
    since what the silence means (a broken probe, an unresponsive device) is the transport's to say."""

    scenario_id: str
    lines: tuple[str, ...]
    started: float  # monotonic: when the host began waiting for the scenario
    wait_s: float


class PendingTrace:
    """The lines of the scenario being read, held within the trace limits; the first problem is kept."""

    def __init__(self, limits: TraceLimits) -> None:
        self.limits = limits
        self.lines: list[str] = []
        self.size = 0
        self.seen = 0
        self.problem: str | None = None

    def add(self, line: RawLine) -> str | None:
        """Hold one line (when within limits); the scenario its `exit` event closes, or None."""
        text, problem = line
        self.seen += 1
        if problem is not None and self.problem is None:
            self.problem = problem
        closed = exit_event_scenario(text) if problem is None else None
        if closed is not None:
            self.lines.append(text)  # the closing event is always kept: one line past the limits at most
            return closed
        if problem is not None:
            return None
        self.size += len(text) + 1
        if self.problem is None and self.size > self.limits.scenario_bytes:
            self.problem = over("trace_bytes", f"the scenario's trace passed {self.limits.scenario_bytes} bytes")
        elif self.problem is None and len(self.lines) >= self.limits.scenario_lines:
            self.problem = over("trace_lines", f"the scenario's trace passed {self.limits.scenario_lines} lines")
        if self.problem is None:
            self.lines.append(text)
        return None

    def reset(self) -> None:
        self.lines = []
        self.size = 0
        self.seen = 0
        self.problem = None


class BatchReader:
    """Reads one probe process's stdout into the traces of `scenario_ids`, in order, each within its wait.

    `waits_s[i]` bounds scenario i from when the host began waiting for it (the previous exit, or `started`).
    `on_closed` hears of each scenario its own `exit` closed, just before its trace is handed on.
    """

    def __init__(
        self,
        scenario_ids: Sequence[str],
        waits_s: Sequence[float],
        on_trace: Callable[[ScenarioTrace], None],
        limits: TraceLimits,
        on_closed: Callable[[str], None] | None = None,
    ) -> None:
        self.scenarios = list(zip(scenario_ids, waits_s, strict=True))  # a wait for every scenario, or none
        self.on_trace = on_trace
        self.on_closed = on_closed
        self.closed: list[str] = []  # the scenarios closed by their exit so far, in order
        self._pending = PendingTrace(limits)
        self._backlog: deque[RawLine] = deque()  # lines read past the last exit: the next scenario's

    def read(self, stdout: ProbeStdout, started: float) -> Finished | Silent:
        """Read until the batch is over, or until a scenario's wait passes with no `exit` and no flood."""
        pending = self._pending
        for scenario_id, wait_s in self.scenarios:
            got = self._read_to_exit(stdout, started + wait_s)
            if isinstance(got, ProbeEnded):
                return self._ended_early(scenario_id, got, started)
            if got is None:
                stdout.stop()
                if pending.problem is None:
                    return Silent(scenario_id, tuple(pending.lines), started, wait_s)
                # a flood past a limit, for the whole wait: the limit is the answer, not the silence
                return self._failed(scenario_id, f"{pending.problem}; the probe was killed after {wait_s:.1f} s "
                                    "without the scenario's exit", started)  # fmt: skip
            if got != scenario_id:
                stdout.stop()
                error = f"probe reported scenario {got!r} where {scenario_id!r} was expected: the probe is out of step"
                return self._failed(scenario_id, error, started)
            if self.on_closed is not None:
                self.on_closed(scenario_id)
            self._hand_on(scenario_id, started, pending.problem)
            self.closed.append(scenario_id)
            pending.reset()
            started = time.monotonic()
        return Finished()

    def _read_to_exit(self, stdout: ProbeStdout, deadline: float) -> str | ProbeEnded | None:
        """Lines into the pending trace until an `exit` event: the scenario it closes; else the probe's end,
        or None once `deadline` passed. Lines already read are taken first: an exit among them still counts."""
        while True:
            while self._backlog:
                closed = self._pending.add(self._backlog.popleft())
                if closed is not None:
                    return closed
            if time.monotonic() >= deadline:  # also while lines keep coming: a flood ends at its wait too
                return None
            got = stdout.next_lines(deadline)
            if got is None or isinstance(got, ProbeEnded):
                return got
            self._backlog.extend(got)

    def _ended_early(self, scenario_id: str, ended: ProbeEnded, started: float) -> Finished:
        missing = missing_functions(self._pending.lines)
        if missing is not None:
            return Finished(api_missing=missing)
        return self._failed(scenario_id, self._pending.problem or _ended_message(ended), started)

    def _failed(self, scenario_id: str, error: str, started: float) -> Finished:
        self._hand_on(scenario_id, started, error)
        return Finished(error=error)

    def _hand_on(self, scenario_id: str, started: float, error: str | None) -> None:
        elapsed_ms = (time.monotonic() - started) * 1000.0
        self.on_trace(ScenarioTrace(scenario_id, tuple(self._pending.lines), elapsed_ms, error))


def _ended_message(ended: ProbeEnded) -> str:
    """Why a scenario has no exit when the probe ended before it: the status and stderr's last line."""
    text = ended.stderr.strip()
    last = text.splitlines()[-1] if text else "no message"
    return f"probe process ended unexpectedly (exit status {ended.status}): {last}"
