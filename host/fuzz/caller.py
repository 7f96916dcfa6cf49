"""The one model of a fuzz program's caller: its state, and one rule per op (a precondition, an effect).

The generator draws its next steps from this state and makes each through ``Caller.take``; the legality
check (host.fuzz.legal) replays a program through the same ``take``, so the shrinker refuses what the
generator could not make. A rule's precondition raises ``Illegal`` naming why the step may not be made
in the state the earlier steps left; its effect changes the state as the step does. An op without a rule
(wait_return, hold, map_gone of a range still mapped...) is not one a fuzz program makes.

The state follows docs/formats.md §2 and the text; what a conforming device answers to each argument
(granted, refused, either) is host.fuzz.answers':
- requests: created once (a live name is not created again), used only while live; every setter may be
  called again (the last value counts); a request lent to a callback's allocAsync (cb_action alloc_) is
  never used again by the program;
- documented crashes (setOnAlloc(NULL), setOnAlloc of a NULL request, allocAsync of a request without
  onAlloc, loadAsync with onLoad NULL): only as a program's last step, the process dies there;
- cookies: a `cookie_new` handle exists once created (created once). A cookie object is handed over with
  a deleter at most once, since a bind by cookie selects the buffer by it (the text allows more:
  cookie-shared-refcounted); NULL and integers, which no bind selects, may be handed over again (the
  judge considers every unheld hand-over of a value a deleter may be for);
- allocations: a submission brings a buffer the caller may bind only when every conforming device grants
  it (answers.request_answer); a bind by cookie takes an onAlloc with that cookie not yet bound, delivered
  or still owed (the bind waits for it), a bind by position (`nth`) only when arrival order cannot change
  it (the K-th success is the only one of its wait, or the only one still owed when the bind waits for it);
- buffers: used only between their bind and their free, and not once a callback's action took them;
  loaded only while not (maybe) preempted; a map is made with any arguments, and only a map every
  conforming device grants gives a mapping the program uses (answers.map_answer); one that may be
  granted leaves the buffer maybe mapped (no commanded preemption then);
- mappings: read, written (writable ones only) and unmapped only on pages still mapped; a mapping stays
  valid after its buffer's free until unmapped (free-mapping-valid); `map_gone` only of a mapping
  unmapped whole, while nothing else of its buffer may be mapped;
- files: created once; a load or segment lies within its file; a file is sought only before its hand-over;
- callbacks' actions (cb_action): armed for a kind only while no callback of that kind is owed, so the
  callbacks the action reaches are those of the steps after it; a buffer a buffer action may reach is
  never used again by the program (teardown frees it, after the callbacks that run actions have ended);
- waits: at most the callbacks owed (an onLoad is not counted on once a buffer was freed during a load;
  an onPreempt only from a commanded preemption, `preempt=` or `preempt_late=`, of an unmapped buffer whose
  request had onPreempt, and none once a preemption may or may not have happened);
- parallel blocks: no handle used by two threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from reference_model.vocabulary import CALLBACK_KINDS

from .answers import (
    EITHER,
    GRANTED,
    INVALID,
    PAGE,
    REFUSED,
    VALID_PROT,
    device_value,
    is_int,
    map_answer,
    pages_of,
    priority_in_range,
    prot_bits,
    prot_names,
    request_answer,
    type_value,
    within,
)

# The commanded preemptions fuzz programs make: `preempt_late=` is `preempt=` with the onPreempt due later
# (docs/vnpu.md §7); to the caller both are the same preemption.
PREEMPT_KEYS: Final = frozenset({"preempt", "preempt_late"})
LOWEST: Final = "lowest"  # `preempt=lowest`: the device chooses the victim, the lowest priority
PARALLEL: Final = "parallel"  # the YAML form of a par_begin .. par_end block
_HANDLE_ARGS: Final = ("req", "buf", "map", "file", "cookie")
# The cb_actions a fuzz program arms: the buffer actions reach the callback's buffer, alloc_<req> submits a
# request again from inside the callback, the others call nothing the program holds.
BUFFER_ACTIONS: Final = ("free_buf", "set_priority_", "map_unmap")
QUIET_ACTIONS: Final = ("new_request", "sleep_")
ALLOC_ACTION: Final = "alloc_"


class Illegal(Exception):
    """A step the caller may not make in the state the earlier steps left."""


@dataclass
class Req:
    device: str = INVALID  # the default is negative (req-device-default-negative)
    type: str = INVALID  # the default is UNKNOWN (req-type-default-unknown)
    size: int = 0
    prot: frozenset[str] = frozenset({"READ"})  # the default is PROT_READ
    prot_valid: bool = True
    priority_ok: bool = True
    onalloc: bool = False
    onpreempt: bool = False
    cookie: str | None = None  # a cookie handle name (None: an integer, NULL, or never set)
    segment: str = "none"  # none, or the answer a file segment leaves (granted when it fits, else either)
    segment_end: int = 0  # the buffer byte a fitting segment reaches
    setters: set[str] = field(default_factory=set)  # the setter ops called on it so far
    submitted: bool = False
    refused: bool = False  # its last submission was refused by every conforming device
    asked: str = "no"  # isSupported: no, asked (unchanged since), changed (a setter since)


@dataclass
class Sub:
    """One request's submission (allocAsync), with the snapshot it took."""

    cookie: str | None
    pages: int
    prot: frozenset[str]
    onpreempt: bool
    ok: bool  # every conforming device delivers a buffer
    unknown: bool = False  # a conforming device may or may not deliver one
    bytes: int = 0  # the memory it may hold (counted against a declared capacity)
    delivered: bool = False
    bound: bool = False
    # A callback's action takes its buffer (cb_action): the probe's bind would still select it, so its cookie
    # and its place in arrival order bind nothing.
    taken: bool = False


@dataclass
class Buf:
    pages: int
    prot: frozenset[str]
    onpreempt: bool
    preempted: bool = False  # maybe preempted: commanded, or pressure
    surely_preempted: bool = False  # a commanded preemption of an unmapped buffer
    preempt_seen: bool = False  # its onPreempt was awaited
    loading: bool = False
    maybe_mapped: bool = False  # a map that may have been granted, not used by the program
    unanswered_files: list[str] = field(default_factory=list)  # loaded with onLoad not awaited yet
    answered_files: list[str] = field(default_factory=list)  # loaded with onLoad awaited
    bytes: int = 0


@dataclass
class Map:
    buf: str
    pages: set[int]  # the pages still mapped, counted from the mapping's start (as map_read's offsets are)
    writable: bool
    readable: bool = True
    private: bool = False
    extent: int = 0  # the pages it mapped when made
    whole: bool = False  # it mapped its whole buffer


@dataclass
class Caller:
    reqs: dict[str, Req] = field(default_factory=dict)
    lent: dict[str, Req] = field(default_factory=dict)  # requests a callback's allocAsync holds
    cookies: set[str] = field(default_factory=set)
    handed: set[str] = field(default_factory=set)  # cookie objects handed over with a deleter
    raw_cookies: list[int] = field(default_factory=list)  # integer cookies handed over so far
    subs: list[Sub] = field(default_factory=list)
    waits: list[list[Sub]] = field(default_factory=list)  # the submissions each covering await delivered
    onallocs: int = 0
    bufs: dict[str, Buf] = field(default_factory=dict)
    freed: set[str] = field(default_factory=set)
    retired: set[str] = field(default_factory=set)  # buffers a callback's action may reach
    freed_requests: int = 0
    maps: dict[str, Map] = field(default_factory=dict)  # live mappings, of freed buffers too
    dead_maps: set[str] = field(default_factory=set)  # maps refused or maybe granted: never used
    refused_maps: set[str] = field(default_factory=set)  # buffers a map of was refused
    failed_loads: set[str] = field(default_factory=set)  # buffers a load into failed (they were mapped)
    gone: dict[str, Map] = field(default_factory=dict)  # mappings unmapped whole
    files: dict[str, int] = field(default_factory=dict)  # files not handed over yet, with their size
    created_files: set[str] = field(default_factory=set)
    sought: set[str] = field(default_factory=set)  # files whose position a file_seek moved
    # Descriptors of answered loads into buffers freed unmapped: nothing needs them, the owner closes them.
    released_files: list[str] = field(default_factory=list)
    loads: int = 0
    loads_awaited: int = 0
    loads_known: bool = True  # False once a buffer was freed during its load (its onLoad is not counted on)
    preempts: int = 0
    preempts_awaited: int = 0
    preempts_exact: bool = True  # False once an onPreempt may come that is not counted in `preempts`
    pressure: bool = False
    order_lost: bool = False  # a bind by cookie waited for one of several owed onAllocs
    armed: dict[str, list[Any]] = field(default_factory=dict)  # callback kind -> [action, uses left]
    died: str | None = None  # the documented crash the program's last step asked for
    # With a declared capacity: the memory every conforming device still has for the program (what it may
    # hold is taken at each submission, given back only at a free or a last unmap it surely made); None
    # without one, where only small requests are surely granted.
    room: int | None = None
    mapped_bytes: dict[str, int] = field(default_factory=dict)  # freed buffers' memory, held until unmapped

    def take(self, op: str, args: Any) -> None:
        """Make one step: its rule's precondition, then its effect (a parallel item: its threads' steps
        follow, see ``item_steps``)."""
        if self.died is not None:
            raise Illegal(f"a step after a documented crash ({self.died})")
        rule = RULES.get(op)
        if rule is None:
            raise Illegal(f"{op} is not an op of fuzz programs")
        rule.precondition(self, args)
        rule.effect(self, args)

    def allows(self, op: str, args: Any) -> bool:
        """Whether the step's precondition holds now (the state is left as it is)."""
        rule = RULES.get(op)
        if rule is None or self.died is not None:
            return False
        try:
            rule.precondition(self, args)
        except (Illegal, KeyError, TypeError, ValueError):
            return False
        return True

    def live_mapped(self, buf: str) -> bool:
        return any(m.buf == buf for m in self.maps.values())

    def owed(self, kind: str) -> bool:
        """Whether a callback of ``kind`` may still come for the steps so far."""
        if kind == "alloc":
            return any(not s.delivered for s in self.subs)
        if kind == "load":
            return not self.loads_known or self.loads_awaited < self.loads
        return not self.preempts_exact or self.preempts_awaited < self.preempts


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

def _int(value: Any) -> int:
    if not is_int(value):
        raise Illegal(f"{value!r} is not an integer")
    return int(value)


def _within(offset: Any, length: Any, pages: set[int]) -> bool:
    """Whether a byte range of a mapping (offset and length > 0 in bytes) lies on ``pages``."""
    offset, length = _int(offset), _int(length)
    if offset < 0 or length <= 0:
        raise Illegal(f"range {offset}+{length} is empty or negative")
    return within(offset, length, pages)


def _prot(value: Any) -> int:
    try:
        return prot_bits(value)
    except (ValueError, KeyError):
        raise Illegal(f"protection {value!r} is not one the fuzzer writes") from None


def _req(c: Caller, name: str) -> Req:
    req = c.reqs.get(name)
    if req is None:
        lent = " (lent to a callback's allocAsync)" if name in c.lent else ""
        raise Illegal(f"request {name} is not live{lent}")
    return req


def _buf(c: Caller, name: str) -> Buf:
    buf = c.bufs.get(name)
    if buf is None:
        why = " (freed)" if name in c.freed else " (a callback's action may reach it)" if name in c.retired else ""
        raise Illegal(f"buffer {name} is not bound{why}")
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


def _file_ok(c: Caller, fd: Any, offset: Any, length: Any) -> None:
    """A file handed over for a segment or a load: created, not handed over yet, the range within it
    (a length of 0 or below is a class of its own, the text answers it)."""
    if not isinstance(fd, str) or fd not in c.created_files:
        raise Illegal(f"file {fd!r} was never created")
    size = c.files.get(fd)
    if size is None:
        raise Illegal(f"file {fd!r} was handed over already")
    offset, length = _int(offset), _int(length)
    if offset < 0 or offset + max(length, 0) > size:
        raise Illegal("the range does not lie within its file")


def _literal_fd(fd: Any) -> int | None:
    """A literal descriptor (`{fd: -1}`), or None for a file handle."""
    if isinstance(fd, Mapping):
        return _int(fd.get("fd"))
    return None


# --- requests and cookies ----------------------------------------------------------------------------

def _create_unique(c: Caller, a: Mapping[str, Any]) -> None:
    if a["req"] in c.reqs or a["req"] in c.lent:
        raise Illegal(f"request {a['req']} is created while live")


def _create(c: Caller, a: Mapping[str, Any]) -> None:
    c.reqs[a["req"]] = Req()


def _live_req(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])


def _free_req(c: Caller, a: Mapping[str, Any]) -> None:
    del c.reqs[a["req"]]
    c.freed_requests += 1


def _setter(op: str, attribute: str, value: Callable[[Mapping[str, Any]], Any]) -> Check:
    """A request setter's effect: the field takes the last value."""
    def effect(c: Caller, a: Mapping[str, Any]) -> None:
        req = c.reqs[a["req"]]
        setattr(req, attribute, value(a))
        _touched(req, op)

    return effect


# The fields isSupported ignores (support-ignored-fields): setting them leaves its answer as it was.
_IGNORED_BY_SUPPORT: Final = frozenset({"req_set_cookie", "req_set_onalloc", "req_set_onpreempt"})


def _touched(req: Req, op: str) -> None:
    req.setters.add(op)
    if req.asked != "no" and op not in _IGNORED_BY_SUPPORT:
        req.asked = "changed"


def _int_ok(key: str) -> Check:
    def precondition(c: Caller, a: Mapping[str, Any]) -> None:
        _req(c, a["req"])
        value = a[key]
        if not (is_int(value) or (isinstance(value, str) and value.startswith("$"))):
            raise Illegal(f"{key} {value!r} is not an integer")

    return precondition


def _prot_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])
    _prot(a["prot"])


def _set_prot(c: Caller, a: Mapping[str, Any]) -> None:
    req = c.reqs[a["req"]]
    bits = _prot(a["prot"])
    req.prot, req.prot_valid = prot_names(bits), not bits & ~VALID_PROT
    _touched(req, "req_set_prot")


def _onalloc(c: Caller, a: Mapping[str, Any]) -> None:
    if not a["set"]:
        c.died = "setOnAlloc(NULL) crashes"
        return
    _setter("req_set_onalloc", "onalloc", lambda a: True)(c, a)


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
    if is_int(cookie):
        c.raw_cookies.append(cookie)
    req = c.reqs[a["req"]]
    req.cookie = cookie if isinstance(cookie, str) else None
    _touched(req, "req_set_cookie")


def _segment_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _req(c, a["req"])
    if _literal_fd(a["fd"]) is None:
        _file_ok(c, a["fd"], a["file_offset"], a["length"])
    elif _literal_fd(a["fd"]) != -1:
        raise Illegal("a request's descriptor is a file of the program or -1")
    _int(a["buffer_offset"])


def _set_segment(c: Caller, a: Mapping[str, Any]) -> None:
    req = c.reqs[a["req"]]
    if _literal_fd(a["fd"]) is None:
        del c.files[a["fd"]]  # the request owns the descriptor now
        length, at = a["length"], a["buffer_offset"]
        req.segment = GRANTED if length >= 0 and at >= 0 else EITHER  # a negative value: R17
        req.segment_end = max(0, at) + max(0, length)
    else:
        req.segment, req.segment_end = "none", 0  # -1: no file, the other values ignored
    _touched(req, "req_set_file")


def _cookie_new_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["cookie"] in c.cookies:
        raise Illegal(f"cookie {a['cookie']} is created twice")


def _all_live(c: Caller, a: Mapping[str, Any]) -> None:
    for r in a["reqs"]:
        _req(c, r)


def _asked(c: Caller, a: Mapping[str, Any]) -> None:
    for r in a["reqs"]:
        c.reqs[r].asked = "asked"


# --- allocations and binds ---------------------------------------------------------------------------

def answer_of(c: Caller, req: Req) -> str:
    """What every conforming device answers to allocAsync of ``req`` now (host.fuzz.answers)."""
    segment = req.segment
    if segment == GRANTED and req.segment_end > req.size:
        segment = EITHER  # a segment past the buffer's end: L_SEGMENT_CLIPPED loads what fits
    return request_answer(req.device, req.type, req.size, req.prot_valid, req.priority_ok, segment, c.pressure,
                          c.room)


def _submission(c: Caller, req: Req, taken: bool = False) -> Sub:
    answer = answer_of(c, req)
    held = _bytes(req.size) if answer != REFUSED else 0
    if c.room is not None:
        c.room = max(0, c.room - held)  # given back only when the program frees it (see _give_back)
    return Sub(req.cookie, max(0, req.size) // PAGE, req.prot, req.onpreempt, answer == GRANTED,
               unknown=answer == EITHER, taken=taken, bytes=held)


def _bytes(size: int) -> int:
    """The memory a request of ``size`` bytes may hold: whole pages (a device may round up)."""
    return -(-max(0, size) // PAGE) * PAGE


def _alloc(c: Caller, a: Mapping[str, Any]) -> None:
    if any(not c.reqs[r].onalloc for r in a["reqs"]):
        c.died = "allocAsync of a request without onAlloc crashes"
        return
    action, left = c.armed.get("alloc", (None, 0))
    taken = action is not None and action.startswith(BUFFER_ACTIONS)
    for r in a["reqs"]:
        req = c.reqs[r]
        req.refused = answer_of(c, req) == REFUSED
        c.subs.append(_submission(c, req, taken=taken))
        c.onallocs += 1
        req.submitted = True
    if action is not None and action.startswith(ALLOC_ACTION) and a["reqs"] and left:
        # Each onAlloc submits the lent request again, whose onAlloc does too, until the uses are spent.
        lent = c.lent[action[len(ALLOC_ACTION):]]
        for _ in range(left):
            c.subs.append(_submission(c, lent, taken=True))
            c.onallocs += 1
        c.armed["alloc"][1] = 0


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
            if ok[0].bound or ok[0].taken:
                raise Illegal("bind nth: that buffer is bound already, or a callback's action took it")
            return ok[0], wait is pending
        seen += len(ok)
    raise Illegal(f"bind nth {k}: no such onAlloc owed")


def _by_cookie(c: Caller, cookie: Any) -> list[Sub]:
    """The submissions a bind by cookie may take (the first is taken): delivered or still owed."""
    match = [s for s in c.subs if s.ok and not s.bound and s.cookie == cookie]
    if not match or cookie is None:
        raise Illegal(f"bind by cookie {cookie}: no onAlloc with it left")
    if any(s.taken and s.cookie == cookie for s in c.subs):
        raise Illegal(f"bind by cookie {cookie}: a callback's action took a buffer with it")
    first = match[0]
    if any((s.pages, s.prot, s.onpreempt) != (first.pages, first.prot, first.onpreempt) for s in match):
        raise Illegal(f"bind by cookie {cookie}: arrival order picks among different buffers")
    if any(not s.ok and not s.bound and s.cookie == cookie and s.unknown for s in c.subs):
        raise Illegal(f"bind by cookie {cookie}: a submission that may succeed carries it too")
    return match


def _bind_ok(c: Caller, a: Mapping[str, Any]) -> None:
    name = a["buf"]
    if name in c.bufs or name in c.freed or name in c.retired:
        raise Illegal(f"buffer handle {name} is bound twice")
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
    c.bufs[a["buf"]] = Buf(sub.pages, sub.prot, sub.onpreempt, bytes=sub.bytes)


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
        if not c.live_mapped(b) and not buf.maybe_mapped:
            # Freed and unmapped: the descriptors of its answered loads are needed by nothing now.
            c.released_files.extend(buf.answered_files)
            if not buf.loading:
                _give_back(c, buf.bytes)
        elif c.live_mapped(b) and not buf.maybe_mapped and not buf.loading:
            c.mapped_bytes[b] = buf.bytes  # its memory goes with its last unmap (free-memory-after-last-unmap)
        c.freed.add(b)


def _give_back(c: Caller, held: int) -> None:
    """Memory the program let go of, surely (a free, a freed buffer's last unmap)."""
    if c.room is not None and not c.pressure:
        c.room += held


def _retire(c: Caller, name: str) -> None:
    """A callback's action may reach the buffer from now on: the program leaves it to teardown."""
    buf = c.bufs.pop(name)
    if buf.loading and name not in c.retired:
        buf.loading = False
    c.retired.add(name)


def _live_buf(c: Caller, a: Mapping[str, Any]) -> None:
    _buf(c, a["buf"])


def _new_map_name(c: Caller, name: str) -> None:
    if name in c.maps or name in c.dead_maps or name in c.gone:
        raise Illegal(f"mapping name {name} is used already")


def _map_ok(c: Caller, a: Mapping[str, Any]) -> None:
    _buf(c, a["buf"])
    _new_map_name(c, a["map"])
    _prot(a["prot"])
    for key in ("length", "offset"):
        _int(a[key])
    if not isinstance(a["flags"], list) and not is_int(a["flags"]):
        raise Illegal(f"map flags {a['flags']!r} are not ones the fuzzer writes")


def map_answer_now(c: Caller, a: Mapping[str, Any]) -> str:
    buf = c.bufs[a["buf"]]
    return map_answer(a, buf.pages, buf.prot, buf.preempted, buf.surely_preempted, buf.loading)


def _add_map(c: Caller, a: Mapping[str, Any]) -> None:
    answer = map_answer_now(c, a)
    if answer == GRANTED:
        asked = prot_names(prot_bits(a["prot"]))
        pages = pages_of(0, a["length"])
        whole = a["offset"] == 0 and a["length"] == c.bufs[a["buf"]].pages * PAGE
        c.maps[a["map"]] = Map(a["buf"], pages, "WRITE" in asked, "READ" in asked, a["flags"] == ["PRIVATE"],
                               len(pages), whole)
        return
    c.dead_maps.add(a["map"])
    if answer == EITHER:
        c.bufs[a["buf"]].maybe_mapped = True
    else:
        c.refused_maps.add(a["buf"])


def _access_ok(write: bool) -> Check:
    def precondition(c: Caller, a: Mapping[str, Any]) -> None:
        m = _map(c, a["map"])
        if not _within(a["offset"], a["length"], m.pages):
            raise Illegal(f"{'map_write' if write else 'map_read'} of pages no longer mapped")
        if write and not m.writable:
            raise Illegal("a write through a read-only mapping")
        if not write and not m.readable:
            raise Illegal("a read through a mapping without PROT_READ")

    return precondition


def _unmap_ok(c: Caller, a: Mapping[str, Any]) -> None:
    m = _map(c, a["map"])
    offset = _int(a["offset"])
    if offset % PAGE:
        return  # refused like munmap: nothing changes (model: unmapped_span)
    if not _within(offset, a["length"], m.pages):
        raise Illegal("an unmap of pages not mapped")


def _unmap(c: Caller, a: Mapping[str, Any]) -> None:
    if a["offset"] % PAGE:
        return
    m = c.maps[a["map"]]
    m.pages -= pages_of(a["offset"], a["length"])
    if not m.pages:
        c.gone[a["map"]] = c.maps.pop(a["map"])
        if m.buf in c.mapped_bytes and not c.live_mapped(m.buf):
            _give_back(c, c.mapped_bytes.pop(m.buf))


def _gone_ok(c: Caller, a: Mapping[str, Any]) -> None:
    """map_gone looks at an unmapped range; the probe skips it while the scenario may still map any of
    those bytes, so only a mapping unmapped whole, while its buffer has no other mapping, maybe or not."""
    m = c.gone.get(a["map"])
    if m is None:
        raise Illegal(f"map_gone of {a['map']}, which is not a mapping unmapped whole")
    if not _within(a["offset"], a["length"], set(range(m.extent))):
        raise Illegal("map_gone beyond the mapping")
    buf = c.bufs.get(m.buf)
    if c.live_mapped(m.buf) or (buf is not None and buf.maybe_mapped) or m.buf in c.retired:
        raise Illegal(f"map_gone while buffer {m.buf} may still be mapped")


def _prot_look_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if not _within(a["offset"], a["length"], _map(c, a["map"]).pages):
        raise Illegal("map_prot of pages not mapped")


def _file_new_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] in c.created_files:
        raise Illegal(f"file {a['file']} is created twice")
    _int(a["size"])


def _file_new(c: Caller, a: Mapping[str, Any]) -> None:
    c.files[a["file"]] = a["size"]
    c.created_files.add(a["file"])


def _seek_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] not in c.files:
        raise Illegal(f"file_seek of {a['file']}, which is not a file the program still holds")
    _int(a["position"])


def _created_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] not in c.created_files:
        raise Illegal(f"{a['file']} is not a file of the program")


def _load_ok(c: Caller, a: Mapping[str, Any]) -> None:
    buf = _usable(c, a["buf"])
    fd = _literal_fd(a["fd"])
    if fd is None:
        _file_ok(c, a["fd"], a["file_offset"], a["length"])
    elif fd != -1:
        raise Illegal("a load's descriptor is a file of the program or -1")
    at = _int(a["buffer_offset"])
    if at < 0 or at + max(_int(a["length"]), 0) > buf.pages * PAGE:
        raise Illegal("the load does not lie within its buffer")


def _load(c: Caller, a: Mapping[str, Any]) -> None:
    if not a["onload"]:
        c.died = "loadAsync with onLoad NULL crashes"
        return
    if _literal_fd(a["fd"]) is None:
        del c.files[a["fd"]]  # loadAsync owns the descriptor
    if c.live_mapped(a["buf"]):
        c.failed_loads.add(a["buf"])  # load-no-existing-mapping
    buf = c.bufs[a["buf"]]
    c.loads += 1
    buf.loading = True
    if _literal_fd(a["fd"]) is None:
        buf.unanswered_files.append(a["fd"])
    _reach(c, "load", a["buf"])


def _await_load_ok(c: Caller, a: Mapping[str, Any]) -> None:
    count = _int(a["count"])
    if not c.loads_known or count > c.loads or count <= 0:
        raise Illegal(f"await_load of {count} onLoads when {c.loads} are owed"
                      + ("" if c.loads_known else " and a buffer was freed during its load"))


def _await_load(c: Caller, a: Mapping[str, Any]) -> None:
    c.loads_awaited = max(c.loads_awaited, a["count"])
    if a["count"] == c.loads:
        for buf in c.bufs.values():
            buf.loading = False
            buf.answered_files += buf.unanswered_files
            buf.unanswered_files = []


def _await_preempt_ok(c: Caller, a: Mapping[str, Any]) -> None:
    count = _int(a["count"])
    if count > c.preempts or count <= 0:
        raise Illegal(f"await_preempt of {count} onPreempts when {c.preempts} are owed")


def _await_preempt(c: Caller, a: Mapping[str, Any]) -> None:
    c.preempts_awaited = max(c.preempts_awaited, a["count"])
    if a["count"] == c.preempts:
        for buf in c.bufs.values():
            buf.preempt_seen = buf.preempt_seen or (buf.surely_preempted and buf.onpreempt)


def _vnpu_ok(c: Caller, a: Mapping[str, Any]) -> None:
    command = str(a["command"])
    key, _, value = command.partition("=")
    if key == "preempt" and value == LOWEST:
        if "preempt" in c.armed:
            raise Illegal("preempt=lowest (its victim the device's choice) while onPreempt has an action armed")
    elif key in PREEMPT_KEYS:
        buf = _buf(c, value)
        if buf.maybe_mapped and not c.live_mapped(value) and "preempt" in c.armed:
            raise Illegal(f"a preemption of {value}, maybe mapped, while onPreempt has an action armed")
    elif key == "pressure":
        if "preempt" in c.armed:
            raise Illegal("pressure while onPreempt has an action armed")
    else:
        raise Illegal(f"vnpu command {command} is not one the fuzzer writes")


def _vnpu(c: Caller, a: Mapping[str, Any]) -> None:
    key, _, value = str(a["command"]).partition("=")
    if key not in PREEMPT_KEYS:
        c.pressure = True
        c.room = None if c.room is None else 0
        for buf in c.bufs.values():
            buf.preempted = True
            if buf.onpreempt and not buf.surely_preempted:
                c.preempts_exact = False  # pressure may preempt it, or not
        return
    if value == LOWEST:
        _lowest(c)
        return
    buf = c.bufs[value]
    if c.live_mapped(value):
        return  # never while mapped (preempt-never-while-mapped): the command is refused
    if buf.maybe_mapped or (buf.loading and not buf.preempted):
        # Maybe mapped, or maybe loading: the published vnpu refuses a buffer with a load in flight (EBUSY)
        # where aosp-2026 preempts it, so its onPreempt may come or not; none is owed.
        buf.preempted = True
        if buf.onpreempt and not buf.surely_preempted:
            c.preempts_exact = False
        return
    if not buf.preempted and buf.onpreempt:
        c.preempts += 1
        _reach(c, "preempt", value)
    elif buf.onpreempt and not buf.surely_preempted:
        c.preempts_exact = False  # preempted by pressure before, or now: one onPreempt, or none
    buf.preempted = buf.surely_preempted = True


def lowest_victims(c: Caller) -> list[Buf]:
    """The buffers `preempt=lowest` may take now: the bound ones unmapped and not preempted yet."""
    return [b for name, b in c.bufs.items() if not c.live_mapped(name) and not b.preempted]


def lowest_certain(c: Caller) -> bool:
    """Whether the onPreempt of whichever buffer `preempt=lowest` takes is owed: every candidate has
    onPreempt in its snapshot (and is not maybe mapped), and no buffer the program did not bind may be the
    victim. Otherwise the probe's teardown cannot tell either and waits out its whole settle for one."""
    unbound = bool(c.retired) or any((s.ok and not s.bound) or s.unknown or s.taken for s in c.subs)
    return not unbound and all(b.onpreempt and not b.maybe_mapped for b in lowest_victims(c))


def _lowest(c: Caller) -> None:
    """`preempt=lowest`: the device preempts one unmapped buffer of its choice (the lowest priority), so every
    unmapped buffer may be preempted now. One onPreempt is owed when whichever it takes has onPreempt in its
    snapshot (``lowest_certain``)."""
    candidates = lowest_victims(c)
    unbound = bool(c.retired) or any((s.ok and not s.bound) or s.unknown or s.taken for s in c.subs)
    certain = bool(candidates) and lowest_certain(c)
    for b in candidates:
        b.preempted = True
    if certain:
        c.preempts += 1
    elif candidates or unbound:
        c.preempts_exact = False


def _closed_ok(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] not in c.created_files:
        raise Illegal(f"await_closed of {a['file']}, which is not a file of the program")
    if a["file"] in c.files:
        raise Illegal(f"await_closed of {a['file']}, which the program still holds: it would wait its whole time")


def _closed(c: Caller, a: Mapping[str, Any]) -> None:
    if a["file"] in c.released_files:
        c.released_files.remove(a["file"])


# --- callbacks' actions (cb_action) ------------------------------------------------------------------

def _arm_ok(c: Caller, a: Mapping[str, Any]) -> None:
    kind, action, count = a["kind"], str(a["action"]), _int(a["count"])
    if kind not in CALLBACK_KINDS:
        raise Illegal(f"cb_action of {kind!r}, not a callback kind")
    if action == "none":
        if count:
            raise Illegal("cb_action none takes count 0")
        return
    if count < 1:
        raise Illegal("cb_action takes a count of at least 1")
    if not action.startswith((*BUFFER_ACTIONS, *QUIET_ACTIONS, ALLOC_ACTION)):
        raise Illegal(f"cb_action {action} is not one the fuzzer writes")
    if kind in c.armed:
        raise Illegal(f"cb_action for {kind} callbacks while one is armed")
    if c.owed(kind):
        raise Illegal(f"cb_action for {kind} callbacks while one is owed: which one it reaches is a race")
    if action.startswith(ALLOC_ACTION) and not _req(c, action[len(ALLOC_ACTION):]).onalloc:
        raise Illegal(f"cb_action {action}: the request has no onAlloc")


def _arm(c: Caller, a: Mapping[str, Any]) -> None:
    kind, action = a["kind"], str(a["action"])
    if action == "none":
        c.armed.pop(kind, None)
        return
    c.armed[kind] = [action, a["count"]]
    if action.startswith(ALLOC_ACTION):
        name = action[len(ALLOC_ACTION):]
        c.lent[name] = c.reqs.pop(name)


def _reach(c: Caller, kind: str, buf: str) -> None:
    """A callback of ``kind`` comes for ``buf`` (an onLoad, an onPreempt owed): what the armed action does."""
    armed = c.armed.get(kind)
    if armed is None:
        return
    action, left = armed
    if action.startswith(BUFFER_ACTIONS):
        _retire(c, buf)
    elif action.startswith(ALLOC_ACTION) and left:
        c.subs.append(_submission(c, c.lent[action[len(ALLOC_ACTION):]], taken=True))
        c.onallocs += 1
        armed[1] = left - 1


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
        if any(op in ("cb_action", "vnpu") for step in block for op in step):
            raise Illegal("a parallel block arms callbacks or commands the device")


def _died(reason: str) -> Check:
    def effect(c: Caller, a: Mapping[str, Any]) -> None:
        c.died = reason

    return effect


RULE_LIST: Final = (
    Rule("req_create", _create_unique, _create),
    Rule("req_free", _live_req, _free_req),
    Rule("req_free_null", _nothing),
    Rule("req_set_device", _int_ok("device"), _setter("req_set_device", "device", lambda a: device_value(a["device"]))),
    Rule("req_set_type", _int_ok("type"), _setter("req_set_type", "type", lambda a: type_value(a["type"]))),
    Rule("req_set_size", _int_ok("size"), _setter("req_set_size", "size", lambda a: a["size"])),
    Rule("req_set_prot", _prot_ok, _set_prot),
    Rule("req_set_priority", _int_ok("priority"),
         _setter("req_set_priority", "priority_ok", lambda a: priority_in_range(a["priority"]))),
    Rule("req_set_onalloc", _live_req, _onalloc),
    Rule("req_set_onalloc_null_req", _nothing, _died("setOnAlloc of a NULL request crashes")),
    Rule("req_set_onpreempt", _live_req, _setter("req_set_onpreempt", "onpreempt", lambda a: bool(a["set"]))),
    Rule("req_set_cookie", _cookie_ok, _set_cookie),
    Rule("req_set_file", _segment_ok, _set_segment),
    Rule("cookie_new", _cookie_new_ok, lambda c, a: c.cookies.add(a["cookie"])),
    Rule("is_supported", _all_live, _asked),
    Rule("alloc", _all_live, _alloc),
    Rule("await_alloc", _await_alloc_ok, _await_alloc),
    Rule("bind", _bind_ok, _bind),
    Rule("buf_free", _free_ok, _free),
    Rule("buf_set_priority", _live_buf),
    Rule("buf_map", _map_ok, _add_map),
    Rule("map_read", _access_ok(write=False)),
    Rule("map_write", _access_ok(write=True)),
    Rule("map_prot", _prot_look_ok),
    Rule("map_gone", _gone_ok),
    Rule("buf_unmap", _unmap_ok, _unmap),
    Rule("file_new", _file_new_ok, _file_new),
    Rule("file_seek", _seek_ok, lambda c, a: c.sought.add(a["file"])),
    Rule("fd_check", _created_ok),
    Rule("buf_load", _load_ok, _load),
    Rule("await_load", _await_load_ok, _await_load),
    Rule("await_preempt", _await_preempt_ok, _await_preempt),
    Rule("vnpu", _vnpu_ok, _vnpu),
    Rule("sleep_ms", _nothing),
    Rule("await_closed", _closed_ok, _closed),
    Rule("cb_action", _arm_ok, _arm),
    # Its threads' steps are taken after it, one by one (item_steps).
    Rule(PARALLEL, _threads_apart),
)
RULES: Final[Mapping[str, Rule]] = {rule.op: rule for rule in RULE_LIST}
