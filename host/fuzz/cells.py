"""The grammar cells (host.fuzz.grammar) a program's steps reach: each step replayed through the caller's
model (host.fuzz.caller) and named by its op, its context and its argument classes, read from its
arguments and the state the earlier steps left. A cb_action names the calls its action makes inside the
callbacks it reaches (the episode that follows it)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from .answers import (
    CERTAIN_BYTES,
    INVALID,
    OTHER,
    PAGE,
    PAIR,
    PRIORITY_RANGE,
    REFUSED,
    UNSUPPORTED,
    VALID_PROT,
    device_value,
    is_int,
    last_page,
    prot_bits,
    prot_names,
    type_value,
)
from .caller import ALLOC_ACTION, PARALLEL, Caller, Illegal, answer_of, item_steps
from .grammar import (
    AFTER_FREE,
    AFTER_SUBMIT,
    AGAIN,
    CONCURRENT,
    DEATH,
    DURING_LOAD,
    IN_CALLBACK,
    MAIN,
    PREEMPT_WINDOW,
    THREAD,
    Cell,
)

# The calls each cb_action makes inside a callback, with their classes.
ACTION_CALLS: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    "free_buf": (("buf_free", "one"),),
    "map_unmap": (("buf_map", "length=page"), ("buf_unmap", "whole")),
    "new_request": (("req_create", "fresh"), ("req_set_cookie", "null"), ("req_free", "live")),
    ALLOC_ACTION: (("alloc", "one"),),
}
MANY_SUPPORTED: Final = 8  # isSupported of more requests than this may be refused (L_SUPPORT_E2BIG)


def program_cells(program: Mapping[str, Any]) -> set[Cell]:
    """The cells of the program's steps, up to the first step the model refuses (none in a legal program)."""
    c = Caller()
    out: set[Cell] = set()
    for item in program["steps"]:
        try:
            out |= item_cells(c, item)
        except (Illegal, KeyError, TypeError, ValueError):
            break
    return out


def item_cells(c: Caller, item: Mapping[str, Any]) -> set[Cell]:
    """The cells of one program item, each of its steps named in the state the earlier ones left and then
    taken (``c`` changes as ``Caller.take`` changes it; an illegal step raises as it does)."""
    out: set[Cell] = set()
    threads = _thread_ops(item)
    for op, args in item_steps(item):
        if op != PARALLEL:
            context = _context(c, op, args, threads)
            classes = _classes(c, op, args)
            # Outside main a step counts once, by its first class (its op's leading argument's).
            out |= {(op, context, cls) for cls in (classes if context == MAIN else classes[:1])}
            if op == "cb_action":
                out |= set(_action_cells(args))
        c.take(op, args)
    return out


def _thread_ops(item: Mapping[str, Any]) -> dict[int, str] | None:
    """For a parallel item: id(args) of each thread step -> thread or concurrent."""
    if PARALLEL not in item:
        return None
    lists = item[PARALLEL]
    per_thread = [{next(iter(step)) for step in block} for block in lists]
    out: dict[int, str] = {}
    for k, block in enumerate(lists):
        others = set().union(*(ops for j, ops in enumerate(per_thread) if j != k))
        for step in block:
            ((op, args),) = step.items()
            out[id(args)] = CONCURRENT if op in others else THREAD
    return out


def _context(c: Caller, op: str, args: Any, threads: dict[int, str] | None) -> str:
    if threads is not None and id(args) in threads:
        return threads[id(args)]
    named = args.get("buf") if isinstance(args, Mapping) else None
    buf = c.bufs.get(named) if isinstance(named, str) else None
    if op in ("buf_unmap", "map_read", "map_write") and args["map"] in c.maps and c.maps[args["map"]].buf in c.freed:
        return AFTER_FREE
    if buf is not None:
        if buf.surely_preempted and buf.onpreempt and not buf.preempt_seen:
            return PREEMPT_WINDOW
        if buf.loading:
            return DURING_LOAD
    if op == "buf_free" and args["bufs"]:
        bufs = [c.bufs.get(b) for b in args["bufs"]]
        if any(b is not None and b.surely_preempted and b.onpreempt and not b.preempt_seen for b in bufs):
            return PREEMPT_WINDOW
        if any(b is not None and b.loading for b in bufs):
            return DURING_LOAD
    return MAIN


def _action_cells(args: Mapping[str, Any]) -> Iterator[Cell]:
    action = str(args["action"])
    context = IN_CALLBACK.get(str(args["kind"]))
    if context is None:
        return
    if action.startswith("set_priority_"):
        yield ("buf_set_priority", context, _priority_class(int(action[len("set_priority_"):])))
        return
    for prefix, calls in ACTION_CALLS.items():
        if action.startswith(prefix):
            yield from ((op, context, cls) for op, cls in calls)


def _classes(c: Caller, op: str, a: Any) -> list[str]:
    classify = _CLASSIFY.get(op)
    if classify is None:
        return []
    try:
        return list(classify(c, a))
    except (KeyError, TypeError, ValueError):
        return []


def _repetition(c: Caller, op: str, a: Mapping[str, Any]) -> list[str]:
    req = c.reqs.get(a["req"])
    if req is None:
        return []
    return ([AGAIN] if op in req.setters else []) + ([AFTER_SUBMIT] if req.submitted else [])


def _device(c: Caller, a: Mapping[str, Any]) -> list[str]:
    value = device_value(a["device"])
    name = {PAIR: "pair", INVALID: "negative", UNSUPPORTED: "unsupported", OTHER: "other"}[value]
    return [name, *_repetition(c, "req_set_device", a)]


def _type(c: Caller, a: Mapping[str, Any]) -> list[str]:
    value = type_value(a["type"])
    name = {PAIR: "pair", INVALID: "unknown", UNSUPPORTED: "unsupported", OTHER: "other"}[value]
    return [name, *_repetition(c, "req_set_type", a)]


def _size(c: Caller, a: Mapping[str, Any]) -> list[str]:
    size = a["size"]
    if size < 0:
        name = "negative"
    elif size == 0:
        name = "zero"
    elif size < PAGE:
        name = "short"
    elif size > CERTAIN_BYTES:
        name = "huge"
    elif size % PAGE:
        name = "odd"
    else:
        name = "page" if size == PAGE else "pages"
    return [name, *_repetition(c, "req_set_size", a)]


def _priority_class(value: Any) -> str:
    low, high = PRIORITY_RANGE
    if not is_int(value):
        return "valid"
    if value < low:
        return "below"
    if value > high:
        return "above"
    return {low: "min", high: "max"}.get(value, "valid")


def _priority(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return [_priority_class(a["priority"]), *_repetition(c, "req_set_priority", a)]


def _prot_class(bits: int) -> str:
    if bits & ~VALID_PROT:
        return "invalid_bits"
    names = prot_names(bits)
    if "EXEC" in names:
        return "exec"
    return {frozenset(): "none", frozenset({"READ"}): "read", frozenset({"WRITE"}): "write"}.get(names, "read_write")


def _prot(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return [_prot_class(prot_bits(a["prot"])), *_repetition(c, "req_set_prot", a)]


def _cookie(c: Caller, a: Mapping[str, Any]) -> list[str]:
    cookie = a["cookie"]
    if cookie is None:
        name = "null"
    elif is_int(cookie):
        name = "integer_again" if cookie in c.raw_cookies else "integer_64" if cookie >= 1 << 32 else "integer"
    else:
        name = "object"
    extra = [] if a["deleter"] else ["no_deleter"]
    return [name, *extra, *_repetition(c, "req_set_cookie", a)]


def _onalloc(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return ["set" if a["set"] else DEATH, *_repetition(c, "req_set_onalloc", a)]


def _onpreempt(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return ["set" if a["set"] else "null", *_repetition(c, "req_set_onpreempt", a)]


def _segment(c: Caller, a: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    if isinstance(a["fd"], Mapping):
        ignored = a["file_offset"] < 0 or a["length"] < 0 or a["buffer_offset"] < 0
        names.append("no_file_ignored" if ignored else "no_file")
    else:
        length, at = a["length"], a["buffer_offset"]
        names.append("negative_length" if length < 0 else "zero_length" if length == 0
                     else "odd_length" if length % PAGE else "segment")
        if a["file_offset"]:
            names.append("file_offset")
        if at:
            names.append("buffer_offset")
        req = c.reqs.get(a["req"])
        if req is not None and length > 0 and at + length > max(req.size, 0):
            names.append("past_buffer")
    return [*names, *_repetition(c, "req_set_file", a)]


def _request_list(c: Caller, reqs: list[str], op: str) -> list[str]:
    if not reqs:
        return ["empty"]
    names = ["one" if len(reqs) == 1 else "several"]
    if len(set(reqs)) < len(reqs):
        names.append("twice_listed")
    live = [c.reqs[r] for r in reqs if r in c.reqs]
    if any(INVALID in (r.device, r.type) for r in live):
        names.append("invalid")
    if any(r.device == r.type == UNSUPPORTED for r in live):
        names.append("unsupported")
    if op == "is_supported":
        if any(r.asked == "changed" for r in live):
            names.append("after_change")
        if len(reqs) > MANY_SUPPORTED:
            names.append("many")
    else:
        if any(r.refused and answer_of(c, r) != REFUSED for r in live):
            names.append("after_failure")
        if any(not r.onalloc for r in live):
            names.append(DEATH)
    return names


def _is_supported(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return _request_list(c, list(a["reqs"]), "is_supported")


def _alloc(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return _request_list(c, list(a["reqs"]), "alloc")


def _free(c: Caller, a: Mapping[str, Any]) -> list[str]:
    bufs = list(a["bufs"])
    if not bufs:
        return ["empty"]
    names = ["one" if len(bufs) == 1 else "several"]
    if any(c.live_mapped(b) for b in bufs):
        names.append("mapped")
    if any(b in c.bufs and c.bufs[b].surely_preempted for b in bufs):
        names.append("preempted")
    return names


def _map(c: Caller, a: Mapping[str, Any]) -> list[str]:
    buf = c.bufs[a["buf"]]
    offset, length = a["offset"], a["length"]
    names = ["buffer=preempted"] if buf.surely_preempted else []
    if length == 0:
        names.append("length=zero")
    elif last_page(max(offset, 0), length) >= buf.pages:
        names.append("length=past_end")
    elif length < PAGE:
        names.append("length=short")
    elif length % PAGE:
        names.append("length=unaligned")
    else:
        names.append("length=page" if length == PAGE else "length=pages")
    if offset % PAGE:
        names.append("offset=unaligned")
    elif offset:
        names.append("offset=page")
    bits = prot_bits(a["prot"])
    asked = prot_names(bits)
    if not asked <= buf.prot:
        names.append("prot=wider")
    names.append("prot=" + {"none": "none", "read": "read", "exec": "exec"}.get(_prot_class(bits), "read_write"))
    names.append("flags=private" if a["flags"] == ["PRIVATE"] else "flags=shared")
    if a["buf"] in c.refused_maps:
        names.append("after_failure")
    return names


def _unmap(c: Caller, a: Mapping[str, Any]) -> list[str]:
    m = c.maps[a["map"]]
    offset, length = a["offset"], a["length"]
    if offset % PAGE:
        return ["unaligned_offset"]
    if length < PAGE:
        return ["short_length"]
    if length % PAGE:
        return ["unaligned_length"]
    whole = offset // PAGE <= min(m.pages) and last_page(offset, length) >= max(m.pages)
    return ["whole" if whole else "partial"]


def _buf_priority(c: Caller, a: Mapping[str, Any]) -> list[str]:
    names = [_priority_class(a["priority"])]
    if c.live_mapped(a["buf"]):
        names.append("mapped")
    if c.bufs[a["buf"]].surely_preempted:
        names.append("preempted")
    return names


def _load(c: Caller, a: Mapping[str, Any]) -> list[str]:
    if not a["onload"]:
        return [DEATH]
    buf = c.bufs[a["buf"]]
    length = a["length"]
    names = []
    if isinstance(a["fd"], Mapping):
        names.append("bad_fd")
    elif length < 0:
        names.append("negative_length")
    elif length == 0:
        names.append("zero_length")
    elif length % PAGE:
        names.append("odd_length")
    else:
        names.append("whole" if length == buf.pages * PAGE else "part")
    if a["file_offset"]:
        names.append("file_offset")
    if isinstance(a["fd"], str) and a["fd"] in c.sought:
        names.append("position_moved")
    if a["buffer_offset"]:
        names.append("buffer_offset")
    if c.live_mapped(a["buf"]) or buf.maybe_mapped:
        names.append("mapped")
    if a["buf"] in c.failed_loads:
        names.append("after_failure")
    return names


def _read(c: Caller, a: Mapping[str, Any]) -> list[str]:
    m = c.maps[a["map"]]
    offset, length = a["offset"], a["length"]
    if offset % PAGE or length % PAGE:
        return ["odd_range"]
    whole = m.whole and offset == 0 and length == m.extent * PAGE
    return ["whole_buffer" if whole else "range"]


def _write(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return ["odd_range" if a["offset"] % PAGE or a["length"] % PAGE else "range"]


def _fd_check(c: Caller, a: Mapping[str, Any]) -> list[str]:
    return ["after_load" if a["file"] in _loaded_files(c) else "after_segment"]


def _loaded_files(c: Caller) -> set[str]:
    out: set[str] = set()
    for buf in c.bufs.values():
        out |= {*buf.answered_files, *buf.unanswered_files}
    return out | set(c.released_files)


def _one(name: str) -> Any:
    return lambda c, a: [name]


_CLASSIFY: Final[Mapping[str, Any]] = {
    "req_create": lambda c, a: ["after_other_freed" if c.freed_requests else "fresh"],
    "req_free": lambda c, a: [AFTER_SUBMIT if c.reqs[a["req"]].submitted else "live"],
    "req_free_null": _one("null"),
    "req_set_device": _device,
    "req_set_type": _type,
    "req_set_size": _size,
    "req_set_priority": _priority,
    "req_set_prot": _prot,
    "req_set_cookie": _cookie,
    "req_set_onalloc": _onalloc,
    "req_set_onalloc_null_req": _one(DEATH),
    "req_set_onpreempt": _onpreempt,
    "req_set_file": _segment,
    "is_supported": _is_supported,
    "alloc": _alloc,
    "buf_free": _free,
    "buf_map": _map,
    "buf_unmap": _unmap,
    "buf_set_priority": _buf_priority,
    "buf_load": _load,
    "map_read": _read,
    "map_write": _write,
    "map_prot": _one("whole"),
    "map_gone": _one("whole"),
    "fd_check": _fd_check,
}
