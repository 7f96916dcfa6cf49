"""What every transition needs besides the state: the judging context and small shared helpers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from .caps import DeviceCaps
from .content import DigestMemo
from .errors import Unjudgeable
from .profiles import Profile
from .rules import Reject
from .scenario import Step
from .state import Buffer, State
from .trace import Call
from .vocabulary import Priority

Out = list[State] | Reject

TYPE_VALID: Final = range(1, 5)
# [ANPUBUFFER_PRIORITY_MIN, ANPUBUFFER_PRIORITY_MAX], inclusive (buffer.h, through vocabulary.yaml)
PRIORITY_RANGE: Final = range(Priority.MIN, Priority.MAX + 1)
PRIORITY_BOUNDS: Final = (PRIORITY_RANGE.start, PRIORITY_RANGE.stop - 1)
PRIORITY_SPAN: Final = f"[{PRIORITY_RANGE.start}, {PRIORITY_RANGE.stop - 1}]"
ANY_ERRNO: Final = "any errno"


@dataclass(frozen=True, slots=True)
class Ctx:
    profile: Profile
    caps: DeviceCaps
    names: Mapping[str, str]  # scenario handle name -> probe slot (the compiler's assignment)
    steps: tuple[Step, ...]  # the scenario's steps
    spontaneous: bool  # preemption may happen without a vnpu command (capacity not declared)
    capacity: int | None  # exact budget prediction when declared with the budget policy
    policy: str | None = None  # acl / caching / arena declared with a capacity: exact prediction (policies/)
    returns: bool = False  # the trace records each callback's return (cb_return, trace version 2)
    # Per step, its op when main makes it (None for a step of a parallel block's thread): the usual call.
    main_ops: tuple[str | None, ...] = ()
    # Every call is made by main: the scenario has no parallel block and no cb_action (the envelope refuses
    # a call on another thread or by a callback), so no other call can be in flight meanwhile.
    one_thread: bool = False
    # The device declares the vnpu's capacity and policy, and with them its documented victim order
    # (`preempt=lowest` takes a buffer of the greatest priority value): the model then predicts the victim.
    # Otherwise the device chooses, and the victim is the one the trace shows.
    ranks_victims: bool = False
    # The digests computed so far (content.DigestMemo): the caller's, filled as the replay computes more.
    digests: DigestMemo = field(default_factory=dict)


def errno_set(errno: str | None) -> bool:
    """A failure reported errno (formats §5: the name, or E#<n> for numbers outside the table)."""
    return errno is not None and errno not in ("E#0", "")


def arg(call: Call, name: str) -> object:
    return call.args.get(name)


def arg_int(call: Call, name: str) -> int:
    v = call.args.get(name)
    if type(v) is not int:  # arguments are decoded JSON: exact builtin types, and true is a bool, not an int
        raise Unjudgeable(call.line, f"step {call.step} ({call.op}): argument {name} is {v!r}, expected an integer")
    return v


def arg_bool(call: Call, name: str) -> bool:
    v = call.args.get(name)
    if isinstance(v, bool):
        return v
    if v in (0, 1):
        return bool(v)
    raise Unjudgeable(call.line, f"step {call.step} ({call.op}): argument {name} is {v!r}, expected true or false")


def arg_slot(call: Call, name: str) -> str:
    v = call.args.get(name)
    if not isinstance(v, str):
        raise Unjudgeable(call.line, f"step {call.step} ({call.op}): argument {name} is {v!r}, expected a slot")
    return v


def arg_handle(call: Call, name: str) -> str | None:
    v = call.args.get(name)
    if v is None or isinstance(v, str):
        return v
    raise Unjudgeable(call.line, f"step {call.step} ({call.op}): argument {name} is {v!r}, expected a handle or null")


def arg_list(call: Call, name: str) -> list[str | None]:
    v = call.args.get(name)
    if isinstance(v, str):
        return [] if v == "-" else [p or None for p in v.split(",")]
    if isinstance(v, list):
        for x in v:  # a plain loop: every alloc and free reads its list
            if x is not None and not isinstance(x, str):
                break
        else:
            return list(v)
    raise Unjudgeable(call.line, f"step {call.step} ({call.op}): argument {name} is {v!r}, expected a list")


def arg_cookie(call: Call, name: str) -> str | None:
    v = call.args.get(name)
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return f"raw:{v}"
    raise Unjudgeable(call.line, f"step {call.step} ({call.op}): argument {name} is {v!r}, expected a cookie")


def live_buffer(s: State, call: Call, handle: str, doing: str) -> Buffer:
    """The live buffer a call names; naming a freed or unknown one is use after free: unjudgeable."""
    b = s.bufs.get(handle)
    if b is None or b.freed:
        raise Unjudgeable(call.line, f"step {call.step} {doing} {handle}, which is not a live buffer (use after free)")
    return b


def reject(clause: str, observed: str, allowed: tuple[str, ...] | list[str], why: str) -> Reject:
    return Reject(clause, observed, tuple(allowed), why)


def slot_label(ctx: Ctx, slot: str) -> str:
    """A slot as a why names it: the scenario's handle name, and the trace's slot where the two differ."""
    name = next((handle for handle, probe in ctx.names.items() if probe == slot), slot)
    return slot if name == slot else f"{name}, {slot} in the trace"


def show_errno(error: str | None) -> str:
    return "0" if error is None else error


def negative_errno(error: str | None) -> bool:
    """Whether a callback's errorNum is a negative number (the probe writes an errno outside its vocabulary
    as ``E#<n>``): an errno is a positive number (errno(3)), so -ENODEV is no errno."""
    return error is not None and error.startswith("E#-")
