"""The closed verdict set and the run-level answer (DESIGN §3, docs/formats.md §7)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum, StrEnum


class Verdict(StrEnum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    WAIVED = "WAIVED"
    CRASH = "CRASH"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"
    NOT_EXECUTED = "NOT_EXECUTED"


class RunExit(IntEnum):
    CONFORMANT = 0
    NON_CONFORMANT = 1
    INCOMPLETE = 2
    USAGE = 3


CONFORMANT_VERDICTS = frozenset({Verdict.PASS, Verdict.WARN, Verdict.NOT_APPLICABLE, Verdict.WAIVED})
BLOCKING_VERDICTS = frozenset({Verdict.FAIL, Verdict.CRASH})


def run_exit(verdicts: Iterable[Verdict]) -> RunExit:
    """0 when every verdict is conformant, 1 on any FAIL/CRASH, else 2 on anything incomplete."""
    seen = set(verdicts)
    if seen & BLOCKING_VERDICTS:
        return RunExit.NON_CONFORMANT
    if seen - CONFORMANT_VERDICTS:
        return RunExit.INCOMPLETE
    return RunExit.CONFORMANT


def answer(verdicts: Iterable[Verdict]) -> str:
    """The one-word answer reports lead with."""
    return {
        RunExit.CONFORMANT: "conformant",
        RunExit.NON_CONFORMANT: "non-conformant",
        RunExit.INCOMPLETE: "incomplete",
        RunExit.USAGE: "usage error",
    }[run_exit(verdicts)]
