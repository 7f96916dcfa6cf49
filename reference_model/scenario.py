"""Scenarios as values (docs/formats.md §2): validated from plain data, no file I/O here."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from .errors import ScenarioInvalid
from .vocabulary import ERRNO_NAMES, OPS, PAGE_SIZE, PROT_BITS, ArgKind, ArgSpec, Op

SCENARIO_ID = re.compile(r"[a-z0-9][a-z0-9_.-]*\Z")
HANDLE = re.compile(r"[a-z][a-z0-9_]*\Z")
CAPABILITIES: Final = frozenset({"supported-pair", "unsupported-pair", "vnpu-control", "load", "capacity",
                                 "pointer-64", "policy-budget", "policy-acl", "policy-caching",
                                 "policy-arena"})
SYMBOLIC_INTS: Final[dict[str, int]] = {
    "INT32_MIN": -(2**31),
    "INT32_MAX": 2**31 - 1,
    "INT64_MIN": -(2**63),
    "INT64_MAX": 2**63 - 1,
    "PAGE": PAGE_SIZE,
}
PAIR_REFERENCES: Final = {
    "$pair.device": "supported-pair",
    "$pair.type": "supported-pair",
    "$unsupported.device": "unsupported-pair",
    "$unsupported.type": "unsupported-pair",
}
PROT_NAMES: Final = tuple(PROT_BITS)
MAPFLAG_NAMES: Final = ("SHARED", "PRIVATE", "FIXED")
INT_RANGES: Final = {
    ArgKind.I32: (-(2**31), 2**31 - 1),
    ArgKind.I64: (-(2**63), 2**63 - 1),
    ArgKind.U64: (0, 2**64 - 1),
}
DEFAULT_TIMEOUT_MS: Final = 5000
PARALLEL: Final = "parallel"
THREADS_MIN: Final = 2
THREADS_MAX: Final = 16
# A probe file lives in shared memory on the device; the corpus needs 2 MiB at most, and a scenario
# from outside must not be able to fill the device's memory with one step.
FILE_NEW_MAX_BYTES: Final = 64 * 2**20
# Ops the compiler writes around a parallel block; a scenario never names them itself.
BLOCK_OPS: Final = frozenset({Op.PAR_BEGIN, Op.PAR_END})
# A step's op by its name, with its spec and its argument names (looked up, not built, for every step).
_STEP_SPECS: Final = {op.value: (op, spec, frozenset(a.name for a in spec.args)) for op, spec in OPS.items()}
_HANDLE_KINDS: Final = frozenset({ArgKind.REQ, ArgKind.BUF, ArgKind.MAP, ArgKind.FILE})
CB_KINDS: Final = ("alloc", "load", "preempt")
CB_ACTION: Final = re.compile(
    r"(none|free_buf|map_unmap|wait_return|new_request|set_priority_(-?[0-9]+)|alloc_([a-z][a-z0-9_]*)|(?:sleep|hold)_([1-9][0-9]{0,3}))\Z")

# An argument value after validation: ints, handle names, None, lists of names, or small mappings.
ArgValue = object


@dataclass(frozen=True, slots=True)
class Step:
    """One op. ``thread`` is None on the scenario's main thread, k for probe thread t<k> of a parallel
    block (the trace's ``th``)."""

    op: Op
    args: tuple[tuple[str, ArgValue], ...]
    thread: int | None = None

    def arg(self, name: str) -> ArgValue:
        for key, value in self.args:
            if key == name:
                return value
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class Parallel:
    """A ``parallel:`` step: each list runs on its own probe thread; all start together and are joined
    before the next step."""

    lists: tuple[tuple[Step, ...], ...]


@dataclass(frozen=True, slots=True)
class Scenario:
    """``steps`` is the program in step-number order, as the probe numbers the trace's ``call`` events: a
    ``Parallel`` of ``body`` appears as ``par_begin`` (threads: N), the steps of thread 0, 1, ... N-1
    (``Step.thread`` set), then ``par_end``. ``body`` keeps the steps as written."""

    id: str
    title: str
    chapter: str
    clauses: tuple[str, ...]
    requires: frozenset[str]
    timeout_ms: int
    steps: tuple[Step, ...]
    source: str
    body: tuple[Step | Parallel, ...] = ()


def flatten(body: tuple[Step | Parallel, ...]) -> tuple[Step, ...]:
    """The program order of ``body`` (see ``Scenario``)."""
    out: list[Step] = []
    for item in body:
        if isinstance(item, Step):
            out.append(item)
            continue
        out.append(Step(Op.PAR_BEGIN, (("threads", len(item.lists)),)))
        for k, steps in enumerate(item.lists):
            out.extend(Step(st.op, st.args, k) for st in steps)
        out.append(Step(Op.PAR_END, ()))
    return tuple(out)


def parse_scenario(data: object, source: str, chapter: str, known_clauses: frozenset[str] | None = None) -> Scenario:
    """Validate one scenario mapping; raise ScenarioInvalid naming file, scenario and field."""
    if not isinstance(data, Mapping):
        raise ScenarioInvalid(source, None, "scenario", type(data).__name__, "a mapping with id, title, clauses, steps")
    raw_id = data.get("id")
    if not isinstance(raw_id, str) or not SCENARIO_ID.match(raw_id):
        raise ScenarioInvalid(source, None, "id", raw_id, "an id matching [a-z0-9][a-z0-9_.-]*")
    sid = raw_id
    allowed = {"id", "title", "clauses", "requires", "timeout_ms", "steps"}
    for key in data:
        if key not in allowed:
            raise ScenarioInvalid(source, sid, str(key), key, "one of " + ", ".join(sorted(allowed)))
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ScenarioInvalid(source, sid, "title", title, "a non-empty sentence")
    clauses = data.get("clauses")
    if not isinstance(clauses, list) or not clauses or not all(isinstance(c, str) for c in clauses):
        raise ScenarioInvalid(source, sid, "clauses", clauses, "a non-empty list of clause IDs")
    if known_clauses is not None:
        for i, clause in enumerate(clauses):
            if clause not in known_clauses:
                raise ScenarioInvalid(source, sid, f"clauses[{i}]", clause, "a clause ID of conformance/clauses.yaml")
    requires = data.get("requires") or []
    if not isinstance(requires, list):
        raise ScenarioInvalid(source, sid, "requires", requires, "a list of capabilities")
    for i, cap in enumerate(requires):
        if cap not in CAPABILITIES:
            raise ScenarioInvalid(source, sid, f"requires[{i}]", cap, "one of " + ", ".join(sorted(CAPABILITIES)))
    timeout = data.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 600_000:
        raise ScenarioInvalid(source, sid, "timeout_ms", timeout, "an int between 1 and 600000")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioInvalid(source, sid, "steps", raw_steps, "a non-empty list of steps")
    required = frozenset(requires)
    body = tuple(_parse_item(s, source, sid, f"steps[{i}]", required) for i, s in enumerate(raw_steps))
    steps = flatten(body)
    _check_cb_actions(steps, body, source, sid)
    return Scenario(sid, title.strip(), chapter, tuple(clauses), required, timeout, steps, source, body)


def _parse_item(raw: object, source: str, sid: str, where: str, requires: frozenset[str]) -> Step | Parallel:
    if not (isinstance(raw, Mapping) and len(raw) == 1 and PARALLEL in raw):
        return _parse_step(raw, source, sid, where, requires)
    lists = raw[PARALLEL]
    field = f"{where}.{PARALLEL}"
    if not isinstance(lists, list) or not THREADS_MIN <= len(lists) <= THREADS_MAX:
        raise ScenarioInvalid(source, sid, field, lists,
                              f"a list of {THREADS_MIN} to {THREADS_MAX} lists of steps, one per thread")
    parsed: list[tuple[Step, ...]] = []
    for k, steps in enumerate(lists):
        if not isinstance(steps, list) or not steps:
            raise ScenarioInvalid(source, sid, f"{field}[{k}]", steps, "a non-empty list of steps")
        thread: list[Step] = []
        for j, st in enumerate(steps):
            inner = f"{field}[{k}][{j}]"
            if isinstance(st, Mapping) and PARALLEL in st:
                raise ScenarioInvalid(source, sid, inner, PARALLEL, "a step (parallel blocks do not nest)")
            thread.append(_parse_step(st, source, sid, inner, requires))
        parsed.append(tuple(thread))
    return Parallel(tuple(parsed))


def _where(body: tuple[Step | Parallel, ...]) -> list[str]:
    """The YAML field of each step of ``flatten(body)`` (block markers named after their step)."""
    out: list[str] = []
    for i, item in enumerate(body):
        if isinstance(item, Step):
            out.append(f"steps[{i}]")
            continue
        out.append(f"steps[{i}].{PARALLEL}")
        out += [f"steps[{i}].{PARALLEL}[{k}][{j}]" for k, steps in enumerate(item.lists) for j in range(len(steps))]
        out.append(f"steps[{i}].{PARALLEL}")
    return out


def _check_cb_actions(steps: tuple[Step, ...], body: tuple[Step | Parallel, ...], source: str, sid: str) -> None:
    """cb_action: a known kind and action, a count that fits it, and a request handle used before."""
    wheres: list[str] | None = None
    requests: set[str] = set()
    for index, st in enumerate(steps):
        if st.op is Op.CB_ACTION:
            wheres = wheres or _where(body)
            field = f"{wheres[index]}.cb_action"
            kind, action, count = st.arg("kind"), st.arg("action"), st.arg("count")
            if kind not in CB_KINDS:
                raise ScenarioInvalid(source, sid, f"{field}.kind", kind, "one of " + ", ".join(CB_KINDS))
            match = CB_ACTION.match(str(action))
            if match is None:
                raise ScenarioInvalid(source, sid, f"{field}.action", action,
                                      "none, free_buf, map_unmap, wait_return, new_request, set_priority_<int32>, "
                                      "alloc_<request handle>, sleep_<ms 1..9999> or hold_<ms 1..9999>")
            if match.group(2) is not None and not -(2**31) <= int(match.group(2)) < 2**31:
                raise ScenarioInvalid(source, sid, f"{field}.action", action, "set_priority_<int32>")
            if match.group(3) is not None and match.group(3) not in requests:
                raise ScenarioInvalid(source, sid, f"{field}.action", action,
                                      "alloc_<handle> naming a request an earlier step used")
            if (action == "none") != (count == 0):
                raise ScenarioInvalid(source, sid, f"{field}.count", count,
                                      "0 for action none, at least 1 otherwise")
        for (_, value), spec in zip(st.args, OPS[st.op].args, strict=True):
            if spec.kind is ArgKind.REQ and isinstance(value, str):
                requests.add(value)
            elif spec.kind is ArgKind.REQS and isinstance(value, tuple):
                requests.update(v for v in value if isinstance(v, str))


def _parse_step(raw: object, source: str, sid: str, where: str, requires: frozenset[str]) -> Step:
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ScenarioInvalid(source, sid, where, raw, "a mapping with exactly one op name as key")
    (name, raw_args), = raw.items()
    found = _STEP_SPECS.get(name) if isinstance(name, str) else None
    if found is None:
        raise ScenarioInvalid(source, sid, where, name, "an op of ndk_probe/vocabulary.yaml")
    op, spec, known = found
    if op in BLOCK_OPS:
        raise ScenarioInvalid(source, sid, where, name, f"an op other than par_begin/par_end (write {PARALLEL}: "
                                                        "[[steps...], ...])")
    args = {} if raw_args is None else raw_args
    at = f"{where}.{name}"
    if not isinstance(args, Mapping):
        raise ScenarioInvalid(source, sid, at, raw_args, "a mapping of arguments")
    for key in args:
        if key not in known:
            expected = "one of " + ", ".join(sorted(known)) if known else "no arguments"
            raise ScenarioInvalid(source, sid, f"{at}.{key}", key, expected)
    values: list[tuple[str, ArgValue]] = []
    for arg in spec.args:
        if arg.name not in args:
            raise ScenarioInvalid(source, sid, f"{at}.{arg.name}", None, f"a value of kind {arg.kind}")
        values.append((arg.name, _check_arg(arg, args[arg.name], source, sid, at, requires)))
    if op is Op.FILE_NEW:
        given = dict(values)["size"]
        size = SYMBOLIC_INTS.get(given) if isinstance(given, str) else given
        if not isinstance(size, int) or size > FILE_NEW_MAX_BYTES:
            raise ScenarioInvalid(source, sid, f"{at}.size", given,
                                  f"a file size of at most {FILE_NEW_MAX_BYTES} bytes (64 MiB)")
    return Step(op, tuple(values))


def _check_arg(arg: ArgSpec, value: object, source: str, sid: str, at: str, requires: frozenset[str]) -> ArgValue:
    """The argument's value as the step keeps it; ScenarioInvalid naming ``at`` (the step's field) and the
    argument when it is not of its kind."""
    kind = arg.kind

    def bad(expected: str) -> ScenarioInvalid:
        return ScenarioInvalid(source, sid, f"{at}.{arg.name}", value, expected)

    if kind in _HANDLE_KINDS:
        if not isinstance(value, str) or not HANDLE.match(value):
            raise bad("a handle name matching [a-z][a-z0-9_]*")
        return value
    if kind is ArgKind.COOKIE:
        if value is None or (isinstance(value, str) and HANDLE.match(value)):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
            return value
        raise bad("a cookie handle name, null, or a non-negative int")
    if kind in (ArgKind.REQS, ArgKind.BUFS):
        if not isinstance(value, list) or not all(isinstance(v, str) and HANDLE.match(v) for v in value):
            raise bad("a list of handle names")
        return tuple(value)
    if kind in INT_RANGES:
        if isinstance(value, str):
            if value in SYMBOLIC_INTS:
                return value
            if value in PAIR_REFERENCES:
                if PAIR_REFERENCES[value] not in requires:
                    raise bad(f"{value} only in a scenario that requires {PAIR_REFERENCES[value]}")
                return value
        if isinstance(value, int) and not isinstance(value, bool):
            low, high = INT_RANGES[kind]
            if low <= value <= high:
                return value
        raise bad(f"an int of kind {kind} or one of " + ", ".join([*SYMBOLIC_INTS, *PAIR_REFERENCES]))
    if kind is ArgKind.PROT:
        return _check_flags(value, PROT_NAMES, bad, allow_none=True)
    if kind is ArgKind.MAPFLAGS:
        return _check_flags(value, MAPFLAG_NAMES, bad, allow_none=False)
    if kind is ArgKind.BOOL:
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if kind is ArgKind.FDSEL:
        if isinstance(value, str) and HANDLE.match(value):
            return value
        if isinstance(value, Mapping) and set(value) == {"fd"} and isinstance(value["fd"], int):
            return (("fd", value["fd"]),)
        raise bad("a file handle name or {fd: <int>}")
    if kind is ArgKind.BINDSEL:
        if isinstance(value, Mapping) and len(value) == 1:
            (key, inner), = value.items()
            if key == "cookie" and isinstance(inner, str) and HANDLE.match(inner):
                return (("cookie", inner),)
            if key == "nth" and isinstance(inner, int) and not isinstance(inner, bool) and inner >= 0:
                return (("nth", inner),)
        raise bad("{cookie: <handle>} or {nth: <int >= 0>}")
    if kind is ArgKind.ERRNO:
        if isinstance(value, str) and value in ERRNO_NAMES:
            return value
        raise bad("an errno name of ndk_probe/vocabulary.yaml")
    if kind is ArgKind.TEXT:
        if isinstance(value, str) and value and " " not in value and "\n" not in value:
            return value
        raise bad("a single token without spaces")
    raise AssertionError(f"unhandled argument kind {kind}")


def _check_flags(
    value: object, names: tuple[str, ...], bad: Callable[[str], ScenarioInvalid], *, allow_none: bool
) -> ArgValue:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if allow_none and value == "NONE":
        return ()
    if isinstance(value, list) and all(isinstance(v, str) and v in names for v in value):
        return tuple(value)
    raise bad(("NONE, " if allow_none else "") + "a list drawn from " + ", ".join(names) + ", or an int")
