"""`npuconf spec [RUN ...] [--out FILE]`: the published header text, each normative sentence marked with
its clause and coloured by its answer across the runs' devices (reports/renderers/spec_page.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from floor.safe_io import write_text
from reference_model.rules import cited_clauses
from reports.recorded.results import load_results
from reports.renderers.spec_page import SpecClause, SpecSource, render_spec

from ..errors import UsageError
from ..suite import REPO_ROOT, SCENARIO_ROOT, load_catalogue, load_corpus
from .errata import ERRATA_HTML, write_errata
from .own_outputs import check_replaceable
from .run_dir import run_results_path

# The kit's copy of the published text (provenance: conformance/spec/README.md).
SPEC_TEXT: Final = REPO_ROOT / "conformance" / "spec" / "buffer-h-api37.md"
DEFAULT_OUT: Final = Path("out") / "spec.html"
SPEC_SIGNATURE: Final = b"<title>npuconf spec:"  # what the page says of itself (spec.html.j2)


def spec_source(text_path: Path = SPEC_TEXT) -> SpecSource:
    """The published text, the catalogue, and the scenarios and rules citing each clause: all the kit's own."""
    try:
        text = text_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{text_path}: cannot read the kit's copy of the published text ({exc})") from None
    catalogue = load_catalogue()
    scenarios: dict[str, list[tuple[str, str]]] = {}
    for scenario in load_corpus(SCENARIO_ROOT, known_clauses=catalogue.ids()):
        for clause in scenario.clauses:
            scenarios.setdefault(clause, []).append((scenario.id, scenario.title))
    clauses = tuple(SpecClause(c.id, c.chapter, c.quote, c.testability, c.reason) for c in catalogue.clauses)
    try:
        shown = str(text_path.relative_to(REPO_ROOT))
    except ValueError:
        shown = str(text_path)
    return SpecSource(
        text, shown, clauses, {c: tuple(s) for c, s in scenarios.items()}, dict(cited_clauses())
    )


def write_spec(runs: Sequence[Path], out: Path) -> dict[str, Path]:
    """The page, and with runs the errata draft for them beside it (the page links it)."""
    check_replaceable(out, SPEC_SIGNATURE, "--out")
    loaded = [load_results(run_results_path(run)) for run in runs]
    paths: dict[str, Path] = {}
    if runs:
        _, written = write_errata(runs, out.parent)
        paths = {f"errata {name}": path for name, path in written.items()}
    write_text(out, render_spec(spec_source(), loaded, ERRATA_HTML if runs else None))
    return {"spec": out, **paths}


def spec_command(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else DEFAULT_OUT
    for name, path in write_spec(args.runs, out).items():
        print(f"{name}: {path}")
    return 0
