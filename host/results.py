"""Appending records to results.jsonl as they finish (docs/formats.md §6)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from reports import RunResults, load_results
from reports.jsonl import results_file
from reports.results import Plan

from .errors import UsageError

RESULTS_SCHEMA = 1


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


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class ResultsWriter:
    """Thread-safe appender: every record is one line, flushed before the call returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
