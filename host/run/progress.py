"""Progress on stderr while a run goes: the lines are pure functions of the counts and the clock.

Each device counts against a pool: its own scenarios in a plain run, or its build's share in a sharded
run (`--shard`: the devices of one build share one pool, so each device's count is its share of the
pool, not a fraction of its own). The run's total is the sum of the pools' totals; its ETA is the
slowest pool's (pools run in parallel, and a pool's devices share its work).

On a terminal, one live line per device plus, for more than one device, a line for the whole run,
redrawn in place. Elsewhere (a CI log, a file), a plain line whenever a plain device (or, sharded, the
run) passes another 10 % of its scenarios, and otherwise at most every 10 s while results arrive, so a
log shows a run moving without flooding. The last line says whether the run completed.
`npuconf run -q` creates no Progress at all.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

from floor.safe_io import console_text
from reference_model.verdicts import Verdict

REDRAW_INTERVAL_S = 0.25  # terminal: the fastest redraw
LOG_INTERVAL_S = 10.0  # log: a line at least this often while results arrive
LOG_STEP_PERCENT = 10  # log: a line each time a device passes another step of this many percent


@dataclass
class DeviceProgress:
    total: int  # the pool's total (the device's own scenarios, or its build's share when sharded)
    started: float  # clock time the device's first scenario started (taken as the Progress's start)
    pool: str
    done: int = 0
    verdicts: Counter[Verdict] = field(default_factory=Counter)

    def eta_s(self, now: float) -> float | None:
        """Seconds left at the device's mean rate so far; None before the first result."""
        return eta_s(self.done, self.total, now - self.started)


@dataclass(frozen=True)
class RunCounts:
    """The whole run: every pool's total and done, the verdicts, and the slowest pool's ETA."""

    done: int
    total: int
    verdicts: Counter[Verdict]
    eta_s: float | None

    @property
    def complete(self) -> bool:
        return self.done >= self.total


def eta_s(done: int, total: int, elapsed: float) -> float | None:
    if done >= total:
        return 0.0
    if done <= 0:
        return None
    return max(elapsed, 0.0) / done * (total - done)


def run_counts(devices: Mapping[str, DeviceProgress], now: float) -> RunCounts:
    pools: dict[str, tuple[int, int, float]] = {}  # pool -> (done, total, started)
    verdicts: Counter[Verdict] = Counter()
    for state in devices.values():
        done, _, _ = pools.get(state.pool, (0, 0, state.started))
        pools[state.pool] = (done + state.done, state.total, state.started)
        verdicts.update(state.verdicts)
    etas = [eta_s(done, total, now - started) for done, total, started in pools.values()]
    eta = None if any(e is None for e in etas) else max((e for e in etas if e is not None), default=0.0)
    return RunCounts(
        done=sum(done for done, _, _ in pools.values()),
        total=sum(total for _, total, _ in pools.values()),
        verdicts=verdicts,
        eta_s=eta,
    )


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _counts(verdicts: Counter[Verdict]) -> str:
    return " ".join(f"{v.value}={verdicts[v]}" for v in Verdict if verdicts[v])


def _percent(done: int, total: int) -> int:
    return 100 * done // total if total else 100


def device_line(serial: str, state: DeviceProgress, now: float) -> str:
    """`[serial] 120/311  39%  ETA 0:07  PASS=118 FAIL=2` (`done` in place of the ETA once finished);
    a device sharing its build's pool: `[serial] ran 37 of the shared 368  PASS=37`."""
    name = console_text(serial)
    if state.pool != serial:
        return f"[{name}] ran {state.done} of the shared {state.total}  {_counts(state.verdicts)}".rstrip()
    eta = "done" if state.done >= state.total else f"ETA {format_duration(state.eta_s(now))}"
    percent = _percent(state.done, state.total)
    return f"[{name}] {state.done}/{state.total} {percent:3d}%  {eta}  {_counts(state.verdicts)}".rstrip()


def run_line(run: RunCounts) -> str:
    """`run: 148/368  40%  ETA 0:10  PASS=146 FAIL=2` (`run complete: 368/368 ...` once finished)."""
    if run.complete:
        return f"run complete: {run.done}/{run.total}  {_counts(run.verdicts)}".rstrip()
    percent = _percent(run.done, run.total)
    eta = format_duration(run.eta_s)
    return f"run: {run.done}/{run.total} {percent:3d}%  ETA {eta}  {_counts(run.verdicts)}".rstrip()


def final_line(devices: Mapping[str, DeviceProgress], elapsed: float) -> str:
    """The line printed when a run ends: complete or not, the run's counts, then each device's part."""
    run = run_counts(devices, 0.0)
    state = "run complete" if run.complete else "run incomplete"
    parts = []
    for serial, device in sorted(devices.items()):
        share = f"{device.done}" if device.pool != serial else f"{device.done}/{device.total}"
        parts.append(f"[{console_text(serial)}] {share}")
    counts = _counts(run.verdicts)
    return f"{state}: {run.done}/{run.total} in {format_duration(elapsed)}  {counts}  ({', '.join(parts)})"


class Progress:
    """Receives `update(serial, verdict, done, total, pool)` from the device runs (any thread)."""

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

    def update(self, serial: str, verdict: Verdict, done: int, total: int, pool: str | None = None) -> None:
        """`pool`: the name of the work the device shares (its build when sharded); None: its own."""
        with self._lock:
            state = self._state.get(serial)
            if state is None:
                state = self._state[serial] = DeviceProgress(total, self.started, pool or serial)
            state.total = total
            state.pool = pool or serial
            state.done = done
            state.verdicts[verdict] += 1
            now = self.clock()
            if self.interactive:
                if now - self._last_draw >= REDRAW_INTERVAL_S or done >= total:
                    self._draw(now)
            else:
                self._log(serial, state, now)

    def _lines(self, now: float) -> list[str]:
        lines = [device_line(serial, s, now) for serial, s in sorted(self._state.items())]
        if len(self._state) > 1 or any(s.pool != serial for serial, s in self._state.items()):
            lines.append(run_line(run_counts(self._state, now)))
        return lines

    def _draw(self, now: float) -> None:
        up = f"\033[{self._drawn}F" if self._drawn else ""  # to the start of the first line drawn before
        lines = [line + "\033[K" for line in self._lines(now)]
        self.stream.write(up + "\n".join(lines) + "\n")
        self.stream.flush()
        self._drawn = len(lines)
        self._last_draw = now

    def _log(self, serial: str, state: DeviceProgress, now: float) -> None:
        if state.pool != serial:  # a shared pool: the steps are the run's, not one device's
            run = run_counts(self._state, now)
            if run.complete:
                return  # finish() says so, with the time taken
            key, done, total, line = "", run.done, run.total, run_line(run)
        else:
            key, done, total, line = serial, state.done, state.total, device_line(serial, state, now)
        step = _percent(done, total) // LOG_STEP_PERCENT
        if step > self._logged_step.get(key, 0):
            self._logged_step[key] = step
            self.stream.write(line + "\n")
        elif now - self._last_log >= LOG_INTERVAL_S:
            self.stream.write("\n".join(self._lines(now)) + "\n")
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
            self.stream.write(final_line(self._state, now - self.started) + "\n")
            self.stream.flush()
