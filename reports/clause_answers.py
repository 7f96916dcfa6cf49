"""The answer of each clause on each device: one pure function over the recorded run.

`clause_answers(run)` is the one answer the clause matrix of report.html, summary.json `clauses`, the
junit.xml properties and the results store (verdict_clauses, hence the dashboard) show. The rules
(docs/reports.md, "The answer of a clause"):

- FAIL where a FAIL's divergence names the clause (`divergence.clause`), never because a failing
  scenario merely cites it;
- CRASH where a CRASH names it: its divergence's clause when it has one, else (the probe died where the
  model expected no death) every clause the scenario cites, since the kit records no finer link between
  the dying step and one sentence; the reason names the step. A FAIL whose record lacks its divergence
  (a hand-made or damaged record) is treated the same way, so no failure goes unshown;
- WAIVED where a waived failure names it (by the same rule);
- WARN where a WARN needed a reading of the clause (reference_model.readings READING_CLAUSES: the
  sentences each reading R<n> of docs/model.md §4 reads; those the scenario cites, else all of them);
- PASS where a scenario citing it exercised it (the claim's rule, reports.claim.exercises);
- otherwise not exercised (`verdict` None), with why. A scenario that failed on one clause does not count
  as exercising the others it cites: the model stops judging at the first divergence, so the trace
  past it shows nothing, and the kit records no link between the steps before it and those sentences.

The clauses a scenario cites come from the kit's corpus (`KitFacts.clauses_of`), never from a record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from reference_model.readings import READING_CLAUSES
from reference_model.verdicts import ANSWER_ORDER, Verdict
from reference_model.waivers import failing_clauses

from .claim import ResultView, RunView, exercises, why_not_exercised

_READING_TEXT: Final = re.compile(r"reading\(s\) (.*)$")
_READING_ID: Final = re.compile(r"\bR\d+\b")


class DivergenceView(Protocol):
    @property
    def clause(self) -> str: ...


class RecordView(ResultView, Protocol):
    """What the answer reads of a result (reports.results.ResultRecord)."""

    @property
    def divergence(self) -> DivergenceView | None: ...


class AnswerRun(RunView, Protocol):
    @property
    def results(self) -> Sequence[RecordView]: ...


@dataclass(frozen=True, slots=True)
class ClauseAnswer:
    clause: str
    device: str
    verdict: Verdict | None  # one of ANSWER_ORDER; None: not exercised
    why: str  # one line: what gave the answer, or why the clause was not exercised
    scenarios: tuple[str, ...]  # the scenarios citing it that ran on the device (the kit's corpus)
    answering: tuple[str, ...]  # the scenarios that gave the verdict (for PASS: those that exercised it)
    readings: tuple[str, ...] = ()  # WARN: the readings needed

    @property
    def label(self) -> str:
        return self.verdict.label if self.verdict is not None else "N/X"

    def text(self) -> str:
        return str(self.verdict) if self.verdict is not None else "not exercised"


@dataclass(frozen=True, slots=True)
class ClauseAnswers:
    devices: tuple[str, ...]
    by_clause: Mapping[str, Mapping[str, ClauseAnswer]]  # clause (sorted) -> device -> answer

    def get(self, clause: str, device: str) -> ClauseAnswer | None:
        return self.by_clause.get(clause, {}).get(device)

    def worst(self, clause: str) -> Verdict | None:
        """The worst answer of a clause over the devices (None: exercised on none)."""
        found = [a.verdict for a in self.by_clause.get(clause, {}).values() if a.verdict is not None]
        return next((v for v in ANSWER_ORDER if v in found), None)

    def with_verdict(self, *verdicts: Verdict) -> tuple[str, ...]:
        """The clauses whose answer is one of `verdicts` on some device."""
        return tuple(c for c, row in self.by_clause.items() if any(a.verdict in verdicts for a in row.values()))

    def to_json(self) -> dict[str, str]:
        """summary.json `clauses`: clause -> the worst answer over the devices, or "not exercised"."""
        out: dict[str, str] = {}
        for clause in self.by_clause:
            verdict = self.worst(clause)
            out[clause] = str(verdict) if verdict is not None else "not exercised"
        return out


def readings_of_reason(reason: str) -> tuple[str, ...]:
    """The reading IDs a WARN's reason names ("... departs from the kit's reading(s) R1 (...), R4 (...)")."""
    match = _READING_TEXT.search(reason)
    if match is None:
        return ()
    return tuple(dict.fromkeys(r for r in _READING_ID.findall(match.group(1)) if r in READING_CLAUSES))


def named_clauses(record: RecordView, cited: Sequence[str]) -> tuple[str, ...]:
    """The clauses a result answers with its own verdict (FAIL, CRASH, WAIVED, WARN), by the rules above."""
    verdict = record.verdict
    if verdict is Verdict.WARN:
        read = [c for r in readings_of_reason(record.reason) for c in READING_CLAUSES[r]]
        return tuple(dict.fromkeys([c for c in read if c in cited] or read))
    if verdict.failed:
        return failing_clauses(record.divergence.clause if record.divergence is not None else None, cited)
    return ()


def answering_clauses(run: AnswerRun, record: RecordView) -> tuple[str, ...]:
    """The clauses whose answer this result takes part in: those it names, and for a PASS or WARN the
    clauses it exercised (the results store records these pairs, so the dashboard shows the same)."""
    cited = run.kit.clauses_of(record.scenario)
    named = named_clauses(record, cited)
    if exercises(record):
        return tuple(dict.fromkeys([*named, *cited]))
    return named


def clause_answers(run: AnswerRun) -> ClauseAnswers:
    """Every clause cited by a scenario of the run or named by one of its results, on every device."""
    devices = run.device_serials
    citing: dict[str, dict[str, list[RecordView]]] = {}
    named: dict[str, dict[str, list[RecordView]]] = {}
    for record in run.results:
        cited = run.kit.clauses_of(record.scenario)
        for clause in cited:
            citing.setdefault(clause, {}).setdefault(record.device, []).append(record)
        for clause in named_clauses(record, cited):
            named.setdefault(clause, {}).setdefault(record.device, []).append(record)
    out: dict[str, dict[str, ClauseAnswer]] = {}
    for clause in sorted(set(citing) | set(named)):
        row: dict[str, ClauseAnswer] = {}
        for device in devices:
            row[device] = _answer(clause, device, citing.get(clause, {}).get(device, []),
                                  named.get(clause, {}).get(device, []))
        out[clause] = row
    return ClauseAnswers(devices, out)


def _answer(clause: str, device: str, citing: list[RecordView], named: list[RecordView]) -> ClauseAnswer:
    scenarios = tuple(dict.fromkeys(r.scenario for r in citing))
    for verdict in (v for v in ANSWER_ORDER if v.names):
        hits = [r for r in named if r.verdict is verdict]
        if hits:
            readings: tuple[str, ...] = ()
            if verdict is Verdict.WARN:
                readings = tuple(dict.fromkeys(x for r in hits for x in readings_of_reason(r.reason)))
                why = f"{len(hits)} scenario(s) needed the reading(s) {', '.join(readings)}"
            else:
                names = [r.scenario for r in hits]
                why = f"{verdict} in {', '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            return ClauseAnswer(clause, device, verdict, why, scenarios, tuple(r.scenario for r in hits), readings)
    passed = [r for r in citing if exercises(r)]
    if passed:
        why = f"exercised by {len(passed)} scenario(s)"
        return ClauseAnswer(clause, device, Verdict.PASS, why, scenarios, tuple(r.scenario for r in passed))
    failed_elsewhere = [r for r in citing if r.verdict.failed]
    if failed_elsewhere:
        first = failed_elsewhere[0]
        other = first.divergence.clause if first.divergence is not None else "(no clause)"
        why = (f"cited only by scenarios that failed on another clause before judging it: "
               f"{first.scenario} {first.verdict} on {other}")
        return ClauseAnswer(clause, device, None, why, scenarios, ())
    return ClauseAnswer(clause, device, None, why_not_exercised(citing), scenarios, ())


def stored_answering(rows: Iterable[Sequence[object]]) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """(run_id, serial, scenario) -> the clauses that result answers, from the store's verdict_clauses rows
    (run_id, serial, scenario, clause), which the store writes with `answering_clauses`."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for run_id, serial, scenario, clause in rows:
        out.setdefault((str(run_id), str(serial), str(scenario)), []).append(str(clause))
    return {key: tuple(sorted(clauses)) for key, clauses in out.items()}
