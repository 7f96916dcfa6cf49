"""spec.html: the published header text with each normative sentence marked by its clause and its answer.

`render_spec(spec, runs)` is pure: `spec` holds the published text (the kit's copy,
conformance/spec/buffer-h-api37.md), the clause catalogue, the scenarios and model rules citing each
clause; `runs` are recorded runs. The text is rendered as the reference shows it (`parse_page`): its raw
`<br />` lines are paragraph breaks, and its "Details Parameters ..." lines are parameter tables. Each
clause's quote is located in the text (links reduced to their text, escapes and emphasis removed,
whitespace collapsed: the catalogue's own normalisation; `locate`), also where it runs from one
paragraph or table cell into the next or holds another clause's sentence, and marked in place with its
ID (split into pieces, nested where sentences nest), coloured by its answer over every device of every
run (reports.answers.clause_answers):

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

import bisect
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup, escape

from reference_model.verdicts import Verdict

from ..answers.claim import claim_of
from ..answers.clause_answers import clause_answers, named_clauses
from ..recorded.replay import replay_command
from ..recorded.results import RunResults, safe_text
from .html import environment

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

# "Details Parameters `a` text `b` text **Returns** text": the NDK page's parameter table, run on in one line.
_PARAM_SPLIT: Final = re.compile(r"(\*\*Returns\*\*|(?<!\S)Parameters(?=\s+`)|`[A-Za-z_]\w*`)")
_PARAM_LINE: Final = re.compile(r"^`[A-Za-z_]\w*`\s")
_BREAK: Final = "<br />"  # the page's raw HTML between paragraphs: a paragraph break, never text


@dataclass(frozen=True, slots=True)
class _Unit:
    """One run of text of the page, normalised: a paragraph, a list item, a heading, a cell."""

    text: str
    searchable: bool = True  # clause quotes are located in it (prose, list items, parameter tables)
    barrier: bool = False  # a quote never runs across it (headings, code, the summary tables)


@dataclass(frozen=True, slots=True)
class _ParamRow:
    kind: str  # "heading" (Parameters), "param" or "returns"
    label: int  # unit index
    description: tuple[int, ...]  # unit indexes, one per paragraph


@dataclass(frozen=True, slots=True)
class _RawBlock:
    kind: str  # h1..h4, p, pre, ul, table, params
    units: tuple[int, ...] = ()  # h*, p, ul
    code: str = ""  # pre
    rows: tuple[tuple[int, ...], ...] = ()  # table
    params: tuple[_ParamRow, ...] = ()  # params


class _Page:
    """The published text as blocks over units (see `parse_page`)."""

    def __init__(self, text: str) -> None:
        self.names = anchor_names(text)
        self.units: list[_Unit] = []
        self.blocks: list[_RawBlock] = []
        self._para: list[str] = []
        self._items: list[str] = []
        self._table: list[list[str]] = []
        self._params: list[_ParamRow] | None = None  # the parameter table a following line may continue

    def unit(self, raw: str, searchable: bool = True, barrier: bool = False) -> int:
        self.units.append(_Unit(_normalised(raw, self.names), searchable, barrier))
        return len(self.units) - 1

    def param_rows(self, raw: str) -> list[_ParamRow]:
        parts = _PARAM_SPLIT.split(raw)
        rows: list[_ParamRow] = []
        if parts[0].strip():  # text before the first name: a description of its own
            rows.append(_ParamRow("param", self.unit(""), (self.unit(parts[0]),)))
        for mark, after in zip(parts[1::2], parts[2::2], strict=True):
            if mark == "Parameters":
                rows.append(_ParamRow("heading", self.unit("Parameters", searchable=False), ()))
            elif mark == "**Returns**":
                rows.append(_ParamRow("returns", self.unit("Returns"), (self.unit(after),)))
            else:
                rows.append(_ParamRow("param", self.unit(mark), (self.unit(after),)))
        return rows

    def open_params(self, rows: list[_ParamRow]) -> None:
        self._params = rows
        self.blocks.append(_RawBlock("params"))  # its rows are filled in by `close_params`

    def close_params(self) -> None:
        if self._params is not None:
            index = max(i for i, b in enumerate(self.blocks) if b.kind == "params")
            self.blocks[index] = _RawBlock("params", params=tuple(self._params))
            self._params = None

    def flush(self) -> None:
        if self._para:
            self.close_params()
            self.blocks.append(_RawBlock("p", (self.unit(" ".join(self._para)),)))
            self._para.clear()
        if self._items:
            self.close_params()
            self.blocks.append(_RawBlock("ul", tuple(self.unit(item) for item in self._items)))
            self._items.clear()
        if self._table:
            table, self._table = self._table, []
            if table[0][0].strip() == "Details":  # the page's own parameter table (Returns only)
                self.close_params()
                rows = [
                    _ParamRow("returns", self.unit("Returns"), (self.unit(cells[1]),))
                    if cells[0].strip() == "**Returns**"
                    else _ParamRow("param", self.unit(cells[0]), (self.unit(cells[1]),))
                    for cells in table[1:]
                    if len(cells) > 1
                ]
                self.blocks.append(_RawBlock("params", params=tuple(rows)))
            else:
                self.close_params()
                self.blocks.append(_RawBlock("table", rows=tuple(
                    tuple(self.unit(c, searchable=False, barrier=True) for c in row) for row in table)))

    def fenced(self, body: list[str]) -> None:
        """A fenced block of indented prose (the reference's notes on a parameter) belongs to the parameter
        before it, or stands as paragraphs; any other fenced block is code."""
        prose = [b for b in body if b.strip()]
        if prose and all(b.startswith("    ") for b in prose):
            chunks: list[str] = []
            chunk: list[str] = []
            for line in [*body, ""]:
                if line.strip():
                    chunk.append(line.strip())
                elif chunk:
                    chunks.append(" ".join(chunk))
                    chunk = []
            if self._params is not None and self._params and self._params[-1].kind != "heading":
                last = self._params[-1]
                more = tuple(self.unit(c) for c in chunks)
                self._params[-1] = _ParamRow(last.kind, last.label, (*last.description, *more))
            else:
                self.close_params()
                self.blocks.extend(_RawBlock("p", (self.unit(c),)) for c in chunks)
        else:
            self.close_params()
            self.units.append(_Unit("", searchable=False, barrier=True))
            self.blocks.append(_RawBlock("pre", code="\n".join(body).strip("\n")))


def parse_page(text: str) -> tuple[list[_Unit], list[_RawBlock]]:
    """The published markdown as blocks: headings (a `#` heading inside a function's section is one of its
    sub-headings, h4), paragraphs, lists, code, the summary tables, and parameter tables where the page has
    them: its "Details Parameters `name` ... **Returns** ..." lines (each starts a table, also right after a
    paragraph's last line) with the indented notes and the `name` lines that continue them. The page's raw
    `<br />` lines are paragraph breaks."""
    page = _Page(text)
    lines = text.splitlines()
    in_function = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped == _BREAK:
            page.flush()
        elif line.startswith("```"):
            page.flush()
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            page.fenced(body)
        elif line.startswith("#"):
            page.flush()
            page.close_params()
            level = len(line) - len(line.lstrip("#"))
            in_function = in_function or level == 3
            kind = "h4" if in_function and level != 3 else f"h{min(level, 4)}"
            page.blocks.append(_RawBlock(kind, (page.unit(line.lstrip("#"), searchable=False, barrier=True),)))
        elif line.startswith("|"):
            if page._para or page._items:
                page.flush()
            cells = line.strip().strip("|").split("|")
            if not all(set(c.strip()) <= {"-", ":", ""} for c in cells):
                page._table.append(cells)
        elif not stripped:
            page.flush()
        elif line.startswith("Details "):
            page.flush()
            page.close_params()
            page.open_params(page.param_rows(line[len("Details "):]))
        elif page._params is not None and not page._para and _PARAM_LINE.match(line):
            page._params.extend(page.param_rows(line))
        elif line.startswith("- "):
            if page._para or page._table:
                page.flush()
            page._items.append(line[2:])
        else:
            if page._items or page._table:
                page.flush()
            page._para.append(line)
        i += 1
    page.flush()
    page.close_params()
    return page.units, page.blocks


Span = tuple[int, int, str, int]  # (start, end, clause, the length of its whole quote) within one unit's text


def locate(units: Sequence[_Unit], clauses: Sequence[SpecClause]) -> dict[int, list[Span]]:
    """Unit index -> the spans of the clauses marked in it. Each clause is located at the first place its
    quote occurs, in a stream of consecutive searchable units (joined by a space: a sentence may run from
    one paragraph or cell into the next) that no barrier interrupts, preferring a place no earlier clause
    of the catalogue took (several clauses share a sentence's text); a quote whose only places are taken
    is marked there too, nested in or split around the earlier mark."""
    streams: list[tuple[str, list[tuple[int, int]]]] = []  # (text, [(unit, start in the text)])
    parts: list[str] = []
    offsets: list[tuple[int, int]] = []
    at = 0

    def close() -> None:
        nonlocal at
        if offsets:
            streams.append((" ".join(parts), list(offsets)))
        parts.clear()
        offsets.clear()
        at = 0

    for index, unit in enumerate(units):
        if unit.barrier:
            close()
        elif unit.searchable and unit.text:
            offsets.append((index, at))
            parts.append(unit.text)
            at += len(unit.text) + 1
    close()

    taken: list[tuple[int, int, int]] = []  # (stream, start, end)
    out: dict[int, list[Span]] = {}
    for clause in clauses:
        quote = _SPACE.sub(" ", clause.quote).strip()
        if not quote:
            continue
        places = [(n, k, k + len(quote)) for n, (text, _) in enumerate(streams) for k in _occurrences(text, quote)]
        free = [p for p in places if not any(t[0] == p[0] and t[1] < p[2] and p[1] < t[2] for t in taken)]
        if not places:
            continue
        chosen = (free or places)[0]
        taken.append(chosen)
        n, start, end = chosen
        for unit_index, unit_start in streams[n][1]:
            unit_end = unit_start + len(units[unit_index].text)
            if unit_start < end and start < unit_end:
                out.setdefault(unit_index, []).append(
                    (max(start, unit_start) - unit_start, min(end, unit_end) - unit_start, clause.id, end - start))
    return out


def _occurrences(text: str, quote: str) -> list[int]:
    found: list[int] = []
    k = text.find(quote)
    while k >= 0:
        found.append(k)
        k = text.find(quote, k + 1)
    return found


@dataclass(slots=True)
class _Piece:
    start: int
    end: int
    clause: str
    children: list[_Piece]


def _nest(spans: Sequence[Span]) -> list[_Piece]:
    """Spans as properly nested pieces: one that overlaps an earlier one without lying inside it is split at
    that one's end (its first part nested, the rest after)."""
    def order(span: Span) -> tuple[int, int, int, str]:
        # the longer span outside; of two alike here, the clause whose whole quote is longer (as elsewhere)
        return span[0], -span[1], -span[3], span[2]

    pending = sorted(spans, key=order)
    roots: list[_Piece] = []
    stack: list[_Piece] = []
    while pending:
        start, end, clause, whole = pending.pop(0)
        while stack and stack[-1].end <= start:
            stack.pop()
        if stack and end > stack[-1].end:
            bisect.insort(pending, (stack[-1].end, end, clause, whole), key=order)
            end = stack[-1].end
        piece = _Piece(start, end, clause, [])
        (stack[-1].children if stack else roots).append(piece)
        stack.append(piece)
    return roots


def _walk(pieces: Sequence[_Piece]) -> Iterator[_Piece]:
    for piece in pieces:
        yield piece
        yield from _walk(piece.children)


class _Marker:
    """Renders units with their clauses marked: each clause's first piece carries its anchor (`s-<id>`) and
    focus, its last its ID, every piece its colour."""

    def __init__(self, units: Sequence[_Unit], spans: Mapping[int, list[Span]], states: Mapping[str, str]) -> None:
        self.units = units
        self.states = states
        self.forests = {index: _nest(found) for index, found in spans.items()}
        self.first: dict[str, int] = {}  # the piece holding the anchor: the first with text of its own
        self.last: dict[str, int] = {}
        fallback: dict[str, int] = {}
        for index in sorted(self.forests):
            for piece in _walk(self.forests[index]):
                fallback.setdefault(piece.clause, id(piece))
                if piece.end - piece.start > sum(c.end - c.start for c in piece.children):
                    self.first.setdefault(piece.clause, id(piece))
                self.last[piece.clause] = id(piece)
        self.first = {**fallback, **self.first}

    def html(self, index: int) -> Markup:
        text = safe_text(self.units[index].text)
        return self._render(text, 0, len(text), self.forests.get(index, []))

    def _render(self, text: str, start: int, end: int, pieces: Sequence[_Piece]) -> Markup:
        out: list[Markup | str] = []
        at = start
        for piece in pieces:
            out.append(text[at:piece.start])
            inner = self._render(text, piece.start, piece.end, piece.children)
            first, last = self.first[piece.clause] == id(piece), self.last[piece.clause] == id(piece)
            anchor = Markup(' tabindex="0" id="s-{}"').format(piece.clause) if first else ""
            label = Markup("<sup>{}</sup>").format(piece.clause) if last else ""
            out.append(Markup('<span class="s st-{}" data-clause="{}"{}>{}{}</span>').format(
                self.states[piece.clause], piece.clause, anchor, inner, label))
            at = piece.end
        out.append(text[at:end])
        return Markup("").join(escape(part) for part in out)


@dataclass(frozen=True, slots=True)
class ParamRow:
    kind: str  # heading, param, returns
    label: Markup
    description: tuple[Markup, ...]


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # h1..h4, p, pre, ul, table, params
    html: str = ""  # h*, p: Markup
    code: str = ""  # pre
    items: tuple[Markup, ...] = ()  # ul
    rows: tuple[tuple[Markup, ...], ...] = ()  # table
    params: tuple[ParamRow, ...] = ()  # params


def _render_blocks(units: Sequence[_Unit], raw: Sequence[_RawBlock], marker: _Marker) -> list[Block]:
    out: list[Block] = []
    for block in raw:
        if block.kind == "pre":
            out.append(Block("pre", code=safe_text(block.code)))
        elif block.kind == "ul":
            out.append(Block("ul", items=tuple(marker.html(u) for u in block.units)))
        elif block.kind == "table":
            out.append(Block("table", rows=tuple(tuple(marker.html(u) for u in row) for row in block.rows)))
        elif block.kind == "params":
            out.append(Block("params", params=tuple(
                ParamRow(row.kind, marker.html(row.label), tuple(marker.html(u) for u in row.description))
                for row in block.params)))
        else:
            out.append(Block(block.kind, html=marker.html(block.units[0])))
    return out


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


def render_spec(spec: SpecSource, runs: Sequence[RunResults], errata: str | None = None) -> str:
    """The page (see the module docstring); `errata`: the name of the errata draft written beside it."""
    details = _details(spec, runs)
    units, raw = parse_page(spec.text)
    spans = locate(units, spec.clauses)
    located = {span[2] for found in spans.values() for span in found}
    marker = _Marker(units, spans, {cid: d.state for cid, d in details.items()})
    blocks = _render_blocks(units, raw, marker)
    shown = [
        Detail(d.clause, d.state, d.summary, d.scenarios, d.rules, d.devices, d.clause.id in located)
        for d in details.values()
    ]
    counts = {state: sum(1 for d in shown if d.state == state) for state in STATES}
    template = environment().get_template("spec.html.j2")
    return template.render(
        source=spec.source,
        runs=[(run.run_id, claim_of(run).headline, ", ".join(run.device_serials)) for run in runs],
        blocks=blocks,
        details=shown,
        unlocated=[d for d in shown if not d.located],
        states=[(s, label, counts[s]) for s, label in STATES.items() if counts[s]],
        with_runs=bool(runs),
        errata=errata,
    )
