"""How many probe processes (lanes) run at once on one device, and which scenarios each one runs.

The corpus is bound by waits (settles, callback waits, the delays scenarios ask for), not by the CPU,
so lanes overlap those waits. On the local target and on the kit's virtual devices every lane's probe
loads its own virtual NPU in its own process, so lanes share nothing a verdict depends on:
`DEFAULT_LANES` of them (shared among the virtual devices of a run) unless `-j` says otherwise. On a
phone or an emulator (`adb`) the lanes would share one NPU service: its capacity, its preemption
victims, its callback threads; the default there stays one lane, and with `-j` the scenarios whose
verdict rests on the whole device's state (`requires` a declared capacity or allocation policy) still
run alone, after the others (docs/architecture.md, "Lanes").
Scenarios are dealt longest first to the lane with the least estimated work, using the durations the
results store measured on the same build, so that no lane is left holding the long ones at the end.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from ..targets.kinds import DEFAULT_LANES as DEFAULT_LANES
from ..targets.kinds import target_kind

# Capabilities whose scenarios predict the whole device's allocations and preemptions: on a shared device
# they need it alone.
DEVICE_WIDE: Final = frozenset({"capacity", "policy-budget", "policy-acl", "policy-caching", "policy-arena"})

DEFAULT_ESTIMATE_MS: Final = 50.0

# Estimated durations (ms) by scenario id for a build fingerprint; from the results store.
EstimatesFn = Callable[[str], Mapping[str, float]]
Item = TypeVar("Item")


def default_lanes(target_name: str, devices: int = 1) -> int:
    """The lanes per device a run uses on `target_name` (with `devices` virtual devices) when `-j` is not
    given: the kind's (host/targets/kinds/)."""
    return target_kind(target_name).default_lanes(devices)


def needs_device_alone(target_name: str, requires: frozenset[str]) -> bool:
    """Whether a scenario must run with no other lane on its device (a shared device, a device-wide verdict)."""
    return target_kind(target_name).shared_devices and bool(requires & DEVICE_WIDE)


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
