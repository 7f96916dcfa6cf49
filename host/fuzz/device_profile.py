"""The virtual NPU's profile for fuzzing: the run's (`--capacity`, `--policy`, `--personality`), with the
late onPreempt of `preempt_late=` due once the program has gone quiet instead of a fixed 100 ms later.

A generated program preempts late so that its next steps (a free, a map) come before the onPreempt; they
come microseconds apart, and what follows is a wait (for that onPreempt, for a callback queued behind it,
a pause, teardown), which a fixed delay made the program sit out. Quiet for LATE_QUIET_MS, the device
delivers it: still after the steps, without the rest of the 100 ms. The corpus keeps the fixed delay, and
so do the written scenarios' replays with `npuconf run`: their pauses are sized for it (host.fuzz.generate).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from ..run import RunRequest
from ..targets import VnpuProfile

# Steps follow one another within microseconds; a loaded two-core host can hold a thread off the CPU for
# several milliseconds between two of them.
LATE_QUIET_MS: Final = 20


def fuzz_profile(request: RunRequest) -> VnpuProfile:
    """The profile a fuzz run gives its virtual NPUs (also the library under `--impl` when it is the vnpu
    behind an interposer: the profile reaches it alike)."""
    return dataclasses.replace(request.vnpu_profile(), preempt_late_quiet_ms=LATE_QUIET_MS)
