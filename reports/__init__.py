"""Reports rendered from a run's results.jsonl only: junit.xml, report.html, summary.json and atlas.json."""

from __future__ import annotations

from pathlib import Path

from .atlas import run_atlas
from .atlas import write_atlas as write_atlas
from .baseline import BaselineComparison
from .html import write_html as write_html
from .junit import write_junit as write_junit
from .outputs import REPORT_FILES as REPORT_FILES
from .outputs import RESULTS_FILE as RESULTS_FILE
from .outputs import present as present
from .results import ResultRecord as ResultRecord
from .results import ResultsUnreadable as ResultsUnreadable
from .results import RunResults as RunResults
from .results import load_results as load_results
from .safe_io import output_dir
from .summary import write_summary as write_summary

__all__ = [
    "REPORT_FILES",
    "RESULTS_FILE",
    "ResultRecord",
    "ResultsUnreadable",
    "RunResults",
    "load_results",
    "present",
    "write_atlas",
    "write_html",
    "write_junit",
    "write_reports",
    "write_run_reports",
    "write_summary",
]


def write_reports(results_path: Path, out_dir: Path, baseline: BaselineComparison | None = None) -> dict[str, Path]:
    """Read `results_path` (results.jsonl or its directory) and write the four reports into `out_dir`."""
    return write_run_reports(load_results(results_path), out_dir, baseline)


def write_run_reports(run: RunResults, out_dir: Path, baseline: BaselineComparison | None = None) -> dict[str, Path]:
    """Write the four reports of a run already read into `out_dir`; report.html shows `baseline`, the
    comparison with a baseline run (`npuconf report --baseline`), when given."""
    output_dir(out_dir)
    paths = {
        "junit": out_dir / "junit.xml",
        "html": out_dir / "report.html",
        "summary": out_dir / "summary.json",
        "atlas": out_dir / "atlas.json",
    }
    atlas = run_atlas(run)
    write_junit(run, paths["junit"])
    write_html(run, paths["html"], atlas, baseline)
    write_summary(run, paths["summary"])
    write_atlas(run, paths["atlas"], atlas)
    return paths
