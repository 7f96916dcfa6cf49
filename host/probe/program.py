"""Compiling scenarios into the probe program text (docs/formats.md §3)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from reference_model.caps import DeviceCaps
from reference_model.scenario import CB_ACTION, SYMBOLIC_INTS, Scenario
from reference_model.slots import SlotError, SlotMap, assign_slots, text_token
from reference_model.vocabulary import OPS, VOCABULARY_HASH, ArgKind, Op

PROGRAM_FORMAT: Final = 2


class CompileError(ValueError):
    """A scenario cannot be compiled for this device (e.g. it needs a pair the device lacks)."""


@dataclass(frozen=True, slots=True)
class CompiledScenario:
    scenario: Scenario
    lines: tuple[str, ...]
    slots: Mapping[str, str]  # handle name -> slot, for the result record

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass(frozen=True, slots=True)
class Pairs:
    """The pairs scenarios may name symbolically, found at run start."""

    supported: tuple[int, int] | None
    unsupported: tuple[int, int] | None

    @staticmethod
    def from_caps(caps: DeviceCaps, probed: Iterable[tuple[int, int]]) -> Pairs:
        supported = sorted(caps.supported_pairs or ())
        unsupported = [p for p in probed if caps.supported_pairs is not None and p not in caps.supported_pairs]
        return Pairs(supported[0] if supported else None, unsupported[0] if unsupported else None)


def program_header() -> str:
    return f"npuconf-program {PROGRAM_FORMAT} {VOCABULARY_HASH}"


def compile_program(compiled: Iterable[CompiledScenario]) -> str:
    parts = [program_header() + "\n"]
    parts += [c.text() for c in compiled]
    return "".join(parts)


def compile_scenario(scenario: Scenario, pairs: Pairs, timeout_ms: int | None = None) -> CompiledScenario:
    try:
        slots = assign_slots(scenario.steps)  # the one assignment; recorded with the program (judge checks it)
    except SlotError as exc:
        raise CompileError(f"scenario {scenario.id}: {exc}") from None
    lines = [f"scenario {scenario.id} {timeout_ms or scenario.timeout_ms}"]
    # scenario.steps is already in program order: a parallel block is par_begin, the steps of thread
    # 0..N-1 (each line prefixed @<k>), par_end; step numbers are positions in that order.
    for index, step in enumerate(scenario.steps):
        tokens = [] if step.thread is None else [f"@{step.thread}"]
        tokens.append(step.op.value)
        for spec, (name, value) in zip(OPS[step.op].args, step.args, strict=True):
            if step.op is Op.CB_ACTION and name == "action":
                tokens.append(_cb_action(value, slots, scenario))
                continue
            tokens.append(_token(spec.kind, value, slots, pairs, scenario, index))
        lines.append(" ".join(tokens))
    lines.append("end")
    return CompiledScenario(scenario, tuple(lines), dict(slots.names))


def _cb_action(value: object, slots: SlotMap, scenario: Scenario) -> str:
    """cb_action's action: `alloc_<request handle>` becomes `alloc_r<N>`; the others are as written."""
    assert isinstance(value, str)
    match = CB_ACTION.match(value)
    handle = match.group(3) if match is not None else None
    if handle is None:
        return value
    slot = slots.names.get(handle)
    if slot is None or not slot.startswith("r"):
        raise CompileError(f"scenario {scenario.id}: cb_action {value}: {handle!r} is not a request handle")
    return f"alloc_{slot}"


def _token(kind: ArgKind, value: object, slots: SlotMap, pairs: Pairs, scenario: Scenario, index: int) -> str:
    def slot(name: object) -> str:
        assert isinstance(name, str)
        return slots.names[name]

    if kind in (ArgKind.REQ, ArgKind.BUF, ArgKind.MAP, ArgKind.FILE):
        return slot(value)
    if kind in (ArgKind.REQS, ArgKind.BUFS):
        assert isinstance(value, tuple)
        return ",".join(slot(v) for v in value) or "-"
    if kind is ArgKind.COOKIE:
        if value is None:
            return "null"
        if isinstance(value, int):
            return f"raw:{value}"
        return slot(value)
    if kind in (ArgKind.I32, ArgKind.I64, ArgKind.U64):
        return str(_integer(value, pairs, scenario, index))
    if kind is ArgKind.PROT:
        if isinstance(value, int):
            return str(value)
        assert isinstance(value, tuple)
        return "|".join(value) if value else "NONE"
    if kind is ArgKind.MAPFLAGS:
        if isinstance(value, int):
            return str(value)
        assert isinstance(value, tuple)
        return "|".join(value)
    if kind is ArgKind.BOOL:
        return "1" if value else "0"
    if kind is ArgKind.FDSEL:
        if isinstance(value, str):
            return slot(value)
        assert isinstance(value, tuple)
        return f"fd:{dict(value)['fd']}"
    if kind is ArgKind.BINDSEL:
        assert isinstance(value, tuple)
        ((how, what),) = value
        return f"cookie:{slot(what)}" if how == "cookie" else f"nth:{what}"
    if kind is ArgKind.TEXT:
        assert isinstance(value, str)
        return text_token(value, slots, index)
    if kind is ArgKind.ERRNO:
        assert isinstance(value, str)
        return value
    raise AssertionError(f"unhandled kind {kind}")


def _integer(value: object, pairs: Pairs, scenario: Scenario, index: int) -> int:
    if isinstance(value, int):
        return value
    assert isinstance(value, str)
    if value in SYMBOLIC_INTS:
        return SYMBOLIC_INTS[value]
    pair = pairs.supported if value.startswith("$pair.") else pairs.unsupported
    if pair is None:
        raise CompileError(f"scenario {scenario.id}: steps[{index}] needs {value} but the device has none")
    return pair[0] if value.endswith(".device") else pair[1]
