"""The virtual NPU's profile for fuzzing: the run's (`--capacity`, `--policy`, `--personality`), with what a
generated program waits for due as soon as it waits (docs/vnpu.md §2).

A generated program preempts late so that its next steps (a free, a map) come before the onPreempt, and
calls right after loadAsync to meet the load in flight; those steps come microseconds apart, and what
follows is a wait (for that onPreempt or onLoad, for a callback queued behind it, a pause, teardown), which
the device's timing made the program sit out: the late onPreempt's 100 ms, a load's 5 ms. Here:
- a late onPreempt is due once the program has made no API call for LATE_QUIET_MS (`preempt_late_quiet_ms`);
- with `due_when_waiting`, a late onPreempt and a load's onLoad are due as soon as the probe says the program
  waits (an await, a settle, a bind), and a pause (`sleep_ms`) ends once the device has nothing left to call
  back: still after the steps before the wait, without the rest of the time.
The corpus keeps the vnpu's own timing, and so do the written scenarios' replays with `npuconf run`: their
pauses are sized for it (host.fuzz.shrink.normalise).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from ..run import RunRequest
from ..targets import VnpuProfile

# Steps follow one another within microseconds; a loaded two-core host can hold a thread off the CPU for
# several milliseconds between two of them. A device the probe does not tell (an --impl library that does
# not export vnpu_waiting) still delivers a late onPreempt this long after the last call.
LATE_QUIET_MS: Final = 20


def fuzz_profile(request: RunRequest) -> VnpuProfile:
    """The profile a fuzz run gives its virtual NPUs (also the library under `--impl` when it is the vnpu
    behind an interposer: the profile reaches it alike)."""
    return dataclasses.replace(request.vnpu_profile(), preempt_late_quiet_ms=LATE_QUIET_MS, due_when_waiting=True)
