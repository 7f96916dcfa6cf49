"""The model state: frozen values. A transition builds a new State; nothing is mutated.

Containers inside a State are plain dicts treated as immutable (a transition copies the one it
changes). Entities are retired as soon as nothing can refer to them any more (a freed, fully
unmapped buffer; a deleted cookie; a delivered submission), so the state stays as small as the
scenario's *live* objects, whatever the trace length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from .content import EMPTY, Content
from .vocabulary import PAGE_SIZE, PROT_BITS, Priority

if TYPE_CHECKING:
    from .policies.pool import Pool

PROT_READ: Final = PROT_BITS["READ"]
PROT_WRITE: Final = PROT_BITS["WRITE"]
PROT_EXEC: Final = PROT_BITS["EXEC"]
PROT_VALID: Final = PROT_READ | PROT_WRITE | PROT_EXEC
MAP_SHARED: Final = 1
MAP_PRIVATE: Final = 2
MAP_FIXED: Final = 0x10
PAGE: Final = PAGE_SIZE
GHOST_LIMIT: Final = 64


@dataclass(frozen=True)
class FileSeg:
    """A file segment handed to a request or to loadAsync. ``file`` is the probe's file slot, or None
    for a literal descriptor ``fd``."""

    file: str | None
    fd: int
    offset: int
    length: int
    buffer_offset: int


# What isSupported may look at of a request (Attrs.support_key): device, type, size, priority, prot, file.
SupportKey = tuple[int, int, int, int, int, FileSeg | None]


@dataclass(frozen=True)
class Attrs:
    """The parameters of a request (what allocAsync snapshots), cookie aside."""

    device: int
    type: int
    size: int
    priority: int
    prot: int
    file: FileSeg | None
    onalloc: bool
    onpreempt: bool
    # The fields no setter has set yet ("device", "type", "size", "priority", "prot", "file", "cookie",
    # "onpreempt"): a default is demonstrated only through a request that kept it.
    unset: frozenset[str] = frozenset()
    # Arguments setFileSegmentToLoad(-1, ...) was given that would matter were they not ignored: "offset",
    # "length", "buffer_offset" (a negative value, which a used segment could not have).
    ignored: frozenset[str] = frozenset()

    def support_key(self) -> SupportKey:
        """What isSupported may look at: every field but the three the text says it ignores (cookie, onAlloc,
        onPreempt). The file segment is part of the request, so an answer binds only requests with the same
        segment (the same file, offsets and length)."""
        return (self.device, self.type, self.size, self.priority, self.prot, self.file)


SET_BY_SETTERS: Final = frozenset({"device", "type", "size", "priority", "prot", "file", "cookie", "onpreempt"})
DEFAULT_ATTRS: Final = Attrs(device=-1, type=0, size=0, priority=int(Priority.DEFAULT), prot=PROT_READ, file=None,
                             onalloc=False, onpreempt=False, unset=SET_BY_SETTERS)


@dataclass(frozen=True)
class CookieRef:
    """A cookie as callbacks see it (``value``: "c0", "raw:5" or None) and, when it was handed over with
    a deleter, the token that tracks its deletion."""

    value: str | None
    token: int | None


NO_COOKIE: Final = CookieRef(None, None)


@dataclass(frozen=True)
class Token:
    """One hand-over of a cookie with a non-NULL deleter: the deleter is owed exactly once, after the
    last holder (request, submission, buffer, pending load) lets go."""

    value: str | None
    holders: int
    step: int
    # A trace of version 1 (no cb_return events) showed a callback carrying the cookie: it may still be
    # running whenever the application next acts, so the implementation may keep the cookie meanwhile.
    lingering: bool = False
    # The trace line from which the last callback carrying it is known to have returned (version 2).
    borrow_end: int = 0
    # The clause whose call let go of its last holder (a request's or a buffer's free): the deleter that
    # follows demonstrates that call's effect.
    released_by: str = ""


@dataclass(frozen=True)
class Borrow:
    """A callback that carried a hand-over (``token``) and is not known to have returned (trace version 2).
    ``line``: its ``cb`` event; ``running``: no ``cb_return`` yet, so it certainly has not returned."""

    line: int
    th: str
    kind: str
    token: int
    running: bool = True


@dataclass(frozen=True)
class Request:
    attrs: Attrs
    cookie: CookieRef
    submitted: bool = False  # allocAsync has taken a snapshot of it
    asked: bool = False  # isSupported has answered for it
    cookie_after_submit: bool = False  # its cookie was set after its last allocAsync


@dataclass(frozen=True)
class Submission:
    """A request submitted by allocAsync and not answered yet (the snapshot)."""

    attrs: Attrs
    cookie: CookieRef
    step: int
    forced: str | None  # vnpu fail_next
    live_at_submit: int
    unsupported: bool  # isSupported said false for these parameters
    preemptable: bool = False  # a vnpu pressure or preempt=lowest came while it was pending
    slot: str = ""  # the request as the scenario (and the trace) names it
    position: int = 1  # 1-based place in the allocAsync list
    batch: int = 1  # how many requests that allocAsync submitted
    overlapped: bool = False  # its allocAsync ran while another thread's allocAsync was in flight (R21)
    req: str = ""  # the probe slot of the request it was made from

    def named(self) -> str:
        """The request as a why names it: one of a batch by its place in the list, since the step alone
        does not tell which of the batch's requests is meant."""
        if self.batch == 1:
            return f"request submitted at step {self.step}"
        return f"request {self.position} of {self.batch} ({self.slot}) of the batch submitted at step {self.step}"


@dataclass(frozen=True)
class Buffer:
    handle: str
    size: int
    prot: int
    cookie: CookieRef
    onpreempt: bool
    priority: int
    freed: bool = False
    maps: int = 0
    preempted: bool = False
    preempt_cb: bool = False
    preemptable: bool = False  # vnpu pressure may have preempted it
    vnpu_preempted: bool = False  # the vnpu confirmed preempting it: onPreempt is owed
    announced: bool = False  # the application saw it preempted (ENOENT): onPreempt is owed, even after free
    notified: bool = False  # aosp-2026 (D24): a map failed ENOMEM after the preemption: the notice arrived
    wedged: bool = False  # aosp-2026 (D25): a loadAsync with a negative fd other than -1 left it Loading
    priority_set: bool = False  # its priority came from a successful ANpuBuffer_setPriority
    # A `vnpu preempt=lowest` passed it over for a buffer of a greater priority value: the clause an onPreempt
    # of it then contradicts (the priority the device holds is not the one set), or "".
    outranked: str = ""
    loads: int = 0
    content: Content = EMPTY
    mapped_hold: bool = False  # freed while mapped: it may hold its cookie until its last unmap
    unset: frozenset[str] = frozenset()  # the request fields it kept at their defaults (Attrs.unset)
    freed_in_teardown: bool = False  # freed by the probe's teardown, after the settles, not by the scenario
    # Its onPreempt came inside its free, on the calling thread, after a vnpu command preempted it or may
    # have: the device may still hold the cookie for its own notice of that preemption.
    notice_hold: bool = False

    def optional_hold(self) -> bool:
        """A freed buffer whose hold of its cookie the device may keep or drop: one still mapped (its memory
        lives until the last unmap), one whose late onPreempt may still come but is no longer owed, or one
        whose notice of a commanded preemption the device may still be delivering (notice_hold)."""
        return self.freed and (self.mapped_hold or self.notice_hold
                               or (self.awaits_late_onpreempt() and not self.owes_onpreempt()))

    def owes_onpreempt(self) -> bool:
        """A preemption the application saw (ENOENT) owes its onPreempt, unless the scenario freed the buffer
        first: "the preemption callback may be invoked after the caller has already freed the buffer", so
        after the scenario's free it may come at any time, or not at all (a free in teardown, after the
        settles, keeps it owed)."""
        return self.announced and not self.preempt_cb and (not self.freed or self.freed_in_teardown)

    def awaits_late_onpreempt(self) -> bool:
        """A buffer preempted, or that a vnpu command may have preempted (pressure=, preempt=lowest), whose
        onPreempt has not come: once freed, the callback may still arrive (owed when the application saw
        the preemption, optional when a command did or may have done it), and the cookie must outlive it,
        so the buffer keeps holding the cookie."""
        return self.onpreempt and not self.preempt_cb and (self.announced or self.vnpu_preempted or self.preemptable)


@dataclass(frozen=True)
class Mapping_:
    buf: str
    offset: int
    length: int
    prot: int
    shared: bool
    overlay: Content = EMPTY  # writes through a private mapping
    # The parts still mapped, [lo, hi) relative to the mapping's start; None: all of it.
    ranges: tuple[tuple[int, int], ...] | None = None

    def live_ranges(self) -> tuple[tuple[int, int], ...]:
        return self.ranges if self.ranges is not None else ((0, self.length),)


@dataclass(frozen=True)
class FileState:
    size: int
    seed: int
    holders: int = 0  # requests / submissions / loads that own the handed descriptor
    handed: str | None = None  # clause of the last hand-over
    position: int | None = 0  # None: unconstrained
    bufs: frozenset[str] = frozenset()  # buffers it was loaded into: the owner may keep it until they are freed
    due: bool = False  # nothing needed the handed descriptor at the last quiet wait (sleep_ms): it must be closed


@dataclass(frozen=True)
class Load:
    buf: str
    seg: FileSeg
    cookie: CookieRef
    step: int
    expect: str  # "error", "success" or "any"
    why: str
    dids: str  # discrepancy IDs that make success acceptable ("" when none)
    # Buffer bytes of the load's range written through a shared mapping while it was in flight: the
    # write may land before or after the copy, so after the onLoad they are indeterminate (R16).
    dirty: tuple[tuple[int, int], ...] = ()

    def span(self) -> tuple[int, int] | None:
        """The buffer bytes [start, end) the load may write, or None when it writes none."""
        seg = self.seg
        if seg.length <= 0 or seg.buffer_offset < 0:
            return None
        return (seg.buffer_offset, seg.buffer_offset + seg.length)


@dataclass(frozen=True)
class Inflight:
    """The API call between its `call` and its `ret` event."""

    step: int
    op: str
    crash: str | None = None  # clause of an expected death
    crash_did: str | None = None  # the death is AOSP behaviour only
    applied: bool = False  # call-time effects were applied (a skipped ret is then unjudgeable)
    subs: tuple[int, ...] = ()  # submissions made by this allocAsync
    owed_deletion: int | None = None  # token the call must delete before returning
    buffers: tuple[str, ...] = ()
    called_back: bool = False  # ANpuBuffer_free: one of its buffers had its onPreempt already
    pending: bool = False  # the call's call-time effects are not applied yet (threads.py)
    # Loads answered (onLoad observed) while this map_read / map_write / buf_map was in flight: (buffer,
    # start, end) of each; the access may have met the copy, so those bytes are indeterminate to it (R16),
    # and the map may have met the load (R15).
    overtaken: tuple[tuple[str, int, int], ...] = ()
    # Buffers whose onPreempt came while this buf_map was in flight: the map may have been decided before
    # the callback, so it is not one "after this callback is invoked".
    preempt_met: tuple[str, ...] = ()


@dataclass(frozen=True)
class State:
    reqs: Mapping[str, Request]
    tokens: Mapping[int, Token]
    subs: Mapping[int, Submission]
    bufs: Mapping[str, Buffer]
    maps: Mapping[str, Mapping_]
    files: Mapping[str, FileState]
    loads: Mapping[int, Load]
    ghosts: tuple[Buffer, ...]
    inflight: Inflight | None
    next_id: int
    unsupported: frozenset[SupportKey]
    slots: Mapping[str, str]  # buffer slot -> handle (from bind)
    forced: tuple[str, ...]
    dids: frozenset[str]
    handed: frozenset[str | None]  # cookie values ever handed over with a deleter (diagnostics)
    relaxed_capacity: bool  # vnpu pressure reserved capacity: ENOMEM can no longer be predicted
    # Several threads (threads.py): ``inflight`` is the call in flight on ``strand``; the calls in flight on
    # other strands wait in ``parked`` (sorted by strand).
    strand: str = "main"
    parked: tuple[tuple[str, Inflight], ...] = ()
    pool: Pool | None = None  # a declared acl/caching/arena policy's state (policies/)
    cbs: tuple[Borrow, ...] = ()  # callbacks carrying a hand-over, not known to have returned
    # Steps of allocAsync calls that were in flight on two strands at once (threads.overlapping_calls).
    overlaps: frozenset[int] = frozenset()
    # Cookie values set with a NULL deleter (diagnostics: a deleter later called with one names the sentence
    # that says nothing happens to them).
    unowned: frozenset[str] = frozenset()
    # Bytes of buffers whose memory the history released: at their free (unmapped then), at their last unmap
    # (freed before). A refusal that only memory kept past one of those explains names its sentence.
    released_at_free: int = 0
    released_at_unmap: int = 0
    # The clauses this history has demonstrated: the trace showed the behaviour each speaks of (a rule saw an
    # observation that the sentence could have failed on, and it held). Not part of ``key``: two histories
    # alike in everything else are one candidate, which keeps only what both demonstrated (``merge_shown``).
    shown: frozenset[str] = frozenset()

    def key(self) -> tuple[object, ...]:
        """A hashable identity, used to deduplicate candidate states (``shown`` aside)."""
        return (
            tuple(sorted(self.reqs.items())),
            tuple(sorted(self.tokens.items())),
            tuple(sorted(self.subs.items())),
            tuple(sorted(self.bufs.items())),
            tuple(sorted(self.maps.items())),
            tuple(sorted(self.files.items())),
            tuple(sorted(self.loads.items())),
            self.ghosts,
            self.inflight,
            self.unsupported,
            tuple(sorted(self.slots.items())),
            self.forced,
            self.dids,
            self.handed,
            self.relaxed_capacity,
            self.strand,
            self.parked,
            self.pool.key() if self.pool is not None else None,
            self.cbs,
            self.overlaps,
            self.unowned,
            self.released_at_free,
            self.released_at_unmap,
        )


INITIAL: Final = State(
    reqs={}, tokens={}, subs={}, bufs={}, maps={}, files={}, loads={}, ghosts=(), inflight=None,
    next_id=1, unsupported=frozenset(), slots={}, forced=(), dids=frozenset(), handed=frozenset(),
    relaxed_capacity=False,
)

T = TypeVar("T")


def each_in_flight(s: State, mark: Callable[[Inflight], Inflight]) -> tuple[Inflight | None,
                                                                            tuple[tuple[str, Inflight], ...]]:
    """The calls in flight, on main's strand and on the parked ones, each passed through ``mark``: what a
    callback observed before their rets records on them."""
    return (mark(s.inflight) if s.inflight is not None else None), tuple((st, mark(inf)) for st, inf in s.parked)


_new_object: Final = object.__new__
_set_attribute: Final = object.__setattr__


def evolve(value: T, **changes: object) -> T:
    """A copy of the frozen ``value`` with ``changes`` to its fields: how a transition makes its new state.

    ``dataclasses.replace`` builds the copy through ``__init__`` (a call per field); the judge makes about
    one copy per trace event, so the copy is given a new dict of the fields, built in one step. Frozen
    forbids assigning an attribute; the copy's dict is set before anyone holds the copy. The dict holds
    exactly the value's fields, so a change that makes it grow names no field: a model bug.

    The dict is built anew, not copied with ``dict.copy``: the copy of a value's own dict keeps that
    dict's layout (keys shared with the class), and CPython does not specialise reading an attribute
    from such a dict once it is an object's ``__dict__``, so every later field read of the copy took
    the slow path."""
    fields_of_value = value.__dict__
    fields_of_copy = {**fields_of_value, **changes}
    if len(fields_of_copy) != len(fields_of_value):
        raise TypeError(f"{type(value).__name__} has no field {sorted(fields_of_copy.keys() - fields_of_value.keys())}")
    copy = _new_object(type(value))
    _set_attribute(copy, "__dict__", fields_of_copy)
    return copy


def done(s: State) -> State:
    """The state after a call returned (no call in flight)."""
    return s if s.inflight is None else evolve(s, inflight=None)


def show(s: State, *clauses: str) -> State:
    """``s`` with ``clauses`` demonstrated (State.shown)."""
    shown = s.shown
    return s if shown.issuperset(clauses) else evolve(s, shown=shown.union(clauses))


def merge_shown(kept: State, other: State) -> State:
    """One candidate for two histories with the same key: what both demonstrated."""
    if kept.shown == other.shown:
        return kept
    return evolve(kept, shown=kept.shown & other.shown)


def live_bytes(s: State) -> int:
    """Sum of sizes of live buffers: not preempted, and not (freed and fully unmapped)."""
    return sum(b.size for b in s.bufs.values() if not b.preempted)
