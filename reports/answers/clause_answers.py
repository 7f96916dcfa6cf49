"""The answer of each clause on each device: one pure function over the recorded run.

`clause_answers(run)` is the one answer the clause matrix of report.html, summary.json `clauses`, the
junit.xml properties, the spec page and the results store (verdict_clauses, hence the dashboard) show. Each
answer is `demonstration.AnswerIndex.answer` over the device's results (the rules are there and in docs/reports.md,
"The answer of a clause"); the claim (claim.py) asks the same function of each device or build, so a clause
it lists as not demonstrated is the one every output shows as not demonstrated.

The clauses a scenario cites come from the kit's corpus (`KitFacts.clauses_of`), never from a record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reference_model.verdicts import ANSWER_ORDER, Verdict

from ..recorded.results import ResultRecord, RunResults
from .demonstration import AnswerIndex, ClauseAnswer
from .demonstration import answering_clauses as _answering
from .demonstration import named_clauses as named_clauses
from .demonstration import readings_of_reason as readings_of_reason


@dataclass(frozen=True, slots=True)
class ClauseAnswers:
    devices: tuple[str, ...]
    by_clause: Mapping[str, Mapping[str, ClauseAnswer]]  # clause (sorted) -> device -> answer

    def get(self, clause: str, device: str) -> ClauseAnswer | None:
        return self.by_clause.get(clause, {}).get(device)

    def worst(self, clause: str) -> Verdict | None:
        """The worst answer of a clause over the devices (None: demonstrated on none)."""
        found = [a.verdict for a in self.by_clause.get(clause, {}).values() if a.verdict is not None]
        return next((v for v in ANSWER_ORDER if v in found), None)

    def not_demonstrated(self) -> tuple[ClauseAnswer, ...]:
        """Every (clause, device) answer that is "not demonstrated" where a scenario of the run cites the
        clause: the report's and summary.json's list of clauses not demonstrated."""
        return tuple(a for row in self.by_clause.values() for a in row.values() if a.verdict is None and a.scenarios)

    def to_json(self) -> dict[str, str]:
        """summary.json `clauses`: clause -> the worst answer over the devices, or "not demonstrated"."""
        out: dict[str, str] = {}
        for clause in self.by_clause:
            verdict = self.worst(clause)
            out[clause] = str(verdict) if verdict is not None else "not demonstrated"
        return out


def answering_clauses(run: RunResults, record: ResultRecord) -> tuple[str, ...]:
    """The clauses whose answer this result takes part in (demonstration.answering_clauses)."""
    return _answering(record, run.kit.clauses_of(record.scenario))


def clause_answers(run: RunResults) -> ClauseAnswers:
    """Every clause cited by a scenario of the run, named by one of its results or demonstrated by one, on
    every device."""
    devices = run.device_serials
    by_device: dict[str, list[ResultRecord]] = {serial: [] for serial in devices}
    for record in run.results:
        by_device.setdefault(record.device, []).append(record)
    indexes = [AnswerIndex(device, by_device[device], run.kit.clauses_of) for device in devices]
    clauses = sorted(set().union(*(index.clauses() for index in indexes)))
    return ClauseAnswers(devices, {clause: {ix.device: ix.answer(clause) for ix in indexes} for clause in clauses})


def stored_answering(rows: Iterable[Sequence[object]]) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """(run_id, serial, scenario) -> the clauses that result answers, from the store's verdict_clauses rows
    (run_id, serial, scenario, clause), which the store writes with `answering_clauses`."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for run_id, serial, scenario, clause in rows:
        out.setdefault((str(run_id), str(serial), str(scenario)), []).append(str(clause))
    return {key: tuple(sorted(clauses)) for key, clauses in out.items()}
