"""One round of fuzz programs on several probe processes of a device at once (lanes).

On the fuzz run's vnpu a generated program waits little (host.fuzz.device_profile): the kit's own CPU
(judging, drawing the candidates) bounds the rate, and lanes keep the probes busy meanwhile. Elsewhere (an
--impl library) programs are bound by their waits (the pause after a preemption, a late onPreempt, a load,
a wait for a callback that never comes), so lanes overlap them, as `npuconf run`'s lanes overlap the
corpus's (host/run/lanes.py). Each lane's probe is a process of its own (on the local target
and on virtual devices each loads its own virtual NPU) and every program still runs in a forked child of
its own, so no program's verdict depends on another's. The round is cut into chunks the lanes take in
turn, the programs that pause dealt out among them first: a lane held by a long chunk leaves the rest of
the round to the others. A lane also validates, compiles and judges its chunk, while the others' probes run.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..run import deal_lanes

# Chunks per lane and round, so that the lanes share the round's long programs out among themselves.
CHUNKS_PER_LANE: Final = 3
# A probe batch costs a process start, and on a virtual device an adb round trip: at least this many
# programs share it, or fewer that run this long (a program that waits out its timeouts runs alone).
MIN_CHUNK: Final = 10
MIN_CHUNK_S: Final = 0.5
# What a program costs besides the pauses it asks for (ms), so that chunks without one still balance.
STEPS_MS: Final = 3.0

# Runs one chunk (positions in the round); None, or why its batch stopped.
ChunkFn = Callable[[list[int]], str | None]


def paused_ms(program: Mapping[str, Any]) -> float:
    """The time a program asks to pause (its sleep_ms steps), the part of its run time known beforehand."""
    steps = program.get("steps")
    total = 0
    for step in steps if isinstance(steps, list) else ():
        pause = step.get("sleep_ms") if isinstance(step, dict) else None
        ms = pause.get("ms") if isinstance(pause, dict) else None
        total += ms if isinstance(ms, int) else 0
    return float(total)


def chunks(programs: Sequence[Mapping[str, Any]], lanes: int, program_s: float | None = None) -> list[list[int]]:
    """The round's positions cut into about CHUNKS_PER_LANE chunks per lane, none under MIN_CHUNK programs
    (fewer when a program has taken ``program_s`` so far, so that a chunk still runs MIN_CHUNK_S); the programs
    that pause dealt out first, each chunk in the round's order. One lane takes them all."""
    smallest = MIN_CHUNK if not program_s else max(1, min(MIN_CHUNK, math.ceil(MIN_CHUNK_S / program_s)))
    if lanes <= 1 or len(programs) <= smallest:
        return [list(range(len(programs)))] if programs else []
    count = min(lanes * CHUNKS_PER_LANE, math.ceil(len(programs) / smallest))
    estimates = {str(k): STEPS_MS + paused_ms(p) for k, p in enumerate(programs)}
    return deal_lanes(list(range(len(programs))), count, str, estimates)


def run_in_lanes(programs: Sequence[Mapping[str, Any]], lanes: int, run_chunk: ChunkFn,
                 stop: threading.Event | None = None, program_s: float | None = None) -> str | None:
    """Every chunk of ``programs`` (``chunks``) through ``run_chunk``, ``lanes`` at a time. The first chunk that stops
    (its probe, or the device, gone) ends the handing out, as does ``stop``: None when every chunk ran,
    else why not."""
    pending = chunks(programs, lanes, program_s)
    guard = threading.Lock()
    stopped: list[str] = []

    def take() -> list[int] | None:
        with guard:
            if not pending or stopped or (stop is not None and stop.is_set()):
                return None
            return pending.pop(0)

    def lane() -> None:
        while (chunk := take()) is not None:
            reason = run_chunk(chunk)
            if reason is not None:
                with guard:
                    stopped.append(reason)

    threads = [threading.Thread(target=lane, name=f"fuzz-lane-{k}", daemon=True)
               for k in range(min(lanes, len(pending)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if stopped:
        return stopped[0]
    return "interrupted" if pending else None
