"""The closed verdict set, what each verdict means, and the run-level answer (docs/formats.md §7).

Every table of the kit that treats verdicts differently (the claim, the reports, junit.xml, the pytest
layer, fuzz) reads a verdict's meaning from here: nothing else lists verdicts by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final, Literal

# How a test runner shows a verdict (junit.xml's elements and the pytest layer's outcome).
Shown = Literal["passed", "failure", "error", "skipped"]


@dataclass(frozen=True, slots=True)
class Meaning:
    rank: int  # severity order: a larger rank is worse (the report's and the dashboard's "worst")
    blocking: bool  # makes a run non-conformant (exit 1)
    conformant: bool  # consistent with a conformance claim (all others make the run incomplete)
    exercises: bool  # the device was seen doing what the scenario's clauses say (the claim's coverage)
    failed: bool  # the device was seen failing the scenario (WAIVED too: its failure is waived, not gone)
    finding: bool  # listed among the report's findings, worst first
    names: bool  # the result gives the clauses it names their answer (a failure its clause, a WARN its reading's)
    ends_trace: bool  # decided by how the trace ended: its last line is the evidence a report shows
    device_log: bool  # the device went wrong where its own log may say why (a real device's logcat is kept)
    traceless: bool  # what a scenario handed to the device is when no trace came back (never ran, or failed first)
    shown: Shown
    label: str  # the report matrix's short cell text


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

    @property
    def meaning(self) -> Meaning:
        return MEANINGS[self]

    @property
    def blocking(self) -> bool:
        return MEANINGS[self].blocking

    @property
    def conformant(self) -> bool:
        return MEANINGS[self].conformant

    @property
    def exercises(self) -> bool:
        return MEANINGS[self].exercises

    @property
    def failed(self) -> bool:
        return MEANINGS[self].failed

    @property
    def finding(self) -> bool:
        return MEANINGS[self].finding

    @property
    def names(self) -> bool:
        return MEANINGS[self].names

    @property
    def ends_trace(self) -> bool:
        return MEANINGS[self].ends_trace

    @property
    def device_log(self) -> bool:
        return MEANINGS[self].device_log

    @property
    def traceless(self) -> bool:
        return MEANINGS[self].traceless

    @property
    def shown(self) -> Shown:
        return MEANINGS[self].shown

    @property
    def label(self) -> str:
        return MEANINGS[self].label


# Columns: rank, blocking, conformant, exercises, failed, finding, names, ends_trace, device_log, traceless.
_T, _F = True, False
MEANINGS: Final[dict[Verdict, Meaning]] = {
    Verdict.PASS: Meaning(0, _F, _T, _T, _F, _F, _F, _F, _F, _F, "passed", "PASS"),
    # WARN passed on a reading of the text: conformant, and listed so the reading is seen.
    Verdict.WARN: Meaning(1, _F, _T, _T, _F, _T, _T, _F, _F, _F, "passed", "WARN"),
    Verdict.NOT_APPLICABLE: Meaning(2, _F, _T, _F, _F, _F, _F, _F, _F, _F, "skipped", "N/A"),
    # WAIVED failed and a waiver covers it: consistent with a claim, never counted as exercising.
    Verdict.WAIVED: Meaning(3, _F, _T, _F, _T, _F, _T, _F, _F, _F, "passed", "WAIV"),
    Verdict.NOT_EXECUTED: Meaning(4, _F, _F, _F, _F, _F, _F, _F, _F, _T, "skipped", "N/E"),
    Verdict.ERROR: Meaning(5, _F, _F, _F, _F, _T, _F, _F, _F, _T, "error", "ERR"),
    Verdict.TIMEOUT: Meaning(6, _F, _F, _F, _F, _T, _F, _T, _T, _F, "error", "TIME"),
    Verdict.FAIL: Meaning(7, _T, _F, _F, _T, _T, _T, _F, _T, _F, "failure", "FAIL"),
    Verdict.CRASH: Meaning(8, _T, _F, _F, _T, _T, _T, _T, _T, _F, "error", "CRSH"),
}

# Mildest first: the order every table and chart lists verdicts in.
SEVERITY: Final[tuple[Verdict, ...]] = tuple(sorted(Verdict, key=lambda v: MEANINGS[v].rank))
# Findings, worst first (the report's failure list and its counts).
FINDING_ORDER: Final[tuple[Verdict, ...]] = tuple(v for v in reversed(SEVERITY) if v.finding)
CONFORMANT_VERDICTS: Final = frozenset(v for v in Verdict if v.conformant)
BLOCKING_VERDICTS: Final = frozenset(v for v in Verdict if v.blocking)
# Neither conformant nor blocking: the device was not judged (the run is incomplete), worst first.
UNJUDGED_ORDER: Final[tuple[Verdict, ...]] = tuple(v for v in reversed(SEVERITY) if not v.conformant and not v.blocking)
# What a clause's own answer can be, worst first: a verdict that names clauses, or a PASS that exercised them.
ANSWER_ORDER: Final[tuple[Verdict, ...]] = tuple(v for v in reversed(SEVERITY) if v.names or v.exercises)


class RunExit(IntEnum):
    CONFORMANT = 0
    NON_CONFORMANT = 1
    INCOMPLETE = 2
    USAGE = 3


def worst(verdicts: Iterable[Verdict]) -> Verdict | None:
    """The most severe verdict, None for none."""
    return max(verdicts, key=lambda v: MEANINGS[v].rank, default=None)


def run_exit(verdicts: Iterable[Verdict]) -> RunExit:
    """0 when every verdict is conformant, 1 on any blocking verdict, else 2 on anything incomplete."""
    seen = set(verdicts)
    if any(v.blocking for v in seen):
        return RunExit.NON_CONFORMANT
    if not all(v.conformant for v in seen):
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
