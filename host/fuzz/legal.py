"""Whether a fuzz program is one a caller may write: its steps replayed through a model of the caller's state.

The generator builds only legal programs; the shrinker edits them (drops steps, merges handles, shrinks
sizes) and an edit can leave a program that the text forbids or that the judge cannot judge: a step on a
request that was freed or never created, a buffer handle that was never bound (its allocation or bind
dropped) or already freed, a mapping that is not live or a page no longer mapped, a load longer than its
file, an onAlloc wait for callbacks nobody owes. Such a candidate may still give the same FAIL (the
defect shows before the illegal step), and keeping it would report an illegal program. ``check`` replays
the steps and names the first illegal one; the shrinker runs only candidates it accepts.

The caller's state follows docs/formats.md §2 and the text:
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

PAGE: Final = 4096
_CRASHING_OPS: Final = frozenset({"req_free_null", "req_set_onalloc_null_req", "cb_action"})
_HANDLE_ARGS: Final = ("req", "buf", "map", "file", "cookie")
# The commanded preemptions fuzz programs make: `preempt_late=` is `preempt=` with the onPreempt due later
# (docs/vnpu.md §7); to the caller both are the same preemption.
PREEMPT_KEYS: Final = frozenset({"preempt", "preempt_late"})


class Illegal(Exception):
    """A step the caller may not make in the state the earlier steps left."""


@dataclass
class _Req:
    device: bool = False
    type: bool = False
    size: int = 0
    prot: frozenset[str] = frozenset()
    onalloc: bool = False
    onpreempt: bool = False
    cookie: str | None = None  # a cookie handle name (None: an integer, NULL, or never set)
    submitted: bool = False
    segment: bool = False


@dataclass
class _Sub:
    cookie: str | None
    pages: int
    prot: frozenset[str]
    onpreempt: bool
    ok: bool  # a conforming device delivers a buffer
    unknown: bool = False  # submitted under pressure: it may or may not get one
    delivered: bool = False
    bound: bool = False


@dataclass
class _Buf:
    pages: int
    prot: frozenset[str]
    onpreempt: bool
    preempted: bool = False
    loading: bool = False


@dataclass
class _Map:
    buf: str
    pages: set[int]
    writable: bool


@dataclass
class _Caller:
    reqs: dict[str, _Req] = field(default_factory=dict)
    cookies: set[str] = field(default_factory=set)
    handed: set[str] = field(default_factory=set)  # cookie objects handed over with a deleter
    subs: list[_Sub] = field(default_factory=list)
    waits: list[list[_Sub]] = field(default_factory=list)  # the submissions each covering await delivered
    onallocs: int = 0
    bufs: dict[str, _Buf] = field(default_factory=dict)
    freed: set[str] = field(default_factory=set)
    maps: dict[str, _Map] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)  # files not handed over yet, with their size
    created_files: set[str] = field(default_factory=set)
    loads: int = 0
    loads_known: bool = True
    preempts: int = 0
    pressure: bool = False
    order_lost: bool = False  # a bind by cookie waited for one of several owed onAllocs


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


def _req(c: _Caller, name: str) -> _Req:
    req = c.reqs.get(name)
    if req is None:
        raise Illegal(f"request {name} is not live")
    return req


def _buf(c: _Caller, name: str) -> _Buf:
    buf = c.bufs.get(name)
    if buf is None:
        raise Illegal(f"buffer {name} is not bound" + (" (freed)" if name in c.freed else ""))
    return buf


def _usable(c: _Caller, name: str) -> _Buf:
    buf = _buf(c, name)
    if buf.preempted:
        raise Illegal(f"buffer {name} may have been preempted")
    return buf


def _map(c: _Caller, name: str) -> _Map:
    m = c.maps.get(name)
    if m is None:
        raise Illegal(f"mapping {name} is not live")
    return m


def _bind_nth(c: _Caller, k: int) -> _Sub:
    """The submission whose buffer the K-th successful onAlloc brings, when arrival order cannot change it.
    The onAllocs not awaited yet count as one more wait: the bind waits for them."""
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
            if wait is pending:
                _deliver(c, pending)
            return ok[0]
        seen += len(ok)
    raise Illegal(f"bind nth {k}: no such onAlloc owed")


def _deliver(c: _Caller, subs: list[_Sub]) -> None:
    """``subs`` have had their onAlloc (an await counted them, or a bind waited for them)."""
    for s in subs:
        s.delivered = True
    if subs:
        c.waits.append(subs)


def _bind_cookie(c: _Caller, cookie: Any) -> _Sub:
    """The submission a bind by cookie takes: delivered or still owed (the bind waits for it)."""
    match = [s for s in c.subs if s.ok and not s.bound and s.cookie == cookie]
    if not match or cookie is None:
        raise Illegal(f"bind by cookie {cookie}: no onAlloc with it left")
    sub = match[0]
    if any((s.pages, s.prot, s.onpreempt) != (sub.pages, sub.prot, sub.onpreempt) for s in match):
        raise Illegal(f"bind by cookie {cookie}: arrival order picks among different buffers")
    if not any(s.delivered for s in match):
        # The bind waits for the first of them to come. Where it stands among the other successes still
        # owed is known only when there are none: then it is the next one, else binds by position end.
        if len(match) == 1 and not any(not s.delivered and s.ok and s is not sub for s in c.subs):
            _deliver(c, [sub])
        else:
            c.order_lost = True
            for s in match:
                s.delivered = True
    return sub


def _step(c: _Caller, op: str, a: Mapping[str, Any]) -> None:
    if op in _CRASHING_OPS:
        raise Illegal(f"{op} is not an op of fuzz programs")
    if op == "req_create":
        if a["req"] in c.reqs:
            raise Illegal(f"request {a['req']} is created while live")
        c.reqs[a["req"]] = _Req()
    elif op == "req_free":
        _req(c, a["req"])
        del c.reqs[a["req"]]
    elif op == "req_set_device":
        _req(c, a["req"]).device = a["device"] == "$pair.device"
    elif op == "req_set_type":
        _req(c, a["req"]).type = a["type"] == "$pair.type"
    elif op == "req_set_size":
        size = _int(a["size"])
        _req(c, a["req"]).size = size
    elif op == "req_set_prot":
        _req(c, a["req"]).prot = _prot(a["prot"])
    elif op == "req_set_priority":
        _req(c, a["req"])
    elif op == "req_set_onalloc":
        if not a["set"]:
            raise Illegal("setOnAlloc(NULL) crashes")
        _req(c, a["req"]).onalloc = True
    elif op == "req_set_onpreempt":
        _req(c, a["req"]).onpreempt = bool(a["set"])
    elif op == "req_set_cookie":
        req = _req(c, a["req"])
        cookie = a["cookie"]
        if isinstance(cookie, str) and cookie not in c.cookies:
            raise Illegal(f"cookie {cookie} was never created")
        if a["deleter"] and isinstance(cookie, str):
            # A cookie object selects the buffer a bind by cookie takes: one hand-over each keeps that
            # choice the program's (NULL and integers, never selected, may be handed over again).
            if cookie in c.handed:
                raise Illegal(f"cookie {cookie!r} handed over with a deleter twice")
            c.handed.add(cookie)
        req.cookie = cookie if isinstance(cookie, str) else None
    elif op == "req_set_file":
        req = _req(c, a["req"])
        fd = a["fd"]
        if isinstance(fd, str):
            known = c.files.get(fd)
            if known is None:
                raise Illegal(f"file {fd} was never created")
            size = known
            offset, length, at = _int(a["file_offset"]), _int(a["length"]), _int(a["buffer_offset"])
            if offset < 0 or length <= 0 or offset + length > size or at < 0:
                raise Illegal("the segment does not lie within its file")
            del c.files[fd]  # the request owns the descriptor now
            req.segment = True
    elif op == "cookie_new":
        if a["cookie"] in c.cookies:
            raise Illegal(f"cookie {a['cookie']} is created twice")
        c.cookies.add(a["cookie"])
    elif op == "is_supported":
        for r in a["reqs"]:
            _req(c, r)
    elif op == "alloc":
        for r in a["reqs"]:
            req = _req(c, r)
            if not req.onalloc:
                raise Illegal(f"allocAsync of {r} without onAlloc crashes")
            valid = req.device and req.type and req.size > 0
            c.subs.append(_Sub(req.cookie, (req.size + PAGE - 1) // PAGE, req.prot, req.onpreempt,
                               valid and not c.pressure, unknown=valid and c.pressure))
            c.onallocs += 1
    elif op == "await_alloc":
        count = _int(a["count"])
        if count > c.onallocs or count <= 0:
            raise Illegal(f"await_alloc of {count} onAllocs when {c.onallocs} are owed")
        if count == c.onallocs:
            _deliver(c, [s for s in c.subs if not s.delivered])
    elif op == "bind":
        if a["buf"] in c.bufs or a["buf"] in c.freed:
            raise Illegal(f"buffer handle {a['buf']} is bound twice")
        select = a["select"]
        if "cookie" in select:
            sub = _bind_cookie(c, select["cookie"])
        else:
            sub = _bind_nth(c, _int(select["nth"]))
            if sub.bound:
                raise Illegal("bind nth: that buffer is bound already")
        sub.bound = True
        c.bufs[a["buf"]] = _Buf(sub.pages, sub.prot, sub.onpreempt)
    elif op == "buf_free":
        bufs = a["bufs"]
        if len(set(bufs)) != len(bufs):
            raise Illegal("a buffer freed twice in one call")
        for b in bufs:
            buf = _buf(c, b)
            if buf.loading:
                c.loads_known = False
            del c.bufs[b]
            c.freed.add(b)
    elif op == "buf_set_priority":
        _buf(c, a["buf"])
    elif op == "buf_map":
        buf = _usable(c, a["buf"])
        if a["map"] in c.maps:
            raise Illegal(f"mapping {a['map']} is live already")
        pages = _pages(_int(a["length"]), _int(a["offset"]))
        if max(pages) >= buf.pages:
            raise Illegal("the mapping reaches past the buffer")
        prot = _prot(a["prot"])
        if not prot <= buf.prot or not prot:
            raise Illegal("the mapping asks for protection the request did not have")
        c.maps[a["map"]] = _Map(a["buf"], pages, "WRITE" in prot)
    elif op in ("map_read", "map_write"):
        m = _map(c, a["map"])
        if not _pages(_int(a["length"]), _int(a["offset"])) <= m.pages:
            raise Illegal(f"{op} of pages no longer mapped")
        if op == "map_write" and not m.writable:
            raise Illegal("a write through a read-only mapping")
    elif op == "buf_unmap":
        m = _map(c, a["map"])
        pages = _pages(_int(a["length"]), _int(a["offset"]))
        if not pages <= m.pages:
            raise Illegal("an unmap of pages not mapped")
        m.pages -= pages
        if not m.pages:
            del c.maps[a["map"]]
    elif op == "file_new":
        if a["file"] in c.files:
            raise Illegal(f"file {a['file']} is created twice")
        c.files[a["file"]] = _int(a["size"])
        c.created_files.add(a["file"])
    elif op == "buf_load":
        buf = _usable(c, a["buf"])
        fd = a["fd"]
        known = c.files.get(fd) if isinstance(fd, str) else None
        if known is None:
            raise Illegal(f"load from {fd!r}, which is not a file of the program")
        size = known
        offset, length, at = _int(a["file_offset"]), _int(a["length"]), _int(a["buffer_offset"])
        if offset < 0 or length <= 0 or offset + length > size or at < 0 or at + length > buf.pages * PAGE:
            raise Illegal("the load does not lie within its file and its buffer")
        del c.files[fd]  # loadAsync owns the descriptor
        if a["onload"]:
            c.loads += 1
            buf.loading = True
    elif op == "await_load":
        count = _int(a["count"])
        if not c.loads_known or count > c.loads or count <= 0:
            raise Illegal(f"await_load of {count} onLoads when {c.loads} are owed"
                          + ("" if c.loads_known else " and a buffer was freed during its load"))
        if count == c.loads:
            for buf in c.bufs.values():
                buf.loading = False
    elif op == "await_preempt":
        count = _int(a["count"])
        if count > c.preempts or count <= 0:
            raise Illegal(f"await_preempt of {count} onPreempts when {c.preempts} are owed")
    elif op == "vnpu":
        command = str(a["command"])
        key, _, value = command.partition("=")
        if key in PREEMPT_KEYS:
            buf = _buf(c, value)
            if any(m.buf == value for m in c.maps.values()):
                raise Illegal(f"a preemption of {value} while it is mapped")
            if not buf.preempted and buf.onpreempt:
                c.preempts += 1
            buf.preempted = True
        elif key == "pressure":
            c.pressure = True
            for buf in c.bufs.values():
                buf.preempted = True
        else:
            raise Illegal(f"vnpu command {command} is not one the fuzzer writes")
    elif op == "sleep_ms":
        return
    elif op == "await_closed":
        if a["file"] not in c.created_files:
            raise Illegal(f"await_closed of {a['file']}, which is not a file of the program")
    else:
        raise Illegal(f"{op} is not an op of fuzz programs")


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


def check(program: Mapping[str, Any]) -> str | None:
    """None when every step is legal; else the first illegal step and why."""
    c = _Caller()
    n = 0
    for item in program["steps"]:
        if "parallel" in item:
            lists = item["parallel"]
            seen: set[str] = set()
            for block in lists:
                used = _handles(block)
                if used & seen:
                    return f"step {n}: a parallel block uses {sorted(used & seen)[0]} from two threads"
                seen |= used
            flat = [step for block in lists for step in block]
        else:
            flat = [item]
        for step in flat:
            ((op, args),) = step.items()
            try:
                _step(c, op, args or {})
            except (Illegal, KeyError, TypeError) as exc:
                return f"step {n} ({op}): {exc}"
            n += 1
    return None


def legal(program: Mapping[str, Any]) -> bool:
    return check(program) is None


def _positions(program: Mapping[str, Any], hit: Callable[[_Caller, str, Mapping[str, Any], int], bool]) -> list[int]:
    """Positions (in ``program["steps"]``) of the steps for which ``hit(state after the step, op, args,
    submissions before it)`` holds; the steps are replayed as ``check`` does, up to the first illegal one."""
    c = _Caller()
    out: list[int] = []
    for position, item in enumerate(program["steps"]):
        flat = [step for block in item["parallel"] for step in block] if "parallel" in item else [item]
        for step in flat:
            ((op, args),) = step.items()
            before = len(c.subs)
            try:
                _step(c, op, args or {})
            except (Illegal, KeyError, TypeError):
                return out
            if hit(c, op, args or {}, before) and position not in out:
                out.append(position)
    return out


def refusable_with_onpreempt(program: Mapping[str, Any]) -> list[int]:
    """Positions of the allocAsync steps that submit, with onPreempt in the snapshot, a request a conforming
    device may refuse: one without the pair's device and type or a size, or one submitted under pressure.
    Its onAlloc may fail, and then no onPreempt may follow (preempt-callback-on-forced-dealloc); one that
    comes anyway comes after that onAlloc, so only a program that waits for the onAlloc and then pauses
    shows it before teardown."""
    return _positions(program, lambda c, op, a, before: op == "alloc"
                      and any(s.onpreempt and not s.ok for s in c.subs[before:]))


def preempted_without_onpreempt(program: Mapping[str, Any]) -> list[int]:
    """Positions of the commanded preemptions (`vnpu preempt=`, `preempt_late=`) of a buffer whose snapshot had
    no onPreempt: none may come (req-onpreempt-default-null, also when the request's onPreempt was set
    after allocAsync), and one that comes anyway comes on the device's thread after the command, so only
    a pause after the command shows it before teardown."""
    def hit(c: _Caller, op: str, a: Mapping[str, Any], before: int) -> bool:
        key, _, value = str(a.get("command", "")).partition("=")
        return op == "vnpu" and key in PREEMPT_KEYS and not c.bufs[value].onpreempt

    return _positions(program, hit)
