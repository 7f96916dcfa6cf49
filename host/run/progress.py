"""Progress on stderr while a run goes: the lines are pure functions of the counts and the clock.

On a terminal, one live line per device (done/total, percent, ETA, verdict counts), redrawn in place.
Elsewhere (a CI log, a file), a plain line whenever a device passes another 10 % of its scenarios,
and otherwise at most every 10 s while results arrive, so a log shows a run moving without flooding.
`npuconf run -q` creates no Progress at all.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from reference_model.verdicts import Verdict
from reports.safe_io import console_text

REDRAW_INTERVAL_S = 0.25  # terminal: the fastest redraw
LOG_INTERVAL_S = 10.0  # log: a line at least this often while results arrive
LOG_STEP_PERCENT = 10  # log: a line each time a device passes another step of this many percent


@dataclass
class DeviceProgress:
    total: int
    started: float  # clock time the device's first scenario started (taken as the Progress's start)
    done: int = 0
    verdicts: Counter[Verdict] = field(default_factory=Counter)

    def eta_s(self, now: float) -> float | None:
        """Seconds left at the device's mean rate so far; None before the first result."""
        if self.done <= 0 or self.done >= self.total:
            return 0.0 if self.done >= self.total else None
        elapsed = max(now - self.started, 0.0)
        return elapsed / self.done * (self.total - self.done)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def device_line(serial: str, state: DeviceProgress, now: float) -> str:
    """`[serial] 120/311  39%  ETA 0:07  PASS=118 FAIL=2` (`done` in place of the ETA once finished)."""
    percent = 100 * state.done // state.total if state.total else 100
    eta = "done" if state.done >= state.total else f"ETA {format_duration(state.eta_s(now))}"
    counts = " ".join(f"{v.value}={state.verdicts[v]}" for v in Verdict if state.verdicts[v])
    return f"[{console_text(serial)}] {state.done}/{state.total} {percent:3d}%  {eta}  {counts}".rstrip()


def status_line(per_device: dict[str, tuple[int, int, Counter[Verdict]]]) -> str:
    """Every device on one line, without timing (the summary printed when a run ends)."""
    parts = []
    for serial, (done, total, verdicts) in sorted(per_device.items()):
        counts = " ".join(f"{v.value}={verdicts[v]}" for v in Verdict if verdicts[v])
        parts.append(f"[{console_text(serial)}] {done}/{total} {counts}".rstrip())
    return "  ".join(parts)


class Progress:
    """Receives `update(serial, verdict, done, total)` from the device runs (any thread)."""

    def __init__(
        self, stream: TextIO, *, interactive: bool | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream: TextIO = getattr(stream, "raw", stream)  # device names are made safe in device_line
        self.interactive = stream.isatty() if interactive is None else interactive
        self.clock = clock
        self.started = clock()
        self._state: dict[str, DeviceProgress] = {}
        self._lock = threading.Lock()
        self._last_draw = float("-inf")
        self._drawn = 0  # terminal: lines drawn last time, to move back over
        self._last_log = self.started
        self._logged_step: dict[str, int] = {}

    def update(self, serial: str, verdict: Verdict, done: int, total: int) -> None:
        with self._lock:
            state = self._state.get(serial)
            if state is None:
                state = self._state[serial] = DeviceProgress(total, self.started)
            state.total = total
            state.done = done
            state.verdicts[verdict] += 1
            now = self.clock()
            if self.interactive:
                if now - self._last_draw >= REDRAW_INTERVAL_S or done >= total:
                    self._draw(now)
            else:
                self._log(serial, state, now)

    def _draw(self, now: float) -> None:
        up = f"\033[{self._drawn}F" if self._drawn else ""  # to the start of the first line drawn before
        lines = [device_line(serial, s, now) + "\033[K" for serial, s in sorted(self._state.items())]
        self.stream.write(up + "\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn = len(lines)
        self._last_draw = now

    def _log(self, serial: str, state: DeviceProgress, now: float) -> None:
        step = 100 * state.done // state.total // LOG_STEP_PERCENT if state.total else 0
        if step > self._logged_step.get(serial, 0):
            self._logged_step[serial] = step
            self.stream.write(device_line(serial, state, now) + "\n")
        elif now - self._last_log >= LOG_INTERVAL_S:
            for name, other in sorted(self._state.items()):
                self.stream.write(device_line(name, other, now) + "\n")
        else:
            return
        self.stream.flush()
        self._last_log = now

    def finish(self) -> None:
        with self._lock:
            if not self._state:
                return
            now = self.clock()
            if self.interactive:
                self._draw(now)
            else:
                elapsed = format_duration(now - self.started)
                per_device = {k: (s.done, s.total, s.verdicts) for k, s in self._state.items()}
                self.stream.write(f"finished in {elapsed}: {status_line(per_device)}\n")
                self.stream.flush()
