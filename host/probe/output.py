"""What a probe run hands back: one scenario's trace lines, a batch's outcome, and the markers in them."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from floor.limits import over
from reference_model.trace import closing_scenario, exit_line
from reference_model.vocabulary import PROBE_LIST_LINES

from ..errors import StaleProbe


@dataclass(frozen=True, slots=True)
class ScenarioTrace:
    """The raw trace lines of one scenario, ending with the probe's `exit` event when it has one."""

    scenario_id: str
    lines: tuple[str, ...]
    duration_ms: float
    infra_error: str | None = None  # the probe process itself failed: verdict ERROR
    timed_out: str | None = None  # the host's watchdog gave up on the device: verdict TIMEOUT

    def recorded_lines(self) -> tuple[str, ...]:
        """The lines as results.jsonl keeps them: a probe failure is ended by the host's `exit` marker
        saying why, so whoever re-decides the verdict from the record sees what the run saw."""
        if self.infra_error is None:
            return self.lines
        return (*self.lines, host_exit_line(self.scenario_id, "error", self.infra_error))


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    completed: tuple[str, ...]
    api_missing: tuple[str, ...] | None
    error: str | None
    stderr: str = ""  # what the probe and the implementation printed (sanitizer reports land here)


def host_exit_line(scenario_id: str, status: str, reason: str) -> str:
    """The `exit` event the host writes when it, not the probe, ends a scenario (`timeout`, `error`)."""
    return exit_line(scenario_id, status, host=True, t=time.monotonic_ns(), reason=reason)


def exit_event_scenario(line: str) -> str | None:
    """The scenario an `exit` event closes, or None when the line is anything else."""
    return closing_scenario(line)


def api_missing_line(symbols: Sequence[str]) -> str:
    """The probe's `api_missing` event, kept as the evidence of NOT_APPLICABLE in a scenario's record."""
    return json.dumps({"ev": "api_missing", "symbols": list(symbols)})


def check_listed_op_table(probe: str, lines: Sequence[str], returncode: int) -> None:
    """Compare what `npuconf-probe --list` printed with the kit's vocabulary; StaleProbe on any difference."""
    got = tuple(line.rstrip("\r") for line in lines)
    if returncode == 0 and got == PROBE_LIST_LINES:
        return
    for probe_line, kit_line in zip(got + ("<missing>",) * len(PROBE_LIST_LINES), PROBE_LIST_LINES, strict=False):
        if probe_line != kit_line:
            raise StaleProbe(probe, probe_line, kit_line)
    raise StaleProbe(probe, got[len(PROBE_LIST_LINES)] if len(got) > len(PROBE_LIST_LINES) else "?", "<end of table>")


# A line as read from a device: its text (decoded with replacement) and what was wrong with it, if anything.
RawLine = tuple[str, str | None]


class LineSplitter:
    """Bytes from a device in, bounded text lines out: device output is bytes until proven text.

    A line longer than `line_bytes` is never held whole: its first bytes are kept for the message and
    the rest is skipped up to the next newline. A line that is not UTF-8 is decoded with replacement
    and carries a problem, which makes its scenario ERROR.
    """

    def __init__(self, line_bytes: int) -> None:
        self.line_bytes = line_bytes
        self._buffer = bytearray()
        self._skipped = 0  # > 0 while skipping the rest of an over-long line

    def feed(self, chunk: bytes) -> list[RawLine]:
        out: list[RawLine] = []
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            piece = chunk[start:end]
            if self._skipped:
                self._skipped += len(piece)
            else:
                room = self.line_bytes - len(self._buffer)
                if len(piece) > room:
                    self._buffer += piece[: max(room, 0)]
                    self._skipped = len(self._buffer) + len(piece) - max(room, 0)
                else:
                    self._buffer += piece
            if newline < 0:
                break
            out.append(self._take())
            start = newline + 1
        return out

    def end(self) -> list[RawLine]:
        """The last line when the stream ended without a newline."""
        return [self._take()] if self._buffer or self._skipped else []

    def _take(self) -> RawLine:
        raw = bytes(self._buffer).rstrip(b"\r")
        self._buffer.clear()
        if self._skipped:
            length, self._skipped = self._skipped, 0
            head = raw[:80].decode("utf-8", errors="replace")
            return head, over("trace_line_bytes", f"a trace line of {length} bytes (starting {head[:40]!r})")
        try:
            return raw.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            text = raw.decode("utf-8", errors="replace")
            bad = raw[exc.start : exc.start + 1]
            return text, f"a trace line is not valid UTF-8 (byte {exc.start}: {bad!r}); the scenario cannot be judged"


class BoundedBytes:
    """Keeps the first `limit` bytes it is given and counts the rest (stderr of a device)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        text = bytes(self.data).decode("utf-8", errors="replace")
        if self.dropped:
            text += (
                ("" if text.endswith("\n") or not text else "\n")
                + f"[npuconf: {self.dropped} more bytes not kept: "
                + over("stderr_bytes", "stderr")
                + "]\n"
            )
        return text
