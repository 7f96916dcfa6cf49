"""Generator moves for the request side of the grammar (host.fuzz.grammar): every argument class of every
setter, setters called again (before and after the submission), isSupported before and after a change, a
request submitted again once a refused submission was fixed, and the lists the text allows (empty, a
request listed twice, more than eight). Each move submits what it built and, when every conforming device
grants it, binds the buffer and looks at it: a setter whose last value did not count shows only in the
buffer it made."""

from __future__ import annotations

from typing import Any, Final

from .answers import GRANTED, PAGE
from .caller import answer_of
from .moves_buffers import look, preempt_now
from .pen import AWAIT_MS, PREEMPT_PAUSE_MS, Move, Pen, can_bind

# One value per argument class of each setter (host.fuzz.cells names the class of each).
DEVICES: Final = {"pair": "$pair.device", "negative": -1, "other": 7, "unsupported": "$unsupported.device"}
TYPES: Final = {"pair": "$pair.type", "unknown": 0, "other": 9, "unsupported": "$unsupported.type"}
SIZES: Final = {"page": PAGE, "pages": 2 * PAGE, "odd": PAGE + 1, "short": 100, "zero": 0, "negative": -1,
                "huge": 1 << 40, "large": 64 << 20}
PRIORITIES: Final = {"valid": 700, "min": 0, "max": 1000, "below": -1, "above": 1001}
PROTS: Final[dict[str, Any]] = {"read_write": ["READ", "WRITE"], "read": ["READ"], "none": "NONE",
                                "write": ["WRITE"], "exec": ["READ", "EXEC"], "invalid_bits": 8}
# The fields isSupported answers on, with a value that makes a request invalid or unsupported, then the
# value that makes it valid again.
BROKEN: Final = (("req_set_type", "type", 0, "$pair.type"), ("req_set_device", "device", -1, "$pair.device"),
                 ("req_set_size", "size", 0, PAGE))


def _valid(s: Pen, r: str, pages: int = 2, prot: Any = ("READ", "WRITE")) -> None:
    """A request of the pair's device and type, ``pages`` pages, with onAlloc (and a cookie object)."""
    s.add("req_create", req=r)
    s.add("req_set_device", req=r, device="$pair.device")
    s.add("req_set_type", req=r, type="$pair.type")
    s.add("req_set_size", req=r, size=pages * PAGE)
    if prot is not None:
        s.add("req_set_prot", req=r, prot=list(prot))
    s.add("req_set_onalloc", req=r, set=True)


def _cookie_object(s: Pen, r: str) -> str:
    c = s.name("c")
    s.add("cookie_new", cookie=c)
    s.add("req_set_cookie", req=r, cookie=c, deleter=True)
    return c


def submit_and_look(s: Pen, r: str, cookie: str | None) -> str | None:
    """allocAsync of ``r``, its onAlloc awaited; when every conforming device grants it, the buffer bound and
    looked at whole (host.fuzz.moves_buffers.look). Returns the buffer's name, or None."""
    granted = answer_of(s.model, s.model.reqs[r]) == GRANTED
    s.add("alloc", reqs=[r])
    s.await_allocs()
    if not granted or cookie is None:
        return None
    b = s.name("b")
    bind = {"buf": b, "select": {"cookie": cookie}}
    if not s.model.allows("bind", bind):
        return None
    s.add("bind", **bind)
    look(s, b)
    return b


def _value_of(s: Pen, table: dict[str, Any]) -> tuple[str, Any]:
    """A value of the table's classes the device can be given (the pair's and the unsupported pair's only
    where they are known)."""
    choices = [k for k in table if (s.unsupported or k != "unsupported")
               and (s.pair or not str(table[k]).startswith("$pair.")) and (k != "large" or not _large_yet(s))]
    name = s.rng.choice(choices)
    return name, table[name]


def _large_yet(s: Pen) -> bool:
    """Whether a large request was made: one per program, so that with every other buffer alive the device's
    capacity (256 MiB on the vnpu) still grants what the program binds."""
    return any(r.size >= SIZES["large"] for r in (*s.model.reqs.values(), *s.model.lent.values())) or any(
        sub.pages * PAGE >= SIZES["large"] for sub in s.model.subs)


# Each setter: its op, its argument, the table of values by class, and the class that makes a request valid.
SETTERS: Final[tuple[tuple[str, str, dict[str, Any], str], ...]] = (
    ("req_set_device", "device", DEVICES, "pair"),
    ("req_set_type", "type", TYPES, "pair"),
    ("req_set_size", "size", SIZES, "pages"),
    ("req_set_priority", "priority", PRIORITIES, "valid"),
    ("req_set_prot", "prot", PROTS, "read_write"),
)


def _setter_twice(s: Pen) -> None:
    """A request whose one field is set twice, one of the two values of another class (valid then invalid,
    invalid then valid, or two valid ones), the rest valid; submitted, and what it brings looked at.
    Also setOnPreempt set then cleared (or the reverse), with a commanded preemption where the device has
    control, and a file segment replaced by another."""
    roll = s.rng.random()
    r = s.name("r")
    if roll < 0.12 and s.allow_loads:
        _valid(s, r)
        for _ in range(2):
            f = s.name("f")
            s.add("file_new", file=f, size=2 * PAGE, seed=s.rng.randint(1, 1000))
            s.add("req_set_file", req=r, fd=f, file_offset=0, length=s.rng.choice((PAGE, 2 * PAGE)),
                  buffer_offset=0)
        submit_and_look(s, r, _cookie_object(s, r))
        return
    if roll < 0.25:
        _valid(s, r)
        first = s.chance(0.5)
        s.add("req_set_onpreempt", req=r, set=first)
        s.add("req_set_onpreempt", req=r, set=not first)
        b = submit_and_look(s, r, _cookie_object(s, r))
        if b is not None and s.control and b in s.model.bufs and not s.model.live_mapped(b) \
                and not s.model.bufs[b].maybe_mapped:
            s.add("vnpu", command=f"preempt={b}")
            if s.model.bufs[b].onpreempt:
                s.add("await_preempt", count=s.model.preempts, timeout_ms=AWAIT_MS)
            else:
                s.add("sleep_ms", ms=PREEMPT_PAUSE_MS)
        return
    op, key, table, good = s.rng.choice(SETTERS)
    s.add("req_create", req=r)
    values = [_value_of(s, table)[1], _value_of(s, table)[1]]
    if s.chance(0.5):
        values[s.rng.randrange(2)] = table[good]
    for field_op, field_key, field_table, field_good in SETTERS:
        if field_op == op:
            for value in values:
                s.add(op, req=r, **{key: value})
        elif field_op != "req_set_priority" or s.chance(0.5):
            s.add(field_op, req=r, **{field_key: field_table[field_good]})
    s.add("req_set_onalloc", req=r, set=True)
    submit_and_look(s, r, _cookie_object(s, r))


def _odd_request(s: Pen) -> None:
    """A request with one field of a class other than valid (or left at its default), the rest valid."""
    r = s.name("r")
    op, key, table, _ = s.rng.choice(SETTERS)
    s.add("req_create", req=r)
    for field_op, field_key, field_table, field_good in SETTERS:
        if field_op == op:
            if s.chance(0.85):  # else: never called, the default
                s.add(op, req=r, **{key: _value_of(s, table)[1]})
        else:
            s.add(field_op, req=r, **{field_key: field_table[field_good]})
    s.add("req_set_onalloc", req=r, set=True)
    if s.chance(0.4):
        s.add("req_set_onpreempt", req=r, set=True)
    submit_and_look(s, r, _cookie_object(s, r))


def _after_submit(s: Pen) -> None:
    """A setter on a request after its submission (its own class: alloc-elements-modify-after-return); the
    submission keeps its snapshot. At times the request is submitted again."""
    submitted = [name for name, r in s.model.reqs.items() if r.submitted]
    r = s.rng.choice(submitted)
    if s.allow_loads and s.chance(0.15):
        f = s.name("f")
        s.add("file_new", file=f, size=PAGE, seed=s.rng.randint(1, 1000))
        s.add("req_set_file", req=r, fd=f, file_offset=0, length=PAGE, buffer_offset=0)
    else:
        op, key, table, _ = s.rng.choice(SETTERS)
        s.add(op, req=r, **{key: _value_of(s, table)[1]})
    if s.chance(0.3) and s.model.reqs[r].onalloc:
        s.add("alloc", reqs=[r])
        s.await_allocs()


def _snapshot(s: Pen) -> None:
    """A request submitted, then one of its fields changed (at times to an invalid value) before its onAlloc:
    the submission keeps the snapshot it took (alloc-snapshot), and what it brings is looked at. Or its
    onPreempt set or cleared after allocAsync, and the buffer preempted where the device has control: the
    snapshot decides whether an onPreempt comes (req-onpreempt-default-null, preempt-onpreempt-purpose)."""
    r = s.name("r")
    _valid(s, r)
    onpreempt = s.control and s.chance(0.4)
    before = s.chance(0.5)
    if onpreempt and before:
        s.add("req_set_onpreempt", req=r, set=True)
    cookie = _cookie_object(s, r)
    granted = answer_of(s.model, s.model.reqs[r]) == GRANTED
    s.add("alloc", reqs=[r])
    if onpreempt:
        s.add("req_set_onpreempt", req=r, set=not before)
    else:
        for _ in range(s.rng.choice((1, 1, 2))):
            op, key, table, _ = s.rng.choice(SETTERS)
            s.add(op, req=r, **{key: _value_of(s, table)[1]})
    s.await_allocs()
    b = s.name("b")
    bind = {"buf": b, "select": {"cookie": cookie}}
    if not granted or not s.model.allows("bind", bind):
        return
    s.add("bind", **bind)
    if onpreempt:
        preempt_now(s, b)
    else:
        look(s, b)


def _support_after_change(s: Pen) -> None:
    """isSupported of a request with an invalid field, then the field made valid, isSupported again, and the
    allocation (support-modify-after-return: the answer follows the change); also the reverse."""
    op, key, bad, good = s.rng.choice(BROKEN)
    r = s.name("r")
    _valid(s, r, pages=1)
    if op == "req_set_size" or s.chance(0.7):
        s.add(op, req=r, **{key: bad})
        s.add("is_supported", reqs=[r])
        s.add(op, req=r, **{key: good})
    else:
        s.add("is_supported", reqs=[r])
        s.add(op, req=r, **{key: bad})
    s.add("is_supported", reqs=[r])
    submit_and_look(s, r, _cookie_object(s, r))


def _after_failure(s: Pen) -> None:
    """A request whose submission every conforming device refuses, fixed and submitted again: the object
    is used again after the failure."""
    op, key, bad, good = s.rng.choice(BROKEN[:2])
    r = s.name("r")
    _valid(s, r, pages=1)
    s.add(op, req=r, **{key: bad})
    s.add("alloc", reqs=[r])
    s.await_allocs()
    s.add(op, req=r, **{key: good})
    submit_and_look(s, r, _cookie_object(s, r))


def _unsupported_request(s: Pen) -> None:
    """A request of the pair the device does not support: isSupported says no, allocAsync fails."""
    r = s.name("r")
    s.add("req_create", req=r)
    s.add("req_set_device", req=r, device="$unsupported.device")
    s.add("req_set_type", req=r, type="$unsupported.type")
    s.add("req_set_size", req=r, size=PAGE)
    s.add("req_set_onalloc", req=r, set=True)
    if s.chance(0.5):
        s.add("req_set_onpreempt", req=r, set=True)
    _cookie_object(s, r)
    s.add("is_supported", reqs=[r])
    s.add("alloc", reqs=[r])
    s.await_allocs()


def _lists(s: Pen) -> None:
    """The lists the text allows: empty (isSupported, allocAsync, free), a request listed twice in one
    allocAsync (two buffers), more than eight requests in one isSupported (one request listed again)."""
    roll = s.rng.random()
    if roll < 0.3:
        op = s.rng.choice(("is_supported", "alloc", "buf_free"))
        s.add(op, **{"bufs" if op == "buf_free" else "reqs": []})
    elif s.pair and (roll < 0.6 or not s.model.reqs):
        r = s.name("r")
        _valid(s, r, pages=1)
        cookie = _cookie_object(s, r)
        s.add("alloc", reqs=[r, r])
        s.await_allocs()
        if s.model.pressure:
            return
        for _ in range(2):
            b = s.name("b")
            if s.model.allows("bind", {"buf": b, "select": {"cookie": cookie}}):
                s.add("bind", buf=b, select={"cookie": cookie})
    elif s.model.reqs:
        live = list(s.model.reqs)
        s.add("is_supported", reqs=[s.rng.choice(live) for _ in range(s.rng.randint(9, 12))])
    else:
        s.add("is_supported", reqs=[])


def _free_null(s: Pen) -> None:
    """AllocRequest_free(NULL): nothing happens (req-free-null-noop)."""
    s.add("req_free_null")


def _segment_request(s: Pen) -> None:
    """A request with a file segment of one class (or fd -1, its other values then ignored), submitted and
    looked at; the descriptor's position looked at."""
    r, f = s.name("r"), s.name("f")
    pages = s.rng.choice((1, 2, 3))
    s.add("req_create", req=r)
    s.add("req_set_device", req=r, device="$pair.device")
    s.add("req_set_type", req=r, type="$pair.type")
    s.add("req_set_size", req=r, size=pages * PAGE)
    s.add("req_set_prot", req=r, prot=["READ", "WRITE"])
    s.add("req_set_onalloc", req=r, set=True)
    kind = s.rng.choice(["zero", "odd", "file_offset", "buffer_offset", "no_file", "ignored", "negative", "past"])
    if kind in ("no_file", "ignored"):
        # one ignored field out of range at a time: a device that checks it then fails that field's sentence
        fields = {"file_offset": 0, "length": 0, "buffer_offset": 0}
        if kind == "ignored":
            fields[s.rng.choice(sorted(fields))] = -s.rng.randint(1, 5)
        s.add("req_set_file", req=r, fd={"fd": -1}, **fields)
        f = ""
    else:
        length = {"zero": 0, "odd": PAGE + 100, "negative": -1, "past": (pages + 1) * PAGE}.get(kind, PAGE)
        offset = PAGE if kind == "file_offset" else 0
        at = PAGE if kind == "buffer_offset" and pages > 1 else 0
        s.add("file_new", file=f, size=offset + max(length, PAGE), seed=s.rng.randint(1, 1000))
        s.add("req_set_file", req=r, fd=f, file_offset=offset, length=length, buffer_offset=at)
    c = s.name("c")
    s.add("cookie_new", cookie=c)
    s.add("req_set_cookie", req=r, cookie=c, deleter=True)
    submit_and_look(s, r, c)
    if f and s.chance(0.5):
        s.add("fd_check", file=f)


def _has_submitted(s: Pen) -> bool:
    return any(r.submitted for r in s.model.reqs.values())


MOVES: Final = (
    Move(_setter_twice, 3, can_bind),
    Move(_odd_request, 2, can_bind),
    Move(_after_submit, 1, _has_submitted),
    Move(_snapshot, 2, can_bind),
    Move(_support_after_change, 1, can_bind),
    Move(_after_failure, 1, can_bind),
    Move(_unsupported_request, 1, lambda s: s.unsupported),
    Move(_lists, 1, lambda s: True),
    Move(_free_null, 1, lambda s: True),
    Move(_segment_request, 2, can_bind, loads=True),
)
