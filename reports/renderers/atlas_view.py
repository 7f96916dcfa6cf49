"""The behaviour atlas as report.html and dashboard.html show it (templates/_atlas.html.j2): per aspect,
the rows whose answers differ between the columns first, each cell with its counts, detail and sources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..answers.atlas import ABSENT, ASPECT_TITLES, Aspect, Atlas, Entry, answer_of

# A cell's tooltip names at most this many scenarios (atlas.json lists them all).
SHOWN_SOURCES: Final = 6


@dataclass(frozen=True, slots=True)
class CellView:
    text: str  # the answer with its counts, or ABSENT
    detail: str
    note: str
    sources: str  # the scenarios and trace lines it comes from, for the tooltip
    odd: bool  # on a differing row: this cell's answer is not the first column's


@dataclass(frozen=True, slots=True)
class RowView:
    question: str
    cells: tuple[CellView, ...]


@dataclass(frozen=True, slots=True)
class SectionView:
    aspect: str
    title: str
    differing: tuple[RowView, ...]
    same: tuple[RowView, ...]


def sources_text(entry: Entry) -> str:
    parts: list[str] = []
    for choice in entry.choices:
        listed = [f"{s.scenario}" + (f" lines {', '.join(map(str, s.lines))}" if s.lines else "")
                  for s in choice.sources[:SHOWN_SOURCES]]
        more = len(choice.sources) - SHOWN_SOURCES
        parts.append(f"{choice.value}: {'; '.join(listed)}" + (f"; and {more} more scenarios" if more > 0 else ""))
    return "\n".join(parts)


def _cell_view(cell: Entry | None, first: str, differs: bool) -> CellView:
    if cell is None:
        return CellView(ABSENT, "", "", "", differs and first != ABSENT)
    return CellView(cell.text(), cell.detail, cell.note, sources_text(cell), differs and cell.answer != first)


def atlas_sections(atlas: Atlas) -> tuple[SectionView, ...]:
    """Per aspect, the rows whose answers differ between the columns first, then the others."""
    out: list[SectionView] = []
    for aspect in Aspect:
        rows = [r for r in atlas.rows if r.aspect is aspect]
        if not rows:
            continue
        views = {
            id(r): RowView(r.question, tuple(_cell_view(c, answer_of(r.cells[0]), r.differs) for c in r.cells))
            for r in rows
        }
        out.append(SectionView(str(aspect), ASPECT_TITLES[aspect], tuple(views[id(r)] for r in rows if r.differs),
                               tuple(views[id(r)] for r in rows if not r.differs)))
    return tuple(out)
