"""The one model of a fuzz program's caller: its state, and one rule per op (a precondition, an effect).

The generator draws its next steps from this state and makes each through ``Caller.take``; the legality
check (host.fuzz.legal) replays a program through the same ``take``, so the shrinker refuses what the
generator could not make. A rule's precondition raises ``Illegal`` naming why the step may not be made
in the state the earlier steps left; its effect changes the state as the step does. An op without a rule
(a crashing op, a file_seek...) is not one a fuzz program makes.

The state follows docs/formats.md §2 and the text:
- requests: created once (a live name is not created again), used only while live; setOnAlloc only with
  a callback (setOnAlloc(NULL) crashes: crash-setonalloc-null), and before any allocAsync of the request;
- cookies: a `cookie_new` handle exists once created (created once). A cookie object is handed over with
  a deleter at most once, since a bind by cookie selects the buffer by it (the text allows more:
  cookie-shared-refcounted); NULL and integers, which no bind selects, may be handed over again (the
  judge considers every unheld hand-over of a value a deleter may be for);
- allocations: a submission succeeds on a conforming device when its request has the pair's device and
  type, a size and onAlloc, and no pressure was commanded; a bind by cookie takes an onAlloc with that
  cookie not yet bound, delivered or still owed (the bind waits for it), a bind by position (`nth`) only
  when arrival order cannot change it (the K-th success is the only one of its wait, or the only one
  still owed when the bind waits for it);
- buffers: used only between their bind and their free; mapped or loaded only while not (maybe)
  preempted; a map's protection within the request's, its range within the buffer;
- mappings: read, written (writable ones only) and unmapped only on pages still mapped; a mapping stays
  valid after its buffer's free until unmapped (free-mapping-valid);
- files: created once; a load or segment lies within its file and its buffer;
- waits: at most the callbacks owed (an onLoad is not counted on once a buffer was freed during a load;
  an onPreempt only from a commanded preemption, `preempt=` or `preempt_late=`, of a buffer whose request
  had onPreempt);
- parallel blocks: no handle used by two threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from reference_model.vocabulary import PAGE_SIZE

PAGE: Final = PAGE_SIZE

# The commanded preemptions fuzz programs make: `preempt_late=` is `preempt=` with the onPreempt due later
# (docs/vnpu.md §7); to the caller both are the same preemption.
PREEMPT_KEYS: Final = frozenset({"preempt", "preempt_late"})
PARALLEL: Final = "parallel"  # the YAML form of a par_begin .. par_end block
_HANDLE_ARGS: Final = ("req", "buf", "map", "file", "cookie")


class Illegal(Exception):
    """A step the caller may not make in the state the earlier steps left."""


@dataclass
class Req:
    device: bool = False
    type: bool = False
    size: int = 0
    prot: frozenset[str] = frozenset()
    onalloc: bool = False
    onpreempt: bool = False
    cookie: str | None = None  # a cookie handle name (None: an integer, NULL, or never set)
    segment: bool = False


@dataclass
class Sub:
    """One request's submission (allocAsync), with the snapshot it took."""

    cookie: str | None
    pages: int
    prot: frozenset[str]
    onpreempt: bool
    ok: bool  # a conforming device delivers a buffer
    unknown: bool = False  # submitted under pressure: it may or may not get one
    delivered: bool = False
    bound: bool = False


@dataclass
class Buf:
    pages: int
    prot: frozenset[str]
    onpreempt: bool
    preempted: bool = False  # maybe preempted: commanded, or pressure
    loading: bool = False
    unanswered_files: list[str] = field(default_factory=list)  # loaded with onLoad not awaited yet
    answered_files: list[str] = field(default_factory=list)  # loaded with onLoad awaited


@dataclass
class Map:
    buf: str
    pages: set[int]
    writable: bool


@dataclass
class Caller:
    reqs: dict[str, Req] = field(default_factory=dict)
    cookies: set[str] = field(default_factory=set)
    handed: set[str] = field(default_factory=set)  # cookie objects handed over with a deleter
    raw_cookies: list[int] = field(default_factory=list)  # integer cookies handed over so far
    subs: list[Sub] = field(default_factory=list)
    waits: list[list[Sub]] = field(default_factory=list)  # the submissions each covering await delivered
    onallocs: int = 0
    bufs: dict[str, Buf] = field(default_factory=dict)
    freed: set[str] = field(default_factory=set)
    maps: dict[str, Map] = field(default_factory=dict)  # live mappings, of freed buffers too
    files: dict[str, int] = field(default_factory=dict)  # files not handed over yet, with their size
    created_files: set[str] = field(default_factory=set)
    # Descriptors of answered loads into buffers freed unmapped: nothing needs them, the owner closes them.
    released_files: list[str] = field(default_factory=list)
    loads: int = 0
    loads_known: bool = True  # False once a buffer was freed during its load (its onLoad is not counted on)
    preempts: int = 0
    pressure: bool = False
    order_lost: bool = False  # a bind by cookie waited for one of several owed onAllocs

    def take(self, op: str, args: Any) -> None:
        """Make one step: its rule's precondition, then its effect (a parallel item: its threads' steps
        follow, see ``item_steps``)."""
        rule = RULES.get(op)
        if rule is None:
            raise Illegal(f"{op} is not an op of fuzz programs")
        rule.precondition(self, args)
        rule.effect(self, args)

    def allows(self, op: str, args: Any) -> bool:
        """Whether the step's precondition holds now (the state is left as it is)."""
        rule = RULES.get(op)
        if rule is None:
            return False
        try:
            rule.precondition(self, args)
        except (Illegal, KeyError, TypeError):
            return False
        return True

    def live_mapped(self, buf: str) -> bool:
        return any(m.buf == buf for m in self.maps.values())


Check = Callable[[Caller, Any], None]


def _nothing(c: Caller, a: Any) -> None:
    """No precondition, or no effect."""


@dataclass(frozen=True)
class Rule:
    op: str
    precondition: Check
    effect: Check = _nothing


def item_steps(item: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The (op, args) a program item makes, in order: a parallel item, then its threads' steps in list order."""
    ((op, args),) = item.items()
    if op != PARALLEL:
        return [(op, args or {})]
    out: list[tuple[str, Any]] = [(op, args)]
    for block in args:
        for step in block:
            ((inner, inner_args),) = step.items()
            out.append((inner, inner_args or {}))
    return out


# --- argument readers --------------------------------------------------------------------------------

def _pages(length: int, offset: int = 0) -> set[int]:
    if length <= 0 or offset < 0 or offset % PAGE or length % PAGE:
        raise Illegal(f"range {offset}+{length} is not whole pages")
    return set(range(offset // PAGE, (offset + length) // PAGE))


def _prot(value: Any) -> frozenset[str]:
    if value == "NONE" or value == 0:
        return frozenset()
    if isinstance(value, list):
        return frozenset(str(v) for v in value)
    raise Illegal(f"protection {value!r} is not one the fuzzer writes")


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Illegal(f"{value!r} is not an integer")
    return value


def _req(c: Caller, name: str) -> Req:
    req = c.reqs.get(name)
    if req is None:
        raise Illegal(f"request {name} is not live")
    return req


def _buf(c: Caller, name: str) -> Buf:
    buf = c.bufs.get(name)
    if buf is None:
        raise Illegal(f"buffer {name} is not bound" + (" (freed)" if name in c.freed else ""))
    return buf


def _usable(c: Caller, name: str) -> Buf:
    buf = _buf(c, name)
    if buf.preempted:
        raise Illegal(f"buffer {name} may have been preempted")
    return buf


def _map(c: Caller, name: str) -> Map:
    m = c.maps.get(name)
    if m is None:
        raise Illegal(f"mapping {name} is not live")
    return m


def _within_file(c: Caller, a: Mapping[str, Any], buffer_pages: int | None) -> None:
    fd = a["fd"]
    if not isinstance(fd, str) or fd not in c.created_files:
        raise Illegal(f"file {fd!r} was never created")
    size = c.files.get(fd)
    if size is None:
        raise Illegal(f"file {fd!r} was handed over already")
    offset, length, at = _int(a["file_offset"]), _int(a["length"]), _int(a["buffer_offset"])
    if offset < 0 or length <= 0 or offset + length > size or at < 0:
        raise Illegal("the range does not lie within its file")
    if buffer_pages is not None and at + length > buffer_pages * PAGE:
        raise Illegal("the load does not lie within its buffer")


# --- requests and cookies ----------------------------------------------------------------------------

def _create_unique(c: Caller, a: Mapping[str, Any]) -> None:
    if a["req"] in c.reqs:
        raise Illegal(f"request {a['req']} is created while live")


def _create(c: Caller, a: Mapping[str, Any]) -> None:
    c.reqs[a["req"]] = Req()


def _live_req(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])


def _free_req(c: Caller, a: Mapping[str, Any]) -> None:
    del c.reqs[a["req"]]


def _size_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])
    _int(a["size"])


def _prot_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])
    _prot(a["prot"])


def _onalloc_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if not a["set"]:
        raise Illegal("setOnAlloc(NULL) crashes")
    _req(c, a["req"])


def _cookie_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])
    cookie = a["cookie"]
    if isinstance(cookie, str) and cookie not in c.cookies:
        raise Illegal(f"cookie {cookie} was never created")
    # A cookie object selects the buffer a bind by cookie takes: one hand-over each keeps that choice the
    # program's (NULL and integers, never selected, may be handed over again).
    if a["deleter"] and isinstance(cookie, str) and cookie in c.handed:
        raise Illegal(f"cookie {cookie!r} handed over with a deleter twice")


def _set_cookie(c: Caller, a: Mapping[str, Any]) -> None:
    cookie = a["cookie"]
    if a["deleter"] and isinstance(cookie, str):
        c.handed.add(cookie)
    if isinstance(cookie, int) and not isinstance(cookie, bool):
        c.raw_cookies.append(cookie)
    c.reqs[a["req"]].cookie = cookie if isinstance(cookie, str) else None


def _segment_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])
    if isinstance(a["fd"], str):
        _within_file(c, a, None)


def _set_segment(c: Caller, a: Mapping[str, Any]) -> None:
    if isinstance(a["fd"], str):
        del c.files[a["fd"]]  # the request owns the descriptor now
        c.reqs[a["req"]].segment = True


def _cookie_new_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["cookie"] in c.cookies:
        raise Illegal(f"cookie {a['cookie']} is created twice")


def _all_live(c: Caller, a: Mapping[str, Any]) -> None:
    for r in a["reqs"]:
        _req(c, r)


def _setter(attribute: str, value: Callable[[Mapping[str, Any]], Any]) -> Check:
    def effect(c: Caller, a: Mapping[str, Any]) -> None:
        setattr(c.reqs[a["req"]], attribute, value(a))

    return effect


# --- allocations and binds ---------------------------------------------------------------------------

def _alloc_ok(c: Caller, a: Mapping[str, Any]) -> None:
    for r in a["reqs"]:
        if not _req(c, r).onalloc:
            raise Illegal(f"allocAsync of {r} without onAlloc crashes")


def _alloc(c: Caller, a: Mapping[str, Any]) -> None:
    for r in a["reqs"]:
        req = c.reqs[r]
        valid = req.device and req.type and req.size > 0
        c.subs.append(Sub(req.cookie, (req.size + PAGE - 1) // PAGE, req.prot, req.onpreempt,
                          valid and not c.pressure, unknown=valid and c.pressure))
        c.onallocs += 1


def _deliver(c: Caller, subs: list[Sub]) -> None:
    """``subs`` have had their onAlloc (an await counted them, or a bind waited for them)."""
    for s in subs:
        s.delivered = True
    if subs:
        c.waits.append(subs)


def _await_alloc_ok(c: Caller, a: Mapping[str, Any]) -> None:
    count = _int(a["count"])
    if count > c.onallocs or count <= 0:
        raise Illegal(f"await_alloc of {count} onAllocs when {c.onallocs} are owed")


def _await_alloc(c: Caller, a: Mapping[str, Any]) -> None:
    if a["count"] == c.onallocs:
        _deliver(c, [s for s in c.subs if not s.delivered])


def _by_position(c: Caller, k: int) -> tuple[Sub, bool]:
    """The submission whose buffer the K-th successful onAlloc brings, when arrival order cannot change it,
    and whether the bind waits for it. The onAllocs not awaited yet count as one more wait."""
    if c.order_lost:
        raise Illegal("bind by position after a bind by cookie took an onAlloc out of arrival order")
    seen = 0
    pending = [s for s in c.subs if not s.delivered]
    for wait in [*c.waits, pending]:
        if any(s.unknown for s in wait):
            raise Illegal("bind by position after allocations that may fail")
        ok = [s for s in wait if s.ok]
        if k < seen + len(ok):
            if len(ok) != 1:
                raise Illegal(f"bind nth {k}: arrival order among {len(ok)} onAllocs decides it")
            if ok[0].bound:
                raise Illegal("bind nth: that buffer is bound already")
            return ok[0], wait is pending
        seen += len(ok)
    raise Illegal(f"bind nth {k}: no such onAlloc owed")


def _by_cookie(c: Caller, cookie: Any) -> list[Sub]:
    """The submissions a bind by cookie may take (the first is taken): delivered or still owed."""
    match = [s for s in c.subs if s.ok and not s.bound and s.cookie == cookie]
    if not match or cookie is None:
        raise Illegal(f"bind by cookie {cookie}: no onAlloc with it left")
    first = match[0]
    if any((s.pages, s.prot, s.onpreempt) != (first.pages, first.prot, first.onpreempt) for s in match):
        raise Illegal(f"bind by cookie {cookie}: arrival order picks among different buffers")
    return match


def _bind_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["buf"] in c.bufs or a["buf"] in c.freed:
        raise Illegal(f"buffer handle {a['buf']} is bound twice")
    select = a["select"]
    if "cookie" in select:
        _by_cookie(c, select["cookie"])
    else:
        _by_position(c, _int(select["nth"]))


def _bind(c: Caller, a: Mapping[str, Any]) -> None:
    select = a["select"]
    if "cookie" in select:
        match = _by_cookie(c, select["cookie"])
        sub = match[0]
        if not any(s.delivered for s in match):
            # The bind waits for the first of them to come. Where it stands among the other successes still
            # owed is known only when there are none: then it is the next one, else binds by position end.
            if len(match) == 1 and not any(not s.delivered and s.ok and s is not sub for s in c.subs):
                _deliver(c, [sub])
            else:
                c.order_lost = True
                for s in match:
                    s.delivered = True
    else:
        sub, waits = _by_position(c, select["nth"])
        if waits:
            _deliver(c, [s for s in c.subs if not s.delivered])
    sub.bound = True
    c.bufs[a["buf"]] = Buf(sub.pages, sub.prot, sub.onpreempt)


# --- buffers, mappings, files ------------------------------------------------------------------------

def _free_ok(c: Caller, a: Mapping[str, Any]) -> None:
    bufs = a["bufs"]
    if len(set(bufs)) != len(bufs):
        raise Illegal("a buffer freed twice in one call")
    for b in bufs:
        _buf(c, b)


def _free(c: Caller, a: Mapping[str, Any]) -> None:
    for b in a["bufs"]:
        buf = c.bufs.pop(b)
        if buf.loading:
            c.loads_known = False
        if not c.live_mapped(b):
            # Freed and unmapped: the descriptors of its answered loads are needed by nothing now.
            c.released_files.extend(buf.answered_files)
        c.freed.add(b)


def _live_buf(c: Caller, a: Mapping[str, Any]) -> None:
    _buf(c, a["buf"])


def _map_ok(c: Caller, a: Mapping[str, Any]) -> None:
    buf = _usable(c, a["buf"])
    if a["map"] in c.maps:
        raise Illegal(f"mapping {a['map']} is live already")
    pages = _pages(_int(a["length"]), _int(a["offset"]))
    if max(pages) >= buf.pages:
        raise Illegal("the mapping reaches past the buffer")
    prot = _prot(a["prot"])
    if not prot <= buf.prot or not prot:
        raise Illegal("the mapping asks for protection the request did not have")


def _add_map(c: Caller, a: Mapping[str, Any]) -> None:
    c.maps[a["map"]] = Map(a["buf"], _pages(a["length"], a["offset"]), "WRITE" in _prot(a["prot"]))


def _access_ok(write: bool) -> Check:
    def precondition(c: Caller, a: Mapping[str, Any]) -> None:
        m = _map(c, a["map"])
        if not _pages(_int(a["length"]), _int(a["offset"])) <= m.pages:
            raise Illegal(f"{'map_write' if write else 'map_read'} of pages no longer mapped")
        if write and not m.writable:
            raise Illegal("a write through a read-only mapping")

    return precondition


def _unmap_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if not _pages(_int(a["length"]), _int(a["offset"])) <= _map(c, a["map"]).pages:
        raise Illegal("an unmap of pages not mapped")


def _unmap(c: Caller, a: Mapping[str, Any]) -> None:
    m = c.maps[a["map"]]
    m.pages -= _pages(a["length"], a["offset"])
    if not m.pages:
        del c.maps[a["map"]]


def _file_new_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] in c.created_files:
        raise Illegal(f"file {a['file']} is created twice")
    _int(a["size"])


def _file_new(c: Caller, a: Mapping[str, Any]) -> None:
    c.files[a["file"]] = a["size"]
    c.created_files.add(a["file"])


def _load_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _within_file(c, a, _usable(c, a["buf"]).pages)


def _load(c: Caller, a: Mapping[str, Any]) -> None:
    del c.files[a["fd"]]  # loadAsync owns the descriptor
    if a["onload"]:
        buf = c.bufs[a["buf"]]
        c.loads += 1
        buf.loading = True
        buf.unanswered_files.append(a["fd"])


def _await_load_ok(c: Caller, a: Mapping[str, Any]) -> None:
    count = _int(a["count"])
    if not c.loads_known or count > c.loads or count <= 0:
        raise Illegal(f"await_load of {count} onLoads when {c.loads} are owed"
                      + ("" if c.loads_known else " and a buffer was freed during its load"))


def _await_load(c: Caller, a: Mapping[str, Any]) -> None:
    if a["count"] == c.loads:
        for buf in c.bufs.values():
            buf.loading = False
            buf.answered_files += buf.unanswered_files
            buf.unanswered_files = []


def _await_preempt_ok(c: Caller, a: Mapping[str, Any]) -> None:
    count = _int(a["count"])
    if count > c.preempts or count <= 0:
        raise Illegal(f"await_preempt of {count} onPreempts when {c.preempts} are owed")


def _vnpu_ok(c: Caller, a: Mapping[str, Any]) -> None:
    command = str(a["command"])
    key, _, value = command.partition("=")
    if key in PREEMPT_KEYS:
        _buf(c, value)
        if c.live_mapped(value):
            raise Illegal(f"a preemption of {value} while it is mapped")
    elif key != "pressure":
        raise Illegal(f"vnpu command {command} is not one the fuzzer writes")


def _vnpu(c: Caller, a: Mapping[str, Any]) -> None:
    key, _, value = str(a["command"]).partition("=")
    if key in PREEMPT_KEYS:
        buf = c.bufs[value]
        if not buf.preempted and buf.onpreempt:
            c.preempts += 1
        buf.preempted = True
    else:
        c.pressure = True
        for buf in c.bufs.values():
            buf.preempted = True


def _closed_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] not in c.created_files:
        raise Illegal(f"await_closed of {a['file']}, which is not a file of the program")


def _closed(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] in c.released_files:
        c.released_files.remove(a["file"])


def _handles(steps: Sequence[Mapping[str, Any]]) -> set[str]:
    """The handle names the steps use (cookies by name, buffers of lists too)."""
    out: set[str] = set()
    for step in steps:
        ((op, args),) = step.items()
        for key, value in (args or {}).items():
            if key in _HANDLE_ARGS and isinstance(value, str) and not value.startswith("$"):
                out.add(f"{key}:{value}")
            elif key in ("reqs", "bufs"):
                out |= {f"{key[:-1]}:{v}" for v in value}
            elif key == "fd" and isinstance(value, str):
                out.add(f"file:{value}")
            elif op == "vnpu" and "=" in str(value):
                out.add(f"buf:{str(value).partition('=')[2]}")
    return out


def _threads_apart(c: Caller, lists: Sequence[Sequence[Mapping[str, Any]]]) -> None:
    seen: set[str] = set()
    for block in lists:
        used = _handles(block)
        if used & seen:
            raise Illegal(f"a parallel block uses {sorted(used & seen)[0]} from two threads")
        seen |= used


RULE_LIST: Final = (
    Rule("req_create", _create_unique, _create),
    Rule("req_free", _live_req, _free_req),
    Rule("req_set_device", _live_req, _setter("device", lambda a: a["device"] == "$pair.device")),
    Rule("req_set_type", _live_req, _setter("type", lambda a: a["type"] == "$pair.type")),
    Rule("req_set_size", _size_ok, _setter("size", lambda a: a["size"])),
    Rule("req_set_prot", _prot_ok, _setter("prot", lambda a: _prot(a["prot"]))),
    Rule("req_set_priority", _live_req),
    Rule("req_set_onalloc", _onalloc_ok, _setter("onalloc", lambda a: True)),
    Rule("req_set_onpreempt", _live_req, _setter("onpreempt", lambda a: bool(a["set"]))),
    Rule("req_set_cookie", _cookie_ok, _set_cookie),
    Rule("req_set_file", _segment_ok, _set_segment),
    Rule("cookie_new", _cookie_new_ok, lambda c, a: c.cookies.add(a["cookie"])),
    Rule("is_supported", _all_live),
    Rule("alloc", _alloc_ok, _alloc),
    Rule("await_alloc", _await_alloc_ok, _await_alloc),
    Rule("bind", _bind_ok, _bind),
    Rule("buf_free", _free_ok, _free),
    Rule("buf_set_priority", _live_buf),
    Rule("buf_map", _map_ok, _add_map),
    Rule("map_read", _access_ok(write=False)),
    Rule("map_write", _access_ok(write=True)),
    Rule("buf_unmap", _unmap_ok, _unmap),
    Rule("file_new", _file_new_ok, _file_new),
    Rule("buf_load", _load_ok, _load),
    Rule("await_load", _await_load_ok, _await_load),
    Rule("await_preempt", _await_preempt_ok),
    Rule("vnpu", _vnpu_ok, _vnpu),
    Rule("sleep_ms", _nothing),
    Rule("await_closed", _closed_ok, _closed),
    # Its threads' steps are taken after it, one by one (item_steps).
    Rule(PARALLEL, _threads_apart),
)
RULES: Final[Mapping[str, Rule]] = {rule.op: rule for rule in RULE_LIST}
