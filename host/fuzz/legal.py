"""Whether a fuzz program is one a caller may write: its steps replayed through the caller's model.

The generator builds only legal programs; the shrinker edits them (drops steps, merges handles, shrinks
sizes) and an edit can leave a program that the text forbids or that the judge cannot judge: a step on a
request that was freed or never created, a buffer handle that was never bound (its allocation or bind
dropped) or already freed, a mapping that is not live or a page no longer mapped, a load longer than its
file, an onAlloc wait for callbacks nobody owes. Such a candidate may still give the same FAIL (the
defect shows before the illegal step), and keeping it would report an illegal program. ``check`` replays
the steps through the rules of host.fuzz.caller, the same preconditions the generator draws under, and
names the first step whose precondition fails; the shrinker runs only candidates it accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .caller import PARALLEL, PREEMPT_KEYS, Caller, Illegal, item_steps

# What a malformed candidate's arguments raise in a rule (a missing key, a list where a name belongs).
_MALFORMED = (Illegal, KeyError, TypeError)


@dataclass(frozen=True)
class _Taken:
    """One step replayed: where it is, what it is, the state after it (before it when illegal), and why it
    is illegal (None: legal)."""

    position: int  # in program["steps"]
    number: int  # among the steps, parallel blocks opened
    op: str
    args: Any
    state: Caller
    subs_before: int  # submissions before the step
    illegal: str | None = None


def _replay(program: Mapping[str, Any], capacity: int | None = None) -> Iterator[_Taken]:
    """The steps taken, up to the first illegal one (the last then, with why). A parallel item is checked
    as a whole first (its threads apart), then its steps count one by one. ``capacity``: the device's
    declared capacity (what the program was generated for: host.fuzz.generate)."""
    c = Caller(room=capacity)
    n = 0
    for position, item in enumerate(program["steps"]):
        for op, args in item_steps(item):
            before = len(c.subs)
            try:
                c.take(op, args)
            except _MALFORMED as exc:
                yield _Taken(position, n, op, args, c, before, str(exc))
                return
            if op != PARALLEL:
                yield _Taken(position, n, op, args, c, before)
                n += 1


def check(program: Mapping[str, Any], capacity: int | None = None) -> str | None:
    """None when every step is legal; else the first illegal step and why."""
    for t in _replay(program, capacity):
        if t.illegal is not None:
            return f"step {t.number}: {t.illegal}" if t.op == PARALLEL else f"step {t.number} ({t.op}): {t.illegal}"
    return None


def legal(program: Mapping[str, Any], capacity: int | None = None) -> bool:
    return check(program, capacity) is None


def _positions(program: Mapping[str, Any], hit: Callable[[Caller, str, Any, int], bool]) -> list[int]:
    """Positions (in ``program["steps"]``) of the steps for which ``hit(state after the step, op, args,
    submissions before it)`` holds; the steps are replayed as ``check`` does, up to the first illegal one."""
    out: list[int] = []
    for t in _replay(program):
        if t.illegal is None and t.position not in out and hit(t.state, t.op, t.args, t.subs_before):
            out.append(t.position)
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
    def hit(c: Caller, op: str, a: Any, before: int) -> bool:
        key, _, value = str(a.get("command", "")).partition("=")
        return op == "vnpu" and key in PREEMPT_KEYS and value in c.bufs and not c.bufs[value].onpreempt

    return _positions(program, hit)
