"""Live progress per device; the status line is a pure function of the counts."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import TextIO

from reference_model.verdicts import Verdict
from reports.safe_io import console_text

REDRAW_INTERVAL_S = 0.25


def status_line(per_device: dict[str, tuple[int, int, Counter[Verdict]]]) -> str:
    parts = []
    for serial, (done, total, verdicts) in sorted(per_device.items()):
        counts = " ".join(f"{v.value}={verdicts[v]}" for v in Verdict if verdicts[v])
        parts.append(f"[{console_text(serial)}] {done}/{total} {counts}".rstrip())
    return "  ".join(parts)


class Progress:
    def __init__(self, stream: TextIO) -> None:
        self.stream: TextIO = getattr(stream, "raw", stream)  # device names are made safe in status_line
        self.interactive = stream.isatty()
        self._state: dict[str, tuple[int, int, Counter[Verdict]]] = {}
        self._lock = threading.Lock()
        self._last_draw = 0.0

    def update(self, serial: str, verdict: Verdict, done: int, total: int) -> None:
        with self._lock:
            _, _, verdicts = self._state.get(serial, (0, total, Counter()))
            verdicts[verdict] += 1
            self._state[serial] = (done, total, verdicts)
            now = time.monotonic()
            if self.interactive and (now - self._last_draw >= REDRAW_INTERVAL_S or done == total):
                self.stream.write("\r" + status_line(self._state) + "\033[K")
                self.stream.flush()
                self._last_draw = now

    def finish(self) -> None:
        with self._lock:
            if self._state:
                self.stream.write(("\r" if self.interactive else "") + status_line(self._state) + "\n")
                self.stream.flush()
