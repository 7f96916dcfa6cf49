"""Reports rendered from a run's results.jsonl only: junit.xml, report.html and summary.json."""

from __future__ import annotations

from pathlib import Path

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
    "report_paths",
    "write_html",
    "write_junit",
    "write_reports",
    "write_run_reports",
    "write_summary",
]


def write_reports(results_path: Path, out_dir: Path) -> dict[str, Path]:
    """Read `results_path` (results.jsonl or its directory) and write the three reports into `out_dir`."""
    return write_run_reports(load_results(results_path), out_dir)


def report_paths(out_dir: Path) -> dict[str, Path]:
    """The three reports of a run directory, by name."""
    return {
        "junit": out_dir / "junit.xml",
        "html": out_dir / "report.html",
        "summary": out_dir / "summary.json",
    }


def write_run_reports(run: RunResults, out_dir: Path) -> dict[str, Path]:
    """Write the three reports of a run already read into `out_dir`."""
    output_dir(out_dir)
    paths = report_paths(out_dir)
    write_junit(run, paths["junit"])
    write_html(run, paths["html"])
    write_summary(run, paths["summary"])
    return paths
