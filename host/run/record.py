"""Recording a finished run in the results store, so dashboards see every run without an extra step;
reading back the scenarios' measured durations for the `--shard` balance."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from reference_model.errors import KitError
from reports.store import DEFAULT_STORE, describe_location, import_runs, scenario_durations

from ..suite import part_tree_hash


def default_store(out_dir: Path) -> Path:
    """The store a run records itself in: next to its output directory (out/npuconf.sqlite by default)."""
    return out_dir.parent / DEFAULT_STORE.name


def record_run(out_dir: Path, store: str | Path | None = None) -> str | Path | None:
    """Import a finished (or resumed) run into the results store; a store problem is a warning, never the
    run's failure. A store that refuses the run (its run id is there with other results) is a warning too."""
    location = store if store is not None else default_store(out_dir)
    where = describe_location(location)
    try:
        outcomes = import_runs(location, [out_dir], kit_hash=part_tree_hash("kit"))
    except (KitError, OSError) as exc:
        print(f"npuconf: warning: the run was not recorded in the results store {where}: {exc}", file=sys.stderr)
        return None
    for outcome in outcomes:
        if outcome.status in ("refused", "skipped"):
            print(f"npuconf: warning: results store {where}: {outcome.line()}", file=sys.stderr)
            return None
    return location


def duration_estimates(out_dir: Path, store: str | Path | None = None) -> Estimates:
    """Measured scenario durations from the run's store, by build fingerprint (empty when unknown)."""
    return Estimates(store if store is not None else default_store(out_dir))


class Estimates:
    """Callable fingerprint -> {scenario id: mean duration ms}; a store problem gives no estimates."""

    def __init__(self, location: str | Path) -> None:
        self.location = location

    def __call__(self, fingerprint: str) -> Mapping[str, float]:
        try:
            return scenario_durations(self.location, fingerprint)
        except (KitError, OSError) as exc:
            where = describe_location(self.location)
            print(f"npuconf: warning: no measured durations from {where} ({exc}); defaults used", file=sys.stderr)
            return {}
