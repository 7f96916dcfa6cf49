"""Generator moves for the calling contexts of the grammar (host.fuzz.grammar): calls from inside each
callback kind (a cb_action armed for one callback the next steps bring, then disarmed), calls on other
threads, alone or while another thread calls the same function, and the documented crashes a program
may end with."""

from __future__ import annotations

from typing import Any, Final

from .answers import PAGE
from .pen import AWAIT_MS, LATE_SHARE, Move, Pen, a_buffer, can_bind, has_buffer, quiet

# The actions a callback runs (vocabulary cb_actions): the buffer actions, a request made and freed, an
# allocAsync of a request the program lends, and a callback that takes a while.
ACTIONS: Final = ("free_buf", "set_priority_", "map_unmap", "new_request", "alloc_", "sleep_5")
CALLBACK_PRIORITY: Final = 700  # the boundaries are main's classes; inside a callback, a valid priority
THREAD_PRIORITIES: Final = (0, 700, 1000)


def _request(s: Pen, r: str, cookie: bool = True) -> str | None:
    """A valid one-page request of the pair with onAlloc (and a cookie object): its cookie's name."""
    s.add("req_create", req=r)
    s.add("req_set_device", req=r, device="$pair.device")
    s.add("req_set_type", req=r, type="$pair.type")
    s.add("req_set_size", req=r, size=PAGE)
    s.add("req_set_onalloc", req=r, set=True)
    if not cookie:
        return None
    c = s.name("c")
    s.add("cookie_new", cookie=c)
    s.add("req_set_cookie", req=r, cookie=c, deleter=True)
    return c


def _kinds(s: Pen) -> list[str]:
    """The callback kinds an action may be armed for now: none of them owed, a trigger at hand (or one to
    be made: host.fuzz.pen.a_buffer)."""
    kinds = ["alloc"]
    if s.allow_loads and has_buffer()(s):
        kinds.append("load")
    if s.control and not s.model.pressure and has_buffer(onpreempt=True)(s):
        kinds.append("preempt")
    return [k for k in kinds if not s.model.owed(k) and k not in s.model.armed]


def _callback(s: Pen) -> None:
    """One callback that calls back into the API: the action armed, the one callback brought (an onAlloc, an
    onLoad, an onPreempt), awaited (and the onAlloc an allocAsync inside it owes), then disarmed."""
    kind = s.rng.choice(_kinds(s))
    # The buffer an onLoad or onPreempt comes for is found (or made) before the action is armed.
    b = a_buffer(s, onpreempt=True) if kind == "preempt" else a_buffer(s) if kind == "load" else ""
    # In onPreempt the text invites a new request: drawn more often there.
    action = "new_request" if kind == "preempt" and s.chance(0.3) else s.rng.choice(ACTIONS)
    if action == "set_priority_":
        action += str(CALLBACK_PRIORITY)
    elif action == "alloc_":
        lent = s.name("r")
        _request(s, lent, cookie=s.chance(0.5))
        action += lent
    s.add("cb_action", kind=kind, action=action, count=1)
    if kind == "alloc":
        r = s.name("r")
        cookie = _request(s, r)
        s.add("alloc", reqs=[r])
        s.await_allocs()
        bind = {"buf": s.name("b"), "select": {"cookie": cookie}}
        if s.model.allows("bind", bind):
            s.add("bind", **bind)
    elif kind == "load":
        f = s.name("f")
        pages = s.model.bufs[b].pages
        s.add("file_new", file=f, size=pages * PAGE, seed=s.rng.randint(1, 1000))
        s.add("buf_load", buf=b, fd=f, file_offset=0, length=pages * PAGE, buffer_offset=0, onload=True)
        s.add("await_load", count=s.model.loads, timeout_ms=AWAIT_MS)
    else:
        s.add("vnpu", command=f"{'preempt_late' if s.chance(LATE_SHARE) else 'preempt'}={b}")
        s.add("await_preempt", count=s.model.preempts, timeout_ms=AWAIT_MS)
    if action.startswith("alloc_"):
        s.await_allocs()  # the submission made inside the callback
    s.add("cb_action", kind=kind, action="none", count=0)


# --- other threads -----------------------------------------------------------------------------------

def _task(s: Pen, kind: str, taken: set[str], before: list[dict[str, Any]],
          segment: bool) -> list[dict[str, Any]] | None:
    """One thread's steps of ``kind`` on handles of its own (``taken``: buffers other threads use; steps the
    thread needs made first, such as its file, go to ``before``; ``segment``: its request gets a file
    segment); None when no buffer is free for it."""
    if kind in ("request", "support"):
        r, c = s.name("r"), s.name("c")
        steps: list[dict[str, Any]] = [
            {"req_create": {"req": r}},
            {"req_set_device": {"req": r, "device": "$pair.device" if s.pair else 0}},
            {"req_set_type": {"req": r, "type": "$pair.type" if s.pair else 1}},
            {"req_set_size": {"req": r, "size": PAGE}},
        ]
        if kind == "support":
            return [*steps, {"is_supported": {"reqs": [r]}}, {"req_free": {"req": r}}]
        if segment:
            f = s.name("f")
            before.append({"file_new": {"file": f, "size": PAGE, "seed": s.rng.randint(1, 1000)}})
            steps.append({"req_set_file": {"req": r, "fd": f, "file_offset": 0, "length": PAGE, "buffer_offset": 0}})
        return [*steps, {"req_set_prot": {"req": r, "prot": ["READ", "WRITE"]}},
                {"req_set_priority": {"req": r, "priority": s.rng.choice(THREAD_PRIORITIES)}},
                {"req_set_onalloc": {"req": r, "set": True}}, {"req_set_onpreempt": {"req": r, "set": True}},
                {"cookie_new": {"cookie": c}}, {"req_set_cookie": {"req": r, "cookie": c, "deleter": True}},
                {"alloc": {"reqs": [r]}}, {"req_free": {"req": r}}]
    spare = [b for b in quiet(s) if b not in taken and ("READ" in s.model.bufs[b].prot or kind != "map")]
    if not spare and not can_bind(s):
        return None
    b = a_buffer(s, readable=kind == "map", besides=taken)
    taken.add(b)
    if kind == "map":
        m = s.name("m")
        return [{"buf_map": {"map": m, "buf": b, "length": PAGE, "prot": ["READ"], "flags": ["SHARED"], "offset": 0}},
                {"map_read": {"map": m, "offset": 0, "length": PAGE}},
                {"buf_unmap": {"map": m, "offset": 0, "length": PAGE}}]
    if kind == "load":
        f = s.name("f")
        pages = s.model.bufs[b].pages
        before.append({"file_new": {"file": f, "size": pages * PAGE, "seed": s.rng.randint(1, 1000)}})
        return [{"buf_load": {"buf": b, "fd": f, "file_offset": 0, "length": pages * PAGE, "buffer_offset": 0,
                              "onload": True}}]
    if kind == "free":
        return [{"buf_free": {"bufs": [b]}}]
    return [{"buf_set_priority": {"buf": b, "priority": s.rng.choice(THREAD_PRIORITIES)}}]


TASKS: Final = ("request", "support", "map", "load", "free", "priority")


def _threads(s: Pen) -> None:
    """Two or three threads, each on its own handles, at times calling the same function at once: a request
    made, submitted and freed; isSupported of a request of its own; a map, read and unmapped; a load; a
    free; a priority set."""
    kinds = [k for k in TASKS if s.allow_loads or k != "load"]
    first = s.rng.choice(kinds)
    lists: list[list[dict[str, Any]]] = []
    before: list[dict[str, Any]] = []
    taken: set[str] = set()
    segment = s.allow_loads and s.chance(0.5)  # the threads' requests alike: concurrent setFileSegmentToLoad
    for k in range(s.rng.choice((2, 2, 3))):
        kind = first if k == 1 and s.chance(0.6) else s.rng.choice(kinds)
        steps = _task(s, kind, taken, before, segment) or _task(s, "support", taken, before, segment)
        assert steps is not None
        lists.append(steps)
    for item in before:
        s.add_item(item)
    s.add_item({"parallel": lists})
    if any("alloc" in step for block in lists for step in block):
        s.await_allocs()
    if any("buf_load" in step for block in lists for step in block) and s.model.loads_known:
        s.add("await_load", count=s.model.loads, timeout_ms=AWAIT_MS)


# --- documented crashes ------------------------------------------------------------------------------

def death(s: Pen) -> None:
    """A documented crash as the program's last step (crash-setonalloc-null, req-request-not-null,
    crash-alloc-without-onalloc, crash-load-onload-null): the process must die inside the call."""
    options = ["null_request", "without_onalloc"]
    if s.model.reqs:
        options.append("onalloc_null")
    if s.allow_loads and quiet(s):
        options.append("onload_null")
    kind = s.rng.choice(options)
    if kind == "null_request":
        s.add("req_set_onalloc_null_req")
    elif kind == "onalloc_null":
        s.add("req_set_onalloc", req=s.rng.choice(list(s.model.reqs)), set=False)
    elif kind == "without_onalloc":
        r = s.name("r")
        s.add("req_create", req=r)
        s.add("alloc", reqs=[r])
    else:
        b, f = s.rng.choice(quiet(s)), s.name("f")
        s.add("file_new", file=f, size=PAGE, seed=s.rng.randint(1, 1000))
        s.add("buf_load", buf=b, fd=f, file_offset=0, length=PAGE, buffer_offset=0, onload=False)


MOVES: Final = (
    Move(_callback, 4, lambda s: can_bind(s) and bool(_kinds(s))),
    Move(_threads, 3, lambda s: True),
)
