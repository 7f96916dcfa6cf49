"""The files a run directory's writers replace, and the check that refuses a directory already holding
one: a command never silently replaces a file it did not write in this very directory; and where the
results store is when no `--store` is given."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

RESULTS_FILE: Final = "results.jsonl"
JUNIT_FILE: Final = "junit.xml"
HTML_FILE: Final = "report.html"
SUMMARY_FILE: Final = "summary.json"
ATLAS_FILE: Final = "atlas.json"
# The reports of a run directory, by the name `report_paths` gives each (reports/renderers/run_reports.py).
REPORTS: Final = {"junit": JUNIT_FILE, "html": HTML_FILE, "summary": SUMMARY_FILE, "atlas": ATLAS_FILE}
REPORT_FILES: Final = tuple(REPORTS.values())
# Beside the run directories `npuconf run` makes by default (out/<run id>).
DEFAULT_STORE: Final = Path("out") / "npuconf.sqlite"


def present(directory: Path, names: Iterable[str]) -> str | None:
    """The first of `names` that exists in `directory` (by lstat: a symlink counts, dangling or not)."""
    for name in names:
        try:
            os.lstat(directory / name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return name  # there but unreadable: still not ours to replace
        return name
    return None
