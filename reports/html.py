"""report.html: one self-contained page (inline CSS, SVG and JS; no network) rendered from results.

The page leads with the answer, then the device × clause matrix, per-chapter pass rates, the
alloc-callback latency distribution, a filterable table of every result and, for each non-PASS
result, its divergence, a replay command and the end of its trace.
"""

from __future__ import annotations

import itertools
import math
import os
import shlex
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import jinja2
from markupsafe import Markup

from reference_model.verdicts import Verdict

from .results import (
    SEVERITY,
    ResultRecord,
    RunResults,
    alloc_callback_latencies_ns,
    clause_matrix,
    count_verdicts,
    counts_by_chapter,
    render_value,
    safe_text,
    worst,
)

TEMPLATES_DIR: Final = Path(__file__).parent / "templates"
TRACE_EXCERPT_LINES: Final = 40

VERDICT_SHORT: Final = {
    Verdict.PASS: "PASS",
    Verdict.WARN: "WARN",
    Verdict.FAIL: "FAIL",
    Verdict.NOT_APPLICABLE: "N/A",
    Verdict.WAIVED: "WAIV",
    Verdict.CRASH: "CRSH",
    Verdict.TIMEOUT: "TIME",
    Verdict.ERROR: "ERR",
    Verdict.NOT_EXECUTED: "N/E",
}

# Latency histogram bin edges in ns: 1-2-5 steps from 1 µs to 10 s (plus "< 1 µs" and "≥ 10 s").
_LATENCY_EDGES_NS: Final[tuple[int, ...]] = (*(m * 10**e for e in range(3, 10) for m in (1, 2, 5)), 10**10)


def format_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            value = ns / scale
            return f"{value:.3g} {unit}"
    return f"{ns:.0f} ns"


def replay_command(run: RunResults, record: ResultRecord) -> str:
    """The command that runs this one scenario again on the run's target."""
    parts = ["npuconf", "run"]
    target = run.plan.target if run.plan else ""
    if target:
        parts += ["--target", target]
    if target == "adb":
        parts += ["--serial", record.device]
    parts += ["-k", record.scenario]
    return " ".join(shlex.quote(p) for p in parts)


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
class Detail:
    id: str
    device: str
    scenario: str
    title: str
    verdict: str
    reason: str
    step: str
    event: str
    observed: str
    allowed: str
    clause: str
    quote: str
    message: str
    discrepancy: str
    waiver: str
    exit: str
    replay: str
    trace_note: str
    trace: str


def _matrix(run: RunResults, devices: Sequence[str]) -> tuple[MatrixRow, ...]:
    rows: list[MatrixRow] = []
    for clause, by_device in clause_matrix(run).items():
        cells: list[Cell] = []
        for serial in devices:
            records = by_device.get(serial, [])
            verdict = worst(r.verdict for r in records)
            if verdict is None:
                cells.append(Cell("", "", f"{clause} on {serial}: no scenario"))
                continue
            listed = "; ".join(f"{r.scenario} {r.verdict}" for r in records)
            cells.append(Cell(str(verdict), VERDICT_SHORT[verdict], f"{clause} on {serial}: {verdict} ({listed})"))
        rows.append(MatrixRow(clause, tuple(cells)))
    return tuple(rows)


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


def _percentile(values: Sequence[int], q: float) -> float:
    ordered = sorted(values)
    k = max(0, math.ceil(q * len(ordered)) - 1)
    return float(ordered[k])


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
            format_ns(_percentile(vs, 0.95)),
            format_ns(max(vs)),
        )
        for serial, vs in per_device.items()
        if vs
    )
    return Histogram(tuple(bins), width, height, top + plot_h, peak, stats)


def _detail(run: RunResults, record: ResultRecord, ident: str) -> Detail:
    d = record.divergence
    excerpt = record.trace_excerpt(TRACE_EXCERPT_LINES)
    if not record.recorded:
        trace_note = "no trace: the scenario never ran"
    elif not excerpt:
        trace_note = "no trace lines recorded"
    elif len(excerpt) < len(record.trace):
        trace_note = f"last {len(excerpt)} of {len(record.trace)} trace lines"
    else:
        trace_note = f"all {len(excerpt)} trace lines"
    return Detail(
        id=ident,
        device=record.device,
        scenario=record.scenario,
        title=record.title,
        verdict=str(record.verdict),
        reason=record.reason,
        step="" if d is None or d.step is None else str(d.step),
        event="" if d is None or d.event is None else str(d.event),
        observed="" if d is None else render_value(d.observed),
        allowed="" if d is None else d.allowed_text(),
        clause="" if d is None else d.clause,
        quote="" if d is None else d.quote,
        message="" if d is None else d.message,
        discrepancy=record.discrepancy or "",
        waiver=record.waiver or "",
        exit="" if not record.exit else ", ".join(f"{k}={render_value(v)}" for k, v in record.exit.items()),
        replay=replay_command(run, record),
        trace_note=trace_note,
        trace="\n".join(excerpt),
    )


def _rows_and_details(run: RunResults) -> tuple[tuple[Row, ...], tuple[Detail, ...]]:
    rows: list[Row] = []
    details: list[Detail] = []
    for index, record in enumerate(run.results):
        detail_id = ""
        if record.verdict is not Verdict.PASS:
            detail_id = f"r{index}"
            details.append(_detail(run, record, detail_id))
        note = record.divergence.one_line() if record.divergence else record.reason
        if record.discrepancy:
            note = f"{note} [{record.discrepancy}]" if note else f"[{record.discrepancy}]"
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
                detail_id=detail_id,
            )
        )
    return tuple(rows), tuple(details)


# ---------------------------------------------------------------------------------------------
# rendering


def _finalize(value: object) -> object:
    """Every string the template prints: characters no HTML/XML text may hold become escapes."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return safe_text(value)
    return value


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(run: RunResults) -> str:
    devices = run.device_serials
    plan = run.plan
    counts = count_verdicts(run.results)
    rows, details = _rows_and_details(run)
    meta = [
        ("run", run.run_id or "(no plan)"),
        ("started", plan.started if plan else ""),
        ("finished", run.end.finished if run.end else "not finished (no end record)"),
        ("target", plan.target if plan else ""),
        ("profile", plan.profile if plan else ""),
        ("kit version", plan.kit_version if plan else ""),
        ("vocabulary", plan.vocabulary if plan else ""),
        ("corpus hash", plan.corpus_hash if plan else ""),
        ("model hash", plan.model_hash if plan else ""),
        ("results", str(run.path)),
    ]
    device_info = [
        (serial, [(key, render_value(value)) for key, value in run.devices.get(serial, {}).items()])
        for serial in devices
    ]
    template = environment().get_template("report.html.j2")
    return template.render(
        run_id=run.run_id,
        answer=run.answer,
        exit_code=int(run.exit_code),
        counts=[(str(v), counts[v]) for v in SEVERITY],
        total=len(run.results),
        meta=[(k, v) for k, v in meta if v],
        devices=devices,
        device_info=device_info,
        problems=run.problems,
        matrix=_matrix(run, devices),
        chapters=_chapter_bars(run),
        chart_bar_x=CHART_BAR_X,
        chart_bar_width=CHART_BAR_WIDTH,
        chart_row_height=CHART_ROW_HEIGHT,
        histogram=_histogram(run, devices),
        verdicts=[str(v) for v in SEVERITY],
        rows=rows,
        details=details,
    )


def write_html(run: RunResults, path: Path) -> None:
    """Write report.html for `run` to `path`, replacing it atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(run), encoding="utf-8")
    os.replace(tmp, path)
