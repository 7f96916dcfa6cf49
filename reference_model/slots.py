"""Slot assignment: the probe slot (``r0``, ``b1``, ``c0``, ``m0``, ``f0``) of every scenario handle name.

The one place slots are assigned (docs/formats.md §3, "Slots"): the program compiler writes them into the
probe program, the judge reads the trace's echo through them (``Ctx.names``), and the model tests'
trace builder echoes them. A name gets its slot at its first use in step order, numbered per kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from .errors import ModelCrash
from .scenario import Step
from .vocabulary import OPS, ArgKind

MAX_SLOTS: Final = 256  # per kind: the probe's slot tables (ndk_probe)

# Per argument kind, the slot prefix and the shape of the value: one name, a tuple of names, a descriptor
# selector (a file name or (("fd", n),)), a bind selector ((("cookie", name),) or (("nth", k),)).
_ONE: Final = "one"
_MANY: Final = "many"
_FDSEL: Final = "fdsel"
_BINDSEL: Final = "bindsel"
_SHAPES: Final[dict[ArgKind, tuple[str, str]]] = {
    ArgKind.REQ: ("r", _ONE), ArgKind.BUF: ("b", _ONE), ArgKind.MAP: ("m", _ONE), ArgKind.FILE: ("f", _ONE),
    ArgKind.REQS: ("r", _MANY), ArgKind.BUFS: ("b", _MANY), ArgKind.COOKIE: ("c", _ONE),
    ArgKind.FDSEL: ("f", _FDSEL), ArgKind.BINDSEL: ("c", _BINDSEL),
}
# Per op, its handle arguments as (position, prefix, shape), built on first use.
_PLANS: dict[object, tuple[tuple[int, str, str], ...]] = {}


class SlotError(ValueError):
    """A scenario whose handles cannot be given slots (one name used as two kinds, too many names)."""


@dataclass(frozen=True, slots=True)
class SlotMap:
    """``names``: handle name -> slot, in order of first use; ``first_step``: the step that first uses it."""

    names: Mapping[str, str]
    first_step: Mapping[str, int]

    def buffer_before(self, name: str, step: int) -> str | None:
        """The buffer slot of ``name`` if a step before ``step`` gave it one."""
        slot = self.names.get(name)
        if slot is None or not slot.startswith("b") or self.first_step[name] >= step:
            return None
        return slot


def text_token(value: str, slots: SlotMap, step: int) -> str:
    """A text argument as the program writes it: ``key=<buffer name>`` (a vnpu command's target) names
    the buffer's slot when an earlier step gave it one; anything else is written as it is."""
    key, sep, target = value.partition("=")
    slot = slots.buffer_before(target, step) if sep else None
    return value if slot is None else f"{key}={slot}"


def assign_slots(steps: Iterable[Step]) -> SlotMap:
    """The slot of every handle name of ``steps`` (a scenario's, in program order); SlotError if none fits."""
    names: dict[str, str] = {}
    first_step: dict[str, int] = {}
    counters: dict[str, int] = {}

    def take(name: object, prefix: str, index: int) -> None:
        if not isinstance(name, str):
            return
        existing = names.get(name)
        if existing is not None:
            if existing[0] != prefix:
                raise SlotError(f"handle {name!r} is used both as {existing[0]} and {prefix}")
            return
        number = counters.get(prefix, 0)
        if number >= MAX_SLOTS:
            raise SlotError(f"more than {MAX_SLOTS} handles of one kind")
        counters[prefix] = number + 1
        names[name] = f"{prefix}{number}"
        first_step[name] = index

    for index, st in enumerate(steps):
        plan = _PLANS.get(st.op)
        if plan is None:
            plan = _PLANS[st.op] = tuple((i, *_SHAPES[a.kind]) for i, a in enumerate(OPS[st.op].args)
                                         if a.kind in _SHAPES)
        for i, prefix, shape in plan:
            value = st.args[i][1]
            if shape == _ONE or (shape == _FDSEL and isinstance(value, str)):
                # A name seen before as this kind, the usual case, needs nothing more (``take`` checks the rest).
                existing = names.get(value) if isinstance(value, str) else None
                if existing is None or existing[0] != prefix:
                    take(value, prefix, index)
            elif shape == _MANY and isinstance(value, tuple):
                for v in value:
                    take(v, prefix, index)
            elif shape == _BINDSEL and isinstance(value, tuple):
                for how, what in value:
                    if how == "cookie":
                        take(what, prefix, index)
    return SlotMap(names, first_step)


def check_recorded(scenario_id: str, recorded: Mapping[str, str], own: SlotMap) -> None:
    """A slot map recorded with a program (the compiler's) must be the one assigned now: else a kit bug."""
    if dict(recorded) == dict(own.names):
        return
    differ = sorted(set(recorded) ^ set(own.names) | {n for n in recorded if recorded[n] != own.names.get(n)})
    name = differ[0]
    raise ModelCrash(f"scenario {scenario_id}: the program gave handle {name!r} slot {recorded.get(name)!r} "
                     f"but slot assignment gives {own.names.get(name)!r}")
