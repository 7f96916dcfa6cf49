"""How many probe processes (lanes) run at once on one device, and which scenarios each one runs.

The corpus is bound by waits (settles, callback waits, the delays scenarios ask for), not by the CPU,
so on the local target, where every lane's probe loads its own virtual NPU in its own process, lanes
overlap those waits: `DEFAULT_LANES` of them unless `-j` says otherwise. Through adb (phones and the
virtual devices alike) the lanes share one device, one adb connection and the device's health
bookkeeping (three timeouts in a row lose it), so the default there stays one lane
(docs/decisions.md, "Lanes").
Scenarios are dealt longest first to the lane with the least estimated work, using the durations the
results store measured on the same build, so that no lane is left holding the long ones at the end.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

# Measured on the 2-core host (docs/decisions.md, "Lanes"): verdicts identical to -j 1 up to 16 lanes;
# past 8 the wall time gains little and every lane is a probe process with its own memory.
DEFAULT_LANES: Final = 8
SHARED_DEVICE_TARGETS: Final = frozenset({"adb", "virtual"})

DEFAULT_ESTIMATE_MS: Final = 50.0

# Estimated durations (ms) by scenario id for a build fingerprint; from the results store.
EstimatesFn = Callable[[str], Mapping[str, float]]
Item = TypeVar("Item")


def default_lanes(target_name: str) -> int:
    """The lanes a run uses on `target_name` when `-j` is not given."""
    return 1 if target_name in SHARED_DEVICE_TARGETS else DEFAULT_LANES


def estimate_all(ids: Sequence[str], known: Mapping[str, float]) -> dict[str, float]:
    """Every id's estimate: the measured one, else the median of the measured ones, else the default."""
    measured = [v for v in (known.get(i) for i in ids) if v is not None and v > 0]
    fallback = statistics.median(measured) if measured else DEFAULT_ESTIMATE_MS
    return {i: (v if (v := known.get(i)) is not None and v > 0 else fallback) for i in ids}


def known_estimates(estimates: EstimatesFn | None, group: str) -> Mapping[str, float]:
    """The store's measured durations for a build (empty without a store, or when it cannot answer)."""
    if estimates is None:
        return {}
    try:
        return estimates(group)
    except Exception:  # estimates only steer the balance; a store problem must not stop the run
        return {}


def deal_lanes(
    items: Sequence[Item], lanes: int, key: Callable[[Item], str], known: Mapping[str, float]
) -> list[list[Item]]:
    """`items` split into at most `lanes` lists: longest estimate first, each to the lane with the least
    estimated work so far (ties: the lower lane). With nothing measured every estimate is equal and
    the items are dealt in turn, as before. Each lane keeps its items in their original order."""
    count = max(1, min(lanes, len(items)))
    estimate = estimate_all([key(i) for i in items], known)
    order = sorted(range(len(items)), key=lambda n: -estimate[key(items[n])])
    heap = [(0.0, lane) for lane in range(count)]
    chosen: list[list[int]] = [[] for _ in range(count)]
    for n in order:
        load, lane = heapq.heappop(heap)
        chosen[lane].append(n)
        heapq.heappush(heap, (load + estimate[key(items[n])], lane))
    return [[items[n] for n in sorted(indices)] for indices in chosen if indices]
