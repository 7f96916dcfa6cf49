"""Finding and loading a recorded run directory (its results.jsonl and plan) for the offline commands."""

from __future__ import annotations

from pathlib import Path

from reports.recorded.records import results_file
from reports.recorded.results import Plan, RunResults, load_results

from ..errors import UsageError


def run_results_path(directory: Path) -> Path:
    """The results.jsonl of a run directory (or the file itself); a one-line usage error when absent."""
    path = results_file(directory)
    if not path.is_file():
        raise UsageError(f"{directory}: no results.jsonl; expected a run directory written by `npuconf run`")
    return path


def load_planned_run(directory: Path, purpose: str) -> tuple[Path, RunResults, Plan]:
    """Load a run that must have its plan record (rejudge, bundle)."""
    path = run_results_path(directory)
    run = load_results(path)
    if run.plan is None:
        raise UsageError(f"{path}: no plan record; {purpose} needs the run's plan")
    return path, run, run.plan
