"""Shrinking a divergent program to a small one that still diverges the same way on the same target.

Candidates drop chunks of steps (halving the chunk size down to one step), turn a parallel block into
its threads' steps one after the other or drop one of its threads, split a batch allocAsync into one
request, merge a request into another one the program already uses, and move priorities to the
default. Sizes and lengths stay: a smaller buffer under an unchanged mapping would be another, illegal
program. After each edit the wait counts are recomputed (await_alloc waits for the onAllocs the program
still owes, await_load for its onLoads) and `requires` follows the ops left. Every candidate runs on the
target, many in one probe batch; one is kept only when it gives the same verdict with the same clause.
Candidates the judge cannot judge (a step left using an unbound buffer) come back ERROR and are not
kept."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from .execute import Result

Program = dict[str, Any]
RunFn = Callable[[Sequence[Program]], list[Result | None]]
BATCH: Final = 48
SHRINK_AWAIT_MS: Final = 400


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


def normalise(program: Program) -> Program:
    """Recompute the wait counts and `requires` after an edit; drop waits for nothing."""
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
        elif op == "vnpu" and str(args["command"]).startswith("preempt="):
            preempts += 1
        elif op == "await_preempt":
            if preempts == 0:
                continue
            args["count"] = min(args["count"], preempts)
        steps.append(item)
    out["steps"] = steps
    ops = {next(iter(step)) for step in flat_steps(out)}
    requires = ["supported-pair"]
    if ops & {"buf_load", "file_new"}:
        requires.append("load")
    if "vnpu" in ops:
        requires.append("vnpu-control")
    out["requires"] = requires
    return out


def _chunk_removals(program: Program, size: int) -> Iterator[Program]:
    steps = program["steps"]
    for start in range(0, len(steps), size):
        if size >= len(steps):
            return
        out = dict(program)
        out["steps"] = steps[:start] + steps[start + size :]
        yield out


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


def _rename(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new if value == old else value
    if isinstance(value, list):
        return [_rename(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, old, new) for k, v in value.items()}
    return value


def _argument_edits(program: Program) -> Iterator[Program]:
    steps = program["steps"]
    requests = [next(iter(s.values()))["req"] for s in steps if "req_create" in s]
    for i, item in enumerate(steps):
        if "parallel" in item:
            continue
        ((op, args),) = item.items()
        edits: list[dict[str, Any]] = []
        if op == "alloc" and len(args["reqs"]) > 1:
            edits += [{"reqs": [r]} for r in args["reqs"]]
        if op in ("req_set_priority", "buf_set_priority") and args["priority"] != 500:
            edits.append({"priority": 500})
        for edit in edits:
            changed = dict(args, **edit)
            yield dict(program, steps=[*steps[:i], {op: changed}, *steps[i + 1:]])
    # Merging handles: a later request becomes the first one (its creation dropped).
    for later in requests[1:]:
        first = requests[0]
        kept = [s for s in steps if s != {"req_create": {"req": later}}]
        yield dict(program, steps=_rename(kept, later, first))


def _quick(program: Program) -> Program:
    """The program as a candidate runs: waits cut to SHRINK_AWAIT_MS (a candidate that dropped the step a
    wait needs, such as setOnAlloc, would otherwise spend the whole wait)."""
    out = copy.deepcopy(program)
    for item in out["steps"]:
        ((op, args),) = item.items()
        if op.startswith("await_"):
            args["timeout_ms"] = min(args["timeout_ms"], SHRINK_AWAIT_MS)
    return out


def _first_match(candidates: list[Program], same: Callable[[Result], bool],
                 run: RunFn) -> Program | None:
    for start in range(0, len(candidates), BATCH):
        chunk = [normalise(c) for c in candidates[start : start + BATCH]]
        for n, c in enumerate(chunk):
            c["id"] = f"{c['id'].split('-c')[0]}-c{start + n}"
        for candidate, result in zip(chunk, run([_quick(c) for c in chunk]), strict=True):
            if result is not None and same(result):
                return candidate
    return None


def shrink(program: Program, found: Result, run: RunFn, deadline: float) -> tuple[Program, int]:
    """The smallest program found before `deadline` (time.monotonic) that still gives `found`'s verdict and
    signature; and how many candidates ran."""

    def same(result: Result) -> bool:
        return result.verdict is found.verdict and result.signature == found.signature

    current = normalise(program)
    tried = 0
    size = max(1, len(current["steps"]) // 2)
    while time.monotonic() < deadline:
        candidates = list(_chunk_removals(current, size))
        tried += len(candidates)
        better = _first_match(candidates, same, run) if candidates else None
        if better is not None:
            current = better
            size = min(size, max(1, len(current["steps"]) // 2))
            continue
        if size > 1:
            size //= 2
            continue
        candidates = list(_parallel_edits(current)) + list(_argument_edits(current))
        tried += len(candidates)
        better = _first_match(candidates, same, run) if candidates else None
        if better is None:
            break
        current = better
        size = max(1, len(current["steps"]) // 2)
    return current, tried
