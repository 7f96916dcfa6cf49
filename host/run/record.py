"""Recording a finished run in the results store, so dashboards see every run without an extra step."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from reference_model.errors import KitError
from reports.store import DEFAULT_STORE, import_runs

from ..suite import checkout_hashes


def default_store(out_dir: Path) -> Path:
    """The store a run records itself in: next to its output directory (out/npuconf.sqlite by default)."""
    return out_dir.parent / DEFAULT_STORE.name


def record_run(out_dir: Path, store: Path | None = None) -> Path | None:
    """Import a finished run into the results store; a store problem is a warning, never the run's failure."""
    path = store if store is not None else default_store(out_dir)
    try:
        import_runs(path, [out_dir], kit_hash=checkout_hashes()["kit"])
    except (KitError, OSError, sqlite3.Error) as exc:
        print(f"npuconf: warning: the run was not recorded in the results store {path}: {exc}", file=sys.stderr)
        return None
    return path
