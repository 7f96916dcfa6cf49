"""Footprints: what an event or a pending call reads or changes, and so which other strands' pending
call-time effects can matter to an event (threads.py, docs/model.md §2a). Effects whose footprints do
not meet commute: their order is not searched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from . import threads
from ._context import Ctx, arg_list
from .state import State, live_bytes
from .trace import Call, Cb, Deleter, Event, Ret

Footprint = frozenset[str] | None  # None: the whole state
CAP_READ: Final = "cap?"  # reads the live bytes (the capacity prediction)
CAP_WRITE: Final = "cap!"  # changes them
_CAP_EFFECT: Final = {"alloc": CAP_READ, "buf_free": CAP_WRITE, "buf_unmap": CAP_WRITE}
_SUPPORT_EFFECT: Final = {"alloc": "support?", "is_supported": "support!"}


def _meets(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two footprints conflict: a shared name, unless both only read it (``x?`` reads x, ``x!``
    changes it, a plain name does both)."""
    for name in a:
        if name.endswith("?"):
            if name[:-1] + "!" in b:
                return True
        elif name in b or (name.endswith("!") and name[:-1] + "?" in b):
            return True
    return False


def _capacity_matters(ctx: Ctx, s: State, calls: Mapping[str, Call]) -> bool:
    """Whether the live bytes can decide an allocation: even if every pending submission and every
    pending allocAsync became a buffer, could an answer be ENOMEM? If not, their order is moot."""
    if ctx.capacity is None or s.relaxed_capacity:
        return False
    worst = live_bytes(s) + sum(max(sub.attrs.size, 0) for sub in s.subs.values())
    for strand in threads.pending_strands(s):
        call = calls.get(strand)
        if call is not None and call.op == "alloc":
            for slot in arg_list(call, "reqs"):
                req = s.reqs.get(slot) if slot is not None else None
                worst += max(req.attrs.size, 0) if req is not None else 0
    return worst > ctx.capacity


def _call_footprint(ctx: Ctx, s: State, call: Call, cap: bool) -> Footprint:
    """What a call reads or changes: its slots and handles, the cookies they hold, the files, and the
    live bytes when they are predicted (``cap``). A vnpu command may touch every buffer."""
    if call.op == "vnpu":
        return None
    names: set[str] = set()
    for key, value in call.args.items():
        for v in value if isinstance(value, list) else [value]:
            if key == "cookie":
                names.add(f"c:{v}")
            elif key in ("fd", "file"):
                names.add("file")
            elif isinstance(v, str):
                names.add(v)
                names |= _holds(s, v, call.op)
    if cap and call.op in _CAP_EFFECT:
        names.add(_CAP_EFFECT[call.op])
    if call.op in _SUPPORT_EFFECT:
        names.add(_SUPPORT_EFFECT[call.op])  # isSupported's false answers decide later submissions
    return frozenset(names)


def _holds(s: State, name: str, op: str) -> set[str]:
    """The cookie (and mapped buffer, and whether a file is involved) a slot or handle leads to. A
    request's cookie matters to a submission (callbacks are attributed by cookie), otherwise only when
    it was handed over with a deleter."""
    req = s.reqs.get(name)
    if req is not None:
        names = {"file"} if req.attrs.file is not None else set()
        if op == "alloc" or req.cookie.token is not None:
            names.add(f"c:{req.cookie.value}")
        return names
    m = s.maps.get(name)
    if m is not None:
        b = s.bufs.get(m.buf)
        return {m.buf} | ({f"c:{b.cookie.value}"} if b is not None else set())
    b = s.bufs.get(name)
    if b is not None:
        return {f"c:{b.cookie.value}"}
    return set()


def _event_footprint(ctx: Ctx, s: State, ev: Event, calls: Mapping[str, Call], cap: bool) -> Footprint:
    if isinstance(ev, Cb):
        names = {f"c:{ev.cookie}"} | ({ev.buf} if ev.buf is not None else set())
        if ev.kind == "alloc":
            names |= {CAP_READ, CAP_WRITE} if cap else set()
            names |= {"file"} if any(sub.attrs.file is not None for sub in s.subs.values()) else set()
        return frozenset(names)
    if isinstance(ev, Deleter):
        return frozenset({f"c:{ev.cookie}"})
    if isinstance(ev, Call):
        return _call_footprint(ctx, s, ev, cap)
    if isinstance(ev, Ret):
        call = calls.get(ev.strand)
        return _call_footprint(ctx, s, call, cap) if call is not None else None
    return None


def relevant(ctx: Ctx, s: State, ev: Event, strand: str, calls: Mapping[str, Call]) -> list[str]:
    """The pending strands whose effects may be placed before ``ev``: those whose footprint meets the
    event's, transitively. The others commute with it and stay pending."""
    own = not isinstance(ev, (Call, Ret))
    strands = [other for other in threads.pending_strands(s) if own or other != strand]
    if not strands:
        return strands
    cap = _capacity_matters(ctx, s, calls)
    reach = _event_footprint(ctx, s, ev, calls, cap)
    if reach is None:
        return strands
    prints = {other: _call_footprint(ctx, threads.switch(s, other), calls[other], cap) for other in strands}
    chosen: list[str] = []
    grew = True
    while grew:
        grew = False
        for other in strands:
            fp = prints[other]
            if other not in chosen and (fp is None or _meets(fp, reach)):
                chosen.append(other)
                if fp is None:
                    return strands
                reach = reach | fp
                grew = True
    return chosen
