"""Random API programs built from the caller's state, so that every call is one the text lets a caller make.

The generator keeps the state the probe's slot table will have: live requests (with their cookie),
bound buffers (mapped pages, preempted or not), mappings, files and the callbacks owed. Each step is
drawn among the actions legal in that state, so a program never uses a freed request, an unbound or
freed buffer, an unmapped page or a failed mapping (the judge's Unjudgeable cases, docs/formats.md §2).
Weights favour deep states: many requests and buffers alive, cookies replaced while submissions hold
them, maps and partial unmaps, loads while mapped, frees during loads, priorities, and, where the
device has vnpu control, preemption and pressure. Programs are plain scenario mappings (the YAML form)
so that the shrinker edits and writes them as they are.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Final

from reference_model.vocabulary import PREEMPT_LATE_MS

PAGE: Final = 4096
# Sizes stay far below the vnpu's default capacity (256 MiB) while nothing presses on it: every
# allocation of a program without pressure succeeds on a conforming device, so its buffer can be bound.
SIZES_PAGES: Final = (1, 1, 2, 3, 4, 8, 16)
PRIORITIES: Final = (0, 1, 250, 499, 500, 501, 750, 999, 1000)
AWAIT_MS: Final = 2000
CLOSE_WAIT_MS: Final = 1000  # as the corpus: a conforming owner closes at once, the probe polls until then
# The clause a generated program names: its steps may exercise any, the judge names the one it breaks.
PROGRAM_CLAUSE: Final = "alloc-supported-may-fail"
MAX_LIVE_BUFFERS: Final = 12
# After a commanded preemption of a buffer without onPreempt: long enough for a callback that should not
# come to show on a loaded machine (at 20 ms a shrink under CI load kept 16 steps instead of 11); about
# 2 % of programs have one, so the rate drops by well under half.
PREEMPT_PAUSE_MS: Final = 100
# About half of the commanded preemptions are `preempt_late=` (docs/vnpu.md §7): the buffer is preempted at
# once, its onPreempt comes PREEMPT_LATE_MS later, after the steps that follow (a free, a map), in one step.
# Without it, a defect shown only by a late onPreempt (a cookie deleted at the free) is a race.
LATE_SHARE: Final = 0.5
# Without a supported pair (discovery failed) requests take these numbers; their allocations may fail or
# not, so nothing is bound: the programs exercise requests, cookies, isSupported and onAlloc.
BLIND_DEVICES: Final = (0, 1, -1)
BLIND_TYPES: Final = (0, 1, 2, 3, 4, 9)


@dataclass
class _Buffer:
    name: str
    pages: int
    cookie: str
    onpreempt: bool
    maybe_preempted: bool = False
    loading: bool = False
    # Files loaded into it whose onLoad was awaited: once it is freed, nothing needs their descriptors.
    loaded_files: list[str] = field(default_factory=list)


@dataclass
class _Map:
    name: str
    buf: str
    pages: set[int]
    writable: bool


@dataclass
class _State:
    rng: random.Random
    control: bool
    steps: list[dict[str, Any]] = field(default_factory=list)
    serial: int = 0
    # name -> (cookie, pages, onPreempt): the cookie is a cookie handle (a str), an integer or None (NULL);
    # only buffers of a cookie handle are bound (a bind selects by cookie handle).
    requests: dict[str, tuple[Any, int, bool]] = field(default_factory=dict)
    buffers: dict[str, _Buffer] = field(default_factory=dict)
    maps: dict[str, _Map] = field(default_factory=dict)
    submitted: int = 0  # onAlloc callbacks owed so far
    loads: int = 0  # onLoad callbacks owed so far
    loads_known: bool = True  # False once a buffer was freed during its load (its onLoad is not counted on)
    preempts: int = 0  # onPreempt callbacks owed by preempt commands so far
    pressure: bool = False  # allocations may fail from now on: their buffers are never bound
    used_load: bool = False
    used_control: bool = False
    pair: bool = True  # a supported pair is known: allocations succeed and their buffers are bound
    allow_loads: bool = True  # the device may be asked to load files (the `load` capability)
    pointer64: bool = False  # the device has a 64-bit ABI: raw cookies above 2^32 (and 2^48) are allowed
    released_files: list[str] = field(default_factory=list)  # descriptors nothing needs any more
    raw_values: list[int] = field(default_factory=list)  # integer cookies used so far (handed over again at times)
    wide_cookie: bool = False  # a raw cookie above 2^32 was used (the program requires pointer-64)
    # Mappings whose buffer was freed while they were live: valid until unmapped (free-mapping-valid).
    orphans: dict[str, _Map] = field(default_factory=dict)

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def add(self, op: str, **args: Any) -> None:
        self.steps.append({op: args})


def _cookie(s: _State) -> Any:
    """A cookie for setCookie: mostly a new cookie object (its cookie_new step added); sometimes a raw
    integer (above 2^48 on a 64-bit ABI: cookie-raw-integer), at times one used before, or NULL."""
    roll = s.rng.random()
    if roll < 0.14:
        s.serial += 1
        number = s.serial * 8 + s.rng.randint(1, 7)
        if s.pointer64 and s.rng.random() < 0.6:
            s.wide_cookie = True
            number |= s.rng.randint(1, 0xFFFF) << 48
        s.raw_values.append(number)
        return number
    if roll < 0.17 and s.raw_values:
        return s.rng.choice(s.raw_values)  # an integer handed over before: the same value again
    if roll < 0.22:
        return None
    c = s.name("c")
    s.add("cookie_new", cookie=c)
    return c


def _set_cookie(s: _State, r: str, c: Any) -> None:
    deleter = s.rng.random() < 0.85
    s.add("req_set_cookie", req=r, cookie=c, deleter=deleter)


def _new_request(s: _State) -> None:
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
    s.add("req_set_prot", req=r, prot=["READ", "WRITE"])
    if s.rng.random() < 0.5:
        s.add("req_set_priority", req=r, priority=s.rng.choice(PRIORITIES))
    s.add("req_set_onalloc", req=r, set=True)
    onpreempt = s.rng.random() < 0.6
    if onpreempt:
        s.add("req_set_onpreempt", req=r, set=True)
    if s.allow_loads and s.rng.random() < 0.12:
        # A file segment loaded at allocation (setFileSegmentToLoad): the request owns the descriptor.
        f = s.name("f")
        seg = s.rng.randint(1, pages)
        s.add("file_new", file=f, size=seg * PAGE, seed=s.rng.randint(1, 1000))
        s.add("req_set_file", req=r, fd=f, file_offset=0, length=seg * PAGE, buffer_offset=0)
        s.used_load = True
    c = _cookie(s)
    _set_cookie(s, r, c)
    s.requests[r] = (c, pages, onpreempt)


def _replace_cookie(s: _State, r: str) -> None:
    c = _cookie(s)
    _set_cookie(s, r, c)
    s.requests[r] = (c, *s.requests[r][1:])


def _submit(s: _State) -> None:
    """allocAsync of one to three live requests, then (usually) the wait, and the binds by cookie."""
    names = list(s.requests)
    chosen = s.rng.sample(names, k=min(len(names), s.rng.choice((1, 1, 1, 2, 3))))
    held = [s.requests[r] for r in chosen]
    s.add("alloc", reqs=chosen)
    s.submitted += len(chosen)
    # Replacing a cookie while the submission holds the old one, or freeing the request at once:
    # the submission keeps what it took (alloc-no-request-ownership, the cookie rules).
    for r in chosen:
        roll = s.rng.random()
        if roll < 0.3:
            _replace_cookie(s, r)
        elif roll < 0.45:
            s.add("req_free", req=r)
            del s.requests[r]
    # A bind waits for the onAlloc it names, so the wait may be left to the binds (never under pressure,
    # where nothing is bound).
    if s.pressure or s.rng.random() < 0.75:
        s.add("await_alloc", count=s.submitted, timeout_ms=AWAIT_MS)
    if s.pressure:
        return  # an allocation may have been refused: nothing of this submission is bound
    for cookie, pages, onpreempt in held:
        if len(s.buffers) >= MAX_LIVE_BUFFERS:
            break
        if not isinstance(cookie, str) or not s.pair:
            continue  # an integer or NULL cookie: no bind selects it (its buffer is freed by teardown)
        b = s.name("b")
        s.add("bind", buf=b, select={"cookie": cookie})
        s.buffers[b] = _Buffer(b, pages, cookie, onpreempt)


def _usable(s: _State) -> list[_Buffer]:
    return [b for b in s.buffers.values() if not b.maybe_preempted]


def _add_map(s: _State, b: _Buffer, writable: bool | None = None, flags: str | None = None) -> tuple[str, int, bool]:
    """A buf_map of the first pages of ``b`` (how many, and unless given whether writable and its flags,
    drawn): the mapping's name, pages and writability."""
    m = s.name("m")
    pages = s.rng.randint(1, b.pages)
    if writable is None:
        writable = s.rng.random() < 0.7
    if flags is None:
        flags = s.rng.choice(("SHARED", "SHARED", "PRIVATE"))
    s.add("buf_map", map=m, buf=b.name, length=pages * PAGE, prot=["READ", "WRITE"] if writable else ["READ"],
          flags=[flags], offset=0)
    s.maps[m] = _Map(m, b.name, set(range(pages)), writable)
    return m, pages, writable


def _map(s: _State) -> None:
    choices = _usable(s)
    if not choices:
        return
    m, pages, writable = _add_map(s, s.rng.choice(choices))
    if writable and s.rng.random() < 0.7:
        s.add("map_write", map=m, offset=0, length=pages * PAGE, seed=s.rng.randint(1, 1000))
    if s.rng.random() < 0.6:
        s.add("map_read", map=m, offset=0, length=pages * PAGE)


def _touch_map(s: _State) -> None:
    if not s.maps:
        return
    m = s.rng.choice(list(s.maps.values()))
    page = s.rng.choice(sorted(m.pages))
    if m.writable and s.rng.random() < 0.5:
        s.add("map_write", map=m.name, offset=page * PAGE, length=PAGE, seed=s.rng.randint(1, 1000))
    else:
        s.add("map_read", map=m.name, offset=page * PAGE, length=PAGE)


def _unmap(s: _State) -> None:
    if s.orphans and (not s.maps or s.rng.random() < 0.5):
        _unmap_orphan(s)
        return
    if not s.maps:
        return
    m = s.maps[s.rng.choice(list(s.maps))]
    pages = sorted(m.pages)
    if len(pages) > 1 and s.rng.random() < 0.6:
        page = s.rng.choice(pages)  # a partial unmap: one page of the mapping
        s.add("buf_unmap", map=m.name, offset=page * PAGE, length=PAGE)
        m.pages.discard(page)
        return
    # The first contiguous run of the pages still mapped (never a range over a hole a partial unmap left).
    low = high = pages[0]
    while high + 1 in m.pages:
        high += 1
    s.add("buf_unmap", map=m.name, offset=low * PAGE, length=(high - low + 1) * PAGE)
    m.pages -= set(range(low, high + 1))
    if not m.pages:
        del s.maps[m.name]


def _unmap_orphan(s: _State) -> None:
    """Unmapping, page by page or whole, a mapping whose buffer was freed: its memory goes with the last page."""
    m = s.orphans[s.rng.choice(list(s.orphans))]
    pages = sorted(m.pages)
    if s.rng.random() < 0.5:
        low = high = pages[0]
        while high + 1 in m.pages:
            high += 1
        s.add("buf_unmap", map=m.name, offset=low * PAGE, length=(high - low + 1) * PAGE)
        m.pages -= set(range(low, high + 1))
    else:
        page = s.rng.choice(pages)
        s.add("buf_unmap", map=m.name, offset=page * PAGE, length=PAGE)
        m.pages.discard(page)
    if not m.pages:
        del s.orphans[m.name]


def _free_mapped(s: _State) -> None:
    """ANpuBuffer_free of a buffer that is still mapped: the text lets the mapping stay valid until it is
    unmapped (free-mapping-valid-after-free), and the device may not preempt it meanwhile
    (preempt-never-while-mapped). The mappings are unmapped by later steps (or by teardown)."""
    mapped = [b for b in s.buffers.values() if any(m.buf == b.name for m in s.maps.values())]
    if not mapped:
        # None mapped yet: map one first (not one that may be preempted, as _map; during a load is fine, R15).
        idle = _usable(s)
        if not idle:
            return
        b = s.rng.choice(idle)
        _add_map(s, b, writable=True, flags="SHARED")
        mapped = [b]
    b = s.rng.choice(mapped)
    s.add("buf_free", bufs=[b.name])
    if b.loading:
        s.loads_known = False
    del s.buffers[b.name]
    for name in [m.name for m in s.maps.values() if m.buf == b.name]:
        s.orphans[name] = s.maps.pop(name)


def _is_supported(s: _State) -> None:
    """ANpuManager_isSupported of live requests (cookies, callbacks and priorities set: ignored fields), one
    of them listed twice at times, and at times a request with an invalid type or a negative device (which
    may also be submitted, with onPreempt: its onAlloc fails and no onPreempt may follow)."""
    live = list(s.requests)
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
        s.submitted += 1
        s.add("await_alloc", count=s.submitted, timeout_ms=AWAIT_MS)
    s.add("req_free", req=extra)


def _callbacks_after(s: _State) -> None:
    """setOnPreempt (a callback, or NULL) or setOnAlloc again on a request, usually one already submitted:
    the submissions made keep the callbacks of their snapshot (alloc-snapshot), later ones take the new."""
    if not s.requests:
        return
    r = s.rng.choice(list(s.requests))
    cookie, pages, onpreempt = s.requests[r]
    roll = s.rng.random()
    if roll < 0.7:
        onpreempt = not onpreempt if roll < 0.5 else onpreempt
        s.add("req_set_onpreempt", req=r, set=onpreempt)
        s.requests[r] = (cookie, pages, onpreempt)
    else:
        s.add("req_set_onalloc", req=r, set=True)


def _load(s: _State) -> None:
    choices = _usable(s)
    if not choices:
        return
    b = s.rng.choice(choices)
    f = s.name("f")
    pages = s.rng.randint(1, b.pages)
    s.add("file_new", file=f, size=pages * PAGE, seed=s.rng.randint(1, 1000))
    onload = s.rng.random() < 0.8
    s.add("buf_load", buf=b.name, fd=f, file_offset=0, length=pages * PAGE, buffer_offset=0, onload=onload)
    s.used_load = True
    if not onload:
        return
    s.loads += 1
    b.loading = True
    if s.loads_known and s.rng.random() < 0.6:
        s.add("await_load", count=s.loads, timeout_ms=AWAIT_MS)
        for other in s.buffers.values():
            other.loading = False
        b.loaded_files.append(f)


def _released(s: _State, b: _Buffer) -> None:
    """``b`` is freed and unmapped: the descriptors of its answered loads are needed by nothing now."""
    s.released_files.extend(b.loaded_files)


def _await_closed(s: _State) -> None:
    """A descriptor handed over to a load, answered, into a buffer since freed: the owner must close it
    (load-fd-ownership); the probe waits for that, polling, and the model requires it closed by the end."""
    if s.released_files:
        f = s.released_files.pop(s.rng.randrange(len(s.released_files)))
        s.add("await_closed", file=f, timeout_ms=CLOSE_WAIT_MS)


def _freeable(s: _State) -> list[_Buffer]:
    """Buffers without a live mapping."""
    return [b for b in s.buffers.values() if all(m.buf != b.name for m in s.maps.values())]


def _free(s: _State) -> None:
    """ANpuBuffer_free of one or two buffers (possibly during their load)."""
    free = _freeable(s)
    if not free:
        return
    chosen = s.rng.sample(free, k=min(len(free), s.rng.choice((1, 1, 2))))
    s.add("buf_free", bufs=[b.name for b in chosen])
    for b in chosen:
        if b.loading:
            s.loads_known = False
        _released(s, b)
        del s.buffers[b.name]


def _priority(s: _State) -> None:
    if s.buffers:
        b = s.rng.choice(list(s.buffers))
        s.add("buf_set_priority", buf=b, priority=s.rng.choice(PRIORITIES))


def _free_request(s: _State) -> None:
    free = list(s.requests)
    if free:
        r = s.rng.choice(free)
        s.add("req_free", req=r)
        del s.requests[r]


def _preempt(s: _State) -> None:
    if s.pressure:
        return  # the onPreempts owed are not counted any more
    choices = [b for b in s.buffers.values()
               if all(m.buf != b.name for m in s.maps.values()) and not b.maybe_preempted]
    if not choices:
        return
    b = s.rng.choice(choices)
    late = s.rng.random() < LATE_SHARE
    s.add("vnpu", command=f"{'preempt_late' if late else 'preempt'}={b.name}")
    b.maybe_preempted = True
    s.used_control = True
    if b.onpreempt:
        # The commanded preemption's onPreempt comes on a device thread, by teardown's preempt settle at
        # the latest: the program waits for it only sometimes.
        s.preempts += 1
        if s.rng.random() < 0.5:
            s.add("await_preempt", count=s.preempts, timeout_ms=AWAIT_MS)
    else:
        # No onPreempt in the submission's snapshot: none may come (req-onpreempt-default-null, also when
        # the request's onPreempt was set after allocAsync). A short pause lets one that comes anyway show
        # in the trace before teardown, whatever steps follow (the shrinker keeps it: shrink._keep_pauses).
        s.add("sleep_ms", ms=PREEMPT_PAUSE_MS + (PREEMPT_LATE_MS if late else 0))


def _pressure(s: _State) -> None:
    # The device may preempt any buffer to make room, mapped ones too: mappings go first.
    for m in [*s.maps.values(), *s.orphans.values()]:
        for page in sorted(m.pages):
            s.add("buf_unmap", map=m.name, offset=page * PAGE, length=PAGE)
    s.maps.clear()
    s.orphans.clear()
    # With at most MAX_LIVE_BUFFERS of at most 16 pages alive, 255 MiB of the 256 MiB leaves room for them
    # all (nothing is preempted, so no onPreempt is owed at an unknown time) and little for new ones; the
    # whole capacity is reserved only while no buffer is alive.
    mib = s.rng.choice((128, 255, 255) if s.buffers else (128, 255, 256))
    s.add("vnpu", command=f"pressure={mib * 1024 * 1024}")
    s.pressure = True
    s.used_control = True
    for b in s.buffers.values():
        b.maybe_preempted = True


def _parallel(s: _State) -> None:
    """Two or three threads, each on its own slots: set a priority, or free a buffer, or create, set and
    free a request of its own."""
    lists: list[list[dict[str, Any]]] = []
    taken: set[str] = set()
    unmapped = [b.name for b in _freeable(s)]
    for _ in range(s.rng.choice((2, 2, 3))):
        roll = s.rng.random()
        spare = [b for b in s.buffers if b not in taken]
        if roll < 0.35 and spare:
            b = s.rng.choice(spare)
            taken.add(b)
            lists.append([{"buf_set_priority": {"buf": b, "priority": s.rng.choice(PRIORITIES)}}])
        elif roll < 0.6 and [b for b in unmapped if b not in taken]:
            b = s.rng.choice([b for b in unmapped if b not in taken])
            taken.add(b)
            if s.buffers[b].loading:
                s.loads_known = False
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
    s.steps.append({"parallel": lists})
    for block in lists:
        for step in block:
            if "buf_free" in step:
                _released(s, s.buffers.pop(step["buf_free"]["bufs"][0]))


def _replace(s: _State) -> None:
    free = list(s.requests)
    if free:
        _replace_cookie(s, s.rng.choice(free))


# action -> (weight, needs vnpu control)
_ACTIONS: Final = (
    (_new_request, 14, False),
    (_submit, 16, False),
    (_replace, 6, False),
    (_map, 10, False),
    (_touch_map, 6, False),
    (_unmap, 7, False),
    (_load, 7, False),
    (_free, 8, False),
    (_priority, 5, False),
    (_free_request, 4, False),
    (_parallel, 3, False),
    (_is_supported, 3, False),
    (_callbacks_after, 3, False),
    (_free_mapped, 3, False),
    (_await_closed, 3, False),
    (_preempt, 3, True),
    (_pressure, 1, True),
)


def generate(seed: int, index: int, *, vnpu_control: bool, loads: bool = True,
             pointer64: bool = False, pair: bool = True) -> dict[str, Any]:
    """Program ``index`` of the stream ``seed``: a scenario mapping (docs/formats.md §2). ``pointer64``: the
    device has a 64-bit ABI, so raw cookies may use the high bits. ``pair`` False: the device's pair
    discovery failed, so the program requires no pair and binds no buffer (as `npuconf run` still runs the
    scenarios that need no discovery on such a device)."""
    rng = random.Random(f"{seed}:{index}")
    s = _State(rng, vnpu_control and pair, allow_loads=loads and pair, pointer64=pointer64, pair=pair)
    actions = [(fn, w) for fn, w, control in _ACTIONS if s.control or not control]
    actions = [(fn, w) for fn, w in actions if s.allow_loads or fn is not _load]
    length = rng.randint(8, 40)
    _new_request(s)
    while len(s.steps) < length:
        fn = rng.choices([a for a, _ in actions], weights=[w for _, w in actions])[0]
        if fn is _new_request and len(s.requests) >= 8:
            fn = _submit
        if fn is _submit and not s.requests:
            fn = _new_request
        fn(s)
    requires = ["supported-pair"] if pair else []
    if s.used_load:
        requires.append("load")
    if s.used_control:
        requires.append("vnpu-control")
    if s.wide_cookie:
        requires.append("pointer-64")
    return {
        "id": f"fuzz.s{seed}_{index}",
        "title": f"Random API program {index} of seed {seed}",
        "clauses": [PROGRAM_CLAUSE],
        "requires": requires,
        "timeout_ms": 20000,
        "steps": s.steps,
    }
