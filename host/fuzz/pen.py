"""A program being drawn: the caller's model (host.fuzz.caller), through whose rules every step goes, and
what only drawing needs (the random stream, the device's capabilities, fresh names); and the choices the
moves draw from (host.fuzz.generate and its move modules)."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Final

from .answers import PAGE
from .caller import Caller
from .cells import item_cells
from .device_profile import LATE_QUIET_MS
from .grammar import Cell

# The bound of a wait for owed callbacks (the probe scales it by --timeout-multiplier). A conforming device
# calls back within milliseconds (the vnpu's late onPreempt at most 100 ms after its command), so only a
# callback that never comes (a defect, or a preemption the device refused) reaches the bound, and a program
# that meets one sits all of it out.
AWAIT_MS: Final = 500
MAX_LIVE_BUFFERS: Final = 12
# After a commanded preemption of a buffer without onPreempt: long enough for a callback that should not
# come to show on a loaded machine (at 20 ms a shrink under CI load kept 16 steps instead of 11). On the
# fuzz run's vnpu a pause ends as soon as the device has nothing left to call back (`due_when_waiting`,
# host.fuzz.device_profile), so this is the bound where the device cannot say (an --impl library).
PREEMPT_PAUSE_MS: Final = 100
# About half of the commanded preemptions are `preempt_late=` (docs/vnpu.md §7): the buffer is preempted at
# once, its onPreempt comes PREEMPT_LATE_MS later, after the steps that follow (a free, a map), in one step.
# Without it, a defect shown only by a late onPreempt (a cookie deleted at the free) is a race.
LATE_SHARE: Final = 0.5
# The pause after a `preempt_late=` of a buffer without onPreempt: the fuzz run's vnpu delivers a late
# onPreempt as the pause begins, or (a device the probe cannot tell) once the program has been quiet for
# LATE_QUIET_MS (host.fuzz.device_profile), so one that must not come has PREEMPT_PAUSE_MS to show after
# that, as after `preempt=`. A written scenario gets PREEMPT_PAUSE_MS + PREEMPT_LATE_MS
# (host.fuzz.shrink.normalise), for `npuconf run`'s vnpu, where it comes PREEMPT_LATE_MS after the command.
LATE_PAUSE_MS: Final = PREEMPT_PAUSE_MS + LATE_QUIET_MS
CLOSE_WAIT_MS: Final = 1000  # as the corpus: a conforming owner closes at once, the probe polls until then


@dataclass
class Pen:
    rng: random.Random
    control: bool  # the device has vnpu control
    pair: bool  # a supported pair is known: allocations succeed and their buffers are bound
    allow_loads: bool  # the device may be asked to load files (the `load` capability)
    pointer64: bool  # the device has a 64-bit ABI: raw cookies above 2^32 (and 2^48) are allowed
    unsupported: bool = False  # an unsupported pair is known (`$unsupported.*`)
    model: Caller = field(default_factory=Caller)
    steps: list[dict[str, Any]] = field(default_factory=list)
    cells: set[Cell] = field(default_factory=set)  # the grammar cells its steps reach (host.fuzz.cells)
    serial: int = 0

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def add(self, op: str, **args: Any) -> None:
        self.add_item({op: args})

    def add_item(self, item: dict[str, Any]) -> None:
        # A precondition that refuses here is a move drawing a step its state does not allow: Illegal.
        self.cells |= item_cells(self.model, item)
        self.steps.append(item)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def await_allocs(self) -> None:
        """Wait for every onAlloc owed so far."""
        self.add("await_alloc", count=self.model.onallocs, timeout_ms=AWAIT_MS)


# --- what the moves draw from ------------------------------------------------------------------------

# The buffers the moves map, load and read whole: a large one (bound where a capacity is declared) is looked
# at only by the move that made it, at its ends (a load's file is at most 64 MiB, a read costs its size).
SMALL_PAGES: Final = 16


def usable(s: Pen) -> list[str]:
    """Buffers that may be mapped or loaded (not maybe preempted, one to SMALL_PAGES pages)."""
    return [name for name, b in s.model.bufs.items() if not b.preempted and 0 < b.pages <= SMALL_PAGES]


def mapped(s: Pen) -> list[str]:
    """Live buffers with a live mapping."""
    return [name for name in s.model.bufs if s.model.live_mapped(name)]


def freeable(s: Pen) -> list[str]:
    """Live buffers without a live mapping."""
    return [name for name in s.model.bufs if not s.model.live_mapped(name)]


def live_maps(s: Pen) -> list[str]:
    """Mappings of live buffers."""
    return [name for name, m in s.model.maps.items() if m.buf in s.model.bufs]


def orphans(s: Pen) -> list[str]:
    """Mappings whose buffer was freed while they were live: valid until unmapped (free-mapping-valid)."""
    return [name for name, m in s.model.maps.items() if m.buf not in s.model.bufs]


def preemptable(s: Pen) -> list[str]:
    """Buffers a commanded preemption surely preempts: usable, unmapped, not maybe mapped."""
    return [name for name in usable(s) if not s.model.live_mapped(name) and not s.model.bufs[name].maybe_mapped]


def quiet(s: Pen) -> list[str]:
    """Usable buffers with no load in flight and nothing mapped, maybe or not: whatever a step does to them
    alone, the caller knows what follows."""
    return [name for name in preemptable(s) if not s.model.bufs[name].loading]


@dataclass(frozen=True)
class Move:
    """One generator move: its weight, whether it needs vnpu control or loads, when the state allows it
    (then it adds at least one step), and how it draws its steps."""

    draw: Callable[[Pen], None]
    weight: int
    enabled: Callable[[Pen], bool]
    control: bool = False
    loads: bool = False


def can_bind(s: Pen) -> bool:
    """A new buffer may be allocated and bound: a known pair, no pressure, room for one more (in the count
    of buffers, and in a declared capacity for a few pages)."""
    room = s.model.room
    return s.pair and not s.model.pressure and len(s.model.bufs) < MAX_LIVE_BUFFERS and (
        room is None or room >= 16 * PAGE)


def a_buffer(s: Pen, readable: bool = False, onpreempt: bool = False, besides: Collection[str] = ()) -> str:
    """A quiet buffer (readable: its protection has READ; onpreempt: its snapshot has onPreempt; not one of
    ``besides``), one allocated and bound for it (a request of the pair, one to three pages, READ|WRITE)
    when there is none."""
    found = [b for b in quiet(s) if (not readable or "READ" in s.model.bufs[b].prot)
             and (not onpreempt or s.model.bufs[b].onpreempt) and b not in besides]
    if found and (s.chance(0.8) or not can_bind(s)):
        return s.rng.choice(found)
    r, c, b = s.name("r"), s.name("c"), s.name("b")
    s.add("req_create", req=r)
    s.add("req_set_device", req=r, device="$pair.device")
    s.add("req_set_type", req=r, type="$pair.type")
    s.add("req_set_size", req=r, size=s.rng.choice((1, 2, 3)) * PAGE)
    s.add("req_set_prot", req=r, prot=["READ", "WRITE"])
    s.add("req_set_onalloc", req=r, set=True)
    if onpreempt or s.chance(0.6):
        s.add("req_set_onpreempt", req=r, set=True)
    s.add("cookie_new", cookie=c)
    s.add("req_set_cookie", req=r, cookie=c, deleter=True)
    s.add("alloc", reqs=[r])
    s.add("bind", buf=b, select={"cookie": c})
    return b


def has_buffer(readable: bool = False, onpreempt: bool = False) -> Callable[[Pen], bool]:
    """Enabled when a_buffer finds one or may make one."""
    def enabled(s: Pen) -> bool:
        return can_bind(s) or any((not readable or "READ" in s.model.bufs[b].prot)
                                  and (not onpreempt or s.model.bufs[b].onpreempt) for b in quiet(s))

    return enabled
