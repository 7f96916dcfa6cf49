"""Shrinking a divergent program to a small one that still diverges the same way on the same target.

Candidates drop chunks of steps (halving the chunk size down to one step); once no single step can go,
structural edits follow, those that save steps first: a mapping goes with every step that names it, a
parallel block becomes its threads' steps one
after the other, or loses a thread; a later request or cookie object becomes an earlier one (its creation
dropped, its setters then repeat and can go); a cookie object no bind selects becomes an integer (its
cookie_new dropped); a bind by cookie becomes a bind by position where arrival order cannot change it
(so that its cookie can become an integer too); a batch allocAsync keeps one request; priorities go to
the default; sizes and lengths go down to one page (all at once, or one request's size). After each edit
the wait counts are recomputed (await_alloc waits for the onAllocs the program still owes, await_load
for its onLoads) and `requires` follows the ops and cookies left. No edit changes a vnpu command: a
`preempt_late=` (whose late onPreempt may be what makes the divergence show every time) stays one. A
submission a conforming device may refuse, with onPreempt set, keeps a wait for its onAlloc and a pause
after it, and a commanded preemption of a buffer without onPreempt the pause after it: an onPreempt that
must not come shows in the trace only if the program is still running when it comes, and the confirmation
runs below cannot tell a program that shows it by design from one that showed it by luck (an edit that
drops such a pause is put back, and the candidate equal to the kept program never runs).

Every candidate must be a legal program (host.fuzz.legal.check, the one validity notion here: the steps
replayed through the preconditions of host.fuzz.caller's rules, which the generator draws under: no step
on a freed or never-bound handle, no map beyond the request's protection, no wait for callbacks nobody
owes...): an illegal one never runs, even if it would give the same FAIL. Legal candidates run on the
target, many in one probe batch; one is kept only when it gives the same verdict with the same clause,
and gives it again in CONFIRM more runs (a divergence shown by one run's timing alone does not make the
kept program)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from reference_model.vocabulary import PREEMPT_LATE_MS

from .answers import PAGE, names_unsupported_pair
from .caller import PREEMPT_KEYS
from .execute import Result
from .legal import check, preempted_without_onpreempt, refusable_with_onpreempt
from .pen import AWAIT_MS, PREEMPT_PAUSE_MS

Program = dict[str, Any]
RunFn = Callable[[Sequence[Program]], list[Result | None]]
BATCH: Final = 48
# Candidates in a batch before one has been timed: a batch must not run long past the deadline.
FIRST_BATCH: Final = 8
SHRINK_AWAIT_MS: Final = 400
CONFIRM: Final = 2


def flat_steps(program: Program) -> list[dict[str, Any]]:
    """The program's steps with parallel blocks opened (thread steps in list order)."""
    out: list[dict[str, Any]] = []
    for item in program["steps"]:
        if "parallel" in item:
            for steps in item["parallel"]:
                out.extend(steps)
        else:
            out.append(item)
    return out


def step_count(program: Program) -> int:
    return len(flat_steps(program))


def _wide_cookie(step: dict[str, Any]) -> bool:
    """A raw integer cookie that does not fit 32 bits (a 64-bit ABI only)."""
    ((op, args),) = step.items()
    cookie = args.get("cookie") if op == "req_set_cookie" else None
    return isinstance(cookie, int) and not isinstance(cookie, bool) and cookie >= 1 << 32


def normalise(program: Program) -> Program:
    """Recompute the wait counts and `requires` after an edit; drop waits for nothing; keep the pause after
    an event after which an onPreempt must not come (``_keep_pauses``)."""
    out = copy.deepcopy(program)
    allocs = loads = preempts = 0
    steps: list[dict[str, Any]] = []
    for item in out["steps"]:
        ((op, args),) = item.items()
        if op == "alloc":
            allocs += len(args["reqs"])
        elif op == "buf_load" and args["onload"]:
            loads += 1
        elif op == "await_alloc":
            if allocs == 0:
                continue
            args["count"] = allocs
        elif op == "await_load":
            if loads == 0:
                continue
            args["count"] = loads
        elif op == "vnpu" and str(args["command"]).partition("=")[0] in PREEMPT_KEYS:
            preempts += 1
        elif op == "await_preempt":
            if preempts == 0:
                continue
            args["count"] = min(args["count"], preempts)
        steps.append(item)
    out["steps"] = steps
    _keep_pauses(out, allocs)
    ops = {next(iter(step)) for step in flat_steps(out)}
    requires = ["supported-pair"] if "supported-pair" in program.get("requires", ()) else []
    if any(names_unsupported_pair(args) for step in flat_steps(out) for args in step.values()):
        requires.append("unsupported-pair")
    if ops & {"buf_load", "file_new"}:
        requires.append("load")
    if "vnpu" in ops:
        requires.append("vnpu-control")
    if any(_wide_cookie(step) for step in flat_steps(out)):
        requires.append("pointer-64")
    out["requires"] = requires
    return out


def _keep_pauses(program: Program, owed: int) -> None:
    """The pauses that let an onPreempt that must not come show in the trace. It would come on the device's
    thread after the event that makes it wrong, and the probe's teardown waits only for callbacks owed, so
    without a pause the child may exit first and the FAIL depends on thread timing: candidates without
    it passed the shrinker's confirmation runs and their scenario then replayed 2 of 3 times
    (M_PREEMPT_ON_FAILED; M_LIVE_CALLBACKS 1 of 3). A candidate that dropped a pause is normalised back.
    - After a submission a conforming device may refuse, with onPreempt set (an invalid request, or
      pressure): no onPreempt may follow its failed onAlloc (preempt-callback-on-forced-dealloc). The wait
      for that onAlloc (the first await_alloc after the submission, or one added at the end; ``owed``:
      the onAllocs the whole program owes) is followed by a pause, as the corpus's
      `preemption.*_with_onpreempt_no_callback` scenarios do.
    - After a commanded preemption of a buffer whose snapshot had no onPreempt (req-onpreempt-default-null):
      the pause the generator put there."""
    steps = program["steps"]
    for position in reversed(refusable_with_onpreempt(program)):
        wait = next((j for j in range(position + 1, len(steps)) if "await_alloc" in steps[j]), None)
        if wait is None:
            steps.append({"await_alloc": {"count": owed, "timeout_ms": AWAIT_MS}})
            wait = len(steps) - 1
        _pause_at(steps, wait + 1)
    for position in reversed(preempted_without_onpreempt(program)):
        late = str(steps[position]["vnpu"]["command"]).startswith("preempt_late=")
        _pause_at(steps, position + 1, PREEMPT_PAUSE_MS + (PREEMPT_LATE_MS if late else 0))


def _pause_at(steps: list[dict[str, Any]], at: int, ms: int = PREEMPT_PAUSE_MS) -> None:
    """A pause of at least ``ms`` as step ``at``: the sleep there lengthened, or one inserted."""
    after = steps[at] if at < len(steps) else {}
    if "sleep_ms" in after:
        after["sleep_ms"]["ms"] = max(after["sleep_ms"]["ms"], ms)
    else:
        steps.insert(at, {"sleep_ms": {"ms": ms}})


def _chunk_removals(program: Program, size: int, first: int = 0) -> Iterator[Program]:
    """The program without each chunk of ``size`` steps, from the chunk at step ``first`` round to those
    before it: after a removal that kept the divergence, the chunks before it, which did not, come last."""
    steps = program["steps"]
    if size >= len(steps):
        return
    starts, at = range(0, len(steps), size), first - first % size
    for start in [s for s in starts if s >= at] + [s for s in starts if s < at]:
        out = dict(program)
        out["steps"] = steps[:start] + steps[start + size :]
        yield out


def _first_change(before: list[Any], after: list[Any]) -> int:
    """The position of the first step that differs between two step lists."""
    pairs = enumerate(zip(before, after, strict=False))
    return next((i for i, (a, b) in pairs if a != b), min(len(before), len(after)))


def _parallel_edits(program: Program) -> Iterator[Program]:
    steps = program["steps"]
    for i, item in enumerate(steps):
        if "parallel" not in item:
            continue
        lists = item["parallel"]
        yield dict(program, steps=steps[:i] + [s for block in lists for s in block] + steps[i + 1 :])
        for k in range(len(lists)):
            rest = lists[:k] + lists[k + 1 :]
            middle = [{"parallel": rest}] if len(rest) >= 2 else list(rest[0])
            yield dict(program, steps=steps[:i] + middle + steps[i + 1 :])


def _mapping_removals(program: Program) -> Iterator[Program]:
    """A mapping with every step that names it (its map, accesses, looks and unmaps): apart, none of them can
    go (an unmap of a mapping never made, or a mapping left in place that keeps a preemption refused)."""
    steps = program["steps"]
    for name in _names(steps, "buf_map", "map"):
        kept = [s for s in steps if "parallel" in s or (next(iter(s.values())) or {}).get("map") != name]
        yield dict(program, steps=kept)


def _rename(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new if value == old else value
    if isinstance(value, list):
        return [_rename(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, old, new) for k, v in value.items()}
    return value


def _replace_step(program: Program, i: int, step: dict[str, Any]) -> Program:
    steps = program["steps"]
    return dict(program, steps=[*steps[:i], step, *steps[i + 1:]])


def _names(steps: list[dict[str, Any]], op: str, key: str) -> list[str]:
    return [args[key] for s in steps if "parallel" not in s for o, args in s.items() if o == op]


def _argument_edits(program: Program) -> Iterator[Program]:
    """Edits of one step's arguments that keep the step count: a batch allocAsync of one request,
    priorities at the default, a protection of PROT_READ alone (a request's then is the default, and
    chunk removal can drop its setter)."""
    steps = program["steps"]
    for i, item in enumerate(steps):
        if "parallel" in item:
            continue
        ((op, args),) = item.items()
        edits: list[dict[str, Any]] = []
        if op == "alloc" and len(args["reqs"]) > 1:
            edits += [{"reqs": [r]} for r in args["reqs"]]
        if op in ("req_set_priority", "buf_set_priority") and args["priority"] != 500:
            edits.append({"priority": 500})
        if op in ("req_set_prot", "buf_map") and isinstance(args["prot"], list) and args["prot"] != ["READ"]:
            edits.append({"prot": ["READ"]})
        for edit in edits:
            yield _replace_step(program, i, {op: dict(args, **edit)})


def _merges(program: Program) -> Iterator[Program]:
    """A later request (or cookie) becomes an earlier one: its creation goes, its setters then repeat the
    earlier handle's and chunk removal can drop them."""
    steps = program["steps"]
    for op, key in (("req_create", "req"), ("cookie_new", "cookie")):
        names = _names(steps, op, key)
        for k, later in enumerate(names[1:], 1):
            for first in names[:k]:
                kept = [s for s in steps if s != {op: {key: later}}]
                yield dict(program, steps=_rename(kept, later, first))


def _raw_cookies(program: Program) -> Iterator[Program]:
    """A cookie object no bind selects becomes an integer cookie (its creation goes)."""
    steps = program["steps"]
    bound = {str(args["select"].get("cookie")) for s in flat_steps(program) for o, args in s.items() if o == "bind"}
    used = {args["cookie"] for s in flat_steps(program) for o, args in s.items() if o == "req_set_cookie"}
    for name in _names(steps, "cookie_new", "cookie"):
        if name in bound:
            continue
        digits = "".join(ch for ch in name if ch.isdigit())
        value = int(digits) if digits and int(digits) > 0 else 1000
        while value in used:  # a value of its own (each cookie value is handed over once)
            value += 4096
        kept = [s for s in steps if s != {"cookie_new": {"cookie": name}}]
        out: list[dict[str, Any]] = []
        for s in kept:
            ((op, args),) = s.items()
            if op == "req_set_cookie" and args["cookie"] == name:
                s = {op: dict(args, cookie=value)}
            out.append(s)
        yield dict(program, steps=out)


def _binds_by_position(program: Program) -> Iterator[Program]:
    """A bind by cookie becomes a bind by position (legal only where arrival order cannot change it), so
    that the cookie object can become an integer."""
    steps = program["steps"]
    allocs = sum(len(args["reqs"]) for s in flat_steps(program) for o, args in s.items() if o == "alloc")
    for i, item in enumerate(steps):
        ((op, args),) = item.items()
        if op == "bind" and "cookie" in args["select"]:
            for k in range(allocs):
                yield _replace_step(program, i, {op: dict(args, select={"nth": k})})


def _sizes(program: Program) -> Iterator[Program]:
    """Every size and length down to one page at once, then each request's size alone."""
    steps = program["steps"]
    lengths = {"req_set_size": "size", "file_new": "size", "buf_map": "length", "buf_load": "length",
               "map_read": "length", "map_write": "length", "buf_unmap": "length"}

    def small(step: dict[str, Any]) -> dict[str, Any]:
        ((op, args),) = step.items()
        key = lengths.get(op)
        if key is None or not isinstance(args[key], int) or args[key] <= PAGE:
            return step
        return {op: dict(args, **{key: PAGE})}

    whole = [({"parallel": [[small(t) for t in block] for block in s["parallel"]]} if "parallel" in s
              else small(s)) for s in steps]
    if whole != steps:
        yield dict(program, steps=whole)
    for i, item in enumerate(steps):
        ((op, args),) = item.items()
        if op == "req_set_size" and isinstance(args["size"], int) and args["size"] > PAGE:
            yield _replace_step(program, i, {op: dict(args, size=PAGE)})


def _quick(program: Program) -> Program:
    """The program as a candidate runs: waits cut to SHRINK_AWAIT_MS (a candidate that dropped the step a
    wait needs, such as setOnAlloc, would otherwise spend the whole wait)."""
    out = copy.deepcopy(program)
    for item in out["steps"]:
        ((op, args),) = item.items()
        if op.startswith("await_"):
            args["timeout_ms"] = min(args["timeout_ms"], SHRINK_AWAIT_MS)
    return out


class _Clock:
    """The shrink's deadline, and how long a candidate has taken to run so far: a batch holds only the
    candidates that fit in the time left (at least one), so that shrinking ends about at the deadline."""

    def __init__(self, run: RunFn, deadline: float, capacity: int | None = None) -> None:
        self._run = run
        self.deadline = deadline
        self.capacity = capacity  # the device's declared capacity, which the legality check reads
        self.spent_s = 0.0
        self.ran = 0

    def run(self, programs: Sequence[Program]) -> list[Result | None]:
        started = time.monotonic()
        results = self._run(programs)
        self.spent_s += time.monotonic() - started
        self.ran += len(programs)
        return results

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def batch(self) -> int:
        if not self.ran:
            return FIRST_BATCH
        return max(1, min(BATCH, int(self.left() / (self.spent_s / self.ran))))


def _first_match(candidates: list[Program], same: Callable[[Result], bool], clock: _Clock,
                 current: Program) -> tuple[Program | None, int]:
    """The first candidate that is legal (host.fuzz.legal) and gives the same verdict and signature; and how
    many candidates ran. Illegal candidates never run, nor those that normalise back to ``current`` or
    beyond its size (an edit whose pause normalise puts back, ``_keep_pauses``)."""
    legal_ones: list[Program] = []
    seen: set[str] = {repr(current["steps"])}
    for c in candidates:
        c = normalise(c)
        key = repr(c["steps"])
        if key in seen or step_count(c) > step_count(current) or check(c, clock.capacity) is not None:
            continue
        seen.add(key)
        legal_ones.append(c)
    ran = start = 0
    while start < len(legal_ones) and clock.left() > 0:
        chunk = legal_ones[start : start + clock.batch()]
        for n, c in enumerate(chunk):
            c["id"] = f"{c['id'].split('-c')[0]}-c{start + n}"
        start += len(chunk)
        ran += len(chunk)
        for candidate, result in zip(chunk, clock.run([_quick(c) for c in chunk]), strict=True):
            if result is not None and same(result) and _confirmed(candidate, same, clock.run):
                return candidate, ran + CONFIRM
    return None, ran


def _confirmed(candidate: Program, same: Callable[[Result], bool], run: RunFn) -> bool:
    """The candidate gives the same verdict CONFIRM times more: a divergence that shows only by the luck of
    one run's timing does not make the kept program."""
    copies = [dict(_quick(candidate), id=f"{candidate['id']}-r{k}") for k in range(CONFIRM)]
    return all(r is not None and same(r) for r in run(copies))


# Edits tried once no single step can go, in this order: those that save steps first.
EDITS: Final = (_mapping_removals, _parallel_edits, _merges, _raw_cookies, _binds_by_position, _argument_edits,
                _sizes)


def shrink(program: Program, found: Result, run: RunFn, deadline: float,
           capacity: int | None = None) -> tuple[Program, int]:
    """The smallest program found before `deadline` (time.monotonic) that still gives `found`'s verdict and
    signature; and how many candidates ran. ``capacity``: the device's declared capacity (legality reads
    it: a request that fits it is granted)."""

    def same(result: Result) -> bool:
        return result.verdict is found.verdict and result.signature == found.signature

    current = normalise(program)
    clock = _Clock(run, deadline, capacity)
    tried = 0
    size = max(1, len(current["steps"]) // 2)
    first = 0  # where the last removal that kept the divergence was
    while time.monotonic() < deadline:
        candidates = list(_chunk_removals(current, size, first))
        better, ran = _first_match(candidates, same, clock, current) if candidates else (None, 0)
        tried += ran
        if better is not None:
            first = _first_change(current["steps"], better["steps"])
            current = better
            size = min(size, max(1, len(current["steps"]) // 2))
            continue
        if size > 1:
            size //= 2
            first = 0
            continue
        for edit in EDITS:
            if time.monotonic() >= deadline:
                break
            better, ran = _first_match(list(edit(current)), same, clock, current)
            tried += ran
            if better is not None:
                break
        if better is None:
            break
        current = better
        size = max(1, len(current["steps"]) // 4)
        first = 0
    return current, tried
