"""The errata draft (`npuconf errata RUN...`): what the spec's owners need to fix the published text.

`build_errata(source, runs)` is pure: `source` is the kit's own (the catalogue's quotes and
conformance/errata.yaml: per reading of docs/model.md §4 the sentences it reads, the reading, why, what the
AOSP module does and a proposed wording; per sentence the behaviour atlas can show devices differing on,
the same), `runs` are recorded runs. The draft has one entry per reading, and one per sentence where the
devices of the runs differ in the behaviour atlas (reports/answers/atlas.py). Every entry quotes its sentences,
says the reading the kit applies and why, what each device did (counts, scenarios and trace lines, from
the runs), what the AOSP module does (discrepancy IDs of docs/model.md §5) and proposes a wording.

Trace lines: a WARN records the reading it needed but not the line that needed it, so a reading's
evidence is the lines of the calls and callbacks it reads (READING_EVIDENCE) in the scenarios that needed
it; a failure's is its divergent line; an atlas answer's the lines the atlas took it from.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from reference_model.verdicts import Verdict

from ..answers.atlas import Aspect, DeviceAtlas, Entry, device_atlas, side_by_side
from ..answers.claim import claim_of
from ..answers.clause_answers import clause_answers, named_clauses, readings_of_reason
from ..answers.findings import focus_line
from ..recorded.results import ResultRecord, RunResults, safe_text
from .html import environment

SHOWN_SCENARIOS: Final = 2  # scenarios whose trace lines an entry shows per device
SHOWN_LINES: Final = 3  # trace lines per scenario
SHOWN_QUESTIONS: Final = 4  # differing atlas questions an entry shows with their evidence
LISTED_SCENARIOS: Final = 8  # scenario names listed per device before "and N more"
_DISCOVERY: Final = "npuconf.discovery"

# The trace events each reading reads: `ret` of these ops, callbacks of these kinds ("deleter" and "exit"
# stand for those events).
READING_EVIDENCE: Final[Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "R1": ((), ("alloc",)),
    "R2": (("req_set_cookie",), ("deleter",)),
    "R3": ((), ("deleter",)),
    "R4": (("buf_set_priority",), ("alloc",)),
    "R5": (("is_supported",), ()),
    "R6": (("buf_map",), ()),
    "R7": (("buf_unmap", "buf_free"), ()),
    "R8": ((), ("load",)),
    "R9": ((), ("preempt",)),
    "R10": (("buf_set_priority",), ()),
    "R11": ((), ("exit",)),
    "R13": ((), ("preempt",)),
    "R14": (("alloc", "buf_load"), ("alloc", "load")),
    "R15": (("buf_map",), ("load",)),
    "R16": (("map_read",), ("load",)),
    "R17": ((), ("load", "alloc")),
    "R18": (("buf_map",), ()),
    "R19": (("buf_set_priority",), ()),
    "R20": (("buf_free",), ()),
    "R21": ((), ("alloc",)),
    "R22": ((), ("alloc", "load")),
    "R23": (("buf_map",), ()),
}


@dataclass(frozen=True, slots=True)
class Proposal:
    """One entry of conformance/errata.yaml."""

    sentences: tuple[str, ...]  # clause IDs (readings); empty for a sentence entry (its key is the clause)
    reading: str
    why: str
    aosp: str
    discrepancies: tuple[str, ...]
    proposed: str


@dataclass(frozen=True, slots=True)
class AtlasRule:
    aspect: str
    question: str  # a question starting with this ("" matches any of the aspect)
    sentence: str


@dataclass(frozen=True, slots=True)
class ErrataSource:
    quotes: Mapping[str, str]  # clause -> its sentence (the catalogue's quote)
    readings: Mapping[str, Proposal]  # R<n> -> proposal
    sentences: Mapping[str, Proposal]  # clause -> proposal (where devices may differ)
    atlas: tuple[AtlasRule, ...]
    not_sentences: Mapping[str, str]  # readings that read no sentence, and why


@dataclass(frozen=True, slots=True)
class Line:
    scenario: str
    number: int  # 1-based line of the scenario's trace on that device
    text: str


@dataclass(frozen=True, slots=True)
class DeviceBehaviour:
    device: str
    summary: str  # one sentence: counts and answers
    scenarios: tuple[str, ...]  # the scenarios it rests on
    lines: tuple[Line, ...]  # the evidence


@dataclass(frozen=True, slots=True)
class Question:
    """A question of the atlas on which the devices differ: each device's answer."""

    aspect: str
    question: str
    answers: tuple[tuple[str, str], ...]  # (device, answer)


@dataclass(frozen=True, slots=True)
class ErrataEntry:
    key: str  # R<n>, or the clause of a sentence where devices differ
    kind: str  # "reading" or "devices differ"
    title: str
    sentences: tuple[tuple[str, str], ...]  # (clause, quote)
    reading: str
    why: str
    devices: tuple[DeviceBehaviour, ...]
    aosp: str
    discrepancies: tuple[str, ...]
    proposed: str
    needed_on: tuple[str, ...] = ()  # reading: the devices that needed it (a WARN)
    questions: tuple[Question, ...] = ()  # devices differ: the questions (the first SHOWN_QUESTIONS shown)
    question_count: int = 0

    @property
    def anchor(self) -> str:
        return f"e-{self.key}"


@dataclass(frozen=True, slots=True)
class Errata:
    runs: tuple[tuple[str, str, str], ...]  # (run id, devices, configuration)
    devices: tuple[str, ...]
    entries: tuple[ErrataEntry, ...]
    not_sentences: tuple[tuple[str, str], ...]

    @property
    def readings(self) -> tuple[ErrataEntry, ...]:
        return tuple(e for e in self.entries if e.kind == "reading")

    @property
    def differing(self) -> tuple[ErrataEntry, ...]:
        return tuple(e for e in self.entries if e.kind != "reading")


@dataclass(frozen=True, slots=True)
class _Device:
    label: str
    run: RunResults
    serial: str


def _devices(runs: Sequence[RunResults]) -> list[_Device]:
    several = len(runs) > 1
    return [_Device(f"{serial} ({run.run_id})" if several else serial, run, serial)
            for run in runs for serial in run.device_serials]


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:LISTED_SCENARIOS])
    return shown + (f" and {len(names) - LISTED_SCENARIOS} more" if len(names) > LISTED_SCENARIOS else "")


def _event(line: str) -> Mapping[str, object]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _evidence_lines(record: ResultRecord, ops: Sequence[str], kinds: Sequence[str]) -> tuple[Line, ...]:
    """The lines of `record`'s trace with a `ret` of one of `ops` or a callback of one of `kinds`, those with
    an error first."""
    found: list[tuple[bool, int, str]] = []
    for number, text in enumerate(record.trace, start=1):
        event = _event(text)
        ev = event.get("ev")
        hit = (ev == "ret" and event.get("op") in ops) or (ev == "cb" and event.get("kind") in kinds) \
            or (ev in ("deleter", "exit") and ev in kinds)
        if hit:
            failed = bool(event.get("errno")) or event.get("error") not in (None, 0) or ev == "exit"
            found.append((not failed, number, text))
    chosen = sorted(found)[:SHOWN_LINES]
    return tuple(Line(record.scenario, number, text) for _, number, text in sorted(chosen, key=lambda f: f[1]))


def _divergent_line(record: ResultRecord) -> tuple[Line, ...]:
    line = focus_line(record)
    if line is None:
        return ()
    return (Line(record.scenario, line, record.trace[line - 1]),)


def _reading_behaviour(reading: str, clauses: Sequence[str], device: _Device) -> DeviceBehaviour:
    run, serial = device.run, device.serial
    records = run.for_device(serial)
    warned = [r for r in records if r.verdict is Verdict.WARN and reading in readings_of_reason(r.reason)]
    answers = clause_answers(run)
    failing = [r for r in records if r.verdict.failed
               and set(clauses) & set(named_clauses(r, run.kit.clauses_of(r.scenario)))]
    citing = [r for r in records if set(clauses) & set(run.kit.clauses_of(r.scenario)) and r.recorded]
    ops, kinds = READING_EVIDENCE.get(reading, ((), ()))
    parts: list[str] = []
    if warned:
        parts.append(f"needed the reading (WARN) in {len(warned)} scenario{'s' if len(warned) != 1 else ''}")
    if failing:
        parts.append(f"failed the sentence in {len(failing)} ({', '.join(sorted({str(r.verdict) for r in failing}))})")
    per_clause = []
    for clause in clauses:
        answer = answers.get(clause, serial)
        per_clause.append(f"{clause} {answer.text() if answer is not None else 'not cited'}")
    verdicts = Counter(str(r.verdict) for r in citing)
    counted = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items(), key=lambda i: -i[1]))
    parts.append(f"{len(citing)} scenario{'s' if len(citing) != 1 else ''} cite its sentences"
                 + (f" ({counted})" if counted else ""))
    summary = "; ".join(parts) + "; answers: " + ", ".join(per_clause)
    shown: list[ResultRecord] = [*warned, *failing] or [r for r in citing if r.verdict is Verdict.PASS]
    # The first scenarios by id whose traces show the events the reading reads: not the first to finish,
    # which lanes order differently in every run (a PASS scenario may show none of them this time).
    lines: list[Line] = []
    taken = 0
    for record in sorted(shown, key=lambda r: r.scenario):
        evidence = _divergent_line(record) if record.verdict.failed else _evidence_lines(record, ops, kinds)
        if evidence:
            lines.extend(evidence)
            taken += 1
            if taken == SHOWN_SCENARIOS:
                break
    if not lines:  # callbacks a run may or may not see (a late onPreempt): this time none came
        summary += "; no trace of them shows the calls or callbacks it reads"
    scenarios = tuple(dict.fromkeys(r.scenario for r in (warned or failing or citing)))
    return DeviceBehaviour(device.label, summary, scenarios, tuple(lines))


def _reading_entries(source: ErrataSource, devices: Sequence[_Device]) -> list[ErrataEntry]:
    entries: list[ErrataEntry] = []
    for reading in sorted(source.readings, key=lambda r: int(r[1:])):
        proposal = source.readings[reading]
        clauses = [c for c in proposal.sentences if c in source.quotes]
        behaviour = tuple(_reading_behaviour(reading, clauses, d) for d in devices)
        needed = tuple(b.device for b in behaviour if b.summary.startswith("needed"))
        entries.append(ErrataEntry(
            key=reading,
            kind="reading",
            title=f"Reading {reading}",
            sentences=tuple((c, source.quotes[c]) for c in clauses),
            reading=proposal.reading,
            why=proposal.why,
            devices=behaviour,
            aosp=proposal.aosp,
            discrepancies=proposal.discrepancies,
            proposed=proposal.proposed,
            needed_on=needed,
        ))
    return entries


def _sentence_of(rules: Sequence[AtlasRule], aspect: str, question: str) -> str | None:
    for rule in rules:
        if rule.aspect == aspect and question.startswith(rule.question):
            return rule.sentence
    return None


def _trace_of(device: _Device, scenario: str) -> Sequence[str]:
    if scenario == _DISCOVERY:
        trace = device.run.devices.get(device.serial, {}).get("discovery_trace")
        return [t for t in trace if isinstance(t, str)] if isinstance(trace, list) else []
    for record in device.run.for_device(device.serial):
        if record.scenario == scenario:
            return record.trace
    return []


def _answer_lines(device: _Device, entry: Entry) -> list[Line]:
    out: list[Line] = []
    for choice in entry.choices:
        for source in choice.sources[:1]:
            trace = _trace_of(device, source.scenario)
            out.extend(Line(source.scenario, n, trace[n - 1]) for n in source.lines[:SHOWN_LINES]
                       if 1 <= n <= len(trace))
    return out


def _differing_entries(source: ErrataSource, devices: Sequence[_Device]) -> list[ErrataEntry]:
    atlases: list[tuple[str, DeviceAtlas]] = [(d.label, device_atlas(d.run, d.serial)) for d in devices]
    if len(atlases) < 2:
        return []
    side = side_by_side(atlases)
    by_sentence: dict[str, list[tuple[str, str, tuple[Entry | None, ...]]]] = {}
    for row in side.rows:
        present = [c for c in row.cells if c is not None]
        if row.aspect is Aspect.READING or len(present) < 2 or len({c.answer for c in present}) < 2:
            continue  # readings have entries of their own; a question some device never met is no difference
        sentence = _sentence_of(source.atlas, str(row.aspect), row.question)
        if sentence is not None and sentence in source.quotes:
            by_sentence.setdefault(sentence, []).append((str(row.aspect), row.question, row.cells))
    entries: list[ErrataEntry] = []
    for sentence, rows in sorted(by_sentence.items(), key=lambda item: (-len(item[1]), item[0])):
        questions = tuple(
            Question(aspect, question, tuple((d.label, c.text() if c is not None else "—")
                                             for d, c in zip(devices, cells, strict=True)))
            for aspect, question, cells in rows
        )
        behaviour: list[DeviceBehaviour] = []
        for index, device in enumerate(devices):
            answered = [(q, cells[index]) for q, (_, _, cells) in zip(questions, rows, strict=True)
                        if cells[index] is not None]
            values: Counter[str] = Counter()
            scenarios: dict[str, None] = {}
            for _, cell in answered:
                assert cell is not None
                for choice in cell.choices:
                    values[choice.value] += choice.count
                    scenarios.update(dict.fromkeys(s.scenario for s in choice.sources))
            lines: list[Line] = []
            for _, cell in answered[:SHOWN_QUESTIONS]:
                assert cell is not None
                lines.extend(_answer_lines(device, cell))
            common = ", ".join(f"{value} ({n}×)" if n > 1 else value for value, n in values.most_common(6))
            more = f" and {len(values) - 6} other answers" if len(values) > 6 else ""
            summary = (f"answered {len(answered)} of the {len(rows)} questions: {common}{more}" if answered
                       else "met none of these questions")
            behaviour.append(DeviceBehaviour(device.label, summary, tuple(scenarios), tuple(lines)))
        proposal = source.sentences.get(sentence) or _unwritten(questions)
        entries.append(ErrataEntry(
            key=sentence,
            kind="devices differ",
            title=f"Devices differ: {sentence}",
            sentences=((sentence, source.quotes[sentence]),),
            reading=proposal.reading,
            why=proposal.why,
            devices=tuple(behaviour),
            aosp=proposal.aosp,
            discrepancies=proposal.discrepancies,
            proposed=proposal.proposed,
            questions=questions[:SHOWN_QUESTIONS],
            question_count=len(questions),
        ))
    return entries


def _unwritten(questions: Sequence[Question]) -> Proposal:
    """A sentence errata.yaml has no entry for: the proposal names the answers the devices gave."""
    answers = sorted({a for q in questions for _, a in q.answers if a != "—"})
    return Proposal(
        (), "The kit accepts each of these answers: no sentence of the text decides between them.",
        "The text leaves this choice to the implementation.", "Not documented by the facts.", (),
        "Name the answers an implementation may give here (the devices gave: " + "; ".join(answers[:6]) + ").",
    )


def build_errata(source: ErrataSource, runs: Sequence[RunResults]) -> Errata:
    """The draft for `runs` (see the module docstring)."""
    devices = _devices(runs)
    entries = [*_reading_entries(source, devices), *_differing_entries(source, devices)]
    return Errata(
        runs=tuple((run.run_id, ", ".join(run.device_serials), claim_of(run).configuration_text()) for run in runs),
        devices=tuple(d.label for d in devices),
        entries=tuple(entries),
        not_sentences=tuple(sorted(source.not_sentences.items())),
    )


def render_errata_html(errata: Errata) -> str:
    return environment().get_template("errata.html.j2").render(e=errata)


def _md(text: str) -> str:
    """Text for a Markdown paragraph: what a renderer would read as markup is escaped."""
    out = safe_text(text)
    for mark in ("\\", "`", "*", "[", "]", "<", ">", "|"):
        out = out.replace(mark, "\\" + mark)
    return out


def _code(text: str) -> str:
    shown = safe_text(text)
    return f"`` {shown} ``" if "`" in shown else f"`{shown}`"


def render_errata_markdown(errata: Errata) -> str:
    """The same draft in Markdown, for an issue tracker or a review."""
    out: list[str] = ["# Errata draft: android/npumanager/buffer.h (API 37)", ""]
    out.append("From npuconf's runs:")
    out.append("")
    out.extend(f"- {_code(run_id)} on {_md(devices)}: {_md(configuration)}"
               for run_id, devices, configuration in errata.runs)
    out.append("")
    out.append(f"{len(errata.readings)} sentences the kit needs a reading of, and "
               f"{len(errata.differing)} where the devices tested differ. Each entry quotes the sentence, says "
               "the reading the kit applies and why, what each device did (with trace lines), what the AOSP "
               "module does, and proposes a wording.")
    out.append("")
    for entry in errata.entries:
        out.append(f"## {_md(entry.title)}")
        out.append("")
        out.append("**Sentence**" + ("s" if len(entry.sentences) > 1 else "") + ":")
        out.append("")
        for clause, quote in entry.sentences:
            out.append(f"> {_md(quote)} ({_code(clause)})")
            out.append(">")
        out.pop()
        out.append("")
        out.append(f"**Reading the kit applies**: {_md(entry.reading)}")
        out.append("")
        out.append(f"**Why**: {_md(entry.why)}")
        out.append("")
        if entry.questions:
            out.append(f"**Where the devices differ** ({entry.question_count} questions of the behaviour atlas; "
                       f"the first {len(entry.questions)}):")
            out.append("")
            for q in entry.questions:
                answers = "; ".join(f"{_code(d)} {_md(a)}" for d, a in q.answers)
                out.append(f"- {_md(q.question)}: {answers}")
            out.append("")
        out.append("**What each device did**:")
        out.append("")
        for device in entry.devices:
            out.append(f"- {_code(device.device)}: {_md(device.summary)}"
                       + (f". Scenarios: {_md(_listed(device.scenarios))}" if device.scenarios else ""))
            for line in device.lines:
                out.append(f"  - {_code(line.scenario)} trace line {line.number}: {_code(line.text)}")
        out.append("")
        dids = f" ({', '.join(entry.discrepancies)})" if entry.discrepancies else ""
        out.append(f"**AOSP module**{dids}: {_md(entry.aosp)}")
        out.append("")
        out.append("**Proposed wording**:")
        out.append("")
        out.append(f"> {_md(entry.proposed)}")
        out.append("")
    if errata.not_sentences:
        out.append("## Readings that read no sentence")
        out.append("")
        out.extend(f"- {reading}: {_md(why)}" for reading, why in errata.not_sentences)
        out.append("")
    return "\n".join(out)
