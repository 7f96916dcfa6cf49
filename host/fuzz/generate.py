"""Random API programs built from the caller's state, so that every call is one the text lets a caller make.

The state is the caller's model (host.fuzz.caller), the one the legality check and the shrinker replay
programs through: live requests (with their cookie), submissions, bound buffers (mapped pages, preempted
or not), mappings, files and the callbacks owed. Each move is drawn among those the state allows
(``Move.enabled``), draws its arguments from the state, and makes every step through the model's rules,
so a program never uses a freed request, an unbound or freed buffer, an unmapped page or a failed mapping
(the judge's Unjudgeable cases, docs/formats.md §2). Weights favour deep states: many requests and buffers
alive, cookies replaced while submissions hold them, maps and partial unmaps, loads while mapped, frees
during loads, priorities, and, where the device has vnpu control, preemption and pressure. The moves of
host.fuzz.moves_requests, moves_buffers and moves_contexts reach the rest of the grammar (host.fuzz.grammar):
every argument class, every calling context, repetitions and observations. Programs are plain scenario
mappings (the YAML form) so that the shrinker edits and writes them as they are.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from . import moves_buffers, moves_contexts, moves_requests
from .answers import CERTAIN_BYTES, PAGE, PRIORITY_DEFAULT, PRIORITY_RANGE, names_unsupported_pair
from .caller import item_steps
from .grammar import Cell
from .pen import (
    AWAIT_MS,
    CLOSE_WAIT_MS,
    LATE_PAUSE_MS,
    LATE_SHARE,
    MAX_LIVE_BUFFERS,
    PREEMPT_PAUSE_MS,
    Move,
    Pen,
    freeable,
    live_maps,
    mapped,
    orphans,
    preemptable,
    usable,
)

SIZES_PAGES: Final = (1, 1, 2, 3, 4, 8, 16)
_LOW, _HIGH = PRIORITY_RANGE
PRIORITIES: Final = (_LOW, _LOW + 1, 250, PRIORITY_DEFAULT - 1, PRIORITY_DEFAULT, PRIORITY_DEFAULT + 1, 750, _HIGH - 1,
                     _HIGH)
# The clause a generated program names: its steps may exercise any, the judge names the one it breaks.
PROGRAM_CLAUSE: Final = "alloc-supported-may-fail"
# Without a supported pair (discovery failed) requests take these numbers; their allocations may fail or
# not, so nothing is bound: the programs exercise requests, cookies, isSupported and onAlloc.
BLIND_DEVICES: Final = (0, 1, -1)
BLIND_TYPES: Final = (0, 1, 2, 3, 4, 9)
# A program ends with a documented crash (host.fuzz.moves_contexts.death) this often.
DEATH_SHARE: Final = 0.04


# --- the moves ---------------------------------------------------------------------------------------

def _cookie(s: Pen) -> Any:
    """A cookie for setCookie: mostly a new cookie object (its cookie_new step added); sometimes a raw
    integer (above 2^48 on a 64-bit ABI: cookie-raw-integer), at times one used before, or NULL."""
    roll = s.rng.random()
    if roll < 0.14:
        s.serial += 1
        number = s.serial * 8 + s.rng.randint(1, 7)
        if s.pointer64 and s.rng.random() < 0.6:
            number |= s.rng.randint(1, 0xFFFF) << 48
        return number
    if roll < 0.22 and s.model.raw_cookies:
        return s.rng.choice(s.model.raw_cookies)  # an integer handed over before: the same value again
    if roll < 0.27:
        return None
    c = s.name("c")
    s.add("cookie_new", cookie=c)
    return c


def _set_cookie(s: Pen, r: str) -> None:
    c = _cookie(s)
    s.add("req_set_cookie", req=r, cookie=c, deleter=s.rng.random() < 0.85)


def _new_request(s: Pen) -> None:
    r = s.name("r")
    pages = s.rng.choice(SIZES_PAGES)
    s.add("req_create", req=r)
    if s.pair:
        s.add("req_set_device", req=r, device="$pair.device")
        s.add("req_set_type", req=r, type="$pair.type")
    else:  # no pair known (discovery failed): numbers the device may or may not support
        s.add("req_set_device", req=r, device=s.rng.choice(BLIND_DEVICES))
        s.add("req_set_type", req=r, type=s.rng.choice(BLIND_TYPES))
    s.add("req_set_size", req=r, size=pages * PAGE)
    if s.chance(0.9):
        s.add("req_set_prot", req=r, prot=["READ", "WRITE"])
    if s.rng.random() < 0.5:
        s.add("req_set_priority", req=r, priority=s.rng.choice(PRIORITIES))
    s.add("req_set_onalloc", req=r, set=True)
    if s.rng.random() < 0.6:
        s.add("req_set_onpreempt", req=r, set=True)
    if s.allow_loads and s.chance(0.12):
        # A file segment loaded at allocation (setFileSegmentToLoad): the request owns the descriptor.
        f = s.name("f")
        seg = s.rng.randint(1, pages)
        s.add("file_new", file=f, size=seg * PAGE, seed=s.rng.randint(1, 1000))
        s.add("req_set_file", req=r, fd=f, file_offset=0, length=seg * PAGE, buffer_offset=0)
    _set_cookie(s, r)


def _submit(s: Pen) -> None:
    """allocAsync of one to three live requests, then (usually) the wait, and the binds by cookie."""
    names = submittable(s)
    chosen = s.rng.sample(names, k=min(len(names), s.rng.choice((1, 1, 1, 2, 3))))
    before = len(s.model.subs)
    s.add("alloc", reqs=chosen)
    held = s.model.subs[before:]
    # Replacing a cookie while the submission holds the old one, or freeing the request at once:
    # the submission keeps what it took (alloc-no-request-ownership, the cookie rules).
    for r in chosen:
        roll = s.rng.random()
        if roll < 0.3:
            _set_cookie(s, r)
        elif roll < 0.45:
            s.add("req_free", req=r)
    # A bind waits for the onAlloc it names, so the wait may be left to the binds (never under pressure,
    # where nothing is bound).
    if s.model.pressure or s.rng.random() < 0.75:
        s.add("await_alloc", count=s.model.onallocs, timeout_ms=AWAIT_MS)
    for sub in held:
        if len(s.model.bufs) >= MAX_LIVE_BUFFERS:
            break
        # Only a success with a cookie object is bound (integers and NULL: no bind selects them; their
        # buffers are freed by teardown), and only where the bind's precondition holds.
        if not sub.ok or sub.cookie is None:
            continue
        bind = {"buf": s.name("b"), "select": {"cookie": sub.cookie}}
        if s.model.allows("bind", bind):
            s.add("bind", **bind)


def _add_map(s: Pen, b: str, writable: bool | None = None, flags: str | None = None) -> tuple[str, int, bool]:
    """A buf_map of the first pages of ``b`` (how many, and unless given whether writable and its flags,
    drawn; writable only where the buffer's protection has WRITE): the mapping's name, pages and
    writability."""
    m = s.name("m")
    pages = s.rng.randint(1, s.model.bufs[b].pages)
    if writable is None:
        writable = s.rng.random() < 0.7
    writable = writable and "WRITE" in s.model.bufs[b].prot
    if flags is None:
        flags = s.rng.choice(("SHARED", "SHARED", "PRIVATE"))
    s.add("buf_map", map=m, buf=b, length=pages * PAGE, prot=["READ", "WRITE"] if writable else ["READ"],
          flags=[flags], offset=0)
    return m, pages, writable


def _map(s: Pen) -> None:
    m, pages, writable = _add_map(s, s.rng.choice(usable(s)))
    if m not in s.model.maps:
        return  # one a conforming device may refuse (during a load): the program does not use it
    if writable and s.rng.random() < 0.7:
        s.add("map_write", map=m, offset=0, length=pages * PAGE, seed=s.rng.randint(1, 1000))
    if s.rng.random() < 0.6:
        s.add("map_read", map=m, offset=0, length=pages * PAGE)


def _touch_map(s: Pen) -> None:
    name = s.rng.choice(live_maps(s))
    m = s.model.maps[name]
    page = s.rng.choice(sorted(m.pages))
    if m.writable and s.rng.random() < 0.5:
        s.add("map_write", map=name, offset=page * PAGE, length=PAGE, seed=s.rng.randint(1, 1000))
    else:
        s.add("map_read", map=name, offset=page * PAGE, length=PAGE)


def _first_run(pages: list[int]) -> tuple[int, int]:
    """The first contiguous run of the sorted pages (never a range over a hole a partial unmap left)."""
    low = high = pages[0]
    while high + 1 in pages:
        high += 1
    return low, high


def _unmap(s: Pen) -> None:
    """A partial unmap (one page) or the first run of pages of a mapping; at times of one whose buffer was
    freed (its memory goes with its last page)."""
    left, live = orphans(s), live_maps(s)
    if left and (not live or s.rng.random() < 0.5):
        name = s.rng.choice(left)
        one_page = s.rng.random() >= 0.5
    else:
        name = s.rng.choice(live)
        one_page = len(s.model.maps[name].pages) > 1 and s.rng.random() < 0.6
    pages = sorted(s.model.maps[name].pages)
    if one_page:
        s.add("buf_unmap", map=name, offset=s.rng.choice(pages) * PAGE, length=PAGE)
        return
    low, high = _first_run(pages)
    s.add("buf_unmap", map=name, offset=low * PAGE, length=(high - low + 1) * PAGE)


def _free_mapped(s: Pen) -> None:
    """ANpuBuffer_free of a buffer that is still mapped: the text lets the mapping stay valid until it is
    unmapped (free-mapping-valid-after-free), and the device may not preempt it meanwhile
    (preempt-never-while-mapped). The mappings are unmapped by later steps (or by teardown)."""
    held = mapped(s)
    if not held:
        # None mapped yet: map one first (not one that may be preempted, as _map; during a load it may be
        # refused, R15, and the buffer is freed all the same).
        b = s.rng.choice(usable(s))
        _add_map(s, b, flags="SHARED")
        held = [b]
    s.add("buf_free", bufs=[s.rng.choice(held)])


def _is_supported(s: Pen) -> None:
    """ANpuManager_isSupported of live requests (cookies, callbacks and priorities set: ignored fields), one
    of them listed twice at times, and at times a request with an invalid type or a negative device (which
    may also be submitted, with onPreempt: its onAlloc fails and no onPreempt may follow)."""
    live = list(s.model.reqs)
    reqs = s.rng.sample(live, k=min(len(live), s.rng.choice((1, 1, 2, 3)))) if live else []
    if reqs and s.rng.random() < 0.35:
        reqs.insert(s.rng.randrange(len(reqs) + 1), s.rng.choice(reqs))
    extra = None
    if not reqs or s.rng.random() < 0.35:
        extra = s.name("r")
        s.add("req_create", req=extra)
        if s.rng.random() < 0.5:
            s.add("req_set_device", req=extra, device="$pair.device" if s.pair else 0)
            s.add("req_set_type", req=extra, type=0)  # ANPUBUFFER_TYPE_UNKNOWN: not a valid type
        else:
            s.add("req_set_device", req=extra, device=-1)
            s.add("req_set_type", req=extra, type="$pair.type" if s.pair else 1)
        s.add("req_set_size", req=extra, size=PAGE)
        reqs.insert(s.rng.randrange(len(reqs) + 1), extra)
    s.add("is_supported", reqs=reqs)
    if extra is None:
        return
    if s.rng.random() < 0.4:
        s.add("req_set_onalloc", req=extra, set=True)
        if s.rng.random() < 0.7:
            s.add("req_set_onpreempt", req=extra, set=True)
        s.add("alloc", reqs=[extra])
        s.add("await_alloc", count=s.model.onallocs, timeout_ms=AWAIT_MS)
    s.add("req_free", req=extra)


def _callbacks_after(s: Pen) -> None:
    """setOnPreempt (a callback, or NULL) or setOnAlloc again on a request, usually one already submitted:
    the submissions made keep the callbacks of their snapshot (alloc-snapshot), later ones take the new."""
    r = s.rng.choice(list(s.model.reqs))
    roll = s.rng.random()
    if roll < 0.7:
        onpreempt = s.model.reqs[r].onpreempt
        s.add("req_set_onpreempt", req=r, set=not onpreempt if roll < 0.5 else onpreempt)
    else:
        s.add("req_set_onalloc", req=r, set=True)


def _load(s: Pen) -> None:
    b = s.rng.choice(usable(s))
    f = s.name("f")
    pages = s.rng.randint(1, s.model.bufs[b].pages)
    s.add("file_new", file=f, size=pages * PAGE, seed=s.rng.randint(1, 1000))
    s.add("buf_load", buf=b, fd=f, file_offset=0, length=pages * PAGE, buffer_offset=0, onload=True)
    if s.model.loads_known and s.chance(0.7):
        s.add("await_load", count=s.model.loads, timeout_ms=AWAIT_MS)


def _await_closed(s: Pen) -> None:
    """A descriptor handed over to a load, answered, into a buffer since freed: the owner must close it
    (load-fd-ownership); the probe waits for that, polling, and the model requires it closed by the end."""
    s.add("await_closed", file=s.rng.choice(s.model.released_files), timeout_ms=CLOSE_WAIT_MS)


def _free(s: Pen) -> None:
    """ANpuBuffer_free of one or two unmapped buffers (possibly during their load)."""
    free = freeable(s)
    s.add("buf_free", bufs=s.rng.sample(free, k=min(len(free), s.rng.choice((1, 1, 2)))))


def _priority(s: Pen) -> None:
    s.add("buf_set_priority", buf=s.rng.choice(list(s.model.bufs)), priority=s.rng.choice(PRIORITIES))


def _free_request(s: Pen) -> None:
    s.add("req_free", req=s.rng.choice(list(s.model.reqs)))


def _preempt(s: Pen) -> None:
    b = s.rng.choice(preemptable(s))
    late = s.rng.random() < LATE_SHARE
    owed = s.model.preempts
    s.add("vnpu", command=f"{'preempt_late' if late else 'preempt'}={b}")
    if s.model.preempts > owed:
        # The commanded preemption's onPreempt comes on a device thread, by teardown's preempt settle at
        # the latest: the program waits for it only sometimes.
        if s.rng.random() < 0.5:
            s.add("await_preempt", count=s.model.preempts, timeout_ms=AWAIT_MS)
    else:
        # No onPreempt in the submission's snapshot: none may come (req-onpreempt-default-null, also when
        # the request's onPreempt was set after allocAsync). A short pause lets one that comes anyway show
        # in the trace before teardown, whatever steps follow (the shrinker keeps it: shrink._keep_pauses).
        s.add("sleep_ms", ms=LATE_PAUSE_MS if late else PREEMPT_PAUSE_MS)


def _pressure(s: Pen) -> None:
    # Mappings go first: what pressure may preempt is then every buffer, none held by a mapping.
    for name, m in list(s.model.maps.items()):
        for page in sorted(m.pages):
            s.add("buf_unmap", map=name, offset=page * PAGE, length=PAGE)
    # With at most MAX_LIVE_BUFFERS of at most 16 pages alive, 255 MiB of the 256 MiB leaves room for them
    # all (nothing is preempted, so no onPreempt is owed at an unknown time) and little for new ones; the
    # whole capacity is reserved only while no buffer is alive.
    mib = s.rng.choice((128, 255, 255) if s.model.bufs else (128, 255, 256))
    s.add("vnpu", command=f"pressure={mib * 1024 * 1024}")


def _parallel(s: Pen) -> None:
    """Two or three threads, each on its own slots: set a priority, or free a buffer, or create, set and
    free a request of its own."""
    lists: list[list[dict[str, Any]]] = []
    taken: set[str] = set()
    unmapped = freeable(s)
    for _ in range(s.rng.choice((2, 2, 3))):
        roll = s.rng.random()
        spare = [b for b in s.model.bufs if b not in taken]
        if roll < 0.35 and spare:
            b = s.rng.choice(spare)
            taken.add(b)
            lists.append([{"buf_set_priority": {"buf": b, "priority": s.rng.choice(PRIORITIES)}}])
        elif roll < 0.6 and [b for b in unmapped if b not in taken]:
            b = s.rng.choice([b for b in unmapped if b not in taken])
            taken.add(b)
            lists.append([{"buf_free": {"bufs": [b]}}])
        else:
            r, c = s.name("r"), s.name("c")
            lists.append([
                {"req_create": {"req": r}},
                {"cookie_new": {"cookie": c}},
                {"req_set_cookie": {"req": r, "cookie": c, "deleter": True}},
                {"req_set_priority": {"req": r, "priority": s.rng.choice(PRIORITIES)}},
                {"req_free": {"req": r}},
            ])
    s.add_item({"parallel": lists})


def _replace(s: Pen) -> None:
    """setCookie again on a live request: a new cookie, or at times the cookie cleared (NULL, no deleter:
    cookie-clear)."""
    r = s.rng.choice(list(s.model.reqs))
    if s.chance(0.15):
        s.add("req_set_cookie", req=r, cookie=None, deleter=False)
    else:
        _set_cookie(s, r)


def submittable(s: Pen) -> list[str]:
    """Live requests with onAlloc (allocAsync of one without crashes: only host.fuzz.moves_contexts.death)."""
    return [name for name, r in s.model.reqs.items() if r.onalloc]


CORE_MOVES: Final = (
    # At most 8 requests alive: more add nothing but teardown work.
    Move(_new_request, 14, lambda s: len(s.model.reqs) < 8),
    Move(_submit, 16, lambda s: bool(submittable(s))),
    Move(_replace, 6, lambda s: bool(s.model.reqs)),
    Move(_map, 10, lambda s: bool(usable(s))),
    Move(_touch_map, 6, lambda s: bool(live_maps(s))),
    Move(_unmap, 7, lambda s: bool(s.model.maps)),
    Move(_load, 7, lambda s: bool(usable(s)), loads=True),
    Move(_free, 8, lambda s: bool(freeable(s))),
    Move(_priority, 5, lambda s: bool(s.model.bufs)),
    Move(_free_request, 4, lambda s: bool(s.model.reqs)),
    Move(_parallel, 2, lambda s: True),
    Move(_is_supported, 3, lambda s: True),
    Move(_callbacks_after, 3, lambda s: bool(s.model.reqs)),
    Move(_free_mapped, 3, lambda s: bool(mapped(s) or usable(s))),
    Move(_await_closed, 3, lambda s: bool(s.model.released_files)),
    # Under pressure the onPreempts owed are not counted any more.
    Move(_preempt, 3, lambda s: not s.model.pressure and bool(preemptable(s)), control=True),
    Move(_pressure, 1, lambda s: not s.model.armed, control=True),
)
MOVES: Final = (*CORE_MOVES, *moves_requests.MOVES, *moves_buffers.MOVES, *moves_contexts.MOVES)
# With 8 requests alive a new request gives way to a submission; with none, a submission to a new request.
_GIVES_WAY_TO: Final[dict[Callable[[Pen], None], Callable[[Pen], None]]] = {
    _new_request: _submit, _submit: _new_request}


def program_id(seed: int, index: int, variant: int = 0) -> str:
    """A program's id: its seed, its index in the stream and, for the other candidates of that index the
    campaign chooses among (host.fuzz.steer), the variant."""
    return f"fuzz.s{seed}_{index}" + (f"v{variant}" if variant else "")


@dataclass(frozen=True)
class Drawn:
    """A generated program and the grammar cells its steps reach (host.fuzz.grammar)."""

    program: dict[str, Any]
    cells: frozenset[Cell]


def generate(seed: int, index: int, *, vnpu_control: bool, loads: bool = True, pointer64: bool = False,
             pair: bool = True, unsupported: bool = False, capacity: int | None = None,
             variant: int = 0) -> dict[str, Any]:
    """Program ``index`` (candidate ``variant``) of the stream ``seed``: a scenario mapping
    (docs/formats.md §2). ``pointer64``: the device has a 64-bit ABI, so raw cookies may use the high bits.
    ``pair`` False: the device's pair discovery failed, so the program requires no pair and binds no buffer
    (as `npuconf run` still runs the scenarios that need no discovery on such a device). ``unsupported``:
    the device has a pair it does not support (`$unsupported.*`). ``capacity``: the capacity the device
    declares (a request that fits it is granted: buffers of any size are bound)."""
    return draw(seed, index, vnpu_control=vnpu_control, loads=loads, pointer64=pointer64, pair=pair,
                unsupported=unsupported, capacity=capacity, variant=variant).program


def draw(seed: int, index: int, *, vnpu_control: bool, loads: bool = True, pointer64: bool = False,
         pair: bool = True, unsupported: bool = False, capacity: int | None = None, variant: int = 0) -> Drawn:
    """``generate``'s program, with its cells."""
    rng = random.Random(f"{seed}:{index}" + (f":{variant}" if variant else ""))
    s = Pen(rng, control=vnpu_control and pair, pair=pair, allow_loads=loads and pair, pointer64=pointer64,
            unsupported=unsupported and pair)
    s.model.room = capacity if pair else None
    moves = [m for m in MOVES if (s.control or not m.control) and (s.allow_loads or not m.loads)]
    length = rng.randint(10, 50)
    _new_request(s)
    weights = [m.weight for m in moves]
    while len(s.steps) < length:
        move = rng.choices(moves, weights=weights)[0]
        if move.enabled(s):
            move.draw(s)
        elif move.draw in _GIVES_WAY_TO:
            _GIVES_WAY_TO[move.draw](s)
        # Any other move the state does not allow is drawn again: the moves it allows keep their weights.
    if rng.random() < DEATH_SHARE:
        moves_contexts.death(s)
    return Drawn(_program(s, seed, index, variant), frozenset(s.cells))


def _program(s: Pen, seed: int, index: int, variant: int) -> dict[str, Any]:
    steps = [step for item in s.steps for step in item_steps(item)]
    ops = {op for op, _ in steps}
    requires = ["supported-pair"] if s.pair else []
    if any(names_unsupported_pair(args) for _, args in steps):
        requires.append("unsupported-pair")
    if any(sub.ok and sub.bytes > CERTAIN_BYTES for sub in s.model.subs):
        requires.append("capacity")  # a buffer bound because it fits the declared capacity
    if ops & {"buf_load", "req_set_file"}:
        requires.append("load")
    if "vnpu" in ops:
        requires.append("vnpu-control")
    if any(value >= 1 << 32 for value in s.model.raw_cookies):
        requires.append("pointer-64")
    return {
        "id": program_id(seed, index, variant),
        "title": f"Random API program {index} of seed {seed}" + (f", candidate {variant}" if variant else ""),
        "clauses": [PROGRAM_CLAUSE],
        "requires": requires,
        "timeout_ms": 20000,
        "steps": s.steps,
    }
