"""Generator moves for the buffer side of the grammar (host.fuzz.grammar): maps of every argument class
(lengths that are no page multiple, shorter than a page, zero, past the buffer; offsets; PROT_NONE, EXEC,
wider than the request's; MAP_PRIVATE), unmaps of every class, loads of every class (empty, odd lengths,
file and buffer offsets, a moved file position, negative lengths, no descriptor, into a mapped buffer and
again once unmapped), priorities at and past the bounds, commanded preemptions of mapped buffers and maps
in the preemption window, and the observations after each effect: the whole buffer read back, a mapping's
effective protection, what is left mapped, the descriptor's position."""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Final

from .answers import PAGE, PRIORITY_DEFAULT, PRIORITY_RANGE
from .caller import lowest_certain
from .pen import (
    AWAIT_MS,
    CLOSE_WAIT_MS,
    LATE_PAUSE_MS,
    LATE_SHARE,
    PREEMPT_PAUSE_MS,
    SMALL_PAGES,
    Move,
    Pen,
    a_buffer,
    can_bind,
    has_buffer,
    live_maps,
    quiet,
)

_LOW, _HIGH = PRIORITY_RANGE
PRIORITY_CLASSES: Final = (_LOW, _HIGH, _LOW - 1, _HIGH + 1, 300)  # min, max, below, above, another valid one
LOWEST_PRIORITIES: Final = (_LOW, _LOW + 1, 250, PRIORITY_DEFAULT, 750, _HIGH - 1, _HIGH)
# After a commanded preemption a conforming device refuses (the buffer is mapped), as the corpus waits.
MAPPED_PREEMPT_PAUSE_MS: Final = 20
ODD_BYTES: Final = (1, 7, 100, 4095)


def _readable_prot(prot: frozenset[str]) -> list[str]:
    return [p for p in ("READ", "WRITE") if p in prot]


def look(s: Pen, b: str, cuts: tuple[int, ...] = ()) -> None:
    """The buffer looked at whole: mapped whole with its protection, the mapping's effective protection,
    every byte read back (written and read again where writable), unmapped whole, and what is left mapped
    of it (nothing). Nothing when a conforming device may refuse the map (a load in flight, preempted).
    ``cuts``: byte offsets the first read back is split at (a load's range apart from the bytes around it,
    so that a digest that disagrees names the sentence of the part it covers)."""
    buf = s.model.bufs[b]
    prot = _readable_prot(buf.prot)
    if not buf.pages or buf.preempted or buf.loading or "READ" not in prot:
        return
    m, length = s.name("m"), buf.pages * PAGE
    s.add("buf_map", map=m, buf=b, length=length, prot=prot, flags=["SHARED"], offset=0)
    if buf.pages > SMALL_PAGES:  # a large buffer: its last page, whose mapping its size decides
        s.add("map_prot", map=m, offset=length - PAGE, length=PAGE)
        s.add("map_read", map=m, offset=length - PAGE, length=PAGE)
        s.add("buf_unmap", map=m, offset=0, length=length)
        return
    s.add("map_prot", map=m, offset=0, length=length)
    bounds = [0, *sorted({c for c in cuts if 0 < c < length}), length]
    for lo, hi in pairwise(bounds):
        s.add("map_read", map=m, offset=lo, length=hi - lo)
    if "WRITE" in prot and s.chance(0.3):
        s.add("map_write", map=m, offset=0, length=length, seed=s.rng.randint(1, 1000))
        s.add("map_read", map=m, offset=0, length=length)
    s.add("buf_unmap", map=m, offset=0, length=length)
    if s.model.allows("map_gone", {"map": m, "offset": 0, "length": length}):
        s.add("map_gone", map=m, offset=0, length=length)


def _look(s: Pen) -> None:
    look(s, s.rng.choice(quiet(s)))


def _map_arguments(s: Pen, pages: int, prot: frozenset[str]) -> dict[str, Any]:
    """A map's arguments of one class other than a whole readable shared mapping."""
    args: dict[str, Any] = {"length": pages * PAGE, "prot": _readable_prot(prot) or "NONE", "flags": ["SHARED"],
                            "offset": 0}
    kinds = ["short", "zero", "past_end", "offset_unaligned", "none", "exec", "wider", "private"]
    if pages >= 2:
        kinds += ["unaligned", "unaligned", "offset_page"]
    kind = s.rng.choice(kinds)
    if kind == "unaligned":
        args["length"] = s.rng.randint(1, pages - 1) * PAGE + s.rng.choice(ODD_BYTES)
    elif kind == "short":
        args["length"] = s.rng.choice(ODD_BYTES)
    elif kind == "zero":
        args["length"] = 0
    elif kind == "past_end":
        args["length"] = (pages + s.rng.choice((1, 16))) * PAGE
    elif kind == "offset_page":
        args["offset"], args["length"] = PAGE, (pages - 1) * PAGE
    elif kind == "offset_unaligned":
        args["offset"], args["length"] = s.rng.choice(ODD_BYTES[1:]), PAGE
    elif kind == "none":
        args["prot"] = "NONE"
    elif kind == "exec":
        args["prot"] = ["READ", "EXEC"]
    elif kind == "wider":
        args["prot"] = ["READ", "WRITE"] if "WRITE" not in prot else ["READ", "WRITE", "EXEC"]
    else:
        args["flags"] = ["PRIVATE"]
    return args


def _map_class(s: Pen) -> None:
    """A map of one argument class; where every conforming device grants it, its effective protection and
    the bytes at its ends looked at, and unmapped with the same length (rounded like munmap)."""
    b = a_buffer(s)
    buf = s.model.bufs[b]
    args = _map_arguments(s, buf.pages, buf.prot)
    m = s.name("m")
    s.add("buf_map", map=m, buf=b, **args)
    if m not in s.model.maps:
        if s.chance(0.5) and b in quiet(s):
            _map_again(s, b)
        return
    length, live = args["length"], s.model.maps[m]
    s.add("map_prot", map=m, offset=0, length=length)
    end = length - 1
    if live.writable and s.chance(0.6):
        s.add("map_write", map=m, offset=max(0, end - 6), length=min(7, length), seed=s.rng.randint(1, 1000))
    if live.readable:
        s.add("map_read", map=m, offset=max(0, end - 6), length=min(7, length))
    if s.chance(0.8):
        if s.chance(0.2):  # refused like munmap: nothing changes, and the whole unmap follows
            s.add("buf_unmap", map=m, offset=s.rng.choice(ODD_BYTES[1:]), length=PAGE)
        s.add("buf_unmap", map=m, offset=0, length=length)


def _map_again(s: Pen, b: str) -> None:
    """After a refused map, a map of the same buffer that every conforming device grants."""
    buf = s.model.bufs[b]
    prot = _readable_prot(buf.prot)
    if "READ" not in prot:
        return
    m = s.name("m")
    s.add("buf_map", map=m, buf=b, length=PAGE, prot=prot, flags=["SHARED"], offset=0)
    if m in s.model.maps:
        s.add("map_read", map=m, offset=0, length=PAGE)
        s.add("buf_unmap", map=m, offset=0, length=PAGE)


def _refused_then_granted(s: Pen) -> None:
    b = a_buffer(s)
    buf = s.model.bufs[b]
    wider = ["READ", "WRITE"] if "WRITE" not in buf.prot else ["READ", "WRITE", "EXEC"]
    s.add("buf_map", map=s.name("m"), buf=b, length=PAGE, prot=wider, flags=["SHARED"], offset=0)
    _map_again(s, b)


def _unmap_class(s: Pen) -> None:
    """An unmap of one class: an unaligned start (refused like munmap: nothing changes), a length shorter
    than a page (its page goes), a length that is no page multiple (rounded up)."""
    name = s.rng.choice(live_maps(s))
    pages = sorted(s.model.maps[name].pages)
    low = pages[0]
    roll = s.rng.random()
    if roll < 0.3:
        s.add("buf_unmap", map=name, offset=low * PAGE + s.rng.choice(ODD_BYTES[1:]), length=PAGE)
    elif roll < 0.6 or low + 1 not in pages:
        s.add("buf_unmap", map=name, offset=low * PAGE, length=s.rng.choice(ODD_BYTES))
    else:
        s.add("buf_unmap", map=name, offset=low * PAGE, length=PAGE + s.rng.choice(ODD_BYTES))


def _after_free(s: Pen) -> None:
    """A buffer mapped, written, freed, then its mapping read and written again and unmapped: the mapping
    stays valid until unmapped (free-mapping-valid-after-free)."""
    b = a_buffer(s, readable=True)
    buf = s.model.bufs[b]
    m, length = s.name("m"), buf.pages * PAGE
    prot = _readable_prot(buf.prot)
    s.add("buf_map", map=m, buf=b, length=length, prot=prot, flags=["SHARED"], offset=0)
    writable = "WRITE" in prot
    if writable:
        s.add("map_write", map=m, offset=0, length=length, seed=s.rng.randint(1, 1000))
    s.add("buf_free", bufs=[b])
    s.add("map_read", map=m, offset=0, length=length)
    if writable and s.chance(0.5):
        s.add("map_write", map=m, offset=0, length=PAGE, seed=s.rng.randint(1, 1000))
        s.add("map_read", map=m, offset=0, length=PAGE)
    if buf.pages > 1 and s.chance(0.5):
        s.add("buf_unmap", map=m, offset=0, length=PAGE)
    if s.chance(0.7):
        left = sorted(s.model.maps[m].pages)
        s.add("buf_unmap", map=m, offset=left[0] * PAGE, length=len(left) * PAGE)


def _load_arguments(s: Pen, f: str, pages: int) -> dict[str, Any]:
    """A load's arguments of one class (the file ``f`` created here, large enough for it)."""
    kind = s.rng.choice(["zero", "odd", "file_offset", "seek", "buffer_offset", "negative", "bad_fd"])
    length, offset, at, size = pages * PAGE, 0, 0, pages * PAGE
    if kind == "zero":
        length = 0
    elif kind == "odd":
        length = s.rng.randint(0, pages - 1) * PAGE + s.rng.choice(ODD_BYTES)
    elif kind == "file_offset":
        offset, size = PAGE, (pages + 1) * PAGE
    elif kind == "buffer_offset" and pages > 1:
        at, length = PAGE, (pages - 1) * PAGE
    elif kind == "negative":
        length = -1
    if kind == "bad_fd":
        return {"fd": {"fd": -1}, "file_offset": 0, "length": s.rng.choice((0, PAGE)), "buffer_offset": 0}
    s.add("file_new", file=f, size=size, seed=s.rng.randint(1, 1000))
    if kind == "seek":
        # Not where the load reads from: a device that loads from the position shows other bytes.
        s.add("file_seek", file=f, position=s.rng.choice((1, 100, PAGE)))
    return {"fd": f, "file_offset": offset, "length": length, "buffer_offset": at}


def _load_class(s: Pen) -> None:
    """A load of one argument class into a quiet buffer, its onLoad awaited, the descriptor's position
    looked at, and the whole buffer read back."""
    b = a_buffer(s)
    f = s.name("f")
    args = _load_arguments(s, f, s.model.bufs[b].pages)
    s.add("buf_load", buf=b, onload=True, **args)
    at, length = args["buffer_offset"], args["length"]
    _after_load(s, b, f if isinstance(args["fd"], str) else None, (at, at + length) if length >= 0 else ())


def _after_load(s: Pen, b: str, f: str | None, span: tuple[int, ...] = ()) -> None:
    """After a load: its onLoad awaited, the descriptor's position, the whole buffer read back (the load's
    ``span`` apart from the bytes around it); at times the buffer freed and its descriptor awaited closed
    by its owner (load-fd-ownership)."""
    if not s.model.loads_known:
        return
    s.add("await_load", count=s.model.loads, timeout_ms=AWAIT_MS)
    if f is not None and s.chance(0.6):
        s.add("fd_check", file=f)
    if b not in s.model.bufs:
        return
    look(s, b, span)
    if f is not None and s.chance(0.3) and not s.model.live_mapped(b):
        s.add("buf_free", bufs=[b])
        if f in s.model.released_files:
            s.add("await_closed", file=f, timeout_ms=CLOSE_WAIT_MS)


def _during_load(s: Pen) -> None:
    """Calls on a buffer while its load is in flight: a priority (any class), a map (a conforming device
    may refuse it, R15: the program does not use it), another load, or the free (with another buffer at
    times); then the onLoads awaited while they are all still counted."""
    b = a_buffer(s)
    pages = s.model.bufs[b].pages
    f = s.name("f")
    s.add("file_new", file=f, size=pages * PAGE, seed=s.rng.randint(1, 1000))
    s.add("buf_load", buf=b, fd=f, file_offset=0, length=pages * PAGE, buffer_offset=0, onload=True)
    roll = s.rng.random()
    if roll < 0.35:
        s.add("buf_set_priority", buf=b, priority=s.rng.choice(PRIORITY_CLASSES))
    elif roll < 0.6:
        s.add("buf_map", map=s.name("m"), buf=b, length=s.rng.randint(1, pages) * PAGE,
              prot=_readable_prot(s.model.bufs[b].prot) or "NONE", flags=["SHARED"], offset=0)
    elif roll < 0.8:
        g = s.name("f")
        s.add("file_new", file=g, size=PAGE, seed=s.rng.randint(1, 1000))
        s.add("buf_load", buf=b, fd=g, file_offset=0, length=PAGE, buffer_offset=0, onload=True)
    else:
        others = [o for o in s.model.bufs if o != b and not s.model.live_mapped(o)]
        s.add("buf_free", bufs=[b, *([s.rng.choice(others)] if others and s.chance(0.7) else [])])
    if s.model.loads_known:
        s.add("await_load", count=s.model.loads, timeout_ms=AWAIT_MS)


def _load_mapped(s: Pen) -> None:
    """A load into a buffer mapped (MAP_SHARED or MAP_PRIVATE): its onLoad reports an error
    (load-no-existing-mapping); unmapped, the buffer is loaded again."""
    b = a_buffer(s, readable=True)
    buf = s.model.bufs[b]
    m, length = s.name("m"), buf.pages * PAGE
    s.add("buf_map", map=m, buf=b, length=length, prot=["READ"], flags=[s.rng.choice(("SHARED", "PRIVATE"))],
          offset=0)
    f = s.name("f")
    s.add("file_new", file=f, size=length, seed=s.rng.randint(1, 1000))
    s.add("buf_load", buf=b, fd=f, file_offset=0, length=length, buffer_offset=0, onload=True)
    if not s.model.loads_known:
        return
    s.add("await_load", count=s.model.loads, timeout_ms=AWAIT_MS)
    s.add("map_read", map=m, offset=0, length=length)
    s.add("buf_unmap", map=m, offset=0, length=length)
    g = s.name("f")
    s.add("file_new", file=g, size=length, seed=s.rng.randint(1, 1000))
    s.add("buf_load", buf=b, fd=g, file_offset=0, length=length, buffer_offset=0, onload=True)
    _after_load(s, b, g)


def _preempt_mapped(s: Pen) -> None:
    """A commanded preemption of a buffer mapped MAP_SHARED or only MAP_PRIVATE: never while mapped
    (preempt-never-while-mapped), so the command is refused and the mapping still works; once unmapped,
    the buffer may be preempted."""
    b = a_buffer(s, readable=True, onpreempt=s.chance(0.9))
    buf = s.model.bufs[b]
    m, length = s.name("m"), buf.pages * PAGE
    prot = _readable_prot(buf.prot)
    s.add("buf_map", map=m, buf=b, length=length, prot=prot, flags=[s.rng.choice(("PRIVATE", "PRIVATE", "SHARED"))],
          offset=0)
    # Refused on a conforming device; an onPreempt that comes anyway shows within the pause.
    s.add("vnpu", command=f"preempt={b}")
    s.add("sleep_ms", ms=MAPPED_PREEMPT_PAUSE_MS)
    if "WRITE" in prot:
        s.add("map_write", map=m, offset=0, length=length, seed=s.rng.randint(1, 1000))
    s.add("map_read", map=m, offset=0, length=length)
    s.add("buf_unmap", map=m, offset=0, length=length)
    if s.chance(0.4):
        preempt_now(s, b)


def preempt_now(s: Pen, b: str) -> None:
    """A commanded preemption of ``b`` (about half of them late), its onPreempt awaited when one is owed, else
    a pause in which one that must not come would show."""
    owed = s.model.preempts
    late = s.chance(LATE_SHARE)
    s.add("vnpu", command=f"{'preempt_late' if late else 'preempt'}={b}")
    if s.model.preempts > owed:
        s.add("await_preempt", count=s.model.preempts, timeout_ms=AWAIT_MS)
    else:
        s.add("sleep_ms", ms=LATE_PAUSE_MS if late else PREEMPT_PAUSE_MS)


def _preempt_window(s: Pen) -> None:
    """Calls on a buffer just preempted, before its onPreempt is seen (map: ENOENT, map-preempt-window-enoent;
    setPriority; free), then after it."""
    # With onPreempt only where one can be had: the move is enabled by any buffer (has_buffer()), and where
    # no new one may be bound (a declared capacity taken) a_buffer must find a quiet one with it.
    b = a_buffer(s, onpreempt=s.chance(0.9) and has_buffer(onpreempt=True)(s))
    owed = s.model.preempts
    late = s.chance(LATE_SHARE)  # its window lasts PREEMPT_LATE_MS: the calls after it are surely inside
    s.add("vnpu", command=f"{'preempt_late' if late else 'preempt'}={b}")
    buf = s.model.bufs[b]
    prot = _readable_prot(buf.prot) or ["READ"]
    for _ in range(s.rng.choice((1, 2))):
        roll = s.rng.random()
        if roll < 0.6:
            s.add("buf_map", map=s.name("m"), buf=b, length=PAGE, prot=prot, flags=["SHARED"], offset=0)
        elif roll < 0.85:
            s.add("buf_set_priority", buf=b, priority=s.rng.choice(PRIORITY_CLASSES))
        else:
            others = [o for o in s.model.bufs if o != b and not s.model.live_mapped(o)]
            s.add("buf_free", bufs=[b, *([s.rng.choice(others)] if others and s.chance(0.5) else [])])
            break
    if s.model.preempts > owed:
        s.add("await_preempt", count=s.model.preempts, timeout_ms=AWAIT_MS)
    else:
        s.add("sleep_ms", ms=LATE_PAUSE_MS if late else PREEMPT_PAUSE_MS)
    if b in s.model.bufs and s.chance(0.6):
        s.add("buf_map", map=s.name("m"), buf=b, length=PAGE, prot=prot, flags=["SHARED"], offset=0)


def _lowest(s: Pen) -> None:
    """Two or three buffers of different priorities (set on the request, at times twice, or by setPriority
    after), then `preempt=lowest`: the device takes the one of the lowest priority (priority-request-range,
    priority-set; judged by the victim's onPreempt where the device declares its capacity)."""
    taken: list[str] = []
    for _ in range(s.rng.choice((2, 3))):
        r, c, b = s.name("r"), s.name("c"), s.name("b")
        s.add("req_create", req=r)
        s.add("req_set_device", req=r, device="$pair.device")
        s.add("req_set_type", req=r, type="$pair.type")
        s.add("req_set_size", req=r, size=PAGE)
        for _ in range(s.rng.choice((0, 1, 1, 2))):
            s.add("req_set_priority", req=r, priority=s.rng.choice(LOWEST_PRIORITIES))
        s.add("req_set_onalloc", req=r, set=True)
        s.add("req_set_onpreempt", req=r, set=True)
        s.add("cookie_new", cookie=c)
        s.add("req_set_cookie", req=r, cookie=c, deleter=True)
        s.add("alloc", reqs=[r])
        s.add("bind", buf=b, select={"cookie": c})
        taken.append(b)
    if s.chance(0.5):
        s.add("buf_set_priority", buf=s.rng.choice(taken), priority=s.rng.choice(LOWEST_PRIORITIES))
    owed = s.model.preempts
    s.add("vnpu", command="preempt=lowest")
    if s.model.preempts > owed:
        s.add("await_preempt", count=s.model.preempts, timeout_ms=AWAIT_MS)
    else:
        s.add("sleep_ms", ms=PREEMPT_PAUSE_MS)


def _big(s: Pen, size: int) -> str:
    """A request of ``size`` bytes of the pair, submitted with a cookie object: the cookie."""
    r, c = s.name("r"), s.name("c")
    s.add("req_create", req=r)
    s.add("req_set_device", req=r, device="$pair.device")
    s.add("req_set_type", req=r, type="$pair.type")
    s.add("req_set_size", req=r, size=size)
    s.add("req_set_prot", req=r, prot=["READ", "WRITE"])
    s.add("req_set_onalloc", req=r, set=True)
    s.add("cookie_new", cookie=c)
    s.add("req_set_cookie", req=r, cookie=c, deleter=True)
    s.add("alloc", reqs=[r])
    return c


def _fill(s: Pen) -> None:
    """Where the device declares its capacity: a buffer of nearly all the memory the program has left,
    freed (at times while mapped: asked again, the same size is refused until the last unmap), then the
    same size asked again, granted: the memory a free or a last unmap gives back is the device's again
    (free-indicates-not-needed, free-memory-after-last-unmap)."""
    room = s.model.room or 0
    size = (room // PAGE - s.rng.choice((0, 0, 1))) * PAGE
    b = s.name("b")
    s.add("bind", buf=b, select={"cookie": _big(s, size)})
    m = s.name("m") if s.chance(0.5) else ""
    if m:
        s.add("buf_map", map=m, buf=b, length=PAGE, prot=["READ", "WRITE"], flags=["SHARED"], offset=0)
        s.add("map_write", map=m, offset=0, length=PAGE, seed=s.rng.randint(1, 1000))
    s.add("buf_free", bufs=[b])
    if m:
        _big(s, size)  # refused while the freed buffer's mapping holds its memory
        s.await_allocs()
        s.add("map_read", map=m, offset=0, length=PAGE)
        s.add("buf_unmap", map=m, offset=0, length=PAGE)
    again = s.name("b")
    s.add("bind", buf=again, select={"cookie": _big(s, size)})
    s.add("buf_free", bufs=[again])


def _priority_class(s: Pen) -> None:
    s.add("buf_set_priority", buf=s.rng.choice(list(s.model.bufs)), priority=s.rng.choice(PRIORITY_CLASSES))


def _observe(s: Pen) -> None:
    """A live mapping's effective protection, or an odd range of its bytes."""
    name = s.rng.choice(live_maps(s))
    m = s.model.maps[name]
    low = min(m.pages)
    if s.chance(0.5):
        s.add("map_prot", map=name, offset=low * PAGE, length=PAGE)
    elif m.readable:
        start = s.rng.choice(ODD_BYTES[1:])
        s.add("map_read", map=name, offset=low * PAGE + start, length=min(PAGE - start, s.rng.choice(ODD_BYTES)))


MOVES: Final = (
    Move(_map_class, 6, has_buffer()),
    Move(_refused_then_granted, 1, has_buffer()),
    Move(_unmap_class, 3, lambda s: bool(live_maps(s))),
    Move(_after_free, 2, has_buffer(readable=True)),
    Move(_look, 3, lambda s: bool(quiet(s))),
    Move(_observe, 2, lambda s: bool(live_maps(s))),
    Move(_priority_class, 2, lambda s: bool(s.model.bufs)),
    Move(_load_class, 5, has_buffer(), loads=True),
    Move(_load_mapped, 2, has_buffer(readable=True), loads=True),
    Move(_during_load, 3, has_buffer(), loads=True),
    Move(_preempt_mapped, 2, lambda s: not s.model.pressure and has_buffer(readable=True)(s), control=True),
    Move(_preempt_window, 2, lambda s: not s.model.pressure and has_buffer()(s), control=True),
    # Only where the victim's onPreempt is owed whichever buffer it is (every other candidate has one):
    # with a victim maybe without one, the probe's teardown would wait out its settle for it.
    Move(_lowest, 2, lambda s: can_bind(s) and "preempt" not in s.model.armed and lowest_certain(s.model),
         control=True),
    Move(_fill, 2, lambda s: can_bind(s) and (s.model.room or 0) >= 4 * PAGE),
)
