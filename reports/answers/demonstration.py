"""A clause's answer over a set of results: the one definition of "demonstrated" every output uses.

A clause counts on a device only where a trace shows the behaviour it speaks of (docs/reports.md "The
answer of a clause"). The model decides that while it judges (reference_model: `State.shown`), and a result
record carries it as `demonstrated`; `verify` derives it again from the trace. Only a PASS or a WARN
demonstrates anything: a failure, a waived failure or an unjudged scenario shows nothing of the clauses it
cites, and a legal refusal or a departure from a reading demonstrates only what the trace still showed.

`AnswerIndex.answer` gives one clause its answer from the results of one device (clause_answers.py: the matrix,
summary.json, junit.xml, the spec page, the store, the dashboard) or of one build's devices in a sharded
run (claim.py: the claim and its gaps), so every output says the same of every clause:

- FAIL / CRASH / WAIVED where a failure names the clause (its divergence's clause; a failure without one
  names every clause its scenario cites, so none goes unshown);
- WARN where a WARN needed a reading of the clause (reference_model.readings: the sentences each reading
  reads; those the scenario cites, else all of them);
- PASS where a result demonstrated it;
- otherwise not demonstrated (`verdict` None), with what stood in the way in the scenarios citing it.

The clauses a scenario cites come from the kit's corpus, never from a record (the callers pass them).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from reference_model.readings import READING_CLAUSES, READINGS
from reference_model.verdicts import ANSWER_ORDER, UNJUDGED_ORDER, Verdict
from reference_model.waivers import failing_clauses

from ..recorded.results import ResultRecord

_READING_TEXT: Final = re.compile(r"reading\(s\) (.*)$")
_READING_ID: Final = re.compile(r"\bR\d+\b")


Cited = Callable[[str], Sequence[str]]  # scenario id -> the clauses the kit's corpus says it cites


@dataclass(frozen=True, slots=True)
class ClauseAnswer:
    clause: str
    device: str  # a device serial, or a build (a sharded run's claim unit)
    verdict: Verdict | None  # one of ANSWER_ORDER; None: not demonstrated
    why: str  # one line: what gave the answer, or what stood in the way
    scenarios: tuple[str, ...]  # the scenarios citing it that ran there (the kit's corpus)
    answering: tuple[str, ...]  # the scenarios that gave the verdict (for PASS: those that demonstrated it)
    readings: tuple[str, ...] = ()  # WARN: the readings needed

    @property
    def label(self) -> str:
        return self.verdict.label if self.verdict is not None else "N/X"

    def text(self) -> str:
        return str(self.verdict) if self.verdict is not None else "not demonstrated"


def demonstrated(record: ResultRecord) -> frozenset[str]:
    """The clauses a result demonstrated: those its trace showed, when it ended PASS or WARN."""
    return frozenset(record.demonstrated) if record.verdict.exercises else frozenset()


def readings_of_reason(reason: str) -> tuple[str, ...]:
    """The reading IDs a WARN's reason names ("... departs from the kit's reading(s) R1 (...), R4 (...)")."""
    match = _READING_TEXT.search(reason)
    if match is None:
        return ()
    return tuple(dict.fromkeys(r for r in _READING_ID.findall(match.group(1)) if r in READING_CLAUSES))


def named_clauses(record: ResultRecord, cited: Sequence[str]) -> tuple[str, ...]:
    """The clauses a result answers with its own verdict (FAIL, CRASH, WAIVED, WARN), by the rules above."""
    verdict = record.verdict
    if verdict is Verdict.WARN:
        read = [c for r in readings_of_reason(record.reason) for c in READING_CLAUSES[r]]
        return tuple(dict.fromkeys([c for c in read if c in cited] or read))
    if verdict.failed:
        return failing_clauses(record.failing_clause, cited)
    return ()


def answering_clauses(record: ResultRecord, cited: Sequence[str]) -> tuple[str, ...]:
    """The clauses whose answer this result takes part in: those it names, and those it demonstrated (the
    results store records these pairs, so the dashboard shows the same). ``cited``: the kit's clauses of
    its scenario; a scenario the kit did not release (none) demonstrates nothing."""
    shown = sorted(demonstrated(record)) if cited else []
    return tuple(dict.fromkeys([*named_clauses(record, cited), *shown]))


class AnswerIndex:
    """The results of one device (or of one build's devices), indexed by the clauses each cites, names and
    demonstrated: `answer` then costs what the clause's own results cost."""

    def __init__(self, device: str, records: Sequence[ResultRecord], cited: Cited) -> None:
        self.device = device
        self.citing: dict[str, list[ResultRecord]] = {}
        self.named: dict[str, list[ResultRecord]] = {}
        self.showing: dict[str, list[ResultRecord]] = {}
        for record in records:
            scenario_clauses = cited(record.scenario)
            for clause in scenario_clauses:
                self.citing.setdefault(clause, []).append(record)
            for clause in named_clauses(record, scenario_clauses):
                self.named.setdefault(clause, []).append(record)
            if not scenario_clauses:
                continue  # a scenario the kit did not release demonstrates nothing, whatever its record says
            for clause in demonstrated(record):
                self.showing.setdefault(clause, []).append(record)

    def clauses(self) -> set[str]:
        return {*self.citing, *self.named, *self.showing}

    def answer(self, clause: str) -> ClauseAnswer:
        """The answer of ``clause`` over the indexed results (the module docstring's rules)."""
        citing = self.citing.get(clause, [])
        scenarios = tuple(dict.fromkeys(r.scenario for r in citing))
        named = self.named.get(clause, [])
        for verdict in (v for v in ANSWER_ORDER if v.names):
            hits = [r for r in named if r.verdict is verdict]
            if hits:
                readings: tuple[str, ...] = ()
                if verdict is Verdict.WARN:
                    readings = tuple(dict.fromkeys(x for r in hits for x in readings_of_reason(r.reason)))
                    why = f"{len(hits)} scenario(s) needed the reading(s) {', '.join(readings)}"
                else:
                    names = [r.scenario for r in hits]
                    why = f"{verdict} in {', '.join(names[:3])}" + (
                        f" and {len(names) - 3} more" if len(names) > 3 else "")
                return ClauseAnswer(clause, self.device, verdict, why, scenarios, tuple(r.scenario for r in hits),
                                    readings)
        showing = self.showing.get(clause, [])
        if showing:
            return ClauseAnswer(clause, self.device, Verdict.PASS, f"demonstrated by {len(showing)} scenario(s)",
                                scenarios, tuple(dict.fromkeys(r.scenario for r in showing)))
        return ClauseAnswer(clause, self.device, None, why_not_demonstrated(citing), scenarios, ())


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def why_not_demonstrated(citing: Sequence[ResultRecord]) -> str:
    """Why the scenarios citing a clause demonstrated nothing of it, in words a device owner can act on: what
    stood in the way, the commonest first, each with how many scenarios."""
    if not citing:
        return "no planned scenario cites it"
    obstacles = Counter(_obstacle(record) for record in citing)
    return "; ".join(f"{text} ({_plural(n, 'scenario')})" for text, n in obstacles.most_common())


def _obstacle(record: ResultRecord) -> str:
    """What kept one scenario citing the clause from demonstrating it."""
    verdict = record.verdict
    if verdict.failed:
        on = f" on {record.failing_clause}" if record.failing_clause else ""
        return f"hidden by a {verdict}{on}: the model stops judging at the first failure"
    if verdict in UNJUDGED_ORDER or verdict is Verdict.NOT_APPLICABLE:
        return f"{verdict}: {record.reason}" if record.reason else str(verdict)
    if verdict is Verdict.WARN and (readings := readings_of_reason(record.reason)):
        said = "; ".join(f"{r}: {READINGS[r]}" for r in readings)
        return f"the device departed from the kit's reading ({said}), and what followed did not show it"
    if record.allocations_refused:
        return (f"the device refused the allocations (ENOMEM) in {record.attempts} attempts, which the text allows, "
                "so nothing after them ran")
    return "passed without showing it (a refusal or failure the text allows, where the scenario needed a success)"
