"""The four reports of a run directory, written together from its results: junit.xml, report.html,
summary.json and atlas.json."""

from __future__ import annotations

from pathlib import Path

from floor.safe_io import output_dir

from ..answers.atlas import run_atlas
from ..answers.baseline import BaselineComparison
from ..recorded.outputs import REPORTS
from ..recorded.results import RunResults, load_results
from .atlas_json import write_atlas
from .html import write_html
from .junit import write_junit
from .summary import write_summary


def write_reports(results_path: Path, out_dir: Path, baseline: BaselineComparison | None = None) -> dict[str, Path]:
    """Read `results_path` (results.jsonl or its directory) and write the four reports into `out_dir`."""
    return write_run_reports(load_results(results_path), out_dir, baseline)


def report_paths(out_dir: Path) -> dict[str, Path]:
    """The four reports of a run directory, by name."""
    return {name: out_dir / file_name for name, file_name in REPORTS.items()}


def write_run_reports(run: RunResults, out_dir: Path, baseline: BaselineComparison | None = None) -> dict[str, Path]:
    """Write the four reports of a run already read into `out_dir`; report.html shows `baseline`, the
    comparison with a baseline run (`npuconf report --baseline`), when given."""
    output_dir(out_dir)
    paths = report_paths(out_dir)
    atlas = run_atlas(run)
    write_junit(run, paths["junit"])
    write_html(run, paths["html"], atlas, baseline)
    write_summary(run, paths["summary"])
    write_atlas(run, paths["atlas"], atlas)
    return paths
