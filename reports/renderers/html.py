"""report.html: one self-contained page (inline CSS, SVG and JS; no network) rendered from results.

The page leads with the answer and the run's configuration, then every failure in severity order
(clause, quote, observed and allowed, discrepancy IDs, replay command, a numbered trace excerpt with
the divergent line marked), then the device × clause matrix grouped by chapter, the clauses not
demonstrated and why, the charts, and last a filterable table of every result.
"""

from __future__ import annotations

import functools
import io
import itertools
import os
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from markupsafe import Markup

from floor.safe_io import atomic_output
from floor.user_cache import cache_key, read_entry, write_entry
from floor.words import counted
from reference_model.readings import READING_CLAUSES, READINGS
from reference_model.verdicts import FINDING_ORDER, SEVERITY, Verdict

from ..answers.atlas import Atlas, run_atlas
from ..answers.baseline import BaselineComparison
from ..answers.claim import claim_of, problems_of, required_clauses
from ..answers.clause_answers import clause_answers, readings_of_reason
from ..answers.findings import (
    Finding,
    Gap,
    clause_chapters,
    coverage_gaps,
    findings,
)
from ..recorded.plan_options import read_plan_options
from ..recorded.results import (
    ResultRecord,
    RunResults,
    alloc_callback_latencies_ns,
    count_verdicts,
    counts_by_chapter,
    format_ns,
    percentile,
    render_value,
    safe_text,
)
from ..recorded.run_options import npuconf_command
from .atlas_view import atlas_sections

if TYPE_CHECKING:
    import jinja2

TEMPLATES_DIR: Final = Path(__file__).parent / "templates"
# The pages' one palette: each verdict's colour, in the order the pages declare their `--<VERDICT>` CSS
# variables, and the dashboard's mark of a clause that got worse.
VERDICT_COLOURS: Final = {
    Verdict.PASS: "#2e7d32",
    Verdict.WARN: "#9e9d24",
    Verdict.FAIL: "#c62828",
    Verdict.CRASH: "#6a1b9a",
    Verdict.TIMEOUT: "#ef6c00",
    Verdict.ERROR: "#8d6e63",
    Verdict.NOT_APPLICABLE: "#9e9e9e",
    Verdict.WAIVED: "#0277bd",
    Verdict.NOT_EXECUTED: "#37474f",
}
COLOURS: Final[dict[str, str]] = {**{str(v): c for v, c in VERDICT_COLOURS.items()}, "REGRESSION": "#ffd600"}


def colour_variables(names: Sequence[str]) -> str:
    """The CSS declarations of the `--<NAME>` colour variables of `names`, for a template's `:root`."""
    return " ".join(f"--{name}: {COLOURS[name]};" for name in names)


# Latency histogram bin edges in ns: 1-2-5 steps from 1 µs to 10 s (plus "< 1 µs" and "≥ 10 s").
_LATENCY_EDGES_NS: Final[tuple[int, ...]] = (*(m * 10**e for e in range(3, 10) for m in (1, 2, 5)), 10**10)


# ---------------------------------------------------------------------------------------------
# view model


@dataclass(frozen=True, slots=True)
class Cell:
    verdict: str  # "" when no scenario cites the clause on that device
    short: str
    tooltip: str


@dataclass(frozen=True, slots=True)
class MatrixRow:
    clause: str
    cells: tuple[Cell, ...]
    failing: bool  # some cell holds a verdict listed among the failures


@dataclass(frozen=True, slots=True)
class MatrixChapter:
    chapter: str
    rows: tuple[MatrixRow, ...]
    failing: int  # rows with a failing cell
    summary: str


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    width: float
    verdict: str
    tooltip: str


@dataclass(frozen=True, slots=True)
class ChapterBar:
    chapter: str
    y: float
    bars: tuple[Bar, ...]
    label: str


@dataclass(frozen=True, slots=True)
class HistogramBin:
    x: float
    y: float
    width: float
    height: float
    count: int
    label: str
    tooltip: str


@dataclass(frozen=True, slots=True)
class LatencyStats:
    device: str
    count: int
    median: str
    p95: str
    maximum: str


@dataclass(frozen=True, slots=True)
class Histogram:
    bins: tuple[HistogramBin, ...]
    width: int
    height: int
    plot_bottom: float
    peak: int
    stats: tuple[LatencyStats, ...]


@dataclass(frozen=True, slots=True)
class Row:
    device: str
    scenario: str
    title: str
    chapter: str
    verdict: str
    clauses: str
    duration: str
    note: str
    detail_id: str


@dataclass(frozen=True, slots=True)
class FindingView:
    id: str
    finding: Finding
    title: str
    exit: str
    waiver: str


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failures sharing a verdict and a clause (a WARN: a reading and a device): one line of the index above
    the failures."""

    verdict: str
    clause: str
    count: int
    first_id: str
    discrepancies: str
    scenarios: str
    device: str = ""  # a WARN row's device; FAIL rows span every device
    reading: str = ""  # a WARN row's reading (R4), with `clause` its words


@dataclass(frozen=True, slots=True)
class ReadingGroup:
    """The WARNs of one device that needed one reading (docs/model.md §4): one row of the failure index and
    one article, which lists each scenario with its replay line and shows the first one's trace."""

    id: str
    reading: str  # R<n>, or "" when the reason names no reading this kit knows
    text: str  # what departs from the reading (reference_model.readings)
    clauses: tuple[str, ...]  # the clauses whose sentences it reads
    device: str
    members: tuple[FindingView, ...]

    @property
    def first(self) -> FindingView:
        return self.members[0]

    @property
    def discrepancies(self) -> str:
        dids = sorted({d for m in self.members for d in m.finding.discrepancies}, key=lambda d: (len(d), d))
        return ", ".join(dids)


@dataclass(frozen=True, slots=True)
class GapView:
    clause: str
    device: str
    why: str
    reasons: tuple[tuple[str, str, str], ...]
    required: bool  # the claim requires it of this device (claim.required_clauses)


@dataclass(frozen=True, slots=True)
class GapCount:
    """The coverage section's heading: every clause not demonstrated, and how many the claim basis holds."""

    total: int
    required: int

    def heading(self) -> str:
        if self.required == self.total:
            return f"Clauses not demonstrated ({self.total})"
        split = f"{self.required} required by the claim, {self.total - self.required} not required"
        return f"Clauses not demonstrated ({self.total}: {split})"


def _matrix(run: RunResults, devices: Sequence[str]) -> tuple[MatrixChapter, ...]:
    """Clause rows grouped by the chapter that cites each clause most (findings.clause_chapters); each
    cell is the clause's own answer on that device (reports.answers.clause_answers)."""
    chapters = clause_chapters(run)
    answers = clause_answers(run)
    verdicts = {(r.device, r.scenario): r.verdict for r in run.results}
    grouped: dict[str, list[MatrixRow]] = {}
    for clause, by_device in answers.by_clause.items():
        cells: list[Cell] = []
        failing = False
        for serial in devices:
            answer = by_device.get(serial)
            if answer is None or (answer.verdict is None and not answer.scenarios):
                cells.append(Cell("", "", f"{clause} on {serial}: no scenario"))
                continue
            if answer.verdict is None:
                cells.append(Cell("", "", f"{clause} on {serial}: not demonstrated ({answer.why})"))
                continue
            verdict = answer.verdict
            listed = "; ".join(f"{s} {verdicts[(serial, s)]}" for s in answer.scenarios if (serial, s) in verdicts)
            tooltip = f"{clause} on {serial}: {verdict}: {answer.why}" + (f" (cited by {listed})" if listed else "")
            cells.append(Cell(str(verdict), verdict.label, tooltip))
            failing = failing or verdict.finding
        grouped.setdefault(chapters.get(clause, ""), []).append(MatrixRow(clause, tuple(cells), failing))
    out: list[MatrixChapter] = []
    for chapter, rows in sorted(grouped.items()):
        failing_rows = sum(1 for row in rows if row.failing)
        summary = f"{len(rows)} clause{'' if len(rows) == 1 else 's'}"
        summary += f", {failing_rows} failing" if failing_rows else ", none failing"
        out.append(MatrixChapter(chapter or "(no chapter)", tuple(rows), failing_rows, summary))
    return tuple(out)


# Failures past this many show their trace excerpt collapsed, so the matrix stays a scroll away.
OPEN_EXCERPTS: Final = 10

CHART_BAR_X: Final = 170.0
CHART_BAR_WIDTH: Final = 420.0
CHART_ROW_HEIGHT: Final = 24.0


def _chapter_bars(run: RunResults) -> tuple[ChapterBar, ...]:
    out: list[ChapterBar] = []
    for index, (chapter, counts) in enumerate(counts_by_chapter(run).items()):
        total = sum(counts.values())
        x = CHART_BAR_X
        bars: list[Bar] = []
        for verdict in SEVERITY:
            n = counts[verdict]
            if not n:
                continue
            width = CHART_BAR_WIDTH * n / total
            bars.append(Bar(round(x, 2), round(width, 2), str(verdict), f"{chapter}: {n} {verdict} of {total}"))
            x += width
        applicable = total - counts[Verdict.NOT_APPLICABLE]
        passed = counts[Verdict.PASS]
        label = f"{passed}/{applicable} pass ({100 * passed / applicable:.0f}%)" if applicable else "not applicable"
        out.append(ChapterBar(chapter, index * CHART_ROW_HEIGHT, tuple(bars), label))
    return tuple(out)


def _histogram(run: RunResults, devices: Sequence[str]) -> Histogram | None:
    per_device: dict[str, list[int]] = {serial: [] for serial in devices}
    for record in run.results:
        per_device.setdefault(record.device, []).extend(alloc_callback_latencies_ns(record))
    values = [v for vs in per_device.values() for v in vs]
    if not values:
        return None
    edges = _LATENCY_EDGES_NS
    counts = [0] * (len(edges) + 1)  # bin 0: < edges[0]; bin i: [edges[i-1], edges[i]); last: >= edges[-1]
    for value in values:
        counts[sum(1 for edge in edges if value >= edge)] += 1
    used = [i for i, c in enumerate(counts) if c]
    first, last = used[0], used[-1]
    labels = [f"< {format_ns(edges[0])}"] + [format_ns(e) for e in edges[:-1]] + [f"≥ {format_ns(edges[-1])}"]
    ranges = (
        [f"below {format_ns(edges[0])}"]
        + [f"{format_ns(lo)} to {format_ns(hi)}" for lo, hi in itertools.pairwise(edges)]
        + [f"{format_ns(edges[-1])} or more"]
    )
    shown = range(first, last + 1)
    peak = max(counts)
    width, height, left, bottom_margin, top = 720, 240, 50.0, 40.0, 16.0
    plot_h = height - bottom_margin - top
    slot = (width - left - 10) / len(shown)
    bins: list[HistogramBin] = []
    for position, index in enumerate(shown):
        h = plot_h * counts[index] / peak
        bins.append(
            HistogramBin(
                x=round(left + position * slot + 2, 2),
                y=round(top + plot_h - h, 2),
                width=round(max(slot - 4, 1), 2),
                height=round(h, 2),
                count=counts[index],
                label=labels[index],
                tooltip=f"{counts[index]} callbacks, {ranges[index]} after their alloc call",
            )
        )
    stats = tuple(
        LatencyStats(
            serial,
            len(vs),
            format_ns(statistics.median(vs)),
            format_ns(percentile(vs, 0.95)),
            format_ns(max(vs)),
        )
        for serial, vs in per_device.items()
        if vs
    )
    return Histogram(tuple(bins), width, height, top + plot_h, peak, stats)


def _exit_text(record: ResultRecord) -> str:
    return "" if not record.exit else ", ".join(f"{k}={render_value(v)}" for k, v in record.exit.items())


def _finding_views(run: RunResults) -> tuple[FindingView, ...]:
    return tuple(
        FindingView(
            id=f"f{index}",
            finding=finding,
            title=finding.record.title,
            exit=_exit_text(finding.record),
            waiver=finding.record.waiver or "",
        )
        for index, finding in enumerate(findings(run), start=1)
    )


def _failure_groups(views: Sequence[FindingView]) -> tuple[FailureGroup, ...]:
    grouped: dict[tuple[str, str], list[FindingView]] = {}
    for view in views:
        f = view.finding
        # Without a divergence (a crash, a timeout) the scenario's cited clauses stand in for the clause.
        clause = f.clause or (", ".join(f.record.clauses) + " (cited)" if f.record.clauses else "(no clause)")
        grouped.setdefault((f.verdict, clause), []).append(view)
    out: list[FailureGroup] = []
    for (verdict, clause), members in grouped.items():  # insertion order keeps the severity order
        dids = sorted({d for m in members for d in m.finding.discrepancies}, key=lambda d: (len(d), d))
        listed = _listed([m.finding.scenario for m in members])
        out.append(FailureGroup(verdict, clause, len(members), members[0].id, ", ".join(dids), listed))
    return tuple(out)


def _merged_from(run: RunResults) -> list[tuple[str, str, str]]:
    """A merged run's inputs: (run id, devices, each outcome-changing option it ran with)."""
    out: list[tuple[str, str, str]] = []
    for source in (run.plan.merged_from or ()) if run.plan is not None else ():
        options = source.get("options")
        devices = source.get("devices")
        typed = read_plan_options(options if isinstance(options, dict) else {})
        config = [f"target {source.get('target') or '-'}", f"impl {typed.impl or 'vnpu'}",
                  f"personality {typed.given('personality')}", f"policy {typed.given('policy')}",
                  f"capacity {typed.capacity if typed.capacity is not None else 'default'}",
                  f"profile {source.get('profile') or '-'}"]
        shown = ", ".join(str(d) for d in devices) if isinstance(devices, list) else "?"
        out.append((str(source.get("run_id") or "?"), shown, ", ".join(config)))
    return out


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _reading_groups(views: Sequence[FindingView]) -> tuple[ReadingGroup, ...]:
    """WARN findings by (reading, device), in the order their first member comes; a WARN that needed two
    readings is in both groups."""
    grouped: dict[tuple[str, str], list[FindingView]] = {}
    for view in views:
        for reading in readings_of_reason(view.finding.record.reason) or ("",):
            grouped.setdefault((reading, view.finding.device), []).append(view)
    return tuple(
        ReadingGroup(f"w{index}", reading, READINGS.get(reading, "no reading this kit knows is named"),
                     READING_CLAUSES.get(reading, ()), device, tuple(members))
        for index, ((reading, device), members) in enumerate(grouped.items(), start=1)
    )


def _reading_rows(groups: Sequence[ReadingGroup]) -> tuple[FailureGroup, ...]:
    return tuple(
        FailureGroup("WARN", g.text, len(g.members), g.id, g.discrepancies,
                     _listed([m.finding.scenario for m in g.members]), g.device, g.reading or "(none)")
        for g in groups
    )


def _rows(run: RunResults, anchors: dict[tuple[str, str], str]) -> tuple[Row, ...]:
    rows: list[Row] = []
    for record in run.results:
        note = record.divergence.one_line() if record.divergence else record.reason
        if record.discrepancy:
            note = f"{note} [{record.discrepancy}]" if note else f"[{record.discrepancy}]"
        if record.waiver:
            note = f"{note} (waived: {record.waiver})"
        rows.append(
            Row(
                device=record.device,
                scenario=record.scenario,
                title=record.title,
                chapter=record.chapter,
                verdict=str(record.verdict),
                clauses=", ".join(record.clauses),
                duration="" if record.duration_ms is None else f"{record.duration_ms:.0f} ms",
                note=note,
                detail_id=anchors.get((record.device, record.scenario), ""),
            )
        )
    return tuple(rows)


def _gap_views(run: RunResults, gaps: Sequence[Gap]) -> tuple[GapView, ...]:
    """The coverage rows, each marked with whether the claim requires its clause of its device."""
    required = {
        serial: required_clauses(run, run.for_device(serial), [run.devices.get(serial, {})])
        for serial in {g.device for g in gaps}
    }
    return tuple(GapView(g.clause, g.device, g.why, g.reasons, g.clause in required[g.device]) for g in gaps)


def _gap_count(views: Sequence[GapView]) -> GapCount:
    return GapCount(len(views), sum(v.required for v in views))


# ---------------------------------------------------------------------------------------------
# rendering


def _finalize(value: object) -> object:
    """Every string the template prints: characters no HTML/XML text may hold become escapes."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return safe_text(value)
    return value


@functools.cache
def environment() -> jinja2.Environment:
    """The one template environment of the kit's pages, made once per process (jinja2 is imported only
    by commands that render a page); each template is compiled once and its code kept in the user
    cache (floor/user_cache.py), keyed by jinja2 on the template's source."""
    import jinja2

    class UserCache(jinja2.BytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            data = read_entry(TEMPLATE_CACHE, cache_key(bucket.key, jinja2.__version__))
            if data is not None:
                bucket.load_bytecode(io.BytesIO(data))  # a wrong magic or source checksum resets it

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            out = io.BytesIO()
            bucket.write_bytecode(out)
            write_entry(TEMPLATE_CACHE, cache_key(bucket.key, jinja2.__version__), out.getvalue())

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        bytecode_cache=UserCache(),
    )
    env.filters["counted"] = counted
    env.filters["plain"] = plain_value
    env.globals["colour_variables"] = colour_variables
    env.globals["coloured_verdicts"] = tuple(str(v) for v in VERDICT_COLOURS)
    return env


def plain_value(value: object) -> str:
    """A configuration value as a reader writes it, never as a Python literal: yes/no, lists joined."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(plain_value(v) for v in value) or "none"
    if value is None:
        return "none"
    return str(value)


TEMPLATE_CACHE: Final = "templates"


def shard_groups(run: RunResults) -> list[tuple[str, list[tuple[str, int]]]]:
    """A sharded run's groups (builds): each with its devices and how many of the group's results each ran."""
    if run.plan is None or not run.plan.shard:
        return []
    ran = Counter(r.device for r in run.results if r.recorded)
    groups: dict[str, list[tuple[str, int]]] = {}
    for serial in run.device_serials:
        groups.setdefault(run.groups.get(serial, f"device:{serial}"), []).append((serial, ran[serial]))
    return list(groups.items())


def html_chunks(
    run: RunResults, atlas: Atlas | None = None, baseline: BaselineComparison | None = None
) -> Iterator[bytes]:
    """report.html as UTF-8 pieces in order: a large page is written, or compared by `verify`, without being
    held whole. `atlas`: the run's behaviour atlas when already computed (reports.answers.atlas.run_atlas);
    `baseline`: what changed since a baseline run (`npuconf report --baseline`), shown in its own section."""
    for piece in environment().get_template("report.html.j2").generate(**_page(run, atlas, baseline)):
        yield piece.encode("utf-8", errors="replace")


def _page(run: RunResults, atlas: Atlas | None, baseline: BaselineComparison | None) -> dict[str, object]:
    devices = run.device_serials
    plan = run.plan
    counts = count_verdicts(run.results)
    every = _finding_views(run)
    failing_counts = Counter(v.finding.verdict for v in every)
    failures = tuple(v for v in every if v.finding.verdict != str(Verdict.WARN))
    reading_groups = _reading_groups([v for v in every if v.finding.verdict == str(Verdict.WARN)])
    matrix = _matrix(run, devices)
    anchors = {(v.finding.device, v.finding.scenario): v.id for v in failures}
    for group in reading_groups:
        for member in group.members:
            anchors.setdefault((member.finding.device, member.finding.scenario), group.id)
    rows = _rows(run, anchors)
    claim = claim_of(run)
    gaps = _gap_views(run, coverage_gaps(run))
    meta = [
        ("run", run.run_id or "(no plan)"),
        ("started", plan.started if plan else ""),
        ("finished", run.end.finished if run.end else "not finished (no end record)"),
        ("kit version", plan.kit_version if plan else ""),
        ("vocabulary", plan.vocabulary if plan else ""),
        ("corpus hash", plan.corpus_hash if plan else ""),
        ("model hash", plan.model_hash if plan else ""),
        # absolute, as the errata command names its directory: the page says where its results are from
        # wherever it is opened, and `verify` renders it again from this row alone
        ("results", os.path.abspath(run.path)),
    ]
    device_info = [
        (
            serial,
            [
                (key, render_value(value))
                for key, value in run.devices.get(serial, {}).items()
                if key != "discovery_trace"  # raw evidence for `verify`; results.jsonl keeps it
            ],
        )
        for serial in devices
    ]
    return dict(
        run_id=run.run_id,
        answer=claim.level.value,
        answer_class=claim.level.name.lower().replace("_", "-"),
        headline=claim.headline,
        exit_code=int(claim.exit_code),
        counts=[(str(v), counts[v]) for v in SEVERITY],
        total=len(run.results),
        configuration=[*claim.configuration, ("devices", ", ".join(devices))],
        partial=claim.partial,
        claim_gaps=[(g.device, g.why, g.clauses) for g in claim.gaps],
        meta=[(k, v) for k, v in meta if v],
        devices=devices,
        device_info=device_info,
        shard_groups=shard_groups(run),
        problems=problems_of(run),
        matrix=matrix,
        matrix_rows=sum(len(chapter.rows) for chapter in matrix),
        chapters=_chapter_bars(run),
        chart_bar_x=CHART_BAR_X,
        chart_bar_width=CHART_BAR_WIDTH,
        chart_row_height=CHART_ROW_HEIGHT,
        histogram=_histogram(run, devices),
        verdicts=[str(v) for v in SEVERITY],
        rows=rows,
        failures=failures,
        failure_groups=(*_failure_groups(failures), *_reading_rows(reading_groups)),
        reading_groups=reading_groups,
        findings_total=len(every),
        readings_needed=sorted({g.reading for g in reading_groups if g.reading}, key=lambda r: int(r[1:])),
        errata_command=npuconf_command("errata", os.path.abspath(run.path.parent)),
        merged_from=_merged_from(run),
        open_excerpts=OPEN_EXCERPTS,
        failure_counts=[(str(v), failing_counts[str(v)]) for v in FINDING_ORDER if failing_counts[str(v)]],
        gaps=gaps,
        gap_heading=_gap_count(gaps).heading(),
        atlas=atlas_sections(atlas if atlas is not None else run_atlas(run)),
        baseline=baseline,
    )


def write_html(run: RunResults, path: Path, atlas: Atlas | None = None,
               baseline: BaselineComparison | None = None) -> None:
    """Write report.html for `run` to `path`, replacing it atomically."""
    with atomic_output(path) as handle:
        for piece in html_chunks(run, atlas, baseline):
            handle.write(piece)
