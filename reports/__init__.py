"""Reports rendered from a run's results.jsonl only: junit.xml, report.html, summary.json and atlas.json."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from floor.lazy_names import lazy_names

from .outputs import REPORT_FILES as REPORT_FILES
from .outputs import RESULTS_FILE as RESULTS_FILE
from .outputs import present as present

if TYPE_CHECKING:
    from .atlas import write_atlas as write_atlas
    from .baseline import BaselineComparison
    from .html import write_html as write_html
    from .junit import write_junit as write_junit
    from .results import ResultRecord as ResultRecord
    from .results import ResultsUnreadable as ResultsUnreadable
    from .results import RunResults as RunResults
    from .results import load_results as load_results
    from .summary import write_summary as write_summary

# Imported when first used: a command that only writes a file safely (floor.safe_io, which every
# command uses) or reads a store loads no report renderer.
_LATER: Final = {
    "write_atlas": ".atlas",
    "write_html": ".html",
    "write_junit": ".junit",
    "ResultRecord": ".results",
    "ResultsUnreadable": ".results",
    "RunResults": ".results",
    "load_results": ".results",
    "write_summary": ".summary",
}


__getattr__ = lazy_names(__name__, _LATER)


__all__ = [
    "REPORT_FILES",
    "RESULTS_FILE",
    "ResultRecord",
    "ResultsUnreadable",
    "RunResults",
    "load_results",
    "present",
    "report_paths",
    "write_atlas",
    "write_html",
    "write_junit",
    "write_reports",
    "write_run_reports",
    "write_summary",
]


def write_reports(results_path: Path, out_dir: Path, baseline: BaselineComparison | None = None) -> dict[str, Path]:
    """Read `results_path` (results.jsonl or its directory) and write the four reports into `out_dir`."""
    from .results import load_results

    return write_run_reports(load_results(results_path), out_dir, baseline)


def report_paths(out_dir: Path) -> dict[str, Path]:
    """The four reports of a run directory, by name."""
    return {
        "junit": out_dir / "junit.xml",
        "html": out_dir / "report.html",
        "summary": out_dir / "summary.json",
        "atlas": out_dir / "atlas.json",
    }


def write_run_reports(run: RunResults, out_dir: Path, baseline: BaselineComparison | None = None) -> dict[str, Path]:
    """Write the four reports of a run already read into `out_dir`; report.html shows `baseline`, the
    comparison with a baseline run (`npuconf report --baseline`), when given."""
    from floor.safe_io import output_dir

    from .atlas import run_atlas, write_atlas
    from .html import write_html
    from .junit import write_junit
    from .summary import write_summary

    output_dir(out_dir)
    paths = report_paths(out_dir)
    atlas = run_atlas(run)
    write_junit(run, paths["junit"])
    write_html(run, paths["html"], atlas, baseline)
    write_summary(run, paths["summary"])
    write_atlas(run, paths["atlas"], atlas)
    return paths
