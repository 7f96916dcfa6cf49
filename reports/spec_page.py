"""spec.html: the published header text with each normative sentence marked by its clause and its answer.

`render_spec(spec, runs)` is pure: `spec` holds the published text (the kit's copy,
conformance/spec/buffer-h-api37.md), the clause catalogue, the scenarios and model rules citing each
clause; `runs` are recorded runs. Each clause's quote is located in the text (links reduced to their
text, escapes and emphasis removed, whitespace collapsed: the catalogue's own normalisation) and
marked with its ID, coloured by its answer over every device of every run (reports.clause_answers):

- `fail`: some device has a FAIL, CRASH or WAIVED answer (a failure naming the clause);
- `warn`: none failed, some device needed a reading of it (the readings are named);
- `pass`: every device answered PASS;
- `nx`: not demonstrated on some device (none failed or warned), with what stood in the way;
- `untestable`: testability not-testable in the catalogue (with its reason).

Without runs the page shows coverage: `covered` (a scenario cites it), `uncovered`, `untestable`.
Clicking a sentence shows its scenarios and rules and, per device, its answer and the failures
naming it with their replay lines. Same Content-Security-Policy as report.html; nothing is fetched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from reference_model.verdicts import Verdict

from .clause_answers import clause_answers, named_clauses
from .html import environment
from .replay import replay_command
from .results import RunResults, safe_text

_LINK: Final = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_URL: Final = re.compile(r"https?://\S+?(?=[\s`()|,]|$)")
_SPACE: Final = re.compile(r"\s+")
_EMPHASIS: Final = re.compile(r"(?<![\w*])\*(\w[^*]*?\w|\w)\*(?![\w*])")


@dataclass(frozen=True, slots=True)
class SpecClause:
    id: str
    chapter: str
    quote: str
    testability: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class SpecSource:
    text: str  # the published header text (markdown as the NDK reference publishes it)
    source: str  # where the kit keeps it, for the page's header
    clauses: tuple[SpecClause, ...]  # the catalogue, in its order
    scenarios: Mapping[str, tuple[tuple[str, str], ...]]  # clause -> (scenario id, title) citing it
    rules: Mapping[str, tuple[str, ...]]  # clause -> model rules citing it


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    clause: str  # "" for unmarked text
    state: str


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # h1..h4, p, pre, table
    segments: tuple[Segment, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Failure:
    scenario: str
    verdict: str
    reason: str
    replay: str


@dataclass(frozen=True, slots=True)
class DeviceAnswer:
    device: str
    answer: str
    why: str
    failures: tuple[Failure, ...]
    verdict: Verdict | None = None  # the clause's answer on the device (None: not demonstrated)


@dataclass(frozen=True, slots=True)
class Detail:
    clause: SpecClause
    state: str
    summary: str
    scenarios: tuple[tuple[str, str], ...]
    rules: tuple[str, ...]
    devices: tuple[DeviceAnswer, ...]
    located: bool


def anchor_names(text: str) -> dict[str, str]:
    """Reference URL -> the name its links show (`ANpuBuffer_free`): the summary tables give only URLs."""
    names: dict[str, str] = {}
    for match in _LINK.finditer(text):
        name, url = match.group(1), match.group(0)[len(match.group(1)) + 3 : -1]
        if name and url.startswith("http"):
            names.setdefault(url, name.removesuffix("()"))
    return names


def normalise(text: str, names: Mapping[str, str] | None = None) -> str:
    """Markdown as the catalogue quotes it: links reduced to their text, bare reference URLs replaced by
    the name their links show (else dropped), backticks, emphasis and escapes removed, whitespace collapsed."""
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(lambda m: (names or {}).get(m.group(0), ""), text)
    text = text.replace("**", "").replace("`", "").replace("\\*", "\0")
    text = _EMPHASIS.sub(r"\1", text).replace("\0", "*").replace("\\", "")
    return _SPACE.sub(" ", text).strip()


_normalised = normalise


def _blocks(text: str) -> list[tuple[str, str | tuple[tuple[str, ...], ...]]]:
    """(kind, normalised text or table rows) in document order. A fenced block of indented prose (the
    reference's parameter notes) is split into paragraphs; other fenced blocks stay code."""
    out: list[tuple[str, str | tuple[tuple[str, ...], ...]]] = []
    names = anchor_names(text)

    def normalise(part: str) -> str:
        return _normalised(part, names)

    para: list[str] = []
    table: list[tuple[str, ...]] = []

    def flush() -> None:
        if para:
            out.append(("p", normalise(" ".join(para))))
            para.clear()
        if table:
            out.append(("table", tuple(table)))
            table.clear()

    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            prose = [b for b in body if b.strip()]
            if prose and all(b.startswith("        ") for b in prose):
                chunk: list[str] = []
                for b in [*body, ""]:
                    if b.strip():
                        chunk.append(b)
                    elif chunk:
                        out.append(("p", normalise(" ".join(chunk))))
                        chunk = []
            else:
                out.append(("pre", "\n".join(body).strip("\n")))
        elif line.startswith("#"):
            flush()
            level = min(len(line) - len(line.lstrip("#")), 4)
            out.append((f"h{level}", normalise(line.lstrip("#"))))
        elif line.startswith("|"):
            if para:
                out.append(("p", normalise(" ".join(para))))
                para.clear()
            cells = tuple(normalise(c) for c in line.strip().strip("|").split("|"))
            if not all(set(c) <= {"-", ":", ""} for c in cells):
                table.append(cells)
        elif not line.strip():
            flush()
        else:
            if table:
                flush()
            para.append(line)
        i += 1
    flush()
    return out


def _locate(paragraphs: Sequence[str], clauses: Sequence[SpecClause]) -> dict[int, list[tuple[int, int, str]]]:
    """Paragraph index -> (start, end, clause) spans: each clause at the first place its quote occurs
    that no earlier clause of the catalogue took (several clauses share a sentence text)."""
    taken: dict[int, list[tuple[int, int, str]]] = {}
    for clause in clauses:
        quote = _SPACE.sub(" ", clause.quote).strip()
        if not quote:
            continue
        placed = False
        for index, text in enumerate(paragraphs):
            start = text.find(quote)
            while start >= 0:
                end = start + len(quote)
                if not any(s < end and start < e for s, e, _ in taken.get(index, [])):
                    taken.setdefault(index, []).append((start, end, clause.id))
                    placed = True
                    break
                start = text.find(quote, start + 1)
            if placed:
                break
    return taken


def _details(spec: SpecSource, runs: Sequence[RunResults]) -> dict[str, Detail]:
    answers = [(run, clause_answers(run)) for run in runs]
    several = len(runs) > 1
    out: dict[str, Detail] = {}
    for clause in spec.clauses:
        scenarios = spec.scenarios.get(clause.id, ())
        rules = spec.rules.get(clause.id, ())
        devices: list[DeviceAnswer] = []
        for run, run_answers in answers:
            for serial in run.device_serials:
                label = f"{serial} ({run.run_id})" if several else serial
                answer = run_answers.get(clause.id, serial)
                failures = tuple(
                    Failure(r.scenario, str(r.verdict), r.reason, replay_command(run, r))
                    for r in run.results
                    if r.device == serial
                    and r.verdict.failed
                    and clause.id in named_clauses(r, run.kit.clauses_of(r.scenario))
                )
                if answer is None:
                    devices.append(DeviceAnswer(label, "not demonstrated", "no scenario of the run cites it", failures))
                else:
                    text = answer.text() + (f" ({', '.join(answer.readings)})" if answer.readings else "")
                    devices.append(DeviceAnswer(label, text, answer.why, failures, answer.verdict))
        state, summary = _state(clause, scenarios, devices, bool(runs))
        out[clause.id] = Detail(clause, state, summary, scenarios, rules, tuple(devices), False)
    return out


def _state(
    clause: SpecClause, scenarios: Sequence[tuple[str, str]], devices: Sequence[DeviceAnswer], with_runs: bool
) -> tuple[str, str]:
    if clause.testability == "not-testable":
        return "untestable", f"not testable: {clause.reason or 'no reason given'}"
    if not with_runs:
        if scenarios:
            return "covered", f"{len(scenarios)} scenario(s) cite it"
        return "uncovered", "no scenario cites it"
    failing = [d.device for d in devices if d.verdict is not None and d.verdict.failed]
    if failing:
        return "fail", f"fails on {len(failing)} of {len(devices)} device(s): {', '.join(failing)}"
    # A clause's answer names it (WARN, the only one left after the failures) or it was demonstrated (PASS).
    warned = [d for d in devices if d.verdict is not None and d.verdict.names]
    if warned:
        return "warn", f"{warned[0].verdict} on {len(warned)} of {len(devices)} device(s): {warned[0].answer}"
    passed = sum(1 for d in devices if d.verdict is not None and d.verdict.exercises)
    if devices and passed == len(devices):
        return "pass", f"PASS on all {len(devices)} device(s)"
    return "nx", f"not demonstrated on {len(devices) - passed} of {len(devices)} device(s)"


STATES: Final = {
    "pass": "all pass",
    "fail": "some fail",
    "warn": "WARN (a reading)",
    "nx": "not demonstrated",
    "untestable": "untestable",
    "covered": "covered by scenarios",
    "uncovered": "no scenario",
}


def render_spec(spec: SpecSource, runs: Sequence[RunResults]) -> str:
    """The page (see the module docstring)."""
    details = _details(spec, runs)
    raw = _blocks(spec.text)
    paragraphs = [b for kind, b in raw if kind == "p" and isinstance(b, str)]
    spans = _locate(paragraphs, spec.clauses)
    located: set[str] = set()
    blocks: list[Block] = []
    p_index = 0
    for kind, body in raw:
        if kind == "table" and not isinstance(body, str):
            blocks.append(Block("table", rows=tuple(tuple(safe_text(c) for c in row) for row in body)))
            continue
        assert isinstance(body, str)
        if kind != "p":
            blocks.append(Block(kind, (Segment(safe_text(body), "", ""),)))
            continue
        segments: list[Segment] = []
        at = 0
        for start, end, cid in sorted(spans.get(p_index, [])):
            if start > at:
                segments.append(Segment(safe_text(body[at:start]), "", ""))
            segments.append(Segment(safe_text(body[start:end]), cid, details[cid].state))
            located.add(cid)
            at = end
        if at < len(body):
            segments.append(Segment(safe_text(body[at:]), "", ""))
        blocks.append(Block("p", tuple(segments)))
        p_index += 1
    shown = [
        Detail(d.clause, d.state, d.summary, d.scenarios, d.rules, d.devices, d.clause.id in located)
        for d in details.values()
    ]
    counts = {state: sum(1 for d in shown if d.state == state) for state in STATES}
    template = environment().get_template("spec.html.j2")
    return template.render(
        source=spec.source,
        runs=[(run.run_id, run.claim.headline, ", ".join(run.device_serials)) for run in runs],
        blocks=blocks,
        details=shown,
        unlocated=[d for d in shown if not d.located],
        states=[(s, label, counts[s]) for s, label in STATES.items() if counts[s]],
        with_runs=bool(runs),
    )
