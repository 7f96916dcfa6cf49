"""What a reader acts on first: the failures in severity order, each with a trace excerpt centred on the
line the verdict rests on, and the clauses a run did not demonstrate (docs/reports.md).

Everything here is derived from `RunResults` alone, so report.html and summary.json show the same
content.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from reference_model.verdicts import FINDING_ORDER, Verdict

from ..recorded.replay import replay_command
from ..recorded.results import ResultRecord, RunResults, render_value
from .clause_answers import clause_answers

EXCERPT_RADIUS: Final = 10  # lines shown either side of the focus line
_TRACE_LINE = re.compile(r"trace line (\d+)")

@dataclass(frozen=True, slots=True)
class ExcerptLine:
    number: int  # 1-based line number in the record's trace
    text: str
    marked: bool


@dataclass(frozen=True, slots=True)
class Excerpt:
    lines: tuple[ExcerptLine, ...]
    focus: int | None  # the marked line, if any
    total: int  # lines in the whole trace
    note: str  # one sentence saying what is shown and why


@dataclass(frozen=True, slots=True)
class Finding:
    """One failure as a reader needs it; `why` never repeats `observed` / `allowed` / `clause`."""

    record: ResultRecord
    verdict: str
    clause: str  # the clause the divergence cites; empty when there is none
    quote: str
    observed: str
    allowed: str
    why: str
    discrepancies: tuple[str, ...]
    replay: str
    excerpt: Excerpt

    @property
    def device(self) -> str:
        return self.record.device

    @property
    def scenario(self) -> str:
        return self.record.scenario


@dataclass(frozen=True, slots=True)
class Gap:
    """A clause no result demonstrated on a device (its answer is "not demonstrated"): what stood in the way,
    and each scenario citing it with its verdict and reason."""

    clause: str
    device: str
    why: str
    reasons: tuple[tuple[str, str, str], ...]  # (scenario, verdict, reason)


def focus_line(record: ResultRecord) -> int | None:
    """The trace line the verdict rests on: the divergent event, the line an ERROR names, or the last
    line of a trace that ended in a crash or timeout. None when no line can be named."""
    count = len(record.trace)
    if not count:
        return None
    divergence = record.divergence
    if divergence is not None and divergence.event is not None and 1 <= divergence.event <= count:
        return divergence.event
    if record.verdict is Verdict.ERROR:
        found = _TRACE_LINE.search(record.reason)
        if found and 1 <= int(found.group(1)) <= count:
            return int(found.group(1))
        return None
    if record.verdict.ends_trace:
        return count
    return None


def trace_excerpt(record: ResultRecord, radius: int = EXCERPT_RADIUS) -> Excerpt:
    """Up to 2 × radius + 1 numbered lines centred on `focus_line` (or the end of the trace)."""
    trace = record.trace
    total = len(trace)
    if not record.recorded:
        return Excerpt((), None, 0, "no trace: the scenario never ran")
    if not total:
        return Excerpt((), None, 0, "no trace lines recorded")
    focus = focus_line(record)
    centre = focus if focus is not None else total
    first = max(1, centre - radius)
    last = min(total, first + 2 * radius)
    first = max(1, last - 2 * radius)
    lines = tuple(ExcerptLine(n, trace[n - 1], n == focus) for n in range(first, last + 1))
    span = f"lines {first}-{last} of {total}" if (first, last) != (1, total) else f"all {total} lines"
    if focus is None:
        note = f"trace {span}; no single line is named, so the end of the trace is shown"
    elif record.divergence is not None and record.divergence.event == focus:
        note = f"trace {span}, centred on line {focus}: the first event the model does not allow"
    elif record.verdict is Verdict.ERROR:
        note = f"trace {span}, centred on line {focus}: the line the judge could not read"
    else:
        note = f"trace {span}; line {focus} is the last one the probe wrote"
    return Excerpt(lines, focus, total, note)


def _why(record: ResultRecord) -> str:
    """The model's explanation without what the observed / allowed / clause rows already say."""
    divergence = record.divergence
    if divergence is None:
        return record.reason
    message = divergence.message
    allowed = ", ".join(render_value(a) for a in divergence.allowed) or "nothing"
    prefix = f"observed {render_value(divergence.observed)}, allowed {allowed}: "
    if message.startswith(prefix):
        return message[len(prefix) :]
    if message:
        return message
    # No message: the reason may still add something the rows do not.
    reason = _TRACE_LINE.sub("", record.reason).strip(" :")
    return "" if not reason or divergence.clause in reason else reason


def _finding(run: RunResults, record: ResultRecord) -> Finding:
    d = record.divergence
    discrepancies = tuple(x.strip() for x in (record.discrepancy or "").split(",") if x.strip())
    return Finding(
        record=record,
        verdict=str(record.verdict),
        clause="" if d is None else d.clause,
        quote="" if d is None else d.quote,
        observed="" if d is None else render_value(d.observed),
        allowed="" if d is None else d.allowed_text(),
        why=_why(record),
        discrepancies=discrepancies,
        replay=replay_command(run, record),
        excerpt=trace_excerpt(record),
    )


def findings(run: RunResults) -> tuple[Finding, ...]:
    """Every CRASH, FAIL, TIMEOUT, ERROR and WARN, most severe first; within a verdict, plan order."""
    listed = [r for r in run.results if r.verdict.finding]
    listed.sort(key=lambda r: FINDING_ORDER.index(r.verdict))  # stable: plan order within a verdict
    return tuple(_finding(run, r) for r in listed)


def clause_chapters(run: RunResults) -> dict[str, str]:
    """Clause → the chapter of the scenarios that cite it most often (ties: the first by name)."""
    cited: dict[str, Counter[str]] = {}
    seen: set[str] = set()
    for record in run.results:
        if record.scenario in seen:
            continue  # count each scenario once, not once per device
        seen.add(record.scenario)
        for clause in record.clauses:
            cited.setdefault(clause, Counter())[record.chapter] += 1
    return {
        clause: min(counts.items(), key=lambda item: (-item[1], item[0]))[0] for clause, counts in sorted(cited.items())
    }


def coverage_gaps(run: RunResults) -> tuple[Gap, ...]:
    """Per device, the clauses a scenario of the run cites whose answer there is "not demonstrated"
    (clause_answers: the same answer as the matrix and the claim), with what stood in the way."""
    order = {serial: index for index, serial in enumerate(run.device_serials)}
    verdicts = {(r.device, r.scenario): r for r in run.results}
    gaps: list[Gap] = []
    for answer in clause_answers(run).not_demonstrated():
        records = [verdicts[(answer.device, s)] for s in answer.scenarios if (answer.device, s) in verdicts]
        reasons = tuple((r.scenario, str(r.verdict), _gap_reason(r)) for r in records)
        gaps.append(Gap(answer.clause, answer.device, answer.why, reasons))
    gaps.sort(key=lambda g: (order.get(g.device, len(order)), g.clause))
    return tuple(gaps)


def _gap_reason(record: ResultRecord) -> str:
    """A citing scenario's part in a gap: a failure is listed with the failures, so it is named, not repeated."""
    if record.verdict.failed:
        return f"{record.verdict} on {record.failing_clause or 'the clauses it cites'} (listed with the failures)"
    return record.reason or "no reason recorded"


def gap_summary(gaps: Sequence[Gap]) -> dict[str, dict[str, dict[str, object]]]:
    """Gaps as plain JSON: device → clause → {why, scenarios: [{scenario, verdict, reason}]}."""
    out: dict[str, dict[str, dict[str, object]]] = {}
    for gap in gaps:
        out.setdefault(gap.device, {})[gap.clause] = {
            "why": gap.why,
            "scenarios": [{"scenario": s, "verdict": v, "reason": reason} for s, v, reason in gap.reasons],
        }
    return out


def finding_summary(finding: Finding) -> dict[str, object]:
    """One finding as plain JSON for summary.json."""
    record = finding.record
    return {
        "device": record.device,
        "scenario": record.scenario,
        "title": record.title,
        "verdict": finding.verdict,
        "clause": finding.clause or None,
        "clauses": list(record.clauses),
        "quote": finding.quote or None,
        "observed": finding.observed or None,
        "allowed": finding.allowed or None,
        "why": finding.why or None,
        "step": record.divergence.step if record.divergence else None,
        "discrepancy": record.discrepancy,
        "discrepancies": list(finding.discrepancies),
        "replay": finding.replay,
        "excerpt": {
            "focus": finding.excerpt.focus,
            "total": finding.excerpt.total,
            "first": finding.excerpt.lines[0].number if finding.excerpt.lines else None,
            "lines": [line.text for line in finding.excerpt.lines],
        },
    }
